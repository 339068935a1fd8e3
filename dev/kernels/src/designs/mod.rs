//! Published kernel designs, re-implemented in SIMT Rust to calibrate and validate the kernel
//! time model (`trident-perfmodel`) against measurements their authors published.
//!
//! These kernels are not used by the trainer. Each follows a design described in public
//! writing — tile shapes, thread-to-data mapping, what is staged in shared memory, how wide the
//! loads are — written from those descriptions, so that the emulator's exact counters for them
//! can be set beside the published speed on the GPU it was measured on.
//!
//! - [`sgemm`]: the step-by-step f32 GEMM designs of Simon Boehm's worklog "How to Optimize a
//!   CUDA Matmul Kernel for cuBLAS-like Performance" (2022), measured on an RTX A6000 at
//!   4096 x 4096.

pub mod sgemm;

/// Every design kernel's host entry; the names are the PTX entry names.
#[cfg(not(target_arch = "nvptx64"))]
pub static HOST_KERNELS: &[trident_kernels::trident_simt::HostKernel] = sgemm::HOST_KERNELS;
