//! Megatron-LM's 3D parallelism for the GPT: tensor (TP), pipeline (PP) and data (DP)
//! parallelism over one rank grid (TP fastest, then DP, then PP).
//!
//! - [`ShardLayout`]: which part of each parameter a rank holds.
//! - [`StageModel`]: a stage's forward and backward on one TP rank, with the f/g operators of
//!   column- and row-parallel layers and the vocab-parallel embedding and cross-entropy.
//! - [`Schedule`]: the 1F1B pipeline schedule as data, which training runs and [`simulate`]
//!   times.
//! - [`PipelineTrainer`]: a step: schedule, data-parallel gradient buckets reduced while the
//!   backward runs ([`DpWorker`]), optional ZeRO-1, global-norm clipping, AdamW.
//! - [`checkpoint`]: checkpoints of any grid in the grid-independent single-rank layout;
//!   any grid resumes them.
//! - [`run_ranks`]: ranks as threads; processes come from any launcher through
//!   `Communicator::from_env`.

pub mod checkpoint;
mod config;
mod error;
mod grad_sync;
mod groups;
mod optimizer;
pub mod run;
pub mod schedule;
mod shard;
mod stage;
mod threads;
mod trainer;
pub mod vocab;

pub use config::{ParallelConfig, Recompute};
pub use error::{ParallelError, Result};
pub use grad_sync::{BucketPaths, DpWorker, Pending};
pub use groups::{on_host, PipeGroup, RankGroups, TpGroup};
pub use optimizer::ShardedAdamW;
pub use schedule::{simulate, Action, Schedule, Timeline};
pub use shard::{LocalTensor, ShardLayout, ShardPlace};
pub use stage::{MicroActs, StageModel};
pub use threads::run_ranks;
pub use trainer::{MemoryReport, PipelineTrainer, StageTiming};

#[cfg(test)]
mod tests;
