//! Process-wide pool of coroutine stacks, so launches do not map and unmap a stack per
//! emulated thread.

use std::sync::Mutex;

use corosensei::stack::DefaultStack;

/// Stack of one emulated thread. Kernels keep register tiles (a few KiB) in locals; unoptimized
/// builds need several times that.
pub const THREAD_STACK_BYTES: usize = 256 * 1024;

/// Stacks kept for reuse beyond this are unmapped.
const MAX_POOLED: usize = 16 * 1024;

static POOL: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());

/// A stack from the pool, or a fresh one.
pub(crate) fn take() -> Result<DefaultStack, String> {
    if let Some(stack) = POOL.lock().unwrap_or_else(|e| e.into_inner()).pop() {
        return Ok(stack);
    }
    DefaultStack::new(THREAD_STACK_BYTES)
        .map_err(|e| format!("cannot map a {THREAD_STACK_BYTES}-byte coroutine stack: {e}"))
}

/// Returns stacks to the pool.
pub(crate) fn give_back(stacks: Vec<DefaultStack>) {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let room = MAX_POOLED.saturating_sub(pool.len());
    pool.extend(stacks.into_iter().take(room));
}
