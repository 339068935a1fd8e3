//! Criterion benchmarks of every CPU op of a GPT layer, on one thread, at the shape one core
//! handles in a `tiny` training step (one row share: 4 sequences of 256 tokens, 256 wide,
//! 4 heads, MLP 1024 wide, vocabulary 256). A step runs each op once per layer per share, so
//! these figures show where a core's step time goes, op by op.
//!
//! GEMM-bound ops report FLOP/s as criterion's elements/s; memory-bound ops report bytes/s.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use trident::ops::cpu;
use trident::ops::AdamWParams;

const B: usize = 4;
const T: usize = 256;
const C: usize = 256;
const NH: usize = 4;
const ROWS: usize = B * T;
const VOCAB: usize = 256;

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0 - 1.0).collect()
}

fn ops(c: &mut Criterion) {
    // One core, as in a row share; the ops' own rayon splits then run in order.
    rayon::ThreadPoolBuilder::new().num_threads(1).build_global().expect("the global pool is built once");
    let mut g = c.benchmark_group("cpu_ops/tiny-share");
    let f32s = |n: usize| (4 * n) as u64;

    let tokens: Vec<u32> = (0..ROWS as u32).map(|i| (i * 31) % VOCAB as u32).collect();
    let (wte, wpe) = (data(VOCAB * C, 1), data(T * C, 2));
    let mut x = vec![0.0f32; ROWS * C];
    g.throughput(Throughput::Bytes(f32s(3 * ROWS * C)));
    g.bench_function("encoder_forward", |b| {
        b.iter(|| cpu::encoder_forward(&mut x, &tokens, &wte, &wpe, T, C))
    });

    let inp = data(ROWS * C, 3);
    let (w, bias) = (data(C, 4), data(C, 5));
    let (mut out, mut mean, mut rstd) = (vec![0.0f32; ROWS * C], vec![0.0f32; ROWS], vec![0.0f32; ROWS]);
    g.throughput(Throughput::Bytes(f32s(2 * ROWS * C)));
    g.bench_function("layernorm_forward", |b| {
        b.iter(|| cpu::layernorm_forward(&mut out, &mut mean, &mut rstd, &inp, &w, &bias, C))
    });
    let dout = data(ROWS * C, 6);
    let (mut dinp, mut dw, mut db) = (vec![0.0f32; ROWS * C], vec![0.0f32; C], vec![0.0f32; C]);
    g.throughput(Throughput::Bytes(f32s(4 * ROWS * C)));
    g.bench_function("layernorm_backward", |b| {
        b.iter(|| cpu::layernorm_backward(&mut dinp, &mut dw, &mut db, &dout, &inp, &w, &mean, &rstd, C))
    });

    // The two projections add onto the residual stream as they are computed.
    let projections =
        [("qkv", C, 3 * C, false), ("proj", C, C, true), ("fc", C, 4 * C, false), ("fcproj", 4 * C, C, true)];
    for (name, ic, oc, onto_residual) in projections {
        let (inp, weight, bias) = (data(ROWS * ic, 7), data(oc * ic, 8), data(oc, 9));
        let dout = data(ROWS * oc, 10);
        let mut out = vec![0.0f32; ROWS * oc];
        let (mut dinp, mut dweight, mut dbias) =
            (vec![0.0f32; ROWS * ic], vec![0.0f32; oc * ic], vec![0.0f32; oc]);
        g.throughput(Throughput::Elements((2 * ROWS * ic * oc) as u64));
        if onto_residual {
            let residual = data(ROWS * oc, 18);
            g.bench_function(format!("matmul_residual_forward/{name}"), |b| {
                b.iter(|| {
                    cpu::matmul_residual_forward(&mut out, &inp, &weight, Some(&bias), &residual, ic, oc)
                })
            });
        } else {
            g.bench_function(format!("matmul_forward/{name}"), |b| {
                b.iter(|| cpu::matmul_forward(&mut out, &inp, &weight, Some(&bias), ic, oc))
            });
        }
        g.throughput(Throughput::Elements((4 * ROWS * ic * oc) as u64));
        g.bench_function(format!("matmul_backward/{name}"), |b| {
            b.iter(|| {
                cpu::matmul_backward(&mut dinp, &mut dweight, Some(&mut dbias), &dout, &inp, &weight, ic, oc)
            })
        });
    }

    // Causal attention: Q K^T and P V over the lower triangle (the tiles on the diagonal in
    // full), counted as half of the square products.
    let qkv = data(ROWS * 3 * C, 11);
    let (mut att, mut lse) = (vec![0.0f32; ROWS * C], vec![0.0f32; B * NH * T]);
    let causal_flops = (2 * B * T * T * C) as u64;
    g.throughput(Throughput::Elements(causal_flops));
    g.bench_function("attention_forward", |b| {
        b.iter(|| cpu::attention_forward(&mut att, &mut lse, &qkv, B, T, C, NH))
    });
    let datt = data(ROWS * C, 12);
    let mut dqkv = vec![0.0f32; ROWS * 3 * C];
    g.throughput(Throughput::Elements(2 * causal_flops));
    g.bench_function("attention_backward", |b| {
        b.iter(|| cpu::attention_backward(&mut dqkv, &datt, &qkv, &att, &lse, B, T, C, NH))
    });

    let pre = data(ROWS * 4 * C, 13);
    let mut act = vec![0.0f32; ROWS * 4 * C];
    g.throughput(Throughput::Bytes(f32s(2 * ROWS * 4 * C)));
    g.bench_function("gelu_forward", |b| b.iter(|| cpu::gelu_forward(&mut act, &pre)));
    // In place, so every run starts from a fresh gradient (repeated scaling would reach
    // subnormals); the copy is not timed.
    let dact = data(ROWS * 4 * C, 14);
    g.throughput(Throughput::Bytes(f32s(3 * ROWS * 4 * C)));
    g.bench_function("gelu_backward", |b| {
        b.iter_batched_ref(|| dact.clone(), |d| cpu::gelu_backward(d, &pre), BatchSize::LargeInput)
    });

    // Used where a collective sits between a projection and the residual add (tensor
    // parallelism); a single rank adds during the projection.
    let (ra, rb) = (data(ROWS * C, 15), data(ROWS * C, 16));
    let mut res = vec![0.0f32; ROWS * C];
    g.throughput(Throughput::Bytes(f32s(3 * ROWS * C)));
    g.bench_function("residual_forward", |b| b.iter(|| cpu::residual_forward(&mut res, &ra, &rb)));

    let targets: Vec<u32> = (0..ROWS as u32).map(|i| (i * 17) % VOCAB as u32).collect();
    let logits0 = data(ROWS * VOCAB, 17);
    let (mut logits, mut losses) = (logits0.clone(), vec![0.0f32; ROWS]);
    g.throughput(Throughput::Bytes(f32s(2 * ROWS * VOCAB)));
    g.bench_function("softmax_cross_entropy", |b| {
        b.iter(|| {
            logits.copy_from_slice(&logits0);
            cpu::softmax_cross_entropy(
                &mut logits,
                &mut losses,
                &targets,
                VOCAB,
                VOCAB,
                Some(1.0 / ROWS as f32),
            )
        })
    });

    // One layer's parameters (12 C^2 + 13 C), as AdamW sees them once per step.
    let n = 12 * C * C + 13 * C;
    let (mut p, grads, mut m, mut v) = (data(n, 18), data(n, 19), vec![0.0f32; n], vec![0.0f32; n]);
    let hp = AdamWParams {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
        grad_scale: 1.0,
        step: 1,
    };
    g.throughput(Throughput::Bytes(f32s(7 * n)));
    g.bench_function("adamw_update", |b| b.iter(|| cpu::adamw_update(&mut p, &grads, &mut m, &mut v, &hp)));
    g.finish();
}

/// The benchmark group, in a private module: `criterion_group!` defines an undocumented
/// `pub fn`.
mod group {
    use super::*;
    criterion_group!(benches, ops);
}
use group::benches;

criterion_main!(benches);
