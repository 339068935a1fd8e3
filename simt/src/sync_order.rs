//! The ordering that mbarriers and `fence.proxy.async` add to the shared-memory race checker.
//!
//! Besides barriers and full-warp `sync_warp`s (the clocks of `smem.rs`), threads of a block
//! order their accesses through mbarriers: an arrival releases the arriving thread's earlier
//! accesses, and a wait that observes the completion of that arrival's phase acquires them
//! (PTX ISA, "Memory Consistency Model": `mbarrier.arrive` has release and
//! `mbarrier.test_wait`/`try_wait` acquire semantics at CTA scope by default). So an earlier
//! access by thread `a` at clock `c` is ordered before an access by thread `b` when `a`
//! arrived on some mbarrier after `c` (its arrival clock is larger) and `b` has since observed
//! the completion of that arrival's phase.
//!
//! The async proxy (TMA, `wgmma` operands) sees a generic-proxy write only after the writing
//! thread ran `fence.proxy.async` (PTX ISA, "Proxies" and "membar/fence": a proxy fence is
//! needed between accesses of one thread through different proxies), and, when another thread
//! issues the async operation, after something ordered that fence before the issue (a barrier
//! or an mbarrier as above).

/// One thread's arrival on an mbarrier.
#[derive(Clone, Copy)]
struct Arrival {
    /// Shared-memory clock of the arrival (ticked just before it).
    clock: u32,
    /// Byte offset of the mbarrier.
    barrier: u32,
    /// The phase (count of completed phases when it arrived) the arrival belongs to.
    phase: u32,
}

/// Per-thread arrivals, observations and proxy fences of the running block.
#[derive(Default)]
pub(crate) struct SyncOrder {
    arrivals: Vec<Vec<Arrival>>,
    /// Per thread: (mbarrier offset, phases whose completion the thread has observed).
    seen: Vec<Vec<(u32, u32)>>,
    /// Per thread: clocks of its `fence.proxy.async` (ticked just before each).
    proxy_fences: Vec<Vec<u32>>,
}

fn slot<T: Default>(v: &mut Vec<T>, thread: u32) -> &mut T {
    let t = thread as usize;
    if v.len() <= t {
        v.resize_with(t + 1, T::default);
    }
    &mut v[t]
}

impl SyncOrder {
    pub fn clear(&mut self) {
        self.arrivals.iter_mut().for_each(Vec::clear);
        self.seen.iter_mut().for_each(Vec::clear);
        self.proxy_fences.iter_mut().for_each(Vec::clear);
    }

    /// `thread` arrived at `clock` on the mbarrier at `barrier` during its phase `phase`.
    pub fn arrive(&mut self, thread: u32, clock: u32, barrier: u32, phase: u32) {
        slot(&mut self.arrivals, thread).push(Arrival { clock, barrier, phase });
    }

    /// `thread` observed that `phases` phases of the mbarrier at `barrier` have completed.
    pub fn observe(&mut self, thread: u32, barrier: u32, phases: u32) {
        let seen = slot(&mut self.seen, thread);
        match seen.iter_mut().find(|(b, _)| *b == barrier) {
            Some((_, p)) => *p = (*p).max(phases),
            None => seen.push((barrier, phases)),
        }
    }

    /// Phases of the mbarrier at `barrier` whose completion `thread` has observed.
    pub fn seen(&self, thread: u32, barrier: u32) -> u32 {
        self.seen
            .get(thread as usize)
            .and_then(|s| s.iter().find(|(b, _)| *b == barrier))
            .map_or(0, |&(_, p)| p)
    }

    /// Whether an access by `earlier_thread` at `clock` is ordered before what `thread` does
    /// now through an mbarrier arrival and an observed phase completion.
    pub fn orders(&self, earlier_thread: u32, clock: u32, thread: u32) -> bool {
        let Some(arrivals) = self.arrivals.get(earlier_thread as usize) else {
            return false;
        };
        let first = arrivals.partition_point(|a| a.clock <= clock);
        arrivals[first..].iter().any(|a| self.seen(thread, a.barrier) > a.phase)
    }

    /// `thread` ran `fence.proxy.async` at `clock`.
    pub fn proxy_fence(&mut self, thread: u32, clock: u32) {
        slot(&mut self.proxy_fences, thread).push(clock);
    }

    /// The clock of the first `fence.proxy.async` of `thread` after `clock`, if any.
    pub fn proxy_fence_after(&self, thread: u32, clock: u32) -> Option<u32> {
        let fences = self.proxy_fences.get(thread as usize)?;
        fences.get(fences.partition_point(|&f| f <= clock)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_orders_only_for_threads_that_observed_its_phase() {
        let mut o = SyncOrder::default();
        o.arrive(1, 10, 64, 0);
        assert!(!o.orders(1, 5, 2), "thread 2 has not observed phase 0");
        o.observe(2, 64, 1);
        assert!(o.orders(1, 5, 2));
        assert!(!o.orders(1, 10, 2), "an access at the arrival's clock is not before it");
        assert!(!o.orders(1, 5, 3));
        o.observe(3, 72, 5);
        assert!(!o.orders(1, 5, 3), "another mbarrier orders nothing");
    }

    #[test]
    fn the_first_proxy_fence_after_a_write_is_found() {
        let mut o = SyncOrder::default();
        o.proxy_fence(0, 4);
        o.proxy_fence(0, 9);
        assert_eq!(o.proxy_fence_after(0, 3), Some(4));
        assert_eq!(o.proxy_fence_after(0, 4), Some(9));
        assert_eq!(o.proxy_fence_after(0, 9), None);
        assert_eq!(o.proxy_fence_after(1, 0), None);
        o.clear();
        assert_eq!(o.proxy_fence_after(0, 3), None);
    }
}
