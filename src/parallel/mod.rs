//! Megatron-LM's 3D parallelism as a grid of ranks: tensor (TP), pipeline (PP) and data (DP)
//! parallelism (TP fastest, then DP, then PP), and what the trainer needs of it. Nothing here
//! knows the model: the layer code (`model`) calls the groups' collectives, and a group of one
//! makes each of them a no-op.
//!
//! - [`ParallelConfig`]: the sizes of the three parallelisms and their options, checked as
//!   Megatron-LM checks them.
//! - [`RankGroups`], [`TpGroup`], [`PipeGroup`]: the communicators a rank uses.
//! - [`DeviceComm`]: a group's collectives as kernels over peer memory, for ranks that are
//!   threads of one process with a device each.
//! - [`Interleaved`]: the pipeline schedule as data (1F1B, interleaved over several model
//!   chunks per stage or not), which training runs and [`simulate_interleaved`] times;
//!   [`Schedule`] spells out the 1F1B transfers.
//! - [`PipeLinks`]: the stages' point-to-point links, sending from threads.
//! - [`DpWorker`]: data-parallel gradient buckets reduced on a thread while the backward runs.
//! - [`run_ranks`]: ranks as threads; processes come from any launcher through
//!   `Communicator::from_env`.

mod config;
mod device_comm;
mod error;
mod grad_sync;
mod groups;
mod pipe;
mod place;
mod threads;

pub use config::{ParallelConfig, SplitDims};
pub use device_comm::{Connected, DeviceComm};
pub use error::{ParallelError, Result};
pub use grad_sync::{BucketPaths, DpWorker, Pending};
pub use groups::{on_host, PipeGroup, RankGroups, TpGroup, TpTraffic};
pub use pipe::{PipeLinks, PipeTraffic};
pub use place::ShardPlace;
pub use schedule::{
    simulate, simulate_interleaved, Action, ChunkStep, ChunkTimeline, Interleaved, Schedule, Timeline,
};
pub use threads::{run_ranks, PeerEcho};
/// The pipeline schedules, from the planner (`trident-plan`), which costs the same ones.
pub use trident_plan::schedule;
pub use trident_plan::Recompute;
