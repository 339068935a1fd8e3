//! The trainer's tests: every grid against the single-rank run, checkpoints that reshard, and
//! the single rank's row shares and refusals, what a save holds.

mod alloc_count;
mod checkpoints;
mod grids;
mod mixed;
mod save_memory;
mod trainer;
