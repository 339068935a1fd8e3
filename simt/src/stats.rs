//! Work counters of a launch ([`LaunchStats`]) and how memory requests are costed.
//!
//! Counters are collected per emulated thread and per warp-level memory request:
//! - An instruction a lane executes through the `simt` API counts once for the lane
//!   ([`LaunchStats::thread_instructions`]). The warp-instruction count of a class is, per
//!   warp, the largest count among its lanes ([`LaunchStats::warp_instructions`]): exact for
//!   code whose lanes execute the same instructions, a lower bound under divergence (where the
//!   GPU issues each side of a branch separately).
//! - A memory request is one dynamic instance of one access site in one warp: the accesses of
//!   the warp's lanes with equal (warp, call site, how many times this lane reached that site
//!   since the last barrier). A request's cost is computed from its lanes' addresses:
//!   shared-memory wavefronts under the 32-bank, 4-byte-bank model, global 32-byte sectors.
//!
//! Arithmetic written as plain Rust operators is not seen; only what kernels call through
//! `simt` (`fma`, `exp2`, ...) is counted.

use std::ops::{Add, AddAssign};

/// Banks of shared memory, each 4 bytes wide.
pub const SHARED_BANKS: u32 = 32;
/// Bytes per shared-memory bank.
pub const BANK_BYTES: u32 = 4;
/// Bytes per global-memory sector (the unit DRAM and L2 move).
pub const SECTOR_BYTES: u64 = 32;

/// Buckets of [`LaunchStats::async_copies_by_overlap`]: 0, 1, 2, and 3 or more barriers.
pub const ASYNC_OVERLAP_BUCKETS: usize = 4;

/// Instruction classes counted by the emulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    /// `mma.sync` on tensor cores.
    Mma,
    /// `fma.rn.f32`.
    Fma,
    /// Other f32 ALU operations called through `simt`: `fmax`, `fmin`.
    Alu,
    /// Shared-memory loads (`ld.shared`, scalar or vector).
    SharedLoad,
    /// Shared-memory stores (`st.shared`).
    SharedStore,
    /// Shared-memory atomics (`atom.shared`).
    SharedAtomic,
    /// `ldmatrix` (also counted in shared-memory traffic as a load).
    Ldmatrix,
    /// Global-memory loads (`ld.global[.nc]`, scalar or vector).
    GlobalLoad,
    /// Global-memory stores (`st.global`).
    GlobalStore,
    /// Global-memory atomics and reductions (`atom.global`, `red.global`).
    GlobalAtomic,
    /// `cp.async` global-to-shared copies.
    AsyncCopy,
    /// `bar.sync` (`sync_threads`).
    Barrier,
    /// `bar.warp.sync` (`sync_warp`).
    WarpSync,
    /// `shfl.sync`.
    Shuffle,
    /// `vote.sync`.
    Vote,
    /// `mbarrier` operations: `init`, `inval`, `arrive` (with or without `expect_tx`),
    /// `expect_tx`, `complete_tx`, `try_wait`/`test_wait` (each call).
    Mbarrier,
    /// `elect.sync`.
    Elect,
    /// `fence.proxy.async`.
    ProxyFence,
    /// TMA: `cp.async.bulk.tensor` loads and stores, `cp.async.bulk.commit_group` and
    /// `wait_group` (the bytes are in [`LaunchStats::tma_loads`] and
    /// [`LaunchStats::tma_stores`]).
    Tma,
    /// `wgmma.mma_async` (each a 64 x N x 16 product for its warpgroup; `wgmma.fence`,
    /// `commit_group` and `wait_group` are not counted).
    Wgmma,
    /// Special-function unit (MUFU) operations called through `simt`: `exp2`, `log2`, `tanh`,
    /// `rsqrt`, and `sqrt` (a reciprocal square root refined by FMAs, which are not counted).
    Sfu,
}

/// Number of [`Class`] values.
pub(crate) const CLASSES: usize = 21;

/// Instruction counts by class; see [`Class`] for what each counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstructionCounts {
    /// Instructions of class [`Class::Mma`].
    pub mma: u64,
    /// Instructions of class [`Class::Fma`].
    pub fma: u64,
    /// Instructions of class [`Class::Alu`].
    pub alu: u64,
    /// Instructions of class [`Class::SharedLoad`].
    pub shared_load: u64,
    /// Instructions of class [`Class::SharedStore`].
    pub shared_store: u64,
    /// Instructions of class [`Class::SharedAtomic`].
    pub shared_atomic: u64,
    /// Instructions of class [`Class::Ldmatrix`].
    pub ldmatrix: u64,
    /// Instructions of class [`Class::GlobalLoad`].
    pub global_load: u64,
    /// Instructions of class [`Class::GlobalStore`].
    pub global_store: u64,
    /// Instructions of class [`Class::GlobalAtomic`].
    pub global_atomic: u64,
    /// Instructions of class [`Class::AsyncCopy`].
    pub async_copy: u64,
    /// Instructions of class [`Class::Barrier`].
    pub barrier: u64,
    /// Instructions of class [`Class::WarpSync`].
    pub warp_sync: u64,
    /// Instructions of class [`Class::Shuffle`].
    pub shuffle: u64,
    /// Instructions of class [`Class::Vote`].
    pub vote: u64,
    /// Instructions of class [`Class::Mbarrier`].
    pub mbarrier: u64,
    /// Instructions of class [`Class::Elect`].
    pub elect: u64,
    /// Instructions of class [`Class::ProxyFence`].
    pub proxy_fence: u64,
    /// Instructions of class [`Class::Tma`].
    pub tma: u64,
    /// Instructions of class [`Class::Wgmma`].
    pub wgmma: u64,
    /// Instructions of class [`Class::Sfu`].
    pub sfu: u64,
}

impl InstructionCounts {
    pub(crate) fn from_array(a: &[u64; CLASSES]) -> Self {
        InstructionCounts {
            mma: a[Class::Mma as usize],
            fma: a[Class::Fma as usize],
            alu: a[Class::Alu as usize],
            shared_load: a[Class::SharedLoad as usize],
            shared_store: a[Class::SharedStore as usize],
            shared_atomic: a[Class::SharedAtomic as usize],
            ldmatrix: a[Class::Ldmatrix as usize],
            global_load: a[Class::GlobalLoad as usize],
            global_store: a[Class::GlobalStore as usize],
            global_atomic: a[Class::GlobalAtomic as usize],
            async_copy: a[Class::AsyncCopy as usize],
            barrier: a[Class::Barrier as usize],
            warp_sync: a[Class::WarpSync as usize],
            shuffle: a[Class::Shuffle as usize],
            vote: a[Class::Vote as usize],
            mbarrier: a[Class::Mbarrier as usize],
            elect: a[Class::Elect as usize],
            proxy_fence: a[Class::ProxyFence as usize],
            tma: a[Class::Tma as usize],
            wgmma: a[Class::Wgmma as usize],
            sfu: a[Class::Sfu as usize],
        }
    }

    pub(crate) fn to_array(self) -> [u64; CLASSES] {
        let mut a = [0; CLASSES];
        a[Class::Mma as usize] = self.mma;
        a[Class::Fma as usize] = self.fma;
        a[Class::Alu as usize] = self.alu;
        a[Class::SharedLoad as usize] = self.shared_load;
        a[Class::SharedStore as usize] = self.shared_store;
        a[Class::SharedAtomic as usize] = self.shared_atomic;
        a[Class::Ldmatrix as usize] = self.ldmatrix;
        a[Class::GlobalLoad as usize] = self.global_load;
        a[Class::GlobalStore as usize] = self.global_store;
        a[Class::GlobalAtomic as usize] = self.global_atomic;
        a[Class::AsyncCopy as usize] = self.async_copy;
        a[Class::Barrier as usize] = self.barrier;
        a[Class::WarpSync as usize] = self.warp_sync;
        a[Class::Shuffle as usize] = self.shuffle;
        a[Class::Vote as usize] = self.vote;
        a[Class::Mbarrier as usize] = self.mbarrier;
        a[Class::Elect as usize] = self.elect;
        a[Class::ProxyFence as usize] = self.proxy_fence;
        a[Class::Tma as usize] = self.tma;
        a[Class::Wgmma as usize] = self.wgmma;
        a[Class::Sfu as usize] = self.sfu;
        a
    }

    /// Every class scaled by `factor`, rounded to the nearest count.
    pub fn scaled(self, factor: f64) -> Self {
        Self::from_array(&self.to_array().map(|v| scale(v, factor)))
    }
}

impl Add for InstructionCounts {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        let (a, b) = (self.to_array(), other.to_array());
        Self::from_array(&std::array::from_fn(|i| a[i] + b[i]))
    }
}

impl AddAssign for InstructionCounts {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// Shared-memory traffic of one kind of access (loads, stores or atomics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedTraffic {
    /// Warp-level requests.
    pub requests: u64,
    /// Wavefronts (shared-memory cycles) the requests take: per request, the most distinct
    /// 4-byte words any one of the 32 banks must deliver, summed over the request's phases. A
    /// request of accesses up to 4 bytes wide is one phase of 32 lanes; 8-byte accesses are
    /// processed per half-warp (2 phases), 16-byte ones per quarter-warp (4 phases); lanes
    /// reading the same word share it (broadcast). A conflict-free request of 4-byte accesses
    /// takes 1 wavefront; an `n`-way bank conflict, `n`.
    pub wavefronts: u64,
    /// Bytes the lanes asked for.
    pub bytes: u64,
}

/// Global-memory traffic of one kind of access (loads, stores or atomics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalTraffic {
    /// Warp-level requests.
    pub requests: u64,
    /// Distinct 32-byte sectors the requests touch (per request, summed): a warp's coalesced
    /// 4-byte accesses touch 4 sectors, 16-byte ones 16, a broadcast 1.
    pub sectors: u64,
    /// Bytes the lanes asked for; `sectors * 32` is what the memory system moves.
    pub bytes_requested: u64,
}

impl GlobalTraffic {
    /// Bytes moved: `sectors * 32`.
    pub fn bytes_moved(&self) -> u64 {
        self.sectors * SECTOR_BYTES
    }
}

macro_rules! traffic_ops {
    ($($t:ident { $($f:ident),* })*) => {$(
        impl AddAssign for $t {
            fn add_assign(&mut self, o: Self) {
                $(self.$f += o.$f;)*
            }
        }
        impl $t {
            /// Every counter scaled by `factor`, rounded.
            pub fn scaled(self, factor: f64) -> Self {
                $t { $($f: scale(self.$f, factor)),* }
            }
        }
    )*};
}

traffic_ops! {
    SharedTraffic { requests, wavefronts, bytes }
    GlobalTraffic { requests, sectors, bytes_requested }
}

/// What one launch did, counted exactly by the emulator (scaled to the whole grid when only a
/// sample of its blocks ran, see [`LaunchStats::blocks_run`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchStats {
    /// The kernel's name.
    pub kernel: &'static str,
    /// Grid shape in blocks.
    pub grid: [u32; 3],
    /// Block shape in threads.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, as launched.
    pub dynamic_smem_bytes: u32,
    /// Most static plus dynamic shared memory a block used.
    pub shared_bytes_per_block: u32,
    /// Blocks in the grid.
    pub blocks_total: u64,
    /// Blocks the emulator ran: `blocks_total` unless the launch sampled (see
    /// [`crate::BlockSample`]); then every counter below is the sampled blocks' counts, each
    /// block weighted by how many blocks of the grid it stands for.
    pub blocks_run: u64,
    /// Warps per block (the last may be partial).
    pub warps_per_block: u32,
    /// Instructions counted per lane.
    pub thread_instructions: InstructionCounts,
    /// Warp-level instructions (per warp, the largest lane count of each class).
    pub warp_instructions: InstructionCounts,
    /// Shared-memory loads: requests and wavefronts under the 32-bank model.
    pub shared_loads: SharedTraffic,
    /// Shared-memory stores: requests and wavefronts under the 32-bank model.
    pub shared_stores: SharedTraffic,
    /// Shared-memory atomics: requests and wavefronts under the 32-bank model.
    pub shared_atomics: SharedTraffic,
    /// Global-memory loads: requests, sectors and bytes.
    pub global_loads: GlobalTraffic,
    /// Global-memory stores: requests, sectors and bytes.
    pub global_stores: GlobalTraffic,
    /// Global-memory atomics: requests, sectors and bytes.
    pub global_atomics: GlobalTraffic,
    /// `cp.async` copies (per thread) by how many barriers their thread passed between
    /// committing the copy's group and waiting for it: `[0, 1, 2, 3 or more]`. A copy waited
    /// for in the barrier interval that issued it overlaps no other work of the block; one
    /// issued `d` intervals ahead (a `d + 1`-stage ring) overlaps `d` intervals of it.
    pub async_copies_by_overlap: [u64; ASYNC_OVERLAP_BUCKETS],
    /// TMA loads (`cp.async.bulk.tensor` global to shared): `requests` counts instructions,
    /// `sectors` the distinct 32-byte sectors of the in-bounds elements each reads (summed
    /// over instructions), `bytes_requested` those elements' bytes.
    pub tma_loads: GlobalTraffic,
    /// TMA stores (shared to global), counted as [`LaunchStats::tma_loads`] (out-of-bounds
    /// elements are not written).
    pub tma_stores: GlobalTraffic,
    /// Bytes TMA loads wrote to and stores read from shared memory (whole boxes, out-of-bounds
    /// fill included).
    pub tma_shared_bytes: u64,
    /// Multiply-adds of the `wgmma.mma_async` instructions: `64 x N x 16` per warpgroup
    /// instruction (the tensor pipe's work on Hopper, where one `wgmma` of a given N may be
    /// any of the shapes, so instruction counts alone do not measure it).
    pub wgmma_macs: u64,
    /// Bytes the lanes' global loads asked for from another emulated device's memory (see
    /// `Registration::set_owner`): what crosses the links between GPUs, inbound.
    pub peer_loads: u64,
    /// Bytes the lanes' global stores wrote into another emulated device's memory: what
    /// crosses the links between GPUs, outbound.
    pub peer_stores: u64,
    /// Bytes of global atomics on another emulated device's memory (flags, for the
    /// collectives).
    pub peer_atomics: u64,
    /// Bytes the lanes' global loads asked for from the memory of the emulated device the
    /// launch runs on (allocations it owns, see `Registration::set_owner`): its own DRAM
    /// traffic, where peer-mapped buffers are told apart from argument tables and host memory.
    pub own_loads: u64,
    /// Bytes the lanes' global stores wrote into the launch's own device's memory.
    pub own_stores: u64,
    /// Bytes of global atomics on the launch's own device's memory.
    pub own_atomics: u64,
}

impl LaunchStats {
    /// Whether only a sample of the grid's blocks ran.
    pub fn sampled(&self) -> bool {
        self.blocks_run < self.blocks_total
    }

    /// Bank-conflict factor of shared loads: wavefronts per request (1.0 when conflict-free
    /// 4-byte accesses).
    pub fn shared_load_wavefronts_per_request(&self) -> f64 {
        ratio(self.shared_loads.wavefronts, self.shared_loads.requests)
    }

    /// Global load efficiency: bytes requested over bytes moved (1.0 when fully coalesced).
    pub fn global_load_efficiency(&self) -> f64 {
        ratio(self.global_loads.bytes_requested, self.global_loads.bytes_moved())
    }

    /// Total bytes moved between the SMs and L2 by global loads, stores and atomics.
    pub fn global_bytes_moved(&self) -> u64 {
        self.global_loads.bytes_moved() + self.global_stores.bytes_moved() + self.global_atomics.bytes_moved()
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn scale(v: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        v
    } else {
        (v as f64 * factor).round() as u64
    }
}

/// Counters of blocks, each weighted by how many blocks of the grid it stands for, summed
/// unrounded (rounding once at the end keeps a sample's scaled counts exact where the
/// blocks it stands for do equal work).
#[derive(Clone, Debug)]
pub(crate) struct WeightedSums {
    values: [f64; WeightedSums::LEN],
    shared_bytes: u32,
}

impl Default for WeightedSums {
    fn default() -> Self {
        WeightedSums { values: [0.0; Self::LEN], shared_bytes: 0 }
    }
}

impl WeightedSums {
    /// Thread and warp instruction counts, then requests/wavefronts/bytes of shared loads,
    /// stores and atomics, then requests/sectors/bytes of global ones, then the `cp.async`
    /// overlap buckets, then the TMA loads' and stores' requests/sectors/bytes and the TMA
    /// shared bytes, then the `wgmma` multiply-adds, then the peer bytes and the own-device
    /// bytes of loads, stores and atomics.
    const LEN: usize = 2 * CLASSES + 9 + 9 + ASYNC_OVERLAP_BUCKETS + 8 + 6;
    const TMA: usize = 2 * CLASSES + 18 + ASYNC_OVERLAP_BUCKETS;

    fn flatten(c: &BlockCounts) -> [u64; Self::LEN] {
        let mut out = [0; Self::LEN];
        out[..CLASSES].copy_from_slice(&c.thread.to_array());
        out[CLASSES..2 * CLASSES].copy_from_slice(&c.warp.to_array());
        for k in 0..3 {
            let s = &c.shared[k];
            out[2 * CLASSES + 3 * k..][..3].copy_from_slice(&[s.requests, s.wavefronts, s.bytes]);
            let g = &c.global[k];
            out[2 * CLASSES + 9 + 3 * k..][..3].copy_from_slice(&[g.requests, g.sectors, g.bytes_requested]);
        }
        out[2 * CLASSES + 18..Self::TMA].copy_from_slice(&c.async_overlap);
        for k in 0..2 {
            let t = &c.tma[k];
            out[Self::TMA + 3 * k..][..3].copy_from_slice(&[t.requests, t.sectors, t.bytes_requested]);
        }
        out[Self::TMA + 6] = c.tma_shared_bytes;
        out[Self::TMA + 7] = c.wgmma_macs;
        out[Self::TMA + 8..Self::TMA + 11].copy_from_slice(&c.peer_bytes);
        out[Self::TMA + 11..].copy_from_slice(&c.own_bytes);
        out
    }

    pub fn add(&mut self, counts: &BlockCounts, weight: f64) {
        for (sum, v) in self.values.iter_mut().zip(Self::flatten(counts)) {
            *sum += v as f64 * weight;
        }
        self.shared_bytes = self.shared_bytes.max(counts.shared_bytes);
    }

    pub fn merge(&mut self, other: &WeightedSums) {
        for (sum, v) in self.values.iter_mut().zip(other.values) {
            *sum += v;
        }
        self.shared_bytes = self.shared_bytes.max(other.shared_bytes);
    }

    /// Writes the rounded sums into the counters of `stats`.
    pub fn write_into(&self, stats: &mut LaunchStats) {
        let v: Vec<u64> = self.values.iter().map(|x| x.round() as u64).collect();
        stats.thread_instructions =
            InstructionCounts::from_array(&v[..CLASSES].try_into().expect("CLASSES values"));
        stats.warp_instructions =
            InstructionCounts::from_array(&v[CLASSES..2 * CLASSES].try_into().expect("CLASSES values"));
        let shared = |k: usize| {
            let x = &v[2 * CLASSES + 3 * k..];
            SharedTraffic { requests: x[0], wavefronts: x[1], bytes: x[2] }
        };
        let global = |k: usize| {
            let x = &v[2 * CLASSES + 9 + 3 * k..];
            GlobalTraffic { requests: x[0], sectors: x[1], bytes_requested: x[2] }
        };
        (stats.shared_loads, stats.shared_stores, stats.shared_atomics) = (shared(0), shared(1), shared(2));
        (stats.global_loads, stats.global_stores, stats.global_atomics) = (global(0), global(1), global(2));
        stats.async_copies_by_overlap.copy_from_slice(&v[2 * CLASSES + 18..Self::TMA]);
        let tma = |k: usize| {
            let x = &v[Self::TMA + 3 * k..];
            GlobalTraffic { requests: x[0], sectors: x[1], bytes_requested: x[2] }
        };
        (stats.tma_loads, stats.tma_stores) = (tma(0), tma(1));
        stats.tma_shared_bytes = v[Self::TMA + 6];
        stats.wgmma_macs = v[Self::TMA + 7];
        (stats.peer_loads, stats.peer_stores, stats.peer_atomics) =
            (v[Self::TMA + 8], v[Self::TMA + 9], v[Self::TMA + 10]);
        (stats.own_loads, stats.own_stores, stats.own_atomics) =
            (v[Self::TMA + 11], v[Self::TMA + 12], v[Self::TMA + 13]);
        stats.shared_bytes_per_block = self.shared_bytes;
    }
}

/// Counters of one block, before weighting.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockCounts {
    pub thread: InstructionCounts,
    pub warp: InstructionCounts,
    /// Loads, stores, atomics.
    pub shared: [SharedTraffic; 3],
    pub global: [GlobalTraffic; 3],
    pub shared_bytes: u32,
    /// `cp.async` copies by overlap bucket (see [`LaunchStats::async_copies_by_overlap`]).
    pub async_overlap: [u64; ASYNC_OVERLAP_BUCKETS],
    /// TMA loads and stores (see [`LaunchStats::tma_loads`]).
    pub tma: [GlobalTraffic; 2],
    /// See [`LaunchStats::tma_shared_bytes`].
    pub tma_shared_bytes: u64,
    /// See [`LaunchStats::wgmma_macs`].
    pub wgmma_macs: u64,
    /// Bytes of loads, stores and atomics on another device's memory (see
    /// [`LaunchStats::peer_loads`]).
    pub peer_bytes: [u64; 3],
    /// Bytes of loads, stores and atomics on the launch's own device's memory (see
    /// [`LaunchStats::own_loads`]).
    pub own_bytes: [u64; 3],
}

/// Access kinds as memory counters index them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MemOp {
    Load = 0,
    Store = 1,
    Atomic = 2,
}

/// The memory requests of one barrier interval, grouped as they are made: the accesses of one
/// warp at one site with equal per-lane visit numbers form a request. `index[warp][site]`
/// maps a visit number to its group, so grouping needs no sort.
#[derive(Default)]
pub(crate) struct RequestGroups {
    index: Vec<Vec<Vec<u32>>>,
    groups: Vec<Group>,
}

/// One request: its kind and each lane's `(address, bytes)`.
#[derive(Clone, Copy)]
struct Group {
    op: MemOp,
    lanes: u8,
    accesses: [(u8, u64, u8); WARP_LANES],
}

const WARP_LANES: usize = 32;

impl RequestGroups {
    /// Adds `thread`'s `instance`-th visit of `site` (since the last barrier): `bytes` at `addr`.
    pub fn add(&mut self, thread: u32, site: u16, instance: u32, op: MemOp, addr: u64, bytes: u32) {
        let lane = thread % WARP_LANES as u32;
        let (warp, site, instance) =
            ((thread / WARP_LANES as u32) as usize, usize::from(site), instance as usize);
        if self.index.len() <= warp {
            self.index.resize_with(warp + 1, Vec::new);
        }
        let sites = &mut self.index[warp];
        if sites.len() <= site {
            sites.resize_with(site + 1, Vec::new);
        }
        let visits = &mut sites[site];
        while visits.len() <= instance {
            visits.push(self.groups.len() as u32);
            self.groups.push(Group { op, lanes: 0, accesses: [(0, 0, 0); WARP_LANES] });
        }
        let group = &mut self.groups[visits[instance] as usize];
        if usize::from(group.lanes) < WARP_LANES {
            group.accesses[usize::from(group.lanes)] = (lane as u8, addr, bytes.min(255) as u8);
            group.lanes += 1;
        }
    }

    /// Costs the shared-memory requests into `counts` and forgets them.
    pub fn cost_shared(&mut self, counts: &mut BlockCounts) {
        let mut words = Vec::with_capacity(128);
        let mut lanes = Vec::with_capacity(WARP_LANES);
        for g in self.groups.iter().filter(|g| g.lanes > 0) {
            let accesses = &g.accesses[..usize::from(g.lanes)];
            lanes.clear();
            lanes.extend(accesses.iter().map(|&(lane, addr, bytes)| (lane, addr as u32, bytes)));
            let t = &mut counts.shared[g.op as usize];
            t.requests += 1;
            t.wavefronts += wavefronts(&lanes, &mut words);
            t.bytes += accesses.iter().map(|a| u64::from(a.2)).sum::<u64>();
        }
        self.clear();
    }

    /// Costs the global-memory requests into `counts` and forgets them.
    pub fn cost_global(&mut self, counts: &mut BlockCounts) {
        let mut scratch = Vec::with_capacity(64);
        for g in self.groups.iter().filter(|g| g.lanes > 0) {
            let accesses = &g.accesses[..usize::from(g.lanes)];
            let t = &mut counts.global[g.op as usize];
            t.requests += 1;
            t.sectors += sectors(accesses.iter().map(|a| (a.1, u32::from(a.2))), &mut scratch);
            t.bytes_requested += accesses.iter().map(|a| u64::from(a.2)).sum::<u64>();
        }
        self.clear();
    }

    pub fn clear(&mut self) {
        self.groups.clear();
        for sites in &mut self.index {
            for visits in sites.iter_mut() {
                visits.clear();
            }
        }
    }
}

/// Wavefronts of one shared request whose lanes access `(lane, offset, bytes)`.
pub(crate) fn wavefronts(accesses: &[(u8, u32, u8)], words: &mut Vec<u32>) -> u64 {
    // Phases: lanes grouped by the widest access of the request.
    let width = accesses.iter().map(|a| a.2).max().unwrap_or(4);
    let lanes_per_phase: u8 = match width {
        0..=4 => 32,
        5..=8 => 16,
        _ => 8,
    };
    let mut total = 0;
    for phase in 0..32 / lanes_per_phase {
        let lanes = phase * lanes_per_phase..(phase + 1) * lanes_per_phase;
        words.clear();
        for &(_, offset, bytes) in accesses.iter().filter(|a| lanes.contains(&a.0)) {
            let first = offset / BANK_BYTES;
            let last = (offset + u32::from(bytes.max(1)) - 1) / BANK_BYTES;
            words.extend(first..=last);
        }
        if words.is_empty() {
            continue;
        }
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0u64; SHARED_BANKS as usize];
        for &w in words.iter() {
            per_bank[(w % SHARED_BANKS) as usize] += 1;
        }
        total += per_bank.iter().copied().max().unwrap_or(0);
    }
    total
}

/// Distinct 32-byte sectors touched by accesses `(address, bytes)`.
pub(crate) fn sectors(accesses: impl Iterator<Item = (u64, u32)>, scratch: &mut Vec<u64>) -> u64 {
    scratch.clear();
    for (addr, bytes) in accesses {
        let first = addr / SECTOR_BYTES;
        let last = (addr + u64::from(bytes.max(1)) - 1) / SECTOR_BYTES;
        scratch.extend(first..=last);
    }
    scratch.sort_unstable();
    scratch.dedup();
    scratch.len() as u64
}

#[cfg(test)]
mod tests {
    fn warp(stride_words: u32, bytes: u8) -> Vec<(u8, u32, u8)> {
        (0..32).map(|l| (l as u8, l * stride_words * 4, bytes)).collect()
    }

    fn wavefronts(accesses: &[(u8, u32, u8)]) -> u64 {
        super::wavefronts(accesses, &mut Vec::new())
    }

    fn sectors(accesses: impl Iterator<Item = (u64, u32)>) -> u64 {
        super::sectors(accesses, &mut Vec::new())
    }

    #[test]
    fn bank_conflicts_follow_the_32_bank_model() {
        assert_eq!(wavefronts(&warp(1, 4)), 1);
        assert_eq!(wavefronts(&warp(2, 4)), 2);
        assert_eq!(wavefronts(&warp(32, 4)), 32);
        assert_eq!(wavefronts(&warp(0, 4)), 1, "a broadcast is one wavefront");
        // 8-byte accesses, consecutive: each half-warp covers 32 words, one per bank.
        assert_eq!(wavefronts(&warp(2, 8)), 2);
        // 16-byte accesses, consecutive: four quarter-warps of 32 words each.
        assert_eq!(wavefronts(&warp(4, 16)), 4);
        // 16-byte accesses with a 32-byte stride: each quarter-warp hits 16 banks twice.
        assert_eq!(wavefronts(&warp(8, 16)), 8);
    }

    #[test]
    fn sectors_count_distinct_32_byte_segments() {
        assert_eq!(sectors((0..32).map(|l| (l * 4, 4))), 4);
        assert_eq!(sectors((0..32).map(|l| (l * 16, 16))), 16);
        assert_eq!(sectors((0..32).map(|_| (64, 4))), 1);
        assert_eq!(sectors((0..32).map(|l| (l * 128, 4))), 32);
        assert_eq!(sectors([(30, 4)].into_iter()), 2, "an access straddling a sector boundary");
    }
}
