//! The emulated thread that is running on this OS thread, and how it suspends.
//!
//! The scheduler sets the current (block, thread) before it resumes a thread's coroutine, so
//! the `simt` device functions, called from deep inside kernel code, can find their state.

use std::cell::Cell;
use std::ptr;

use crate::block::{BlockState, Status};
use crate::error::{EmuError, Fault};

thread_local! {
    static CURRENT: Cell<(*const BlockState, u32)> = const { Cell::new((ptr::null(), 0)) };
}

pub(crate) fn set_current(block: *const BlockState, thread: u32) {
    CURRENT.with(|c| c.set((block, thread)));
}

/// The running block and the linear id of the running thread.
///
/// # Panics
///
/// When called outside an emulated launch (a kernel function called directly on the host).
pub(crate) fn current() -> (&'static BlockState, u32) {
    let (block, thread) = CURRENT.with(Cell::get);
    assert!(
        !block.is_null(),
        "a simt device function was called outside a kernel launch; run kernels through \
         trident_simt::launch"
    );
    // SAFETY: the scheduler sets CURRENT only while it resumes a coroutine of this block, and
    // the block state outlives every coroutine it runs; kernel code cannot hold the reference
    // beyond the device function that asked for it.
    (unsafe { &*block }, thread)
}

/// The running block and thread, or None outside an emulated launch.
pub(crate) fn try_current() -> Option<(&'static BlockState, u32)> {
    let (block, thread) = CURRENT.with(Cell::get);
    // SAFETY: as in `current`.
    (!block.is_null()).then(|| (unsafe { &*block }, thread))
}

/// Suspends the running thread until the scheduler resumes it.
pub(crate) fn suspend(block: &BlockState, thread: u32) {
    let yielder = block.inner.borrow().threads[thread as usize].yielder;
    // SAFETY: the yielder was stored by this thread's coroutine when it started and stays
    // valid until the coroutine finishes; we are running on that coroutine now.
    unsafe { (*yielder).suspend(()) };
    set_current(block, thread);
}

/// Records `error` as the block's failure and parks the running thread for good: the
/// scheduler ends the block and unwinds every coroutine.
pub(crate) fn fail_with(block: &BlockState, thread: u32, error: EmuError) -> ! {
    {
        let mut inner = block.inner.borrow_mut();
        inner.fault.get_or_insert(error);
        inner.threads[thread as usize].status = Status::Faulted;
    }
    suspend(block, thread);
    unreachable!("the emulator resumed a thread after it faulted")
}

/// Fails the running thread with `fault`.
pub(crate) fn fail(block: &BlockState, thread: u32, fault: Fault) -> ! {
    fail_with(block, thread, block.error_at(thread, fault))
}
