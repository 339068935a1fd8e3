//! Host side of `simt`: every operation calls into the SIMT emulator, which knows the running
//! emulated thread. Fast-math functions use the correctly rounded std versions, which differ
//! from the PTX `.approx` instructions by a few ulp; compare kernel results with a tolerance.

use trident_simt::device::{self, ShflMode, VoteMode};
use trident_simt::Class;

use super::Global;

pub use trident_simt::Shared;

/// `threadIdx.x`.
#[inline]
pub fn thread_idx_x() -> u32 {
    device::thread_idx()[0]
}
/// `threadIdx.y`.
#[inline]
pub fn thread_idx_y() -> u32 {
    device::thread_idx()[1]
}
/// `threadIdx.z`.
#[inline]
pub fn thread_idx_z() -> u32 {
    device::thread_idx()[2]
}
/// `blockIdx.x`.
#[inline]
pub fn block_idx_x() -> u32 {
    device::block_idx()[0]
}
/// `blockIdx.y`.
#[inline]
pub fn block_idx_y() -> u32 {
    device::block_idx()[1]
}
/// `blockIdx.z`.
#[inline]
pub fn block_idx_z() -> u32 {
    device::block_idx()[2]
}
/// `blockDim.x`.
#[inline]
pub fn block_dim_x() -> u32 {
    device::block_dim()[0]
}
/// `blockDim.y`.
#[inline]
pub fn block_dim_y() -> u32 {
    device::block_dim()[1]
}
/// `blockDim.z`.
#[inline]
pub fn block_dim_z() -> u32 {
    device::block_dim()[2]
}
/// `gridDim.x`.
#[inline]
pub fn grid_dim_x() -> u32 {
    device::grid_dim()[0]
}
/// `gridDim.y`.
#[inline]
pub fn grid_dim_y() -> u32 {
    device::grid_dim()[1]
}
/// `gridDim.z`.
#[inline]
pub fn grid_dim_z() -> u32 {
    device::grid_dim()[2]
}

/// Lane of the running thread in its warp: linear thread id % 32.
#[inline]
pub fn lane_id() -> u32 {
    device::linear_thread_id() % device::WARP_SIZE
}

/// `__syncthreads()`: `bar.sync 0`. Every thread of the block must reach this same call.
#[track_caller]
pub fn sync_threads() {
    device::sync_threads(core::panic::Location::caller());
}

/// `__threadfence()`: `fence.acq_rel.gpu`. With an ordered atomic
/// ([`GlobalMut::<u32>::atomic_add`](super::GlobalMut::atomic_add)) before or after it, the
/// emulator orders the accesses of different blocks (release/acquire).
#[inline]
pub fn fence_acq_rel_gpu() {
    device::fence_acq_rel();
}

/// `__syncwarp(mask)`: `bar.warp.sync`; the running lane must be in `mask`.
#[track_caller]
pub fn sync_warp(mask: u32) {
    device::sync_warp(mask, core::panic::Location::caller());
}

#[track_caller]
fn shfl(mode: ShflMode, mask: u32, value: u32, b: u32) -> u32 {
    device::shfl(mode, mask, value, b, core::panic::Location::caller())
}

/// `__shfl_sync`: the value of lane `src_lane % 32`.
#[track_caller]
pub fn shfl_idx_u32(mask: u32, value: u32, src_lane: u32) -> u32 {
    shfl(ShflMode::Idx, mask, value, src_lane)
}
/// `__shfl_up_sync`: the value of lane `lane - delta`; lanes below `delta` keep their own.
#[track_caller]
pub fn shfl_up_u32(mask: u32, value: u32, delta: u32) -> u32 {
    shfl(ShflMode::Up, mask, value, delta)
}
/// `__shfl_down_sync`: the value of lane `lane + delta`; lanes past 31 keep their own.
#[track_caller]
pub fn shfl_down_u32(mask: u32, value: u32, delta: u32) -> u32 {
    shfl(ShflMode::Down, mask, value, delta)
}
/// `__shfl_xor_sync`: the value of lane `lane ^ lane_mask`.
#[track_caller]
pub fn shfl_xor_u32(mask: u32, value: u32, lane_mask: u32) -> u32 {
    shfl(ShflMode::Bfly, mask, value, lane_mask)
}
/// [`shfl_idx_u32`] for f32.
#[track_caller]
pub fn shfl_idx_f32(mask: u32, value: f32, src_lane: u32) -> f32 {
    f32::from_bits(shfl(ShflMode::Idx, mask, value.to_bits(), src_lane))
}
/// [`shfl_up_u32`] for f32.
#[track_caller]
pub fn shfl_up_f32(mask: u32, value: f32, delta: u32) -> f32 {
    f32::from_bits(shfl(ShflMode::Up, mask, value.to_bits(), delta))
}
/// [`shfl_down_u32`] for f32.
#[track_caller]
pub fn shfl_down_f32(mask: u32, value: f32, delta: u32) -> f32 {
    f32::from_bits(shfl(ShflMode::Down, mask, value.to_bits(), delta))
}
/// [`shfl_xor_u32`] for f32.
#[track_caller]
pub fn shfl_xor_f32(mask: u32, value: f32, lane_mask: u32) -> f32 {
    f32::from_bits(shfl(ShflMode::Bfly, mask, value.to_bits(), lane_mask))
}

/// `__all_sync`: whether `pred` holds on every lane in `mask`.
#[track_caller]
pub fn vote_all(mask: u32, pred: bool) -> bool {
    device::vote(VoteMode::All, mask, pred, core::panic::Location::caller()) != 0
}
/// `__any_sync`: whether `pred` holds on some lane in `mask`.
#[track_caller]
pub fn vote_any(mask: u32, pred: bool) -> bool {
    device::vote(VoteMode::Any, mask, pred, core::panic::Location::caller()) != 0
}
/// `__ballot_sync`: bit `l` set when lane `l` is in `mask` and its `pred` holds.
#[track_caller]
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    device::vote(VoteMode::Ballot, mask, pred, core::panic::Location::caller())
}

/// A window of `len` elements of `T` at `byte_offset` into the launch's dynamic shared memory.
/// On the host, a window that does not fit the launch's dynamic shared memory or is misaligned
/// for the accesses of a `T` faults the thread.
///
/// # Safety
///
/// On the GPU nothing is checked: the window must lie within the launch's dynamic shared
/// memory, `byte_offset` must be aligned for `T` and, for elements of 2, 4, 8 or 16 bytes, to
/// their size (`Shared::load`/`store` access them with one instruction of that width), and windows of different types that overlap
/// must not be used between the same two barriers.
#[track_caller]
pub unsafe fn dynamic_shared<T: Copy>(byte_offset: usize, len: usize) -> Shared<T> {
    device::dynamic_shared(byte_offset, len, core::panic::Location::caller())
}

#[doc(hidden)]
#[track_caller]
pub fn static_shared_array<T: Copy>(key: &'static str, len: usize) -> Shared<T> {
    device::static_shared(key, len, core::panic::Location::caller())
}

/// A per-block shared array `$name` of `$len` elements of `$ty`, as a [`Shared`] handle.
/// `$ty` and `$len` must not depend on generic parameters (on nvptx64 they size a
/// module-level `.shared` declaration).
#[macro_export]
macro_rules! static_shared {
    ($name:ident, $ty:ty, $len:expr) => {
        $crate::simt::static_shared_array::<$ty>(
            concat!(module_path!(), "::", stringify!($name), "@", line!(), ":", column!()),
            $len,
        )
    };
}

/// `2^x` (`ex2.approx.ftz.f32` on the GPU).
#[inline]
pub fn exp2(x: f32) -> f32 {
    device::count(Class::Sfu);
    x.exp2()
}
/// `log2(x)` (`lg2.approx.ftz.f32` on the GPU).
#[inline]
pub fn log2(x: f32) -> f32 {
    device::count(Class::Sfu);
    x.log2()
}
/// `tanh(x)` (`tanh.approx.f32` on the GPU, sm_75+).
#[inline]
pub fn tanh(x: f32) -> f32 {
    device::count(Class::Sfu);
    x.tanh()
}
/// `1 / sqrt(x)` (`rsqrt.approx.ftz.f32` on the GPU).
#[inline]
pub fn rsqrt(x: f32) -> f32 {
    device::count(Class::Sfu);
    1.0 / x.sqrt()
}
/// Correctly rounded square root (`sqrt.rn.f32`).
#[inline]
pub fn sqrt(x: f32) -> f32 {
    device::count(Class::Sfu);
    x.sqrt()
}
/// `a * b + c` rounded once (`fma.rn.f32`).
#[inline]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    device::count(Class::Fma);
    a.mul_add(b, c)
}
/// Larger of `a` and `b`; a NaN operand yields the other one (`max.f32`).
#[inline]
pub fn fmax(a: f32, b: f32) -> f32 {
    device::count(Class::Alu);
    a.max(b)
}
/// Smaller of `a` and `b`; a NaN operand yields the other one (`min.f32`).
#[inline]
pub fn fmin(a: f32, b: f32) -> f32 {
    device::count(Class::Alu);
    a.min(b)
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: D = A x B + C for a 16x16 bf16 A,
/// a 16x8 bf16 B and f32 C/D, in the PTX ISA fragment layouts (see `trident_simt::fragments`).
/// All 32 lanes of a full warp must execute it together.
#[track_caller]
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    device::mma_m16n8k16_bf16(a, b, c, core::panic::Location::caller())
}

#[track_caller]
fn ldmatrix<const N: usize>(s: Shared<u16>, elem_offset: usize, trans: bool) -> [u32; N] {
    let regs = device::ldmatrix(s, elem_offset, N as u8, trans, core::panic::Location::caller());
    core::array::from_fn(|i| regs[i])
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: lanes 8i..8i+7 pass the element offset of rows
/// 0..7 of matrix i (16-byte aligned rows of 8 elements); register i of lane l holds row l/4,
/// columns 2(l%4) and 2(l%4)+1 of matrix i.
#[track_caller]
pub fn ldmatrix_x4(s: Shared<u16>, elem_offset: usize) -> [u32; 4] {
    ldmatrix(s, elem_offset, false)
}
/// [`ldmatrix_x4`] for two matrices (lanes 0..15 give row offsets).
#[track_caller]
pub fn ldmatrix_x2(s: Shared<u16>, elem_offset: usize) -> [u32; 2] {
    ldmatrix(s, elem_offset, false)
}
/// [`ldmatrix_x4`] for one matrix (lanes 0..7 give row offsets).
#[track_caller]
pub fn ldmatrix_x1(s: Shared<u16>, elem_offset: usize) -> u32 {
    ldmatrix::<1>(s, elem_offset, false)[0]
}
/// `ldmatrix...x4.trans`: register i of lane l holds rows 2(l%4) and 2(l%4)+1, column l/4.
#[track_caller]
pub fn ldmatrix_x4_trans(s: Shared<u16>, elem_offset: usize) -> [u32; 4] {
    ldmatrix(s, elem_offset, true)
}
/// [`ldmatrix_x4_trans`] for two matrices.
#[track_caller]
pub fn ldmatrix_x2_trans(s: Shared<u16>, elem_offset: usize) -> [u32; 2] {
    ldmatrix(s, elem_offset, true)
}
/// [`ldmatrix_x4_trans`] for one matrix.
#[track_caller]
pub fn ldmatrix_x1_trans(s: Shared<u16>, elem_offset: usize) -> u32 {
    ldmatrix::<1>(s, elem_offset, true)[0]
}

/// `cp.async.cg.shared.global` of 16 bytes from global `src` to element `dst_index` of `dst`
/// (both 16-byte aligned). The bytes land at the `cp_async_wait_*` that covers the copy's
/// commit group; on the host, touching them before that faults.
///
/// # Safety
///
/// `src` must be valid for reading 16 bytes.
#[track_caller]
pub unsafe fn cp_async_16<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>) {
    // SAFETY: forwarded from the caller; the emulator checks `src` against the allocations.
    unsafe {
        device::cp_async(dst, dst_index, src.as_ptr(), src.arg(), 16, 16, core::panic::Location::caller())
    }
}

/// [`cp_async_16`] reading only the first `src_bytes` (at most 16) bytes of `src` and zeroing
/// the rest: loads the edge of a tile without reading past the end of a buffer.
///
/// # Safety
///
/// `src` must be valid for reading `src_bytes` bytes.
#[track_caller]
pub unsafe fn cp_async_16_zfill<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>, src_bytes: u32) {
    // SAFETY: forwarded from the caller; the emulator checks `src` against the allocations.
    unsafe {
        device::cp_async(
            dst,
            dst_index,
            src.as_ptr(),
            src.arg(),
            16,
            src_bytes,
            core::panic::Location::caller(),
        )
    }
}

/// `cp.async.ca.shared.global` of 4 bytes (both addresses 4-byte aligned); see [`cp_async_16`].
///
/// # Safety
///
/// `src` must be valid for reading 4 bytes.
#[track_caller]
pub unsafe fn cp_async_4<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>) {
    // SAFETY: forwarded from the caller; the emulator checks `src` against the allocations.
    unsafe {
        device::cp_async(dst, dst_index, src.as_ptr(), src.arg(), 4, 4, core::panic::Location::caller())
    }
}

/// `cp.async.ca.shared.global` of 8 bytes (both addresses 8-byte aligned); see [`cp_async_16`].
///
/// # Safety
///
/// `src` must be valid for reading 8 bytes.
#[track_caller]
pub unsafe fn cp_async_8<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>) {
    // SAFETY: forwarded from the caller; the emulator checks `src` against the allocations.
    unsafe {
        device::cp_async(dst, dst_index, src.as_ptr(), src.arg(), 8, 8, core::panic::Location::caller())
    }
}

/// `cp.async.commit_group`: this thread's copies since the last commit form a group.
#[inline]
pub fn cp_async_commit_group() {
    device::cp_async_commit_group();
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's committed groups are
/// still in flight. Other threads see the data only after a following `sync_threads`.
#[inline]
pub fn cp_async_wait_group<const N: u32>() {
    device::cp_async_wait_group(N);
}

/// `cp.async.wait_all`: commits and waits for all of this thread's copies.
#[inline]
pub fn cp_async_wait_all() {
    device::cp_async_wait_all();
}

// Tensor-core GEMM support (kept together at the end of the file).

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: [`mma_m16n8k16_bf16`] with IEEE
/// half-precision A and B, in the same fragment layouts. All 32 lanes of a full warp must
/// execute it together.
#[track_caller]
pub fn mma_m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    device::mma_m16n8k16_f16(a, b, c, core::panic::Location::caller())
}
