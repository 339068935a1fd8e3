//! Host implementations of the device-side operations kernels call through
//! `trident_kernels::simt`. Each reaches the running emulated thread through the scheduler's
//! thread-local context.

use crate::block::Status;
use crate::context::{self, fail_with, suspend};
use crate::error::Site;
use crate::shared::{self, Shared};
use crate::warp::{self, Arrival, Op};

pub use crate::warp::{ShflMode, VoteMode, FULL_MASK, POISON_WORD, WARP_SIZE};

/// `threadIdx` of the running thread.
pub fn thread_idx() -> [u32; 3] {
    let (block, thread) = context::current();
    block.thread_idx(thread)
}

/// Linear id of the running thread within its block (x fastest).
pub fn linear_thread_id() -> u32 {
    context::current().1
}

/// `blockIdx` of the running block.
pub fn block_idx() -> [u32; 3] {
    context::current().0.block_idx
}

/// `blockDim` of the launch.
pub fn block_dim() -> [u32; 3] {
    context::current().0.block_dim
}

/// `gridDim` of the launch.
pub fn grid_dim() -> [u32; 3] {
    context::current().0.grid_dim
}

/// `bar.sync 0` at `site`: waits until every thread of the block reaches the same barrier.
pub fn sync_threads(site: Site) {
    let (block, thread) = context::current();
    block.inner.borrow_mut().threads[thread as usize].status = Status::AtBarrier(site);
    suspend(block, thread);
}

/// Runs warp collective `op`, returning this lane's result words.
fn collective(op: Op, mask: u32, site: Site, input: &[u32]) -> [u32; 4] {
    let (block, thread) = context::current();
    let arrival = {
        let mut inner = block.inner.borrow_mut();
        warp::arrive(block, &mut inner, thread, op, mask, site, input)
    };
    match arrival {
        Ok(Arrival::Done(out)) => out,
        Ok(Arrival::Wait) => {
            suspend(block, thread);
            block.inner.borrow().threads[thread as usize].collective_out
        }
        Err(error) => fail_with(block, thread, error),
    }
}

/// `shfl.sync.{mode}.b32` with width 32: `b` is the source lane (idx), the delta (up, down)
/// or the lane mask (bfly). A source lane outside the member mask yields [`POISON_WORD`].
pub fn shfl(mode: ShflMode, mask: u32, value: u32, b: u32, site: Site) -> u32 {
    collective(Op::Shfl(mode), mask, site, &[value, b])[0]
}

/// `vote.sync.{mode}`: all/any return 0 or 1, ballot the bit mask of lanes whose predicate holds.
pub fn vote(mode: VoteMode, mask: u32, predicate: bool, site: Site) -> u32 {
    collective(Op::Vote(mode), mask, site, &[u32::from(predicate)])[0]
}

/// `bar.warp.sync mask`: waits for the lanes in `mask`.
///
/// Race tracking does not treat it as ordering shared-memory accesses; use `sync_threads`
/// between dependent shared-memory accesses of different threads.
pub fn sync_warp(mask: u32, site: Site) {
    collective(Op::SyncWarp, mask, site, &[]);
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (see [`crate::fragments`] for the
/// register layouts).
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4], site: Site) -> [f32; 4] {
    let mut input = [0u32; 10];
    input[..4].copy_from_slice(&a);
    input[4..6].copy_from_slice(&b);
    for (word, value) in input[6..].iter_mut().zip(c) {
        *word = value.to_bits();
    }
    collective(Op::Mma, warp::FULL_MASK, site, &input).map(f32::from_bits)
}

/// `ldmatrix.sync.aligned.m8n8.x{matrices}[.trans].shared.b16`: lane `8i + r` (for
/// `i < matrices`) gives the element offset within `s` of row r of matrix i; other lanes'
/// offsets are ignored.
pub fn ldmatrix(s: Shared<u16>, elem_offset: usize, matrices: u8, trans: bool, site: Site) -> [u32; 4] {
    assert!(matches!(matrices, 1 | 2 | 4), "ldmatrix loads 1, 2 or 4 matrices");
    let (block, thread) = context::current();
    let addresses_row = thread % WARP_SIZE < u32::from(matrices) * 8;
    let offset = if addresses_row { s.row_offset(block, thread, elem_offset) } else { 0 };
    collective(Op::Ldmatrix { matrices, trans }, warp::FULL_MASK, site, &[offset])
}

/// `atom.global.add.f32`: adds `value` at `p` atomically and returns the previous value.
///
/// # Safety
///
/// `p` must be valid for reads and writes, 4-byte aligned, and accessed by other threads only
/// atomically while this runs.
pub unsafe fn atomic_add_f32(p: *mut f32, value: f32) -> f32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // SAFETY: the caller guarantees `p` is valid, aligned and only accessed atomically.
    let word = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) };
    let mut old = word.load(Ordering::Relaxed);
    loop {
        let new = (f32::from_bits(old) + value).to_bits();
        match word.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return f32::from_bits(old),
            Err(current) => old = current,
        }
    }
}

/// A window of `len` elements of `T` at `byte_offset` into the launch's dynamic shared memory;
/// the thread faults when the window does not fit or is misaligned.
pub fn dynamic_shared<T: Copy>(byte_offset: usize, len: usize, site: Site) -> Shared<T> {
    shared::dynamic_shared(byte_offset, len, site)
}

/// The block's static shared array named `key` (one per declaration), `len` elements of `T`.
pub fn static_shared<T: Copy>(key: &'static str, len: usize, site: Site) -> Shared<T> {
    shared::static_shared(key, len, site)
}
