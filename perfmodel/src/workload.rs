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
}

/// Warp-level instructions by class (per warp, the most any lane executed), summed over the
/// grid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarpCounts {
    /// `mma.sync.m16n8k16` (bf16 inputs, f32 accumulation).
    pub mma: u64,
    pub fma: u64,
    /// Other f32 ALU/SFU operations called through `simt`.
    pub alu: u64,
    /// Shared loads, stores, atomics and `ldmatrix`.
    pub shared: u64,
    /// Global loads (plain and read-only).
    pub global_load: u64,
    /// Global stores and atomics.
    pub global_store: u64,
    /// `cp.async` copies.
    pub async_copy: u64,
    pub barrier: u64,
    /// Shuffles, votes and warp barriers.
    pub warp_collective: u64,
}

impl WarpCounts {
    /// Every counted warp instruction.
    pub fn total(&self) -> u64 {
        self.mma
            + self.fma
            + self.alu
            + self.shared
            + self.global_load
            + self.global_store
            + self.async_copy
            + self.barrier
            + self.warp_collective
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
