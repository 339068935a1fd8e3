//! The trainer's tests: every grid against the single-rank run, checkpoints that reshard, and
//! the single rank's row shares and refusals.

mod checkpoints;
mod grids;
mod mixed;
mod trainer;
