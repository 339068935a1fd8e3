//! One thread block: its threads as coroutines, and the deterministic scheduler that runs
//! them between barriers and warp collectives.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::async_copy::AsyncCopies;
use crate::config::{HostKernel, KernelAttributes, LaunchConfig};
use crate::context;
use crate::error::{Access, AccessKind, Dim3, EmuError, Fault, Site};
use crate::global::{self, BlockSpan, LaunchMemory, Record, SyncPoint, SyncTags};
use crate::mbarrier::{self, Mbarriers};
use crate::peer_order::Agent;
use crate::sites::SiteTable;
use crate::smem::SharedMemory;
use crate::stacks;
use crate::stats::{BlockCounts, Class, InstructionCounts, MemOp, RequestGroups, CLASSES};
use crate::warp::{self, WarpState, WARP_SIZE};
use crate::watchdog::Heartbeat;
use crate::wgmma::{self as wgmma_state, ThreadWgmma, WarpgroupPending};

/// Where an emulated thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Runnable,
    AtBarrier(Site),
    InCollective,
    /// Waiting for the phase of parity `parity` of the mbarrier at shared byte `offset`.
    AtMbarrier {
        offset: u32,
        parity: u32,
        site: Site,
    },
    Exited,
    Faulted,
}

pub(crate) struct ThreadSlot {
    pub status: Status,
    pub yielder: *const Yielder<(), ()>,
    /// Result of the warp collective the thread took part in last.
    pub collective_out: [u32; 4],
    /// `cp.async` copies the thread has not waited for.
    pub async_copies: AsyncCopies,
    /// Bulk async-groups (TMA stores) the thread has committed.
    pub bulk_committed: u32,
    /// The thread's `wgmma` state: accumulators in flight, groups, the fence.
    pub wgmma: ThreadWgmma,
    /// The flag the thread last polled, for the poll limit (`flags.rs`).
    pub poll: Option<PollState>,
}

/// A flag a thread polls: its address, the value last read and since when it has read it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PollState {
    pub addr: u64,
    pub value: u32,
    pub since: std::time::Instant,
}

/// State the scheduler and the running thread share. Borrowed only inside one device function
/// call or one scheduler step, never across a suspension.
pub(crate) struct BlockInner {
    pub threads: Vec<ThreadSlot>,
    pub warps: Vec<WarpState>,
    pub smem: SharedMemory,
    /// The block's initialized mbarriers.
    pub mbarriers: Mbarriers,
    /// `wgmma.mma_async` collectives in progress, by warpgroup.
    pub warpgroups: Vec<WarpgroupPending>,
    pub fault: Option<EmuError>,
    /// Set while the scheduler unwinds the coroutines of a failed block.
    pub tearing_down: bool,
    /// Memory accesses of the block, for race checks and request costs.
    pub log: AccessLog,
    /// The block as an agent of the order between devices, once it touched peer memory.
    pub agent: Option<Agent>,
    /// Polls (acquire or volatile loads) in the current scheduler pass.
    pub polls: u32,
}

/// The block's logged memory accesses. A request is the accesses of one warp with equal
/// (site, instance): `instances[thread][site]` counts how often the thread reached each site
/// since the last barrier.
pub(crate) struct AccessLog {
    pub sites: SiteTable,
    instances: Vec<Vec<u32>>,
    /// Global accesses of the whole block; those from `epoch_start` on are since the last
    /// barrier.
    pub global: Vec<Record>,
    epoch_start: usize,
    /// Shared accesses since the last barrier.
    shared: RequestGroups,
    /// Global requests since the last barrier.
    global_requests: RequestGroups,
    /// Index of the allocation the last global access hit.
    pub alloc_cache: usize,
    pub counts: BlockCounts,
    scratch: Vec<Record>,
    /// Full-warp `sync_warp`s each warp has completed in this block.
    warp_syncs: Vec<u32>,
    /// `global.len()` when each barrier interval ended, in order.
    barrier_marks: Vec<u32>,
    /// Memory fences, in order.
    fences: Vec<Fence>,
    /// Ordered atomics: the index of the atomic's record in `global` and its place in its
    /// word's modification order.
    ordered: Vec<(u32, SyncPoint)>,
}

/// A `fence.acq_rel.gpu` of one thread.
#[derive(Clone, Copy)]
struct Fence {
    /// `global.len()` when it ran: records before it precede it in program order.
    seq: u32,
    thread: u32,
    /// Barrier intervals the block had ended when it ran.
    barriers: u32,
}

impl AccessLog {
    fn new(threads: u32) -> Self {
        AccessLog {
            sites: SiteTable::new(),
            instances: vec![Vec::new(); threads as usize],
            global: Vec::new(),
            epoch_start: 0,
            shared: RequestGroups::default(),
            global_requests: RequestGroups::default(),
            alloc_cache: 0,
            counts: BlockCounts::default(),
            scratch: Vec::new(),
            warp_syncs: Vec::new(),
            barrier_marks: Vec::new(),
            fences: Vec::new(),
            ordered: Vec::new(),
        }
    }

    /// A memory fence of `thread` ran.
    pub fn fence(&mut self, thread: u32) {
        let fence =
            Fence { seq: self.global.len() as u32, thread, barriers: self.barrier_marks.len() as u32 };
        self.fences.push(fence);
    }

    /// The access just logged was an ordered atomic, update `order` of its word.
    pub fn ordered_atomic(&mut self, order: u32) {
        let seq = self.global.len() as u32 - 1;
        let addr = self.global[seq as usize].addr;
        self.ordered.push((seq, SyncPoint { addr, order }));
    }

    /// How the block's accesses are ordered with other blocks' (see `SyncTags`), per record of
    /// `global`. A release is a fence followed, in the same thread, by an ordered atomic: it
    /// covers that thread's earlier accesses, every access of the barrier intervals ended
    /// before the fence, and the atomic. An acquire is an ordered atomic followed by a fence in
    /// the same thread: it covers that thread's later accesses and every access after the
    /// first barrier that follows the fence. Each access keeps the first release and the first
    /// acquire that cover it (ordering through one word per block is what kernels use).
    fn sync_tags(&self) -> Vec<SyncTags> {
        let mut tags = vec![SyncTags::default(); self.global.len()];
        if self.fences.is_empty() || self.ordered.is_empty() {
            return tags;
        }
        for f in &self.fences {
            let same = |seq: u32| self.global[seq as usize].thread == f.thread;
            let release = self.ordered.iter().find(|(seq, _)| *seq >= f.seq && same(*seq));
            if let Some(&(atomic, point)) = release {
                let before_barrier = f.barriers.checked_sub(1).map_or(0, |b| self.barrier_marks[b as usize]);
                for (i, (r, tag)) in self.global.iter().zip(tags.iter_mut()).enumerate() {
                    let i = i as u32;
                    let covered = i < before_barrier || (r.thread == f.thread && i < f.seq) || i == atomic;
                    if covered && tag.release.is_none() {
                        tag.release = Some(point);
                    }
                }
            }
            let acquire = self.ordered.iter().rev().find(|(seq, _)| *seq < f.seq && same(*seq));
            if let Some(&(_, point)) = acquire {
                let after_barrier = self.barrier_marks.get(f.barriers as usize).copied().unwrap_or(u32::MAX);
                for (i, (r, tag)) in self.global.iter().zip(tags.iter_mut()).enumerate() {
                    let i = i as u32;
                    let covered = i >= after_barrier || (r.thread == f.thread && i >= f.seq);
                    if covered && tag.acquire.is_none() {
                        tag.acquire = Some(point);
                    }
                }
            }
        }
        tags
    }

    /// A full-warp `sync_warp` of `warp` completed: it orders its lanes' global accesses.
    pub fn warp_synced(&mut self, warp: u32) {
        let warp = warp as usize;
        if self.warp_syncs.len() <= warp {
            self.warp_syncs.resize(warp + 1, 0);
        }
        self.warp_syncs[warp] += 1;
    }

    /// The site id of `site` and the instance of this visit by `thread`.
    pub fn visit(&mut self, thread: u32, site: Site) -> (u16, u32) {
        let id = self.sites.id(site);
        let counts = &mut self.instances[thread as usize];
        if counts.len() <= usize::from(id) {
            counts.resize(usize::from(id) + 1, 0);
        }
        let instance = counts[usize::from(id)];
        counts[usize::from(id)] += 1;
        (id, instance)
    }

    pub fn push_global(&mut self, addr: u64, bytes: u32, op: MemOp, thread: u32, site: Site) {
        let (site, instance) = self.visit(thread, site);
        let seq = self.global.len() as u32;
        let warp_syncs = self.warp_syncs.get((thread / WARP_SIZE) as usize).copied().unwrap_or(0);
        self.global.push(Record { addr, bytes, op, thread, site, seq, warp_syncs });
        self.global_requests.add(thread, site, instance, op, addr, bytes);
    }

    /// Logs a bulk (TMA) global access for the race checks; its traffic is counted apart.
    pub fn push_bulk_global(&mut self, addr: u64, bytes: u32, op: MemOp, thread: u32, site: Site) {
        let (site, _) = self.visit(thread, site);
        let seq = self.global.len() as u32;
        let warp_syncs = self.warp_syncs.get((thread / WARP_SIZE) as usize).copied().unwrap_or(0);
        self.global.push(Record { addr, bytes, op, thread, site, seq, warp_syncs });
    }

    pub fn push_shared(&mut self, offset: u32, bytes: u32, op: MemOp, thread: u32, site: Site) {
        let (site, instance) = self.visit(thread, site);
        self.shared.add(thread, site, instance, op, u64::from(offset), bytes);
    }

    fn reset(&mut self) {
        self.global.clear();
        self.epoch_start = 0;
        self.shared.clear();
        self.global_requests.clear();
        self.counts = BlockCounts::default();
        self.warp_syncs.clear();
        self.barrier_marks.clear();
        self.fences.clear();
        self.ordered.clear();
        for counts in &mut self.instances {
            counts.clear();
        }
    }
}
/// One block being run: shape and index (fixed while it runs) plus the mutable state.
pub(crate) struct BlockState {
    pub kernel: &'static str,
    pub grid_dim: [u32; 3],
    pub block_dim: [u32; 3],
    pub block_idx: [u32; 3],
    pub threads: u32,
    /// The kernel attributes the launch runs under (the shared-memory opt-in).
    pub attributes: KernelAttributes,
    pub inner: RefCell<BlockInner>,
    /// Instructions each thread executed, by class.
    pub lane_counts: Vec<[Cell<u64>; CLASSES]>,
    /// The launch's global-memory state; outlives every block of the launch.
    memory: *const LaunchMemory,
}

impl BlockState {
    /// Thread index (x, y, z) of linear thread id `t` (x fastest).
    pub fn thread_idx(&self, t: u32) -> [u32; 3] {
        let [bx, by, _] = self.block_dim;
        [t % bx, (t / bx) % by, t / (bx * by)]
    }

    pub fn error_at(&self, thread: u32, fault: Fault) -> EmuError {
        EmuError::Fault {
            kernel: self.kernel,
            block: Dim3(self.block_idx),
            thread: Dim3(self.thread_idx(thread)),
            fault,
        }
    }

    pub fn dim3(&self, thread: u32) -> Dim3 {
        Dim3(self.thread_idx(thread))
    }

    /// Counts one instruction of `class` for `thread`.
    #[inline]
    pub fn count(&self, thread: u32, class: Class) {
        let c = &self.lane_counts[thread as usize][class as usize];
        c.set(c.get() + 1);
    }

    pub fn memory(&self) -> &LaunchMemory {
        // SAFETY: the launch creates its `LaunchMemory` before any block runner and drops it
        // after every runner has finished (see `launch::launch_with`).
        unsafe { &*self.memory }
    }

    /// Ends the interval since the last barrier: checks its global accesses for races between
    /// threads, costs its memory requests and starts counting visits anew.
    pub fn end_epoch(&self, inner: &mut BlockInner) -> Result<(), EmuError> {
        let log = &mut inner.log;
        let mut epoch = std::mem::take(&mut log.scratch);
        epoch.clear();
        // Only a write or an atomic can race. Records are in `seq` order, so a stable sort by
        // address keeps equal addresses in program order (and is quick on the runs of
        // ascending addresses that threads produce).
        let writes = log.global[log.epoch_start..].iter().any(|r| r.op != MemOp::Load);
        if writes {
            epoch.extend_from_slice(&log.global[log.epoch_start..]);
            epoch.sort_by_key(|r| r.addr);
        }
        log.epoch_start = log.global.len();
        log.barrier_marks.push(log.global.len() as u32);
        if let Some((earlier, later)) = writes.then(|| global::find_race(&epoch)).flatten() {
            let location = self.memory().describe(earlier.addr.max(later.addr));
            let earlier_text = format!(
                "{} by thread {} at {}",
                global::op_name(earlier.op),
                self.dim3(earlier.thread),
                log.sites.site(earlier.site)
            );
            let fault = Fault::GlobalRace {
                location: format!("{location}: {earlier_text}"),
                later: self.access(later.op, later.thread, log.sites.site(later.site)),
                why: "with no sync_threads() between them",
            };
            return Err(self.error_at(later.thread, fault));
        }
        log.scratch = epoch;
        log.global_requests.cost_global(&mut log.counts);
        log.shared.cost_shared(&mut log.counts);
        for counts in &mut log.instances {
            counts.fill(0);
        }
        Ok(())
    }

    fn access(&self, op: MemOp, thread: u32, site: Site) -> Access {
        let kind = match op {
            MemOp::Load => AccessKind::Read,
            MemOp::Store => AccessKind::Write,
            MemOp::Atomic => AccessKind::Atomic,
        };
        Access { kind, thread: self.dim3(thread), site }
    }

    /// Ends the block: the last interval, then its global accesses against the blocks that
    /// ended before it. Returns the block's counters.
    fn end_block(&self) -> Result<BlockCounts, EmuError> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        self.end_epoch(inner)?;
        let log = &mut inner.log;
        let mut spans: [Vec<BlockSpan>; 3] = Default::default();
        let mut records = std::mem::take(&mut log.scratch);
        records.clear();
        records.extend_from_slice(&log.global);
        // By kind, then address; addresses fit in 56 bits on every host we run on.
        records.sort_by_key(|r| (r.op as u64) << 56 | r.addr);
        let tags = log.sync_tags();
        for r in &records {
            let list = &mut spans[r.op as usize];
            let (start, end) = (r.addr, r.addr + u64::from(r.bytes));
            let thread = Some(self.thread_idx(r.thread));
            let sync = tags[r.seq as usize];
            match list.last_mut() {
                // Overlapping accesses ordered differently stay apart: the shadow then keeps
                // the first one's ordering for the common bytes.
                Some(last) if start <= last.end && last.sync == sync => {
                    last.end = last.end.max(end);
                    if last.thread != thread {
                        last.thread = None;
                    }
                }
                _ => list.push(BlockSpan { start, end, thread, site: log.sites.site(r.site), sync }),
            }
        }
        log.scratch = records;
        if let Err(race) = self.memory().merge_block(&spans, self.block_idx) {
            // This block's access: the first logged one of that kind covering the byte.
            let mine = log
                .global
                .iter()
                .find(|r| r.op == race.kind && r.addr <= race.byte && race.byte < r.addr + u64::from(r.bytes))
                .copied()
                .expect("a conflicting span comes from a logged access");
            let fault = Fault::GlobalRace {
                location: format!("{}: {}", self.memory().describe(race.byte), race.other()),
                later: self.access(mine.op, mine.thread, log.sites.site(mine.site)),
                why: "in different blocks, which nothing orders within a launch (use atomics, order \
                      them with a fence, an ordered atomic and a fence, or split the work into two \
                      launches)",
            };
            return Err(self.error_at(mine.thread, fault));
        }
        let mut counts = std::mem::take(&mut log.counts);
        let mut thread = [0u64; CLASSES];
        let mut warp = [0u64; CLASSES];
        for w in 0..self.threads.div_ceil(WARP_SIZE) {
            let lanes = w * WARP_SIZE..((w + 1) * WARP_SIZE).min(self.threads);
            for class in 0..CLASSES {
                let mut max = 0;
                for t in lanes.clone() {
                    let v = self.lane_counts[t as usize][class].replace(0);
                    thread[class] += v;
                    max = max.max(v);
                }
                warp[class] += max;
            }
        }
        counts.thread = InstructionCounts::from_array(&thread);
        counts.warp = InstructionCounts::from_array(&warp);
        counts.shared_bytes = inner.smem.used_bytes();
        Ok(counts)
    }
}

type ThreadCoroutine = Coroutine<(), (), Result<(), String>, DefaultStack>;

/// Runs blocks one after another on the current OS thread, reusing stacks and shadow memory.
pub(crate) struct BlockRunner {
    block: Box<BlockState>,
    stacks: Vec<DefaultStack>,
    heartbeat: Arc<Heartbeat>,
    /// Number of the block being run.
    linear: u64,
}

impl BlockRunner {
    pub fn new(
        kernel: &HostKernel,
        cfg: &LaunchConfig,
        attributes: KernelAttributes,
        memory: &LaunchMemory,
    ) -> Self {
        let threads = cfg.block_threads();
        let warps = threads.div_ceil(WARP_SIZE) as usize;
        let inner = BlockInner {
            threads: (0..threads)
                .map(|_| ThreadSlot {
                    status: Status::Runnable,
                    yielder: std::ptr::null(),
                    collective_out: [0; 4],
                    async_copies: AsyncCopies::default(),
                    bulk_committed: 0,
                    wgmma: ThreadWgmma::default(),
                    poll: None,
                })
                .collect(),
            warps: (0..warps).map(|_| WarpState::default()).collect(),
            smem: SharedMemory::new(),
            mbarriers: Mbarriers::default(),
            warpgroups: Vec::new(),
            fault: None,
            tearing_down: false,
            log: AccessLog::new(threads),
            agent: None,
            polls: 0,
        };
        BlockRunner {
            block: Box::new(BlockState {
                kernel: kernel.name,
                grid_dim: cfg.grid,
                block_dim: cfg.block,
                block_idx: [0; 3],
                threads,
                attributes,
                inner: RefCell::new(inner),
                lane_counts: (0..threads).map(|_| std::array::from_fn(|_| Cell::new(0))).collect(),
                memory,
            }),
            stacks: Vec::new(),
            heartbeat: Heartbeat::register(kernel.name, cfg.grid, cfg.block),
            linear: 0,
        }
    }

    /// Runs block number `linear` (x fastest) of the grid to completion or to its first fault.
    pub fn run(
        &mut self,
        kernel: &HostKernel,
        cfg: &LaunchConfig,
        args: &[u64],
        linear: u64,
        idle: &dyn Fn(),
    ) -> Result<BlockCounts, EmuError> {
        self.linear = linear;
        let [gx, gy, _] = cfg.grid.map(u64::from);
        self.block.block_idx = [linear % gx, (linear / gx) % gy, linear / (gx * gy)].map(|v| v as u32);
        {
            let mut inner = self.block.inner.borrow_mut();
            let inner = &mut *inner;
            for slot in &mut inner.threads {
                slot.status = Status::Runnable;
                slot.yielder = std::ptr::null();
                slot.async_copies.abandon(&mut inner.smem);
                slot.bulk_committed = 0;
                slot.wgmma = ThreadWgmma::default();
                slot.poll = None;
            }
            inner.agent = None;
            inner.polls = 0;
            inner.mbarriers.clear();
            inner.warpgroups.clear();
            for warp in &mut inner.warps {
                warp.pending.clear();
            }
            inner.smem.begin_block(cfg.dynamic_smem_bytes);
            inner.log.reset();
            inner.fault = None;
            inner.tearing_down = false;
        }
        let mut coroutines = Vec::with_capacity(self.block.threads as usize);
        for counts in &self.block.lane_counts {
            counts.iter().for_each(|c| c.set(0));
        }
        for t in 0..self.block.threads {
            let stack = match self.stacks.pop() {
                Some(stack) => stack,
                None => stacks::take()
                    .map_err(|problem| EmuError::HostResources { kernel: kernel.name, problem })?,
            };
            coroutines.push(self.spawn(stack, kernel.entry, args, t));
        }
        let result = self.schedule(&mut coroutines, idle);
        self.block.inner.borrow_mut().tearing_down = true;
        for mut coroutine in coroutines {
            if !coroutine.done() {
                context::set_current(&*self.block, 0);
                coroutine.force_unwind();
            }
            self.stacks.push(coroutine.into_stack());
        }
        context::set_current(std::ptr::null(), 0);
        let agent = self.block.inner.borrow_mut().agent.take();
        if let Some(agent) = agent {
            agent.finish(&mut self.block.memory().learned.lock().unwrap_or_else(|e| e.into_inner()));
        }
        result?;
        self.block.end_block()
    }

    /// Hands the stacks back to the process-wide pool.
    pub fn release(self) {
        stacks::give_back(self.stacks);
    }

    fn spawn(
        &self,
        stack: DefaultStack,
        entry: unsafe fn(&[u64]),
        args: &[u64],
        thread: u32,
    ) -> ThreadCoroutine {
        let block: *const BlockState = &*self.block;
        let (args_ptr, args_len) = (args.as_ptr(), args.len());
        Coroutine::with_stack(stack, move |yielder: &Yielder<(), ()>, ()| {
            // SAFETY: `run` drives every coroutine to completion or unwinds it before it
            // returns, so the boxed block state and the argument slice outlive this closure.
            let (block, args) = unsafe { (&*block, std::slice::from_raw_parts(args_ptr, args_len)) };
            block.inner.borrow_mut().threads[thread as usize].yielder = yielder;
            // SAFETY: `entry` runs inside this emulated launch with the launch's words, whose
            // validity the caller of `launch` vouched for.
            match catch_unwind(AssertUnwindSafe(|| unsafe { entry(args) })) {
                Ok(()) => Ok(()),
                Err(payload) if block.inner.borrow().tearing_down => resume_unwind(payload),
                Err(payload) => Err(panic_message(payload.as_ref())),
            }
        })
    }

    /// Runs every runnable thread until it blocks, then resolves barriers, until all threads
    /// exit or one faults. Threads run in linear-id order, so a schedule is reproducible. A
    /// pass in which every thread that ran only polled a flag is idle: `idle` runs (the launch
    /// may start another worker), and the worker gives its core away (see `flags.rs`).
    fn schedule(&mut self, coroutines: &mut [ThreadCoroutine], idle: &dyn Fn()) -> Result<(), EmuError> {
        let block: &BlockState = &self.block;
        let mut idle_passes = 0u32;
        loop {
            let mut ran = 0u32;
            block.inner.borrow_mut().polls = 0;
            for t in 0..block.threads {
                if block.inner.borrow().threads[t as usize].status != Status::Runnable {
                    continue;
                }
                ran += 1;
                context::set_current(block, t);
                self.heartbeat.enter(self.linear, t);
                let resumed = coroutines[t as usize].resume(());
                self.heartbeat.leave();
                match resumed {
                    CoroutineResult::Yield(()) => {}
                    CoroutineResult::Return(Ok(())) => on_exit(block, t)?,
                    CoroutineResult::Return(Err(message)) => {
                        return Err(block.error_at(t, Fault::Panic { message }))
                    }
                }
                if let Some(error) = block.inner.borrow_mut().fault.take() {
                    return Err(error);
                }
            }
            if ran > 0 && block.inner.borrow().polls >= ran {
                idle_passes += 1;
                idle();
                if idle_passes % 64 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                } else {
                    std::thread::yield_now();
                }
            } else {
                idle_passes = 0;
            }
            if ran == 0 && !release_barrier(block)? {
                return Ok(());
            }
        }
    }
}

fn on_exit(block: &BlockState, t: u32) -> Result<(), EmuError> {
    let mut inner = block.inner.borrow_mut();
    inner.threads[t as usize].status = Status::Exited;
    let lane_bit = 1u32 << (t % WARP_SIZE);
    let warp = &inner.warps[(t / WARP_SIZE) as usize];
    if let Some(p) = warp.pending.iter().find(|p| p.members & lane_bit != 0) {
        let detail = format!(
            "this thread exited while lanes {:#010x} of its warp wait for it at {} with member mask {:#010x}",
            p.arrived, p.op, p.mask
        );
        return Err(block.error_at(t, Fault::WarpCollective { site: p.site, detail }));
    }
    Ok(())
}

/// Called when no thread can run. Releases the barrier all live threads wait at and returns
/// true; returns false when every thread has exited; fails when the block cannot go on.
fn release_barrier(block: &BlockState) -> Result<bool, EmuError> {
    let mut inner = block.inner.borrow_mut();
    if let Some(error) = warp::stalled_collective(block, &inner) {
        return Err(error);
    }
    if let Some(error) = wgmma_state::stalled(block, &inner) {
        return Err(error);
    }
    if let Some(error) = mbarrier::deadlock(block, &inner) {
        return Err(error);
    }
    let statuses: Vec<Status> = inner.threads.iter().map(|s| s.status).collect();
    let Some((waiter, site)) = statuses.iter().enumerate().find_map(|(t, s)| match s {
        Status::AtBarrier(site) => Some((t as u32, *site)),
        _ => None,
    }) else {
        return Ok(false);
    };
    for (t, status) in statuses.iter().enumerate() {
        let t = t as u32;
        match *status {
            Status::AtBarrier(other_site) if other_site != site => {
                return Err(block.error_at(
                    t,
                    Fault::DivergentBarrier { site: other_site, other: block.dim3(waiter), other_site: site },
                ))
            }
            Status::AtBarrier(_) => {}
            other => {
                let missing_state = match other {
                    Status::Exited => "exited without reaching it".to_string(),
                    _ => format!("is stuck elsewhere ({other:?})"),
                };
                return Err(block.error_at(
                    waiter,
                    Fault::PartialBarrier { site, missing: block.dim3(t), missing_state },
                ));
            }
        }
    }
    for slot in &mut inner.threads {
        slot.status = Status::Runnable;
    }
    inner.smem.barrier();
    if let Some(agent) = inner.agent.as_mut() {
        agent.barrier();
    }
    block.end_epoch(&mut inner)?;
    Ok(true)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}
