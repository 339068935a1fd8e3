//! Errors a launch reports: a bad configuration, or a fault some emulated thread hit.

use std::fmt;
use std::panic::Location;

/// A 3-component index or extent, displayed as `(x, y, z)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dim3(pub [u32; 3]);

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.0;
        write!(f, "({x}, {y}, {z})")
    }
}

/// Source location of the kernel code that made an access or reached a barrier.
pub type Site = &'static Location<'static>;

/// Why a launch failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EmuError {
    /// The launch configuration is outside what the hardware accepts.
    #[error("cannot launch kernel `{kernel}`: {problem}")]
    InvalidLaunch {
        /// The kernel's name.
        kernel: &'static str,
        /// Which limit the grid, block or shared memory exceeds.
        problem: String,
    },
    /// The emulator could not get the host resources it needs (stacks, threads).
    #[error("cannot emulate kernel `{kernel}`: {problem}")]
    HostResources {
        /// The kernel's name.
        kernel: &'static str,
        /// What could not be had.
        problem: String,
    },
    /// An emulated thread did something whose result is undefined on a GPU.
    #[error("kernel `{kernel}`, block {block}, thread {thread}: {fault}")]
    Fault {
        /// The kernel's name.
        kernel: &'static str,
        /// The faulting thread's block index.
        block: Dim3,
        /// The faulting thread's index within its block.
        thread: Dim3,
        /// What it did.
        fault: Fault,
    },
}

impl EmuError {
    /// The fault, when the error is one.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            EmuError::Fault { fault, .. } => Some(fault),
            _ => None,
        }
    }
}

/// What kind of shared-memory access a race report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// A plain load.
    Read,
    /// A plain store.
    Write,
    /// An atomic read-modify-write.
    Atomic,
    /// A `cp.async` copy into shared memory that has not been waited for.
    AsyncCopy,
    /// A TMA load (`cp.async.bulk.tensor`, async proxy) writing shared memory.
    TmaLoad,
    /// A TMA store (`cp.async.bulk.tensor`, async proxy) reading shared memory.
    TmaStore,
    /// A `wgmma.mma_async` reading an operand through a matrix descriptor (async proxy).
    WgmmaRead,
}

impl fmt::Display for AccessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::Atomic => "atomic",
            AccessKind::AsyncCopy => "cp.async copy",
            AccessKind::TmaLoad => "TMA load (async proxy)",
            AccessKind::TmaStore => "TMA store read (async proxy)",
            AccessKind::WgmmaRead => "wgmma operand read (async proxy)",
        })
    }
}

/// One side of a data race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Load, store, atomic or `cp.async`.
    pub kind: AccessKind,
    /// The accessing thread's index within its block.
    pub thread: Dim3,
    /// The kernel source line of the access.
    pub site: Site,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by thread {} at {}", self.kind, self.thread, self.site)
    }
}

/// A fault of one emulated thread (the thread the enclosing [`EmuError`] names).
#[derive(Clone, Debug, thiserror::Error)]
pub enum Fault {
    #[error(
        "shared-memory data race on byte {byte} of {region}: {earlier}, then {later}, \
         with no sync_threads() (nor, within one warp, sync_warp) between them"
    )]
    /// Two threads touched one shared-memory byte between two barriers, one of them writing.
    SharedRace {
        /// The static or dynamic shared array.
        region: String,
        /// The byte's offset in it.
        byte: u32,
        /// The first access.
        earlier: Access,
        /// The access that completed the race (this thread's).
        later: Access,
    },
    #[error(
        "shared-memory byte {byte} of {region} is still being filled: {copy} has not been \
         waited for (cp_async_wait_group / cp_async_wait_all, then sync_threads for other \
         threads) when {access}"
    )]
    /// Shared memory a `cp.async` is still filling was accessed.
    AsyncCopyInFlight {
        /// The shared array.
        region: String,
        /// The byte's offset in it.
        byte: u32,
        /// The copy in flight.
        copy: Access,
        /// The access that came too early.
        access: Access,
    },
    #[error(
        "shared-memory byte {byte} of {region} is written by {load}, whose mbarrier phase \
         has not been seen to complete when {access} (wait for the phase with \
         mbarrier try_wait/test_wait on its parity; other threads also need sync_threads after \
         a waiting thread)"
    )]
    /// Shared memory a TMA load fills was accessed before its mbarrier phase was observed.
    TmaLoadInFlight {
        /// The shared array.
        region: String,
        /// The byte's offset in it.
        byte: u32,
        /// The TMA load, its mbarrier and the phase it completes.
        load: String,
        /// The access that came too early.
        access: Access,
    },
    #[error(
        "shared-memory byte {byte} of {region} is the source of {store}, which has not been \
         waited for (cp.async.bulk.wait_group.read) when {access}"
    )]
    /// A TMA store's source was written before its bulk group was waited for.
    TmaStoreInFlight {
        /// The shared array.
        region: String,
        /// The byte's offset in it.
        byte: u32,
        /// The TMA store.
        store: Access,
        /// The access that came too early.
        access: Access,
    },
    #[error(
        "async-proxy race on shared-memory byte {byte} of {region}: {write} (generic proxy), \
         then {read} with no fence.proxy.async by the writing thread ordered before it (the \
         writer must run fence.proxy.async after its writes, and a barrier or mbarrier must \
         order that fence before another thread's async operation: PTX ISA, \"Proxies\")"
    )]
    /// A generic-proxy write read by the async proxy without a proxy fence in between.
    AsyncProxyRace {
        /// The shared array.
        region: String,
        /// The byte's offset in it.
        byte: u32,
        /// The generic-proxy write.
        write: Access,
        /// The async-proxy read.
        read: Access,
    },
    #[error("mbarrier {barrier} at {site}: {detail}")]
    /// An mbarrier misused: not initialized, too many arrivals, a transaction count out of range.
    Mbarrier {
        /// The kernel source line.
        site: Site,
        /// The barrier's shared address.
        barrier: String,
        /// What went wrong.
        detail: String,
    },
    #[error("deadlock: this thread waits at {site} for {wait}, which can never happen: {why}")]
    /// Every live thread of the block waits, and nothing in flight can release any of them.
    Deadlock {
        /// Where this thread waits.
        site: Site,
        /// What it waits for (an mbarrier phase).
        wait: String,
        /// The state of the mbarrier and what the other threads do.
        why: String,
    },
    #[error("wgmma at {site}: {detail}")]
    /// A `wgmma` misused: not a whole warpgroup, no `wgmma.fence`, an accumulator used before
    /// its group was waited for, a bad descriptor.
    Wgmma {
        /// The kernel source line.
        site: Site,
        /// What went wrong.
        detail: String,
    },
    #[error("invalid tensor map: {detail}")]
    /// A tensor map the driver's `cuTensorMapEncodeTiled` would refuse.
    TensorMap {
        /// The field and the rule it breaks.
        detail: String,
    },
    #[error("invalid operand at {site}: {detail}")]
    /// An operand outside what the instruction accepts (a shuffle lane, an alignment).
    BadOperand {
        /// The kernel source line.
        site: Site,
        /// The address, the allocation and what the access was.
        detail: String,
    },
    #[error("shared-memory access out of range at {site}: {detail}")]
    /// A shared-memory access outside the static or dynamic allocation, or misaligned.
    SharedOutOfRange {
        /// The kernel source line.
        site: Site,
        /// The address, the allocation and what the access was.
        detail: String,
    },
    #[error("barrier at {site} reached by only part of the block: thread {missing} {missing_state}")]
    /// A barrier that some thread of the block never reached.
    PartialBarrier {
        /// The barrier's source line.
        site: Site,
        /// A thread that did not arrive.
        missing: Dim3,
        /// Where that thread is instead (ended, at a collective).
        missing_state: String,
    },
    #[error(
        "divergent barrier: this thread waits at {site} while thread {other} waits at {other_site}; \
         bar.sync is barrier.sync.aligned, which every thread of the block must execute as the \
         same instruction (PTX ISA, \"barrier\": the .aligned modifier)"
    )]
    /// Threads of one block wait at different barriers.
    DivergentBarrier {
        /// This thread's barrier.
        site: Site,
        /// A thread at another barrier.
        other: Dim3,
        /// That thread's barrier.
        other_site: Site,
    },
    #[error("warp collective at {site}: {detail}")]
    /// A warp collective whose lanes disagree on the operation or mask, or which leaves out the calling lane.
    WarpCollective {
        /// The kernel source line.
        site: Site,
        /// The address, the allocation and what the access was.
        detail: String,
    },
    #[error("global-memory access out of range at {site}: {detail}")]
    /// A global access outside every live allocation or outside its argument's view, or misaligned.
    GlobalOutOfRange {
        /// The kernel source line.
        site: Site,
        /// The address, the allocation and what the access was.
        detail: String,
    },
    #[error("read of uninitialized global memory at {site}: {detail}")]
    /// A read of global bytes that nothing wrote.
    GlobalUninitialized {
        /// The kernel source line.
        site: Site,
        /// The address, the allocation and what the access was.
        detail: String,
    },
    /// Two threads touched the same global bytes, one writing, not both atomically, unordered.
    /// `location` names the bytes and the earlier access ("byte 4 of allocation ...: read by
    /// thread (0, 0, 0) at file:line"); `later` is the faulting thread's access.
    #[error("global-memory data race on {location}, then {later}, {why}")]
    GlobalRace {
        /// The bytes and the earlier access.
        location: String,
        /// This thread's access.
        later: Access,
        /// Why nothing ordered the two (different blocks, no barrier between them).
        why: &'static str,
    },
    /// Two accesses to the same bytes from different emulated devices or launches, at least
    /// one a write (or an atomic against a plain access), that no release/acquire chain at a
    /// wide enough scope orders (see `peer_order.rs`).
    #[error("data race between devices on {location}, then {later} on {device}, {why}")]
    PeerRace {
        /// The bytes and the earlier access, with its device, kernel, block and thread.
        location: Box<str>,
        /// This thread's access.
        later: Access,
        /// This thread's device and kernel.
        device: Box<str>,
        /// What was missing.
        why: Box<str>,
    },
    /// A thread polled a flag that never changed for the emulator's poll limit: a wait of a
    /// flag protocol that can never complete.
    #[error("flag wait at {site} never completes: {detail}")]
    StalledWait {
        /// The polling load.
        site: Site,
        /// The word, its value and how long it has not changed.
        detail: String,
    },
    /// Kernel code panicked.
    #[error("panicked: {message}")]
    Panic {
        /// The panic's message.
        message: String,
    },
}
