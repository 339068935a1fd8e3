//! Single-rank training: the step (accumulation, clipping, AdamW), learning-rate schedules and
//! FLOP accounting.

pub mod exit;
mod flops;
pub mod memory;
mod schedule;
mod trainer;

pub use exit::{ExitPolicy, ExitReason};
pub use flops::{peak_flops, train_flops_per_token};
pub use memory::{available_memory, MemoryError, MemoryNeed};
pub use schedule::{DecayStyle, LrSchedule};
pub use trainer::{BatchSource, StepStats, TrainError, TrainSettings, Trainer};
