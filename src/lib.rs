//! Trident: a GPU kernel and collectives runtime in Rust, and a GPT trainer on top of it.
//!
//! - [`runtime`]: devices (`Cpu`, `Emu`, `Cuda`), buffers, modules and launches.
//! - [`kernels`]: the PTX and host entries of every kernel, as the runtime loads them, and
//!   [`launch`]: a safe, checked launch wrapper per kernel (both of `trident-ops`).
//! - [`collectives`]: communicators and ring algorithms.
//! - [`ops`] (the `trident-ops` crate): the GPT's tensor ops on any device; [`model`]: the
//!   GPT-2 model; [`optim`], [`train`]: optimizer and training loop; `cli`: the `trident`
//!   binary's commands.
//! - [`llmc`]: training side by side with llm.c.
//! - [`data`], [`checkpoint`], [`metrics`], [`plot`], `progress`: what training reads and writes.
//!
//! Features, all on by default: `cuda` (the kernels' PTX, through `trident-ops`), `cli` (the
//! `cli` and `progress` modules and the binary), `tokenizer` (GPT-2's BPE), `plots` (PNG
//! pictures). Without `tokenizer` or `plots`, what needs them returns an error naming the
//! feature.

pub use trident_collectives as collectives;
pub use trident_data as data;
pub use trident_ops as ops;
pub use trident_ops::{kernels, launch};

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use trident_runtime as runtime;

pub mod checkpoint;
#[cfg(feature = "cli")]
pub mod cli;
pub mod device_collectives;
pub mod kernel_bench;
pub mod llmc;
pub mod metrics;
pub mod model;
pub mod optim;
pub mod parallel;
pub mod plan;
pub mod plot;
#[cfg(feature = "cli")]
pub mod progress;
pub mod train;
