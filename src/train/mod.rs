//! Training, one path for every grid: the trainer ([`Trainer`]: any pipeline schedule, a single
//! rank being a pipeline of one stage), a whole run on one rank ([`run::train_rank`]),
//! checkpoints of any grid that any grid resumes ([`checkpoint`]), learning-rate schedules,
//! FLOP accounting, memory estimates and stopping early.

pub mod checkpoint;
mod error;
pub mod exit;
mod flops;
mod loss_scale;
pub mod memory;
pub mod run;
mod schedule;
mod settings;
mod trainer;

pub use error::{Result, TrainError};
pub use exit::{ExitPolicy, ExitReason};
pub use flops::{peak_flops, train_flops_per_token};
pub use loss_scale::{LossScaleConfig, LossScaler};
pub use memory::{available_memory, MemoryError, MemoryNeed, Storage};
pub use schedule::{DecayStyle, LrSchedule};
pub use settings::{BatchSource, StepStats, TrainSettings};
pub use trainer::{norm_ranges, MemoryReport, StageTiming, Trainer};

#[cfg(test)]
mod tests;
