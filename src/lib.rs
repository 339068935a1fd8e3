//! Trident: a GPU kernel and collectives runtime in Rust, and a GPT trainer on top of it.
//!
//! - [`runtime`]: devices (`Cpu`, `Emu`, `Cuda`), buffers, modules and launches.
//! - [`kernels`]: the PTX and host entries of every kernel, as the runtime loads them, and
//!   [`launch`]: a safe, checked launch wrapper per kernel (both of `trident-ops`).
//! - [`collectives`]: communicators and ring algorithms.
//! - [`ops`] (the `trident-ops` crate): the GPT's tensor ops on any device; [`model`]: the
//!   GPT-2 model; [`optim`], [`train`]: optimizer and training loop.
//! - [`plan`] (the `trident-plan` crate): the cluster planner and the pipeline schedules the
//!   trainer runs (re-exported by [`parallel`]); [`calibrate`]: planning for this machine by
//!   running the real trainer.
//! - [`llmc`]: training side by side with llm.c.
//! - [`data`] (the `trident-data` crate), [`checkpoint`], [`metrics`], [`plot`]: what training
//!   reads and writes.
//!
//! The `trident` binary and its commands are the `trident-cli` crate.
//!
//! Features, all on by default: `cuda` (the kernels' PTX, through `trident-ops`), `tokenizer`
//! (GPT-2's BPE, through `trident-data`), `plots` (PNG pictures). Without `tokenizer` or
//! `plots`, what needs them returns an error naming the feature.

pub use trident_collectives as collectives;
pub use trident_data as data;
pub use trident_ops as ops;
pub use trident_ops::{kernels, launch};
pub use trident_plan as plan;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use trident_runtime as runtime;

pub mod calibrate;
pub mod checkpoint;
pub mod llmc;
pub mod metrics;
pub mod model;
pub mod optim;
pub mod parallel;
pub mod plot;
pub mod train;
