// The two attributes every kernels crate carries (see `trident_kernels::kernels!`): no `std` on
// the GPU, and the nightly features for `extern "ptx-kernel"` and inline PTX.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch))]
// As in `trident-kernels`: register arrays indexed by lane-derived counters, many scalar
// parameters.
#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]
//! Kernels the trainer does not run, kept beside it as llm.c keeps `dev/cuda/`: each is
//! written against `trident_kernels::simt` like the production kernels, built to its own PTX
//! module by `trident-dev`'s build script, and run on `Emu` through [`HOST_KERNELS`].
//!
//! - [`gelu`], [`crossentropy`]: the scalar first generations of GeLU and the fused
//!   softmax + cross-entropy, the baselines the kernel benchmark sets the 128-bit and bf16
//!   kernels beside;
//! - [`designs`]: published SGEMM designs, re-implemented to calibrate and validate the kernel
//!   time model against their authors' measurements;
//! - [`selftest`]: kernels that exercise every `simt` operation, run on `Emu` and on a GPU
//!   against the same references (the first thing the GPU check runs).

pub mod crossentropy;
pub mod designs;
pub mod gelu;
pub mod selftest;

/// Every kernel's host entry, by file; the names are the PTX entry names.
#[cfg(not(target_arch = "nvptx64"))]
pub static HOST_KERNELS: &[&[trident_kernels::trident_simt::HostKernel]] =
    &[crossentropy::HOST_KERNELS, designs::HOST_KERNELS, gelu::HOST_KERNELS, selftest::HOST_KERNELS];

/// Kernels that must not spill registers to local memory (the `ptxas` test checks them).
pub const NO_SPILL: &[&str] = &["gelu_forward_f32", "gelu_backward_f32", "crossentropy_f32"];
