//! The time model: occupancy, then the cycles each SM pipe needs for the busiest SM's share of
//! the grid, the global-memory latency the warps cannot hide, and DRAM traffic; the largest
//! term names the bound. `docs/TIME_MODEL.md` states the equations and their calibration.

use std::fmt;

use trident_hardware::Gpu;

use crate::arch::{Arch, ModelError};
use crate::workload::Workload;

/// Useful FLOPs of one `mma.m16n8k16`: 2 x 16 x 8 x 16.
pub const MMA_M16N8K16_FLOPS: f64 = 4096.0;

/// What limits a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bound {
    /// Tensor-core `mma` throughput.
    TensorPipe,
    /// f32 FMA (and other f32 ALU) throughput.
    FmaPipe,
    /// The special-function units (`ex2`, `lg2`, `tanh`, `rsqrt`): 16 lanes per SM.
    SfuPipe,
    /// Warp-instruction issue: four schedulers, one instruction each per clock.
    Issue,
    /// The memory-instruction path (MIO/LSU): shared and global warp instructions per clock.
    Lsu,
    /// Shared-memory wavefronts (bank conflicts included).
    SharedMemory,
    /// Global sectors through L1.
    L1,
    /// TMA traffic between L2 and shared memory (Hopper's tensor-memory accelerator).
    Tma,
    /// DRAM bandwidth.
    Dram,
    /// Global-memory latency the resident warps cannot hide (low occupancy, barriers).
    Latency,
    /// Launch overhead: the grid is too small to matter.
    Launch,
}

impl Bound {
    /// The bound as reports name it (`tensor pipe`, `DRAM`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Bound::TensorPipe => "tensor pipe",
            Bound::FmaPipe => "FMA pipe",
            Bound::SfuPipe => "SFU pipe",
            Bound::Issue => "issue",
            Bound::Lsu => "LSU/MIO",
            Bound::SharedMemory => "shared memory",
            Bound::L1 => "L1",
            Bound::Tma => "TMA/L2",
            Bound::Dram => "DRAM",
            Bound::Latency => "latency/occupancy",
            Bound::Launch => "launch",
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What limits the resident blocks per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OccupancyLimit {
    /// The SM's limit on resident blocks.
    Blocks,
    /// The SM's limit on resident warps.
    Warps,
    /// The register file.
    Registers,
    /// Shared memory (static plus dynamic per block).
    SharedMemory,
    /// The grid has fewer blocks than the SMs could hold.
    Grid,
}

/// Resident blocks per SM and why no more.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    /// Blocks resident on one SM at once.
    pub blocks_per_sm: u32,
    /// What stops one more.
    pub limit: OccupancyLimit,
    /// Resident warps over the SM's maximum.
    pub fraction: f64,
}

/// The resources one kernel needs per thread and per block (from `ptxas -v`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resources {
    /// 32-bit registers per thread.
    pub registers: u32,
    /// Static shared memory, bytes (dynamic shared memory comes with the launch).
    pub static_smem: u32,
}

/// One term of the model, in seconds on the busiest SM (or the device, for DRAM).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Term {
    /// The unit the term is for.
    pub bound: Bound,
    /// Its predicted time, seconds.
    pub seconds: f64,
}

/// The model's answer for one launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// The GPU predicted for.
    pub gpu: String,
    /// Predicted time of the launch, seconds.
    pub seconds: f64,
    /// The term that sets the time.
    pub bound: Bound,
    /// Resident blocks per SM.
    pub occupancy: Occupancy,
    /// Blocks the busiest SM runs.
    pub blocks_on_busiest_sm: u64,
    /// Every throughput term, largest first, then the latency term.
    pub terms: Vec<Term>,
    /// Bytes the DRAM term assumed.
    pub dram_bytes: u64,
}

impl Prediction {
    /// FLOP/s for `flops` useful operations.
    pub fn flops_per_s(&self, flops: f64) -> f64 {
        flops / self.seconds
    }
}

/// Resident blocks per SM of a kernel with `threads` threads, `regs` registers per thread and
/// `smem` bytes of shared memory per block (the CUDA occupancy calculator's rules).
pub fn occupancy(gpu: &Gpu, arch: &Arch, threads: u32, regs: u32, smem: u32) -> Result<Occupancy, String> {
    let warps = threads.div_ceil(32).max(1);
    let regs_per_warp = (regs.max(1) * 32).div_ceil(arch.register_granule) * arch.register_granule;
    let by_regs = gpu.regs_per_sm / (regs_per_warp * warps);
    let by_warps = gpu.max_warps_per_sm / warps;
    let smem_sm = (gpu.smem_per_sm_kib * 1024.0) as u32;
    let by_smem = if smem == 0 { u32::MAX } else { smem_sm / (smem + arch.smem_reserved_per_block) };
    let candidates = [
        (arch.max_blocks_per_sm, OccupancyLimit::Blocks),
        (by_warps, OccupancyLimit::Warps),
        (by_regs, OccupancyLimit::Registers),
        (by_smem, OccupancyLimit::SharedMemory),
    ];
    let (blocks, limit) = candidates.into_iter().min_by_key(|c| c.0).expect("four candidates");
    if blocks == 0 {
        return Err(format!(
            "{threads} threads x {regs} registers and {smem} bytes of shared memory per block \
             exceed one SM ({} registers, {} warps, {smem_sm} bytes of shared memory)",
            gpu.regs_per_sm, gpu.max_warps_per_sm
        ));
    }
    Ok(Occupancy {
        blocks_per_sm: blocks,
        limit,
        fraction: f64::from(blocks * warps) / f64::from(gpu.max_warps_per_sm),
    })
}

/// Predicts the time of `work` on `gpu` for a kernel with `res` resources.
///
/// Per SM, with `W` the warps the busiest SM runs (`ceil(blocks / SMs)` blocks), each pipe
/// needs `W x (count per warp) / (rate per clock)` cycles; the latency term is one global round
/// trip per barrier phase (two barriers per tiled step) — or, without barriers, per
/// `loads_in_flight_per_warp` loads — for each round of resident blocks, less what a `cp.async`
/// ring hides by issuing its copies barrier intervals ahead (`exposed_latency_fraction`). With barriers a
/// block's warps wait together, so the latency adds to the pipes, shared by the resident
/// blocks; without them other warps fill the wait, so the larger of the two counts.
pub fn predict(gpu: &Gpu, arch: &Arch, work: &Workload, res: Resources) -> Result<Prediction, ModelError> {
    let smem = work.smem_per_block.max(res.static_smem);
    let mut occ = occupancy(gpu, arch, work.threads_per_block, res.registers, smem)
        .map_err(|why| ModelError::DoesNotFit { kernel: work.kernel.clone(), gpu: gpu.name.clone(), why })?;
    let sms = u64::from(gpu.sms);
    let blocks_on_sm = work.blocks.div_ceil(sms).max(1);
    if blocks_on_sm < u64::from(occ.blocks_per_sm) {
        occ.blocks_per_sm = blocks_on_sm as u32;
        occ.limit = OccupancyLimit::Grid;
    }
    let warps_total = work.warps().max(1) as f64;
    let wpb = f64::from(work.warps_per_block());
    // Warps through the busiest SM, and per-warp averages of every counter.
    let w = blocks_on_sm as f64 * wpb;
    let per_warp = |count: u64| count as f64 / warps_total;
    let c = &work.warp;
    let hz = arch.clock_mhz * 1e6;
    let cycles_to_s = |cycles: f64| cycles / hz;

    // The dense bf16 peak per SM and clock (4096 FLOP on GH100: the datasheet's peak at the
    // model's clock). `mma.sync` reaches `mma_sync_fraction` of it, `wgmma` `wgmma_fraction`;
    // the two share the tensor pipe, so their cycles add.
    let peak_flop_per_clk = gpu.bf16_tflops.unwrap_or(0.0) * 1e12 / (f64::from(gpu.sms) * hz);
    let mma_per_clk = peak_flop_per_clk * arch.mma_sync_fraction / MMA_M16N8K16_FLOPS;
    let mma_cycles = if c.mma == 0 { 0.0 } else { w * per_warp(c.mma) / mma_per_clk };
    let wgmma_cycles = if work.wgmma_macs == 0 {
        0.0
    } else {
        w * per_warp(2 * work.wgmma_macs) / (peak_flop_per_clk * arch.wgmma_fraction)
    };
    let mut terms = vec![
        Term { bound: Bound::TensorPipe, seconds: cycles_to_s(mma_cycles + wgmma_cycles) },
        Term {
            bound: Bound::FmaPipe,
            seconds: cycles_to_s(w * per_warp(c.fma + c.alu) / (arch.fp32_lanes / 32.0)),
        },
        Term { bound: Bound::SfuPipe, seconds: cycles_to_s(w * per_warp(c.sfu) / (arch.sfu_lanes / 32.0)) },
        Term {
            bound: Bound::Issue,
            seconds: cycles_to_s(
                w * (per_warp(c.total()) + per_warp(c.total() - c.fma - c.mma) * arch.uncounted_per_counted)
                    / arch.schedulers,
            ),
        },
        Term {
            bound: Bound::Lsu,
            seconds: cycles_to_s(
                w * per_warp(c.shared + c.global_load + c.global_store + c.async_copy + c.warp_collective)
                    / arch.lsu_per_clk,
            ),
        },
        Term {
            bound: Bound::SharedMemory,
            seconds: cycles_to_s(w * per_warp(work.smem_wavefronts) / arch.smem_wavefronts_per_clk),
        },
        Term {
            bound: Bound::L1,
            seconds: cycles_to_s(w * per_warp(work.global_sectors) / arch.l1_sectors_per_clk),
        },
        Term {
            bound: Bound::Tma,
            seconds: cycles_to_s(w * per_warp(work.tma_sectors * 32) / arch.tma_bytes_per_clk),
        },
    ];
    let dram_bytes = work.dram_bytes.unwrap_or((work.global_sectors + work.tma_sectors) * 32);
    let dram_s = dram_bytes as f64 / (gpu.memory_tb_s * 1e12 * gpu.memory_efficiency);
    terms.push(Term { bound: Bound::Dram, seconds: dram_s });
    terms.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let throughput = terms[0];

    // Latency: rounds of resident blocks on the busiest SM, times the round trips each warp
    // waits for in turn.
    let resident = f64::from(occ.blocks_per_sm);
    let rounds = blocks_on_sm as f64 / resident;
    let barriers = per_warp(c.barrier);
    let loads = per_warp(c.global_load + c.async_copy);
    let trips = if barriers > 0.0 {
        (barriers / 2.0).max(1.0).min(loads.max(1.0))
    } else {
        loads / arch.loads_in_flight_per_warp
    };
    let latency = arch.gmem_latency_cycles
        * exposed_latency_fraction(work, throughput.seconds * hz, rounds, barriers, arch);
    // A TMA-fed pipeline (mbarrier ring, no block barrier in its main loop) waits for one
    // round trip per round of resident blocks, to fill its ring; its producer keeps the later
    // loads ahead of the consumers, as a `cp.async` ring does.
    let latency_s = if loads > 0.0 {
        cycles_to_s(rounds * trips * latency)
    } else if work.tma_sectors > 0 {
        cycles_to_s(rounds * arch.gmem_latency_cycles)
    } else {
        0.0
    };
    let core_s = if barriers > 0.0 {
        (throughput.seconds + latency_s / resident).max(latency_s)
    } else {
        throughput.seconds.max(latency_s)
    };
    let launch_s = arch.launch_us * 1e-6;
    let bound = if launch_s > core_s {
        Bound::Launch
    } else if latency_s / if barriers > 0.0 { resident } else { 1.0 } >= throughput.seconds {
        Bound::Latency
    } else {
        throughput.bound
    };
    terms.push(Term { bound: Bound::Latency, seconds: latency_s });
    terms.push(Term { bound: Bound::Launch, seconds: launch_s });
    Ok(Prediction {
        gpu: gpu.name.clone(),
        seconds: core_s + launch_s,
        bound,
        occupancy: occ,
        blocks_on_busiest_sm: blocks_on_sm,
        terms,
        dram_bytes,
    })
}

/// The fraction of the global round trip a warp waits for per load step. Plain loads wait all
/// of it. A `cp.async` copy whose thread passed `d` barriers while it was in flight was issued
/// `d` barrier intervals before its use (a ring of `d + 1` stages or more), and the SM's pipes
/// spend those intervals on the resident blocks' other work: it waits `max(0, L - d t)` of the
/// latency `L`, with `t` the pipe time of one barrier interval on the busiest SM (`pipe_cycles`
/// over `rounds` rounds of resident blocks and `barriers` intervals per warp and round).
fn exposed_latency_fraction(
    work: &Workload,
    pipe_cycles: f64,
    rounds: f64,
    barriers: f64,
    arch: &Arch,
) -> f64 {
    let c = &work.warp;
    let copies: u64 = work.async_overlap.iter().sum();
    let loads = (c.global_load + c.async_copy) as f64;
    if copies == 0 || c.async_copy == 0 || barriers == 0.0 || loads == 0.0 {
        return 1.0;
    }
    let interval = pipe_cycles / (rounds.max(1.0) * barriers);
    let l = arch.gmem_latency_cycles;
    let async_exposed: f64 = work
        .async_overlap
        .iter()
        .enumerate()
        .map(|(d, &n)| n as f64 / copies as f64 * (l - d as f64 * interval).max(0.0) / l)
        .sum();
    (c.global_load as f64 + c.async_copy as f64 * async_exposed) / loads
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WarpCounts;
    use crate::Target;

    fn a6000() -> Target {
        Target::named("a6000").unwrap()
    }

    #[test]
    fn occupancy_follows_the_tightest_resource() {
        let t = a6000();
        // 256 threads x 125 registers: 128 per thread after the 256-per-warp rounding, 32 KiB
        // of registers per block, two blocks in 64 Ki.
        let o = occupancy(&t.gpu, &t.arch, 256, 125, 8192).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit), (2, OccupancyLimit::Registers));
        // 1024 threads: 32 warps of the 48 an sm_86 SM holds.
        let o = occupancy(&t.gpu, &t.arch, 1024, 32, 0).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit), (1, OccupancyLimit::Warps));
        // 48 KiB of shared memory (+1 KiB reserved) per block: two in 100 KiB.
        let o = occupancy(&t.gpu, &t.arch, 128, 32, 48 * 1024).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit), (2, OccupancyLimit::SharedMemory));
        // Tiny blocks: the 16-block limit of sm_86.
        let o = occupancy(&t.gpu, &t.arch, 32, 16, 0).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit), (16, OccupancyLimit::Blocks));
        assert!(occupancy(&t.gpu, &t.arch, 1024, 255, 0).is_err(), "1024 x 255 registers fit no SM");
    }

    /// A grid of `blocks` blocks of 128 threads whose every warp executes `per_warp`.
    fn work(blocks: u64, per_warp: WarpCounts, wavefronts: u64, sectors: u64) -> Workload {
        let warps = blocks * 4;
        let scale = |v: u64| v * warps;
        Workload {
            kernel: "test".into(),
            blocks,
            threads_per_block: 128,
            smem_per_block: 0,
            warp: WarpCounts {
                mma: scale(per_warp.mma),
                fma: scale(per_warp.fma),
                alu: scale(per_warp.alu),
                sfu: scale(per_warp.sfu),
                shared: scale(per_warp.shared),
                global_load: scale(per_warp.global_load),
                global_store: scale(per_warp.global_store),
                async_copy: scale(per_warp.async_copy),
                barrier: scale(per_warp.barrier),
                warp_collective: scale(per_warp.warp_collective),
                wgmma: scale(per_warp.wgmma),
                tma: scale(per_warp.tma),
            },
            smem_wavefronts: wavefronts * warps,
            global_sectors: sectors * warps,
            dram_bytes: None,
            flops: 0.0,
            async_overlap: [0; 4],
            wgmma_macs: 0,
            tma_sectors: 0,
        }
    }

    const RES: Resources = Resources { registers: 32, static_smem: 0 };

    #[test]
    fn an_fma_loop_is_bound_by_the_fma_pipe() {
        let t = a6000();
        // 84 x 16 blocks: 16 per SM, 64 warps each doing 10^6 FMAs. 128 lanes = 4 warp-FMAs
        // per clock: 16 * 10^6 cycles at 1800 MHz.
        let w = work(84 * 16, WarpCounts { fma: 1_000_000, ..Default::default() }, 0, 0);
        let p = predict(&t.gpu, &t.arch, &w, RES).unwrap();
        assert_eq!(p.bound, Bound::FmaPipe);
        let expected = 16e6 / 1.8e9 + t.arch.launch_us * 1e-6;
        assert!((p.seconds - expected).abs() < 1e-12 * expected.max(1.0), "{} vs {expected}", p.seconds);
        assert_eq!(p.blocks_on_busiest_sm, 16);
    }

    /// `ex2` and the other special functions issue 16 lanes per SM per clock, an eighth of the
    /// FMA pipe's 128: the same count of them takes eight times as long.
    #[test]
    fn special_functions_run_at_the_sfu_rate() {
        let t = a6000();
        let w = work(84 * 16, WarpCounts { sfu: 1_000_000, ..Default::default() }, 0, 0);
        let p = predict(&t.gpu, &t.arch, &w, RES).unwrap();
        assert_eq!(p.bound, Bound::SfuPipe);
        // 64 warps per SM x 10^6 warp instructions at half a warp per clock: 128 * 10^6 cycles.
        let expected = 128e6 / 1.8e9 + t.arch.launch_us * 1e-6;
        assert!((p.seconds - expected).abs() < 1e-12 * expected.max(1.0), "{} vs {expected}", p.seconds);
        let fma = work(84 * 16, WarpCounts { fma: 1_000_000, ..Default::default() }, 0, 0);
        let q = predict(&t.gpu, &t.arch, &fma, RES).unwrap();
        let launch = t.arch.launch_us * 1e-6;
        assert!(((p.seconds - launch) / (q.seconds - launch) - 8.0).abs() < 1e-9);
    }

    /// `wgmma` runs at `wgmma_fraction` of the dense peak the datasheet quotes (989.4 TFLOP/s on
    /// an H100 SXM at 1830 MHz, 4096 FLOP per SM and clock), `mma.sync` at 0.66 of it: the same
    /// MACs take `wgmma_fraction / 0.66` as long on the older instruction.
    #[test]
    fn wgmma_runs_at_its_fraction_of_the_dense_peak_and_mma_sync_at_two_thirds() {
        let t = Target::named("h100").unwrap();
        // One persistent block per SM of 3 warpgroups, 2^30 MACs each: 2^31 FLOP / 4096 per clock.
        let mut w = work(132, WarpCounts::default(), 0, 0);
        w.threads_per_block = 384;
        w.wgmma_macs = 132 * (1 << 30);
        let p = predict(&t.gpu, &t.arch, &w, RES).unwrap();
        assert_eq!(p.bound, Bound::TensorPipe);
        let launch = t.arch.launch_us * 1e-6;
        let expected = f64::from(1u32 << 31) / (4096.0 * t.arch.wgmma_fraction) / 1.83e9;
        let tensor = p.terms.iter().find(|t| t.bound == Bound::TensorPipe).unwrap().seconds;
        assert!((tensor - expected).abs() < 1e-3 * expected, "{tensor} vs {expected}");
        assert!((p.seconds - launch - expected).abs() < 1e-3 * expected);
        // The same work as mma.m16n8k16 (4096 FLOP each).
        let mut m = work(132, WarpCounts::default(), 0, 0);
        m.threads_per_block = 384;
        m.warp.mma = 132 * (1 << 31) / 4096;
        let q = predict(&t.gpu, &t.arch, &m, RES).unwrap();
        let mma = q.terms.iter().find(|t| t.bound == Bound::TensorPipe).unwrap().seconds;
        assert!((mma / tensor - t.arch.wgmma_fraction / 0.66).abs() < 1e-6, "{mma} vs {tensor}");
    }

    /// TMA traffic is charged at the SM's L2 port (64 B per clock), not through L1 and the
    /// LSU, and a TMA-fed kernel waits one round trip per round of resident blocks.
    #[test]
    fn tma_traffic_has_its_own_term_and_one_exposed_round_trip() {
        let t = Target::named("h100").unwrap();
        let mut w = work(132, WarpCounts { tma: 1000, ..Default::default() }, 0, 0);
        w.tma_sectors = 132 * 1_000_000;
        let p = predict(&t.gpu, &t.arch, &w, RES).unwrap();
        let term = |b: Bound| p.terms.iter().find(|t| t.bound == b).unwrap().seconds;
        let expected = 32e6 / 64.0 / 1.83e9;
        assert!((term(Bound::Tma) - expected).abs() < 1e-9 * expected, "{}", term(Bound::Tma));
        assert_eq!(term(Bound::L1), 0.0, "TMA bypasses L1");
        assert!((term(Bound::Latency) - 800.0 / 1.83e9).abs() < 1e-15);
        // The DRAM bound falls back to the TMA bytes when no footprint is given.
        assert_eq!(p.dram_bytes, 132 * 1_000_000 * 32);
    }

    #[test]
    fn bank_conflicts_move_the_bound_to_shared_memory() {
        let t = a6000();
        let per_warp = WarpCounts { fma: 1000, shared: 500, ..Default::default() };
        let clean = predict(&t.gpu, &t.arch, &work(84 * 4, per_warp, 500, 0), RES).unwrap();
        // 8-way conflicts: 4000 wavefronts against 1000 FMAs at 4 per clock.
        let conflicted = predict(&t.gpu, &t.arch, &work(84 * 4, per_warp, 4000, 0), RES).unwrap();
        assert_ne!(clean.bound, Bound::SharedMemory);
        assert_eq!(conflicted.bound, Bound::SharedMemory);
        assert!(conflicted.seconds > 2.0 * clean.seconds);
    }

    #[test]
    fn a_streaming_kernel_is_bound_by_dram() {
        let t = Target::named("h100").unwrap();
        // 2^16 blocks of 4 warps, each warp moving 32 sectors (4 loads and 4 stores of 4
        // sectors): 2^16 * 4 * 32 * 32 = 2^28 bytes.
        let per_warp = WarpCounts { global_load: 4, global_store: 4, fma: 4, ..Default::default() };
        let w = work(1 << 16, per_warp, 0, 32);
        let p = predict(&t.gpu, &t.arch, &w, RES).unwrap();
        assert_eq!(p.bound, Bound::Dram);
        assert_eq!(p.dram_bytes, 1 << 28);
        let dram = (1u64 << 28) as f64 / (t.gpu.memory_tb_s * 1e12 * t.gpu.memory_efficiency);
        assert!((p.seconds - dram - t.arch.launch_us * 1e-6).abs() < 1e-9);
    }

    #[test]
    fn one_block_per_sm_exposes_the_load_latency_at_each_barrier() {
        let t = a6000();
        // One block of 32 warps per SM (84 blocks); 100 tiled steps of 2 loads, 2 barriers and
        // 10 FMAs: the pipes need little, the 100 round trips of 600 cycles dominate.
        let per_warp = WarpCounts { global_load: 200, barrier: 200, fma: 1000, ..Default::default() };
        let mut w = work(84, per_warp, 0, 200);
        w.threads_per_block = 1024;
        w.warp = WarpCounts {
            global_load: 200 * 32 * 84,
            barrier: 200 * 32 * 84,
            fma: 1000 * 32 * 84,
            ..Default::default()
        };
        w.global_sectors = 200 * 32 * 84;
        let p = predict(&t.gpu, &t.arch, &w, RES).unwrap();
        assert_eq!(p.bound, Bound::Latency);
        let latency = 100.0 * 600.0 / 1.8e9;
        assert!(p.seconds > latency, "the latency adds to the pipes with one block per SM");
    }

    #[test]
    fn a_cp_async_ring_hides_the_latency_its_copies_are_issued_ahead() {
        let t = Target::named("h100").unwrap();
        // One 8-warp block per SM, 100 slices of 64 mma, 6 copies and 1 barrier per warp: about
        // 97 tensor cycles per warp and slice, 780 per barrier interval for the block.
        let per_slice = WarpCounts { mma: 64, async_copy: 6, barrier: 1, ..Default::default() };
        let blocks = u64::from(t.gpu.sms);
        let mut w = work(blocks, per_slice, 0, 0);
        w.threads_per_block = 256;
        let warps = blocks * 8;
        w.warp = WarpCounts {
            mma: 6400 * warps,
            async_copy: 600 * warps,
            barrier: 100 * warps,
            ..Default::default()
        };
        let res = Resources { registers: 224, static_smem: 0 };
        let copies = 600 * 256 * blocks;
        // Waited for in the interval that issued them: every step waits for its loads.
        w.async_overlap = [copies, 0, 0, 0];
        let exposed = predict(&t.gpu, &t.arch, &w, res).unwrap();
        // Issued one interval ahead (a 3-stage ring), except the first slice.
        w.async_overlap = [copies / 100, copies - copies / 100, 0, 0];
        let hidden = predict(&t.gpu, &t.arch, &w, res).unwrap();
        assert_eq!(hidden.bound, Bound::TensorPipe);
        let tensor = hidden.terms.iter().find(|x| x.bound == Bound::TensorPipe).unwrap().seconds;
        assert!(hidden.seconds < 1.05 * tensor + t.arch.launch_us * 1e-6, "{hidden:?}");
        assert!(exposed.seconds > 1.3 * hidden.seconds, "{} vs {}", exposed.seconds, hidden.seconds);
    }

    #[test]
    fn every_alias_resolves_to_a_gpu_with_micro_architecture_data() {
        for (alias, full) in crate::arch::ALIASES {
            let t = Target::named(alias).unwrap_or_else(|e| panic!("{alias}: {e}"));
            assert_eq!(t.gpu.name, *full);
        }
        let err = Target::named("v100").unwrap_err().to_string();
        assert!(err.contains("v100") && err.contains("h100-sxm"), "{err}");
    }
}
