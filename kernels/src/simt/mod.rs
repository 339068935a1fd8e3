//! The device-side API kernels are written against.
//!
//! Built for nvptx64 each operation is a PTX instruction (`ptx.rs`); built for the host each
//! calls the SIMT emulator (`host.rs`), which checks what the GPU leaves undefined. Signatures
//! are identical on both, so kernel bodies never test the target.
//!
//! - Indices: `thread_idx_x/y/z`, `block_idx_*`, `block_dim_*`, `grid_dim_*`, [`lane_id`],
//!   [`warp_size`].
//! - Barriers: [`sync_threads`] (every thread of the block, at one call site), [`sync_warp`];
//!   the memory fence [`fence_acq_rel_gpu`] (`__threadfence`).
//! - Shared memory: [`Shared`] handles (`load`, `store`, `atomic_add` for f32, `sub`, `cast`)
//!   from [`static_shared!`] or [`dynamic_shared`]; `cp_async_16` (with `_zfill`), `cp_async_4`,
//!   `cp_async_8`, then `cp_async_commit_group` and `cp_async_wait_group::<N>` /
//!   `cp_async_wait_all`.
//! - Warp collectives: `shfl_{idx,up,down,xor}_{f32,u32}`, `vote_{all,any,ballot}`, with a
//!   member mask ([`FULL_MASK`] for the whole warp).
//! - Global memory: [`Global`] (read-only) and [`GlobalMut`] pointers, the kernels' parameter
//!   types: `load`, `store`, `load_nc` (`ld.global.nc`), `load_v2`/`load_v4`/`store_v2`/
//!   `store_v4` (`.v2`/`.v4.b32`), `atomic_add`/`red_add` (`atom`/`red.global.add.f32`), and
//!   `atomic_add` on u32 (`atom.global.add.u32`: with a fence it releases or acquires between
//!   blocks). Kernels never dereference a raw global pointer: on the host every access is
//!   checked and counted.
//! - Flags between blocks and devices (`flags.rs`): `load_acquire_sys`/`load_acquire_gpu`,
//!   `store_release_sys`/`store_release_gpu`, `load_volatile`/`store_volatile` on u32 words,
//!   and [`global_timer_ns`] (`%globaltimer`) for deadlines.
//! - Fast math: [`exp2`], [`exp`], [`log2`], [`tanh`], [`rsqrt`] (PTX `.approx`, a few ulp
//!   from the host's correctly rounded results; `tanh` about 2^-11), [`sqrt`], [`fma`],
//!   [`fmax`], [`fmin`].
//! - bf16: [`f32_to_bf16`], [`bf16_to_f32`], [`pack_bf16x2`], [`unpack_bf16x2`]; f16:
//!   [`f32_to_f16`], [`f16_to_f32`] (pairs packed as bf16 pairs are).
//! - Tensor cores: [`mma_m16n8k16_bf16`], [`mma_m16n8k16_f16`], `ldmatrix_x{1,2,4}` and their
//!   `_trans` forms, in the PTX ISA fragment layouts.
//! - Hopper (sm_90, emitted only into kernels that call them): mbarriers ([`mbarrier_init`],
//!   [`mbarrier_arrive`], [`mbarrier_arrive_expect_tx`], [`mbarrier_try_wait_parity`], ...),
//!   [`elect_sync`], [`fence_proxy_async_shared_cta`], and TMA copies through a
//!   [`TensorMapRef`] (`tma_load_{1..5}d`, `tma_store_{1..5}d`, [`bulk_commit_group`],
//!   [`bulk_wait_group_read`]); `wgmma_m64n{8,16,32,64,128,256}k16_{bf16,f16}` with
//!   [`WgmmaAccumulator`], [`matrix_descriptor`], [`wgmma_fence`], [`wgmma_commit_group`],
//!   [`wgmma_wait_group`]; [`setmaxnreg_inc`] and [`setmaxnreg_dec`] (sm_90a).

mod bf16;
mod f16;
mod flags;
mod global;
mod hopper;
#[cfg(not(target_arch = "nvptx64"))]
mod host;
#[cfg(target_arch = "nvptx64")]
mod ptx;
mod tma;
mod wgmma;

pub use bf16::{bf16_to_f32, f32_to_bf16, pack_bf16x2, unpack_bf16x2};
pub use f16::{f16_to_f32, f32_to_f16};
pub use flags::global_timer_ns;
pub use global::{Global, GlobalMut, Word32};
pub use hopper::*;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::*;
#[cfg(target_arch = "nvptx64")]
pub use ptx::*;
pub use tma::*;
pub use wgmma::*;

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
