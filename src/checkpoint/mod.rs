//! Checkpoints.
