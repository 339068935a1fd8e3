//! `--calibrate`: measures this machine (CPU) and describes it as a hardware-table entry, so
//! the planner predicts runs of Trident's own CPU trainer with measured rates.
//!
//! Measured at the planned run's shapes, on all cores and on one thread: the fp32 GEMM rate of
//! Trident's CPU matmul (the MLP's first linear layer), the attention core's rate (counted as
//! the planner counts it, `4 b s^2 h` forward) and GeLU's bandwidth (the elementwise ops);
//! and the busbw and latency of ring all-reduces over in-process ranks (a least-squares fit of
//! `time = 2 (n-1) alpha + 2 (n-1)/n bytes / busbw`).

use std::time::{Duration, Instant};

use trident_collectives::bench::{run_inproc, BenchOp, BenchOptions};
use trident_hardware::{Gpu, Link, Scope, Vendor};

/// What was measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measured {
    /// Logical cores of the machine.
    pub cores: usize,
    /// Rates with every core (one rank alone on the machine).
    pub gemm_gflops: f64,
    /// Attention-core GFLOP/s with every core (the planner's `4 b s^2 h` count).
    pub attention_gflops: f64,
    /// GeLU's GB/s with every core (bytes read and written).
    pub memory_gb_s: f64,
    /// Rates on one thread (a rank among as many ranks as cores).
    pub gemm_gflops_one_thread: f64,
    /// Attention-core GFLOP/s on one thread.
    pub attention_gflops_one_thread: f64,
    /// GeLU's GB/s on one thread.
    pub memory_gb_s_one_thread: f64,
    /// Fitted bus bandwidth of the in-process ring all-reduce, GB/s.
    pub busbw_gb_s: f64,
    /// Fitted per-step latency (alpha) of that ring, microseconds.
    pub latency_us: f64,
    /// Ranks the all-reduce ran over.
    pub world: usize,
}

/// Runs `f` until `budget` has passed (at least twice after one warm-up); seconds per call.
fn time_per_call(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut calls = 0u32;
    while calls < 2 || start.elapsed() < budget {
        f();
        calls += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(calls)
}

/// The shapes one rank of the planned run computes on: `batch` sequences of `seq` tokens, a
/// `hidden`-wide model with `heads` heads, `tp`-way tensor parallel.
#[derive(Clone, Copy, Debug)]
pub struct RunShape {
    /// Sequences per micro-batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Tensor-parallel size (the rank's widths are divided by it).
    pub tp: usize,
}

impl Default for RunShape {
    /// A 768-wide, 12-head layer over 2 sequences of 256 tokens.
    fn default() -> Self {
        RunShape { batch: 2, seq: 256, hidden: 768, heads: 12, tp: 1 }
    }
}

/// Measures the CPU at `shape` (the MLP's first GEMM, the attention core, GeLU as the
/// bandwidth-bound op: small shapes include the per-call overheads, as the run will);
/// `world` in-process ranks for the all-reduce; `budget` per measurement.
pub fn measure(world: usize, budget: Duration, shape: RunShape) -> anyhow::Result<Measured> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let all = rates(budget, shape);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?.install(|| rates(budget, shape));
    let opts = BenchOptions {
        op: BenchOp::AllReduce,
        min_bytes: 16 << 10,
        max_bytes: 16 << 20,
        iters: 10,
        ..BenchOptions::default()
    };
    let rows = run_inproc(world, &opts)?;
    let (alpha, busbw) =
        fit_ring(&rows.iter().map(|r| (r.bytes as f64, r.time_us * 1e-6)).collect::<Vec<_>>(), world);
    Ok(Measured {
        cores,
        gemm_gflops: all.0,
        attention_gflops: all.1,
        memory_gb_s: all.2,
        gemm_gflops_one_thread: one.0,
        attention_gflops_one_thread: one.1,
        memory_gb_s_one_thread: one.2,
        busbw_gb_s: busbw / 1e9,
        latency_us: alpha * 1e6,
        world,
    })
}

/// `(GEMM GFLOP/s, attention GFLOP/s, GeLU GB/s)` on the current rayon pool.
fn rates(budget: Duration, shape: RunShape) -> (f64, f64, f64) {
    let tp = shape.tp.max(1);
    // The MLP's first linear layer on this rank: 2 n ic oc FLOPs.
    let (n, ic, oc) = (shape.batch * shape.seq, shape.hidden, (4 * shape.hidden / tp).max(1));
    let inp: Vec<f32> = (0..n * ic).map(|i| (i % 13) as f32 * 0.01).collect();
    let weight: Vec<f32> = (0..oc * ic).map(|i| (i % 7) as f32 * 0.01).collect();
    let mut out = vec![0f32; n * oc];
    let gemm = time_per_call(budget, || {
        crate::ops::cpu::matmul_forward(&mut out, &inp, &weight, None, ic, oc);
        std::hint::black_box(&mut out);
    });
    // The attention core of this rank's heads.
    let (b, t, nh) = (shape.batch, shape.seq, (shape.heads / tp).max(1));
    let c = nh * (shape.hidden / shape.heads.max(1)).max(1);
    let qkv: Vec<f32> = (0..3 * b * t * c).map(|i| ((i % 17) as f32 - 8.0) * 0.01).collect();
    let mut att = vec![0f32; b * t * c];
    let mut lse = vec![0f32; b * nh * t];
    let attention = time_per_call(budget, || {
        crate::ops::cpu::attention_forward(&mut att, &mut lse, &qkv, b, t, c, nh);
        std::hint::black_box(&mut att);
    });
    // GeLU over the MLP's activations reads and writes 4 bytes per element.
    let act: Vec<f32> = (0..n * oc).map(|i| (i % 11) as f32 * 0.1 - 0.5).collect();
    let mut gelu = vec![0f32; n * oc];
    let gelu_s = time_per_call(budget, || {
        crate::ops::cpu::gelu_forward(&mut gelu, &act);
        std::hint::black_box(&mut gelu);
    });
    (
        2.0 * (n * ic * oc) as f64 / gemm / 1e9,
        4.0 * (b * t * t * c) as f64 / attention / 1e9,
        8.0 * (n * oc) as f64 / gelu_s / 1e9,
    )
}

/// A rank's share of a rate when `ranks` ranks share the machine: all of `all` alone; else
/// its thread's `one`, times the fraction of a core it gets (`cores / ranks`, at most 1),
/// and never less than an equal split of `all`.
pub fn per_rank(all: f64, one: f64, cores: usize, ranks: usize) -> f64 {
    if ranks <= 1 {
        return all;
    }
    (one * (cores as f64 / ranks as f64).min(1.0)).max(all / ranks as f64)
}

/// Least-squares `(alpha, busbw)` of `time = 2 (n-1) alpha + bytes 2 (n-1) / n / busbw` over
/// `(bytes, seconds)` points of ring all-reduces on `n` ranks.
pub fn fit_ring(points: &[(f64, f64)], n: usize) -> (f64, f64) {
    let k = 2.0 * (n.max(2) - 1) as f64;
    let xs: Vec<f64> = points.iter().map(|(b, _)| b * k / n.max(2) as f64).collect();
    let ys: Vec<f64> = points.iter().map(|(_, t)| *t).collect();
    let len = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / len, ys.iter().sum::<f64>() / len);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let slope = (sxy / sxx).max(1e-15);
    let intercept = (my - slope * mx).max(0.0);
    (intercept / k, 1.0 / slope)
}

/// This machine's memory (`MemTotal` of `/proc/meminfo`), in GiB; 16 where it cannot be read.
pub fn machine_memory_gib() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(16.0, |kb| kb / (1024.0 * 1024.0))
}

/// The measured machine as a table entry (`local-cpu`) for one of `ranks` ranks sharing it,
/// and its link (`local-inproc`); the efficiencies are 1 since the rates are what was measured
/// (attention's is its rate over the GEMM rate, as the planner applies it to the peak).
pub fn as_hardware(m: &Measured, ranks: usize) -> (Gpu, Link) {
    let gemm = per_rank(m.gemm_gflops, m.gemm_gflops_one_thread, m.cores, ranks);
    let attention = per_rank(m.attention_gflops, m.attention_gflops_one_thread, m.cores, ranks);
    let memory = per_rank(m.memory_gb_s, m.memory_gb_s_one_thread, m.cores, ranks);
    let memory_gib = machine_memory_gib();
    let gpu = Gpu {
        name: "local-cpu".into(),
        vendor: Vendor::Other,
        sms: m.cores as u32,
        boost_clock_mhz: None,
        fp32_tflops: gemm / 1e3,
        tf32_tflops: None,
        // Trident's Cpu device runs bf16 and fp16 as fp32 products of rounded values.
        bf16_tflops: Some(gemm / 1e3),
        fp16_tflops: Some(gemm / 1e3),
        fp8_tflops: None,
        memory_gib: memory_gib / ranks.max(1) as f64,
        memory_tb_s: memory / 1e3,
        l2_mib: 1.0,
        l2_tb_s: None,
        smem_per_sm_kib: 48.0,
        regs_per_sm: 32,
        max_threads_per_sm: 1,
        max_warps_per_sm: 1,
        warp_size: 1,
        gpu_link: "local-inproc".into(),
        gpu_link_gb_s: 2.0 * m.busbw_gb_s,
        host_link: "local-inproc".into(),
        tdp_w: 0.0,
        gemm_efficiency: 1.0,
        attention_efficiency: (attention / gemm).clamp(1e-3, 1.0),
        memory_efficiency: 1.0,
    };
    let link = Link {
        name: "local-inproc".into(),
        gb_s: m.busbw_gb_s,
        latency_us: m.latency_us,
        efficiency: 1.0,
        scope: Scope::IntraNode,
        source: format!("measured: ring all-reduce over {} in-process ranks", m.world),
    };
    (gpu, link)
}
