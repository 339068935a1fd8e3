//! What the model reads of a launch: its shape, the exact warp-level counters the emulator
//! took (scaled to the whole grid when it ran a sample of the blocks), and the kernel's
//! resources.

/// One launch's work, summed over its whole grid.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    /// The kernel's name (the key into the resource table).
    pub kernel: String,
    /// Blocks in the grid.
    pub blocks: u64,
    /// Threads per block.
    pub threads_per_block: u32,
    /// Shared memory per block, static plus dynamic, bytes.
    pub smem_per_block: u32,
    /// Warp-level instruction counts.
    pub warp: WarpCounts,
    /// Shared-memory wavefronts of every shared request (loads, stores, atomics, `ldmatrix`).
    pub smem_wavefronts: u64,
    /// Global 32-byte sectors of every global request (loads, stores, atomics).
    pub global_sectors: u64,
    /// Bytes the kernel must move to or from DRAM at least: the footprint of its buffers when
    /// the caller knows it (each byte read or written once), else `None`, and the model uses
    /// the bytes the global requests moved (`global_sectors * 32`, an upper bound).
    pub dram_bytes: Option<u64>,
    /// Useful floating-point operations (for reporting FLOP/s only; the model does not use it).
    pub flops: f64,
    /// `cp.async` copies (per thread) by the barriers their thread passed while they were in
    /// flight, `[0, 1, 2, 3 or more]` (`LaunchStats::async_copies_by_overlap`): how far ahead
    /// of its use a pipelined kernel issues its loads.
    pub async_overlap: [u64; 4],
    /// Multiply-adds of `wgmma.mma_async` (Hopper's warpgroup tensor instruction): the tensor
    /// pipe's work there, counted in MACs because one instruction may be any `m64nNk16`.
    pub wgmma_macs: u64,
    /// Global 32-byte sectors TMA loads read and TMA stores wrote (`cp.async.bulk.tensor`):
    /// traffic that bypasses L1 and the LSU, between L2 and shared memory.
    pub tma_sectors: u64,
}

/// Warp-level instructions by class (per warp, the most any lane executed), summed over the
/// grid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarpCounts {
    /// `mma.sync.m16n8k16` (bf16 inputs, f32 accumulation).
    pub mma: u64,
    /// `fma.rn.f32`.
    pub fma: u64,
    /// Other f32 ALU operations called through `simt` (`max`, `min`).
    pub alu: u64,
    /// Special-function unit operations (`ex2`, `lg2`, `tanh`, `rsqrt`, `sqrt`).
    pub sfu: u64,
    /// Shared loads, stores, atomics and `ldmatrix`.
    pub shared: u64,
    /// Global loads (plain and read-only).
    pub global_load: u64,
    /// Global stores and atomics.
    pub global_store: u64,
    /// `cp.async` copies.
    pub async_copy: u64,
    /// Block barriers (`bar.sync`).
    pub barrier: u64,
    /// Shuffles, votes and warp barriers.
    pub warp_collective: u64,
    /// `wgmma.mma_async` instructions, per warp (their work is [`Workload::wgmma_macs`]).
    pub wgmma: u64,
    /// TMA instructions (`cp.async.bulk.tensor` loads and stores, bulk-group commits and
    /// waits), issued by one elected thread per warp.
    pub tma: u64,
}

impl WarpCounts {
    /// `f` applied to each pair of counters of `self` and `other`, rounded.
    fn zip(&self, other: &WarpCounts, f: impl Fn(f64, f64) -> f64) -> WarpCounts {
        let g = |a: u64, b: u64| f(a as f64, b as f64).round().max(0.0) as u64;
        WarpCounts {
            mma: g(self.mma, other.mma),
            fma: g(self.fma, other.fma),
            alu: g(self.alu, other.alu),
            sfu: g(self.sfu, other.sfu),
            shared: g(self.shared, other.shared),
            global_load: g(self.global_load, other.global_load),
            global_store: g(self.global_store, other.global_store),
            async_copy: g(self.async_copy, other.async_copy),
            barrier: g(self.barrier, other.barrier),
            warp_collective: g(self.warp_collective, other.warp_collective),
            wgmma: g(self.wgmma, other.wgmma),
            tma: g(self.tma, other.tma),
        }
    }

    /// Every counted warp instruction.
    pub fn total(&self) -> u64 {
        self.mma
            + self.fma
            + self.alu
            + self.sfu
            + self.shared
            + self.global_load
            + self.global_store
            + self.async_copy
            + self.barrier
            + self.warp_collective
            + self.wgmma
            + self.tma
    }
}

impl Workload {
    /// Warps per block (the last may be partial and still takes a warp slot).
    pub fn warps_per_block(&self) -> u32 {
        self.threads_per_block.div_ceil(32)
    }

    /// Warps in the grid.
    pub fn warps(&self) -> u64 {
        self.blocks * u64::from(self.warps_per_block())
    }

    /// The launch's counters as the emulator recorded them.
    pub fn from_stats(stats: &trident_simt::LaunchStats) -> Workload {
        let w = &stats.warp_instructions;
        Workload {
            kernel: stats.kernel.to_string(),
            blocks: stats.blocks_total,
            threads_per_block: stats.block.iter().product(),
            smem_per_block: stats.shared_bytes_per_block.max(stats.dynamic_smem_bytes),
            warp: WarpCounts {
                mma: w.mma,
                fma: w.fma,
                alu: w.alu,
                sfu: w.sfu,
                shared: w.shared_load + w.shared_store + w.shared_atomic + w.ldmatrix,
                global_load: w.global_load,
                global_store: w.global_store + w.global_atomic,
                async_copy: w.async_copy,
                barrier: w.barrier,
                warp_collective: w.shuffle + w.vote + w.warp_sync,
                wgmma: w.wgmma,
                tma: w.tma,
            },
            smem_wavefronts: stats.shared_loads.wavefronts
                + stats.shared_stores.wavefronts
                + stats.shared_atomics.wavefronts,
            global_sectors: stats.global_loads.sectors
                + stats.global_stores.sectors
                + stats.global_atomics.sectors,
            dram_bytes: None,
            flops: 0.0,
            async_overlap: stats.async_copies_by_overlap,
            wgmma_macs: stats.wgmma_macs,
            tma_sectors: stats.tma_loads.sectors + stats.tma_stores.sectors,
        }
    }

    /// Counters affine in a size parameter, measured at `p1` (`self`) and `p2` (`other`),
    /// extrapolated to `p1 + t (p2 - p1)`: `self + t (other - self)` for every counter. Exact
    /// for a loop over that parameter whose steps each do the same work (the K-loop of a tiled
    /// GEMM); the shape (blocks, threads, shared memory) is `self`'s.
    pub fn extrapolate(&self, other: &Workload, t: f64) -> Workload {
        let f = |a: f64, b: f64| a + t * (b - a);
        let g = |a: u64, b: u64| f(a as f64, b as f64).round().max(0.0) as u64;
        Workload {
            warp: self.warp.zip(&other.warp, f),
            smem_wavefronts: g(self.smem_wavefronts, other.smem_wavefronts),
            global_sectors: g(self.global_sectors, other.global_sectors),
            async_overlap: std::array::from_fn(|i| g(self.async_overlap[i], other.async_overlap[i])),
            wgmma_macs: g(self.wgmma_macs, other.wgmma_macs),
            tma_sectors: g(self.tma_sectors, other.tma_sectors),
            ..self.clone()
        }
    }

    /// `factor` copies of the launch's grid side by side: blocks and every counter times
    /// `factor` (for grids whose slices — heads, sequences — do identical work).
    pub fn scaled(&self, factor: f64) -> Workload {
        let g = |a: u64| (a as f64 * factor).round() as u64;
        Workload {
            blocks: g(self.blocks),
            warp: self.warp.zip(&self.warp, |a, _| a * factor),
            smem_wavefronts: g(self.smem_wavefronts),
            global_sectors: g(self.global_sectors),
            dram_bytes: self.dram_bytes.map(g),
            async_overlap: self.async_overlap.map(g),
            wgmma_macs: g(self.wgmma_macs),
            tma_sectors: g(self.tma_sectors),
            ..self.clone()
        }
    }

    /// The same workload with its DRAM footprint set to `bytes`.
    pub fn with_dram_bytes(mut self, bytes: u64) -> Self {
        self.dram_bytes = Some(bytes);
        self
    }

    /// The same workload with its useful FLOPs set (for reporting).
    pub fn with_flops(mut self, flops: f64) -> Self {
        self.flops = flops;
        self
    }
}
