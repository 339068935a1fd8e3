//! The device-side API kernels are written against: thread indices, barriers, shared memory,
//! warp shuffles and votes, atomics, fast math and tensor-core fragments.
//!
//! Built for nvptx64 each operation is a PTX instruction (`ptx.rs`); built for the host each
//! calls the SIMT emulator (`host.rs`), which checks what the GPU leaves undefined. Signatures
//! are identical on both, so kernel bodies never test the target.

mod bf16;
#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(target_arch = "nvptx64")]
mod ptx;

pub use bf16::{bf16_to_f32, f32_to_bf16, pack_bf16x2, unpack_bf16x2};
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
#[cfg(target_arch = "nvptx64")]
pub use ptx::*;

pub use crate::static_shared;

/// Threads per warp.
#[inline]
pub fn warp_size() -> u32 {
    32
}

/// Member mask naming all 32 lanes.
pub const FULL_MASK: u32 = u32::MAX;

/// `e^x` through [`exp2`] (one `ex2.approx` on the GPU).
#[inline]
pub fn exp(x: f32) -> f32 {
    exp2(x * core::f32::consts::LOG2_E)
}
