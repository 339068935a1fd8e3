#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch))]
//! Trident's device kernels, written once against [`simt`].
//!
//! Built for `nvptx64-nvidia-cuda` each kernel is an `extern "ptx-kernel"` entry point in the PTX
//! module that `build.rs` embeds in the `trident` library. Built for the host each kernel is a
//! plain function plus an entry in [`HOST_KERNELS`], which the SIMT emulator runs as thread blocks.
//!
//! Kernels take raw pointers and trust their launch wrappers (in the `trident` crate) to have
//! checked shapes, lengths and devices.

#[macro_use]
mod kernel;

pub mod simt;

pub mod elementwise;

/// Every kernel's host entry, by file; the names are the PTX entry names.
#[cfg(not(target_arch = "nvptx64"))]
pub static HOST_KERNELS: &[&[trident_simt::HostKernel]] = &[elementwise::HOST_KERNELS];

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; there is nothing left to keep consistent.
    unsafe { core::arch::nvptx::trap() }
}
