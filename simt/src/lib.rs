//! SIMT emulator core: runs Trident's kernels, compiled for the host, as GPU thread blocks.
//!
//! Each block runs on a worker thread with its threads as coroutines, switched at barriers
//! and warp collectives in a fixed order. The emulator fails a launch, naming kernel, block
//! and thread, on what a GPU leaves undefined: shared-memory races between barriers, barriers
//! reached by part of a block or at different places, warp collectives with inconsistent
//! participation, shared-memory accesses out of range, and panics.
//!
//! Kernels reach the emulator through [`device`] (wrapped by `trident_kernels::simt`).

mod arg;
mod block;
mod config;
mod context;
pub mod device;
mod error;
pub mod fragments;
mod launch;
mod shared;
mod smem;
mod stacks;
mod warp;

pub use arg::KernelArg;
pub use config::{HostKernel, LaunchConfig, MAX_BLOCK_THREADS, MAX_SHARED_BYTES};
pub use error::{Access, AccessKind, Dim3, EmuError, Fault, Site};
pub use launch::launch;
pub use shared::Shared;
pub use stacks::THREAD_STACK_BYTES;
