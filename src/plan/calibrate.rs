//! `--calibrate`: measures this machine (CPU) and describes it as a hardware-table entry, so
//! the planner predicts runs of Trident's own CPU trainer with measured rates.
//!
//! Measured: the fp32 GEMM rate of Trident's CPU matmul at a transformer layer's shape, the
//! attention core's rate (counted as the planner counts it, `4 b s^2 h` forward), the copy
//! bandwidth of all cores, and the busbw and latency of ring all-reduces over in-process ranks
//! (a least-squares fit of `time = 2 (n-1) alpha + 2 (n-1)/n bytes / busbw`).

use std::time::{Duration, Instant};

use trident_collectives::bench::{memcpy_bandwidth, run_inproc, BenchOp, BenchOptions};
use trident_hardware::{Gpu, Link, Scope, Vendor};

/// What was measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Measured {
    pub cores: usize,
    pub gemm_gflops: f64,
    pub attention_gflops: f64,
    pub memory_gb_s: f64,
    pub busbw_gb_s: f64,
    pub latency_us: f64,
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

/// Measures the CPU; `world` in-process ranks for the all-reduce; `budget` per measurement.
pub fn measure(world: usize, budget: Duration) -> anyhow::Result<Measured> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A 768-wide linear layer over 512 tokens: 2 n ic oc FLOPs.
    let (n, ic, oc) = (512, 768, 3072);
    let inp: Vec<f32> = (0..n * ic).map(|i| (i % 13) as f32 * 0.01).collect();
    let weight: Vec<f32> = (0..oc * ic).map(|i| (i % 7) as f32 * 0.01).collect();
    let mut out = vec![0f32; n * oc];
    let gemm = time_per_call(budget, || {
        crate::ops::cpu::matmul_forward(&mut out, &inp, &weight, None, ic, oc);
        std::hint::black_box(&mut out);
    });
    let gemm_gflops = 2.0 * (n * ic * oc) as f64 / gemm / 1e9;
    // Attention over 4 sequences of 256 tokens, 768 wide, 12 heads.
    let (b, t, c, nh) = (4, 256, 768, 12);
    let qkv: Vec<f32> = (0..3 * b * t * c).map(|i| ((i % 17) as f32 - 8.0) * 0.01).collect();
    let mut att = vec![0f32; b * t * c];
    let mut lse = vec![0f32; b * nh * t];
    let attention = time_per_call(budget, || {
        crate::ops::cpu::attention_forward(&mut att, &mut lse, &qkv, b, t, c, nh);
        std::hint::black_box(&mut att);
    });
    let attention_gflops = 4.0 * (b * t * t * c) as f64 / attention / 1e9;
    let memory_gb_s = memcpy_bandwidth(64 << 20);
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
        gemm_gflops,
        attention_gflops,
        memory_gb_s,
        busbw_gb_s: busbw / 1e9,
        latency_us: alpha * 1e6,
        world,
    })
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

/// The measured machine as a table entry (`local-cpu`) and its link (`local-inproc`); the
/// efficiencies are 1 since the rates are what was measured.
pub fn as_hardware(m: &Measured) -> (Gpu, Link) {
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(16.0, |kb| kb / (1024.0 * 1024.0));
    let gpu = Gpu {
        name: "local-cpu".into(),
        vendor: Vendor::Other,
        sms: m.cores as u32,
        boost_clock_mhz: None,
        fp32_tflops: m.gemm_gflops / 1e3,
        tf32_tflops: None,
        bf16_tflops: None,
        fp16_tflops: None,
        fp8_tflops: None,
        memory_gib,
        memory_tb_s: m.memory_gb_s / 1e3,
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
        attention_efficiency: (m.attention_gflops / m.gemm_gflops).clamp(1e-3, 1.0),
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
