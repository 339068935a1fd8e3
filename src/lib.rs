//! Trident: a GPU kernel and collectives runtime in Rust, and a GPT trainer on top of it.
//!
//! - [`runtime`]: devices (`Cpu`, `Emu`, `Cuda`), buffers, modules and launches.
//! - [`kernels`]: the PTX and host entries of every kernel, as the runtime loads them.
//! - [`launch`]: a safe, checked launch wrapper per kernel.
//! - [`collectives`]: communicators and ring algorithms.
//! - [`model`]: the GPT-2 model.
//! - [`data`], [`checkpoint`], [`metrics`], [`plot`], [`progress`]: what training reads and writes.

pub use trident_collectives as collectives;
pub use trident_runtime as runtime;

pub mod checkpoint;
pub mod data;
pub mod kernels;
pub mod launch;
pub mod metrics;
pub mod model;
pub mod plot;
pub mod progress;
