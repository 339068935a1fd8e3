//! Hopper (sm_90) synchronization: `mbarrier` with transaction bytes, `elect.sync` and
//! `fence.proxy.async`; and `setmaxnreg` (sm_90a), which moves registers between warpgroups.
//!
//! On nvptx64 each function is the PTX instruction its documentation names (PTX ISA 8.0,
//! sm_90). They are `#[inline(always)]`: a PTX module holds one of these instructions only if
//! a kernel in it calls the function, so the sm_80 module, whose kernels call none, still
//! assembles for sm_80; a kernel that calls one belongs in an sm_90a module. On the host each
//! runs in the SIMT emulator, which checks what `trident_simt`'s `mbarrier.rs` and
//! `sync_order.rs` describe: an mbarrier used before `init`, more arrivals than its count in a
//! phase, a transaction-count underflow, a wait that can never complete (a deadlock, reported
//! instead of hung), and generic-proxy writes read by the async proxy (TMA stores) without
//! the writer's `fence.proxy.async` ordered before the read.
//!
//! An mbarrier is element `i` of a `Shared<u64>` (8-byte aligned). The usual pattern: one
//! thread calls [`mbarrier_init`], then `sync_threads`; producers arrive (with
//! [`mbarrier_arrive_expect_tx`] when a TMA load completes bytes on the barrier); consumers
//! loop on [`mbarrier_try_wait_parity`] with the parity of the phase they wait for, flipping
//! it each time the ring wraps.

use super::Shared;

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;
#[cfg(not(target_arch = "nvptx64"))]
use trident_simt::device;

#[cfg(not(target_arch = "nvptx64"))]
macro_rules! here {
    () => {
        core::panic::Location::caller()
    };
}

/// `mbarrier.init.shared::cta.b64 [bar], count`: initializes mbarrier `i` of `bars` with an
/// expected arrival count of `count` (1 to 2^20 - 1).
#[inline(always)]
#[track_caller]
pub fn mbarrier_init(bars: Shared<u64>, i: usize, count: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: writes the mbarrier object in the block's shared memory.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{a}], {c};", a = in(reg32) bars.address_of(i), c = in(reg32) count, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_init(bars, i, count, here!());
}

/// `mbarrier.inval.shared::cta.b64 [bar]`: ends mbarrier `i` of `bars` (its bytes may then be
/// reused or initialized again).
#[inline(always)]
#[track_caller]
pub fn mbarrier_inval(bars: Shared<u64>, i: usize) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the mbarrier object is in the block's shared memory.
    unsafe {
        asm!("mbarrier.inval.shared::cta.b64 [{a}];", a = in(reg32) bars.address_of(i), options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_inval(bars, i, here!());
}

/// `mbarrier.arrive.shared::cta.b64 state, [bar]`: one arrival (release at CTA scope);
/// returns the opaque state token.
#[inline(always)]
#[track_caller]
pub fn mbarrier_arrive(bars: Shared<u64>, i: usize) -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let state: u64;
        // SAFETY: the mbarrier object is in the block's shared memory.
        unsafe {
            asm!("mbarrier.arrive.shared::cta.b64 {s}, [{a}];", s = out(reg64) state, a = in(reg32) bars.address_of(i), options(nostack))
        };
        state
    }
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_arrive(bars, i, here!())
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], bytes`: raises the phase's
/// transaction count by `bytes` (what the TMA loads completing on this barrier will bring),
/// then arrives.
#[inline(always)]
#[track_caller]
pub fn mbarrier_arrive_expect_tx(bars: Shared<u64>, i: usize, bytes: u32) -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let state: u64;
        // SAFETY: the mbarrier object is in the block's shared memory.
        unsafe {
            asm!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 {s}, [{a}], {n};",
                s = out(reg64) state, a = in(reg32) bars.address_of(i), n = in(reg32) bytes, options(nostack)
            )
        };
        state
    }
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_arrive_expect_tx(bars, i, bytes, here!())
}

/// `mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], bytes`: raises the transaction
/// count without arriving.
#[inline(always)]
#[track_caller]
pub fn mbarrier_expect_tx(bars: Shared<u64>, i: usize, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the mbarrier object is in the block's shared memory.
    unsafe {
        asm!(
            "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{a}], {n};",
            a = in(reg32) bars.address_of(i), n = in(reg32) bytes, options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_expect_tx(bars, i, bytes, here!());
}

/// `mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [bar], bytes`: lowers the transaction
/// count as if an asynchronous copy of `bytes` completed.
#[inline(always)]
#[track_caller]
pub fn mbarrier_complete_tx(bars: Shared<u64>, i: usize, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the mbarrier object is in the block's shared memory.
    unsafe {
        asm!(
            "mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [{a}], {n};",
            a = in(reg32) bars.address_of(i), n = in(reg32) bytes, options(nostack)
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_complete_tx(bars, i, bytes, here!());
}

/// `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity`: whether the phase of parity
/// `parity` (0 or 1) completed, waiting a while for it first (acquire at CTA scope). On the
/// GPU it may return false after a time limit, so call it in a loop; the emulator returns
/// true once the phase completes and reports a wait that never can.
#[inline(always)]
#[track_caller]
pub fn mbarrier_try_wait_parity(bars: Shared<u64>, i: usize, parity: u32) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let done: u32;
        // SAFETY: the mbarrier object is in the block's shared memory.
        unsafe {
            asm!(
                "{{",
                ".reg .pred %p;",
                "mbarrier.try_wait.parity.shared::cta.b64 %p, [{a}], {q};",
                "selp.u32 {d}, 1, 0, %p;",
                "}}",
                d = out(reg32) done, a = in(reg32) bars.address_of(i), q = in(reg32) parity, options(nostack)
            )
        };
        done != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_try_wait_parity(bars, i, parity, here!())
}

/// `mbarrier.test_wait.parity.shared::cta.b64 p, [bar], parity`: whether the phase of parity
/// `parity` completed, without waiting.
#[inline(always)]
#[track_caller]
pub fn mbarrier_test_wait_parity(bars: Shared<u64>, i: usize, parity: u32) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let done: u32;
        // SAFETY: the mbarrier object is in the block's shared memory.
        unsafe {
            asm!(
                "{{",
                ".reg .pred %p;",
                "mbarrier.test_wait.parity.shared::cta.b64 %p, [{a}], {q};",
                "selp.u32 {d}, 1, 0, %p;",
                "}}",
                d = out(reg32) done, a = in(reg32) bars.address_of(i), q = in(reg32) parity, options(nostack)
            )
        };
        done != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    device::mbarrier_test_wait_parity(bars, i, parity, here!())
}

/// Waits for the phase of parity `parity` of mbarrier `i`: [`mbarrier_try_wait_parity`] in a
/// loop.
#[inline(always)]
#[track_caller]
pub fn mbarrier_wait_parity(bars: Shared<u64>, i: usize, parity: u32) {
    while !mbarrier_try_wait_parity(bars, i, parity) {}
}

/// `elect.sync d|p, mask`: elects one leader among the lanes of `mask`, every one of which
/// must execute it. Returns `(leader lane, whether the running lane is the leader)`. The
/// emulator elects the lowest lane of `mask` (PTX ISA, "Parallel Synchronization and
/// Communication Instructions: elect.sync").
#[inline(always)]
#[track_caller]
pub fn elect_sync(mask: u32) -> (u32, bool) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (leader, me): (u32, u32);
        // SAFETY: a register-only warp collective.
        unsafe {
            asm!(
                "{{",
                ".reg .pred %p;",
                "elect.sync {l}|%p, {m};",
                "selp.u32 {e}, 1, 0, %p;",
                "}}",
                l = out(reg32) leader, e = out(reg32) me, m = in(reg32) mask, options(nomem, nostack)
            )
        };
        (leader, me != 0)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    device::elect_sync(mask, here!())
}

/// `fence.proxy.async.shared::cta`: makes the running thread's earlier generic-proxy writes
/// to shared memory visible to async-proxy operations (TMA stores, `wgmma` operands) that are
/// ordered after it (by this thread, or by another after a barrier or an mbarrier).
#[inline(always)]
pub fn fence_proxy_async_shared_cta() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence has no operands.
    unsafe {
        asm!("fence.proxy.async.shared::cta;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    device::fence_proxy_async();
}

/// Checks a `setmaxnreg` register count at compile time: 24 to 256, a multiple of 8 (PTX ISA,
/// "Miscellaneous Instructions: setmaxnreg").
struct RegisterCount<const N: u32>;

impl<const N: u32> RegisterCount<N> {
    const VALID: () =
        assert!(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24 to 256, a multiple of 8");
}

/// `setmaxnreg.inc.sync.aligned.u32 N` (sm_90a): raises the running warp's per-thread register
/// count to `N`, taking registers the warpgroup's others released with [`setmaxnreg_dec`]
/// (it waits until enough are free). Every warp of the warpgroup must execute it together,
/// and the kernel must not rely on more than the launch's count before it.
///
/// The emulator does not model register allocation: on the host this checks `N` (at compile
/// time, as `ptxas` does) and does nothing else.
#[inline(always)]
pub fn setmaxnreg_inc<const N: u32>() {
    let () = RegisterCount::<N>::VALID;
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: only an immediate operand; the warpgroup executes it together.
    unsafe {
        asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack))
    };
}

/// `setmaxnreg.dec.sync.aligned.u32 N` (sm_90a): lowers the running warp's per-thread
/// register count to `N`, releasing the rest to the CTA's pool for [`setmaxnreg_inc`]. As for
/// that, every warp of the warpgroup executes it together, and the emulator only checks `N`.
#[inline(always)]
pub fn setmaxnreg_dec<const N: u32>() {
    let () = RegisterCount::<N>::VALID;
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: only an immediate operand; the warpgroup executes it together.
    unsafe {
        asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack))
    };
}
