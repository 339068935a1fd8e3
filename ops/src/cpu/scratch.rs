//! Per-thread scratch memory, so that ops need no allocation per call in the training loop.

use std::cell::RefCell;

thread_local! {
    /// Grown to the largest request seen on this thread, never shrunk.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` floats of this thread's scratch (contents unspecified). A call nested in
/// another on the same thread (an op that, waiting on its own parallel tasks, runs a stolen task
/// that wants scratch too) gets a fresh buffer instead.
pub fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => {
            if s.len() < len {
                s.resize(len, 0.0);
            }
            f(&mut s[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_calls_get_separate_buffers() {
        with_scratch(4, |outer| {
            outer.fill(1.0);
            with_scratch(8, |inner| inner.fill(2.0));
            assert_eq!(outer, [1.0; 4]);
        });
        with_scratch(2, |again| assert_eq!(again.len(), 2));
    }
}
