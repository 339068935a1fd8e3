//! `cp.async`: copies from global to shared memory that land when the issuing thread waits
//! for their group. Until then every access to the destination bytes faults, as its value is
//! undefined on the GPU.

use crate::context::{self, fail, fail_with};
use crate::error::{Access, AccessKind, Fault, Site};
use crate::shared::{race_error, Shared};
use crate::smem::SharedMemory;
use crate::stats::{Class, MemOp, ASYNC_OVERLAP_BUCKETS};

struct AsyncCopy {
    /// Commit group, or None while not yet committed.
    group: Option<u32>,
    offset: u32,
    len: u32,
    data: [u8; 16],
    site: Site,
}

/// One thread's copies in flight.
#[derive(Default)]
pub(crate) struct AsyncCopies {
    pending: Vec<AsyncCopy>,
    committed: u32,
    /// The thread's barrier count when each group was committed, by group number.
    commit_barriers: Vec<u64>,
}

impl AsyncCopies {
    /// Drops the copies a thread never waited for (their bytes stay undefined).
    pub fn abandon(&mut self, smem: &mut SharedMemory) {
        for copy in self.pending.drain(..) {
            smem.abandon_async_copy(copy.offset, copy.len);
        }
        self.committed = 0;
        self.commit_barriers.clear();
    }
}

/// `cp.async` of `bytes` (4, 8 or 16) bytes from `src` to element `dst_index` of `dst`, of which
/// the first `src_bytes` come from `src` and the rest are zero.
///
/// # Safety
///
/// `src` must be valid for reading `src_bytes` bytes.
pub(crate) unsafe fn copy<T: Copy>(
    dst: Shared<T>,
    dst_index: usize,
    src: *const T,
    src_arg: u32,
    bytes: u32,
    src_bytes: u32,
    site: Site,
) {
    let (block, thread) = context::current();
    let element = size_of::<T>() as u32;
    let bad = |detail: String| -> ! { fail(block, thread, Fault::BadOperand { site, detail }) };
    if !matches!(bytes, 4 | 8 | 16) || element == 0 || bytes % element != 0 {
        bad(format!("cp.async copies 4, 8 or 16 bytes of whole elements, not {bytes} bytes of {element}-byte elements"));
    }
    if src_bytes > bytes {
        bad(format!("cp.async source size {src_bytes} exceeds the copy size {bytes}"));
    }
    let offset = dst.byte_offset_of(block, thread, dst_index, (bytes / element) as usize, site);
    if offset % bytes != 0 {
        bad(format!("cp.async destination (shared byte {offset}) is not {bytes}-byte aligned"));
    }
    if src_bytes > 0 && src as usize % bytes as usize != 0 {
        bad(format!("cp.async source address {src:p} is not {bytes}-byte aligned"));
    }
    if src_bytes > 0 {
        crate::device::global_access_as(
            src as u64,
            src_bytes,
            1,
            MemOp::Load,
            Class::AsyncCopy,
            src_arg,
            site,
        );
    } else {
        block.count(thread, Class::AsyncCopy);
    }
    let mut data = [0u8; 16];
    // SAFETY: the caller guarantees `src` is readable for `src_bytes` bytes.
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), data.as_mut_ptr(), src_bytes as usize) };
    let result = {
        let mut inner = block.inner.borrow_mut();
        let inner = &mut *inner;
        inner.log.push_shared(offset, bytes, MemOp::Store, thread, site);
        match inner.smem.track(offset, bytes, AccessKind::AsyncCopy, thread, site) {
            Ok(()) => {
                let copy = AsyncCopy { group: None, offset, len: bytes, data, site };
                inner.threads[thread as usize].async_copies.pending.push(copy);
                Ok(())
            }
            Err(c) => {
                let later = Access { kind: AccessKind::AsyncCopy, thread: block.dim3(thread), site };
                Err(race_error(block, inner, c, later, thread))
            }
        }
    };
    if let Err(error) = result {
        fail_with(block, thread, error);
    }
}

/// The barriers the running thread has passed in its block.
fn barriers_passed(block: &crate::block::BlockState, thread: u32) -> u64 {
    block.lane_counts[thread as usize][Class::Barrier as usize].get()
}

/// `cp.async.commit_group`: the running thread's uncommitted copies form a new group.
pub(crate) fn commit_group() {
    let (block, thread) = context::current();
    let barriers = barriers_passed(block, thread);
    let mut inner = block.inner.borrow_mut();
    let copies = &mut inner.threads[thread as usize].async_copies;
    copies.commit_barriers.push(barriers);
    let group = copies.committed;
    for copy in copies.pending.iter_mut().filter(|c| c.group.is_none()) {
        copy.group = Some(group);
    }
    copies.committed += 1;
}

/// `cp.async.wait_group n`: lands every committed group but the `n` most recent, counting
/// each landed copy by the barriers its thread passed while it was in flight (see
/// [`crate::LaunchStats::async_copies_by_overlap`]).
pub(crate) fn wait_group(n: u32) {
    let (block, thread) = context::current();
    let barriers = barriers_passed(block, thread);
    let mut inner = block.inner.borrow_mut();
    let inner = &mut *inner;
    let copies = &mut inner.threads[thread as usize].async_copies;
    let limit = copies.committed.saturating_sub(n);
    let mut i = 0;
    while i < copies.pending.len() {
        if let Some(group) = copies.pending[i].group.filter(|&g| g < limit) {
            let overlap = barriers - copies.commit_barriers[group as usize];
            let bucket = (overlap as usize).min(ASYNC_OVERLAP_BUCKETS - 1);
            inner.log.counts.async_overlap[bucket] += 1;
            let copy = copies.pending.remove(i);
            inner.smem.finish_async_copy(copy.offset, &copy.data[..copy.len as usize], thread, copy.site);
        } else {
            i += 1;
        }
    }
}
