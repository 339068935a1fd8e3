//! Planted bugs of the send/receive and broadcast protocols, for the emulator's tests: the
//! real kernels' bodies with one step of the protocol broken, so that the tests can show the
//! emulator reports each. The real kernels pass [`Plant::None`], which the compiler folds
//! away; the planted kernels exist on the host only (no PTX entry).

/// Which step of the protocol a kernel breaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Plant {
    /// None: the real protocol.
    None,
    /// The data's flag (`full`, `cast_full`) written with a plain store instead of
    /// `st.release.sys`: the data is not ordered before it.
    PlainRelease,
    /// The writer stores without waiting for the reader's `free` (`cast_ready`): it may
    /// overwrite what the reader still reads.
    IgnoreFree,
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host::HOST_KERNELS;

/// The planted kernels (host only).
#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::super::broadcast::broadcast;
    use super::super::send_recv::send;
    use super::Plant;
    use crate::simt;

    kernels! {
        /// [`send_f32`](super::super::send_recv::send_f32) with its `full` flag written by a
        /// plain store.
        pub unsafe fn send_f32_plain_release(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, dst: u32) {
            let outcome = simt::static_shared!(SEND_PLAIN_OUTCOME, u32, 2);
            send::<f32>(Plant::PlainRelease, table, n, rank, world, seq, timeout_ns, status, outcome, dst);
        }

        /// [`send_f32`](super::super::send_recv::send_f32) that stores without waiting for
        /// the receiver's `free`.
        pub unsafe fn send_f32_ignoring_free(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, dst: u32) {
            let outcome = simt::static_shared!(SEND_NO_FREE_OUTCOME, u32, 2);
            send::<f32>(Plant::IgnoreFree, table, n, rank, world, seq, timeout_ns, status, outcome, dst);
        }

        /// [`broadcast_f32`](super::super::broadcast::broadcast_f32) with its `cast_full`
        /// flags written by plain stores.
        pub unsafe fn broadcast_f32_plain_release(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, root: u32) {
            let outcome = simt::static_shared!(BROADCAST_PLAIN_OUTCOME, u32, 2);
            broadcast::<f32>(Plant::PlainRelease, table, n, rank, world, seq, timeout_ns, status, outcome, root);
        }

        /// [`broadcast_f32`](super::super::broadcast::broadcast_f32) whose root stores without
        /// waiting for the peers' `cast_ready`.
        pub unsafe fn broadcast_f32_ignoring_ready(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, root: u32) {
            let outcome = simt::static_shared!(BROADCAST_NO_READY_OUTCOME, u32, 2);
            broadcast::<f32>(Plant::IgnoreFree, table, n, rank, world, seq, timeout_ns, status, outcome, root);
        }
    }
}
