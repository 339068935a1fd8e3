#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch))]
// Kernels index register arrays by lane-derived counters and take many scalar parameters, as
// GPU code does; iterator rewrites would obscure the thread-to-data mapping.
#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]
//! Trident's device kernels, written once against [`simt`].
//!
//! Built for `nvptx64-nvidia-cuda` each kernel is an `extern "ptx-kernel"` entry point of the
//! PTX module that `trident-ops`' build script compiles (through `trident-ptx-builder`) and
//! assembles for sm_80 to sm_90; built for the host each kernel is a plain function plus an
//! entry in [`HOST_KERNELS`], which the SIMT emulator runs as thread blocks. [`kernels!`]
//! declares both from one source, and [`unroll!`] writes a register-array loop once.
//!
//! Kernels take raw pointers and trust their launch wrappers (`trident-ops`, `ops/src/launch`)
//! to have checked shapes, lengths and devices. One file per kernel family: the tensor-core
//! GEMM ([`gemm_tc`]; on Hopper also [`gemm_hopper`], in the sm_90a module only) and flash
//! attention ([`flash_attention`]) for 16-bit training, the f32
//! GEMM ([`gemm`]) and attention ([`attention`]), the 128-bit memory-bound kernels
//! ([`vector`], [`elementwise_vec`], [`layernorm_row`], [`crossentropy_v4`], [`multi_tensor`]),
//! and the rest of a GPT's training step ([`encoder`], [`layernorm`], [`bias`], [`elementwise`],
//! [`adamw`], [`reduce`], [`convert`], [`precision`]), with the device functions they share
//! ([`gelu`], [`reduce`]). This crate holds what the trainer runs; the superseded scalar
//! generations, the time model's calibration designs and the instruction self-test live in the
//! workspace's `dev/` crate (`trident-dev`), with their own PTX module.

#[macro_use]
mod kernel;
#[macro_use]
mod unroll;

/// The SIMT emulator core the host side of [`kernels!`] builds on, re-exported so that a crate
/// of one's own kernels needs no other dependency.
#[cfg(not(target_arch = "nvptx64"))]
pub use trident_simt;

pub mod simt;

pub mod adamw;
pub mod attention;
pub mod bias;
pub mod collective;
pub mod convert;
pub mod crossentropy_v4;
pub mod elementwise;
pub mod elementwise_vec;
pub mod encoder;
pub mod flash_attention;
pub mod gelu;
pub mod gemm;
// Hopper-only (wgmma, TMA, setmaxnreg): in the sm_90a PTX module, which `-Ctarget-cpu=sm_90a`
// selects, and always on the host.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
pub mod gemm_hopper;
pub mod gemm_tc;
pub mod layernorm;
pub mod layernorm_row;
pub mod multi_tensor;
pub mod precision;
pub mod reduce;
pub mod vector;

/// Every kernel's host entry, by file; the names are the PTX entry names.
#[cfg(not(target_arch = "nvptx64"))]
pub static HOST_KERNELS: &[&[trident_simt::HostKernel]] = &[
    adamw::HOST_KERNELS,
    attention::HOST_KERNELS,
    bias::HOST_KERNELS,
    collective::broadcast::HOST_KERNELS,
    collective::one_shot::HOST_KERNELS,
    collective::ring::HOST_KERNELS,
    collective::send_recv::HOST_KERNELS,
    collective::two_shot::HOST_KERNELS,
    convert::HOST_KERNELS,
    crossentropy_v4::HOST_KERNELS,
    elementwise::HOST_KERNELS,
    elementwise_vec::HOST_KERNELS,
    encoder::HOST_KERNELS,
    flash_attention::HOST_KERNELS,
    gemm::HOST_KERNELS,
    gemm_hopper::HOST_KERNELS,
    gemm_tc::HOST_KERNELS,
    layernorm::HOST_KERNELS,
    layernorm_row::HOST_KERNELS,
    multi_tensor::HOST_KERNELS,
    precision::HOST_KERNELS,
    reduce::HOST_KERNELS,
];

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; there is nothing left to keep consistent.
    unsafe { core::arch::nvptx::trap() }
}

/// Kernels that must not spill registers to local memory: the PTX test fails if `ptxas`
/// reports spill stores or loads for any of them or for any tensor-core GEMM main loop
/// ([`gemm_tc::KERNEL_NAMES`]).
pub const NO_SPILL: &[&str] = &[
    "add_f32",
    "gemm_nn_f32",
    "gemm_nt_f32",
    "gemm_tn_f32",
    "gemm_tt_f32",
    "adamw_f32",
    "add_bias_f32",
    "bias_backward_f32",
    "bias_backward_bf16",
    "bias_backward_f16",
    "convert_f32_to_bf16",
    "convert_f32_to_f16",
    "convert_bf16_to_f32",
    "convert_f16_to_f32",
    "encoder_forward_f32",
    "encoder_backward_wte_f32",
    "encoder_backward_wpe_f32",
    "layernorm_forward_f32",
    "layernorm_backward_f32",
    "sum_squares_f32",
    "first_token_out_of_range_u32",
    "scale_f32",
    "attention_forward_f32",
    "attention_backward_dsum_f32",
    "attention_backward_dq_f32",
    "attention_backward_dkv_f32",
    "flash_attention_forward_hs64",
    "flash_attention_forward_hs128",
    "flash_attention_backward_prep",
    "flash_attention_backward_hs64",
    "flash_attention_backward_hs128",
    "flash_attention_backward_dq",
    "add_v4_f32",
    "add_bf16",
    "gelu_forward_v4_f32",
    "gelu_forward_bf16",
    "gelu_backward_v4_f32",
    "gelu_backward_bf16",
    "layernorm_forward_row_f32",
    "layernorm_residual_forward_f32",
    "layernorm_forward_row_bf16",
    "layernorm_residual_forward_bf16",
    "crossentropy_v4_f32",
    "crossentropy_v4_bf16",
    "crossentropy_v4_f16",
    "adamw_chunks_f32",
    "sum_squares_chunks_f32",
    "sum_squares_finish_f32",
];
