//! One training step (forward, backward, AdamW) on the Cpu device, for the `tiny` model and a
//! GPT-2 124M-shaped one, reported as tokens/s and against PyTorch eager fp32 measured on the
//! same 2-core machine (tiny: ~7,100 tokens/s; 124M-shape: ~250-310 tokens/s).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use trident::data::{Batch, DataError};
use trident::model::{gpt2_init, init::NormalRng, GptConfig, ParamLayout};
use trident::ops::OpsContext;
use trident::optim::AdamWConfig;
use trident::train::{BatchSource, DecayStyle, LrSchedule, TrainSettings, Trainer};
use trident_runtime::Device;

/// Seeded random tokens.
struct RandomTokens {
    rng: NormalRng,
    vocab: usize,
    b: usize,
    t: usize,
}

impl BatchSource for RandomTokens {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        let mut draw =
            || (0..self.b * self.t).map(|_| (self.rng.next_u64() % self.vocab as u64) as u32).collect();
        let (inputs, targets) = (draw(), draw());
        Ok(Batch { batch_size: self.b, seq_len: self.t, inputs, targets })
    }
}

struct Case {
    name: &'static str,
    config: GptConfig,
    batch: usize,
    seq: usize,
    /// PyTorch eager fp32 tokens/s on this machine (the middle of the measured range).
    torch_tokens_per_s: f64,
    samples: usize,
}

fn trainer(case: &Case) -> (Trainer, RandomTokens) {
    let init = gpt2_init(&ParamLayout::new(case.config), 1);
    let settings = TrainSettings {
        micro_batch: case.batch,
        global_batch: case.batch,
        seq_len: case.seq,
        lr_schedule: LrSchedule {
            max_lr: 1e-4,
            min_lr: 1e-5,
            warmup_iters: 0,
            decay_iters: 1000,
            style: DecayStyle::Cosine,
        },
        adamw: AdamWConfig::default(),
        clip_grad: 1.0,
        precision: Default::default(),
        loss_scale: Default::default(),
    };
    let data =
        RandomTokens { rng: NormalRng::new(7), vocab: case.config.vocab_size, b: case.batch, t: case.seq };
    (Trainer::single(&Device::Cpu, case.config, &init, settings).unwrap(), data)
}

fn bench(c: &mut Criterion) {
    let cases = [
        Case {
            name: "tiny (L4 C256 H4 T256 V256 B8)",
            config: GptConfig::new(256, 256, 4, 4, 256, 128).unwrap(),
            batch: 8,
            seq: 256,
            torch_tokens_per_s: 7_100.0,
            samples: 20,
        },
        Case {
            name: "gpt2-124m shape (T256 B4)",
            config: GptConfig::new(1024, 50257, 12, 12, 768, 128).unwrap(),
            batch: 4,
            seq: 256,
            torch_tokens_per_s: 280.0,
            samples: 10,
        },
    ];
    let mut summary = vec![];
    for case in &cases {
        let tokens = (case.batch * case.seq) as u64;
        let mut group = c.benchmark_group("train_step");
        group
            .sample_size(case.samples)
            .warm_up_time(Duration::from_secs(1))
            .throughput(Throughput::Elements(tokens));
        // Built inside the closure, so a filtered-out case costs nothing.
        let mut measured = (0u64, Duration::ZERO, 0.0f64);
        group.bench_function(case.name, |b| {
            let (mut tr, mut data) = trainer(case);
            b.iter_custom(|iters| {
                let (t0, cpu0) = (Instant::now(), cpu_seconds());
                for _ in 0..iters {
                    tr.step(&mut data).unwrap();
                }
                let took = t0.elapsed();
                measured = (measured.0 + iters, measured.1 + took, measured.2 + cpu_seconds() - cpu0);
                took
            })
        });
        group.finish();
        if measured.0 > 0 {
            let tps = (measured.0 * tokens) as f64 / measured.1.as_secs_f64();
            // On a shared machine the wall clock also counts other processes' time slices; CPU
            // time spread over all cores is what an otherwise idle machine would take.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            let idle_tps = (measured.0 * tokens) as f64 * cores / measured.2.max(1e-9);
            summary.push(format!(
                "{}: {tps:.0} tokens/s wall clock over {} steps ({:.2}x PyTorch eager fp32 at {:.0} tokens/s); \
                 {idle_tps:.0} tokens/s from CPU time over {cores} cores ({:.2}x)",
                case.name,
                measured.0,
                tps / case.torch_tokens_per_s,
                case.torch_tokens_per_s,
                idle_tps / case.torch_tokens_per_s
            ));
        }
    }
    summary.push(gemm_calibration(c));
    for line in summary {
        println!("{line}");
    }
}

/// The GPT-2 MLP's first matmul alone (1024 x 768 -> 3072), to read the step numbers against
/// what GEMM reaches on the machine at the time (about 350 GFLOP/s on 2 idle cores).
fn gemm_calibration(c: &mut Criterion) -> String {
    use trident::ops::matmul_forward;
    use trident_runtime::Buffer;
    let (n, ic, oc) = (1024, 768, 3072);
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let mut rng = NormalRng::new(3);
    let mut fill = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.next_normal() as f32).collect() };
    let (x, w, bias) = (fill(n * ic), fill(oc * ic), fill(oc));
    let (x, w, bias) = (
        Buffer::from_slice(&Device::Cpu, &x).unwrap(),
        Buffer::from_slice(&Device::Cpu, &w).unwrap(),
        Buffer::from_slice(&Device::Cpu, &bias).unwrap(),
    );
    let mut out = Buffer::<f32>::zeros(&Device::Cpu, n * oc).unwrap();
    let flops = 2 * n * ic * oc;
    let mut measured = (0u64, Duration::ZERO);
    let mut group = c.benchmark_group("gemm");
    group.sample_size(20).throughput(Throughput::Elements(flops as u64));
    group.bench_function("matmul_forward 1024x768->3072", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                let (xv, wv, bv) = (x.view(..).unwrap(), w.view(..).unwrap(), bias.view(..).unwrap());
                matmul_forward(&ctx, &mut out.view_mut(..).unwrap(), xv, wv, Some(bv), n, ic, oc).unwrap();
            }
            let took = t0.elapsed();
            measured = (measured.0 + iters, measured.1 + took);
            took
        })
    });
    group.finish();
    let gflops = (measured.0 as f64 * flops as f64) / measured.1.as_secs_f64().max(1e-9) / 1e9;
    format!("gemm calibration: {gflops:.0} GFLOP/s ({:.2}x of 350 GFLOP/s on 2 idle cores)", gflops / 350.0)
}

/// User + system CPU seconds of this process so far (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// The benchmark group, in a private module: `criterion_group!` defines an undocumented
/// `pub fn`.
mod group {
    use super::*;
    criterion_group!(benches, bench);
}
use group::benches;

criterion_main!(benches);
