//! Megatron-LM's 3D parallelism as a grid of ranks: tensor (TP), pipeline (PP) and data (DP)
//! parallelism (TP fastest, then DP, then PP), and what the trainer needs of it. Nothing here
//! knows the model: the layer code (`model`) calls the groups' collectives, and a group of one
//! makes each of them a no-op.
//!
//! - [`ParallelConfig`]: the sizes of the three parallelisms and their options, checked as
//!   Megatron-LM checks them.
//! - [`RankGroups`], [`TpGroup`], [`PipeGroup`]: the communicators a rank uses.
//! - [`Schedule`]: the 1F1B pipeline schedule as data, which training runs and [`simulate`]
//!   times.
//! - [`DpWorker`]: data-parallel gradient buckets reduced on a thread while the backward runs.
//! - [`run_ranks`]: ranks as threads; processes come from any launcher through
//!   `Communicator::from_env`.

mod config;
mod error;
mod grad_sync;
mod groups;
mod place;
pub mod schedule;
mod threads;

pub use config::{ModelShape, ParallelConfig, Recompute};
pub use error::{ParallelError, Result};
pub use grad_sync::{BucketPaths, DpWorker, Pending};
pub use groups::{on_host, PipeGroup, RankGroups, TpGroup};
pub use place::ShardPlace;
pub use schedule::{simulate, Action, Schedule, Timeline};
pub use threads::{run_ranks, PeerEcho};
