//! Trident's device runtime.
