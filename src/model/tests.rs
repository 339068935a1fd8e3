//! Whole-model checks: gradients against finite differences, gradient accumulation, learning,
//! and refusal of bad inputs.

use trident_runtime::Device;

use super::*;
use crate::ops::OpsContext;
use crate::optim::{AdamW, AdamWConfig};

fn tiny() -> GptConfig {
    GptConfig::new(6, 11, 2, 2, 8, 16).unwrap()
}

fn tokens(seed: u64, n: usize, vocab: usize) -> Vec<u32> {
    let mut r = init::NormalRng::new(seed);
    (0..n).map(|_| (r.next_u64() % vocab as u64) as u32).collect()
}

fn loss_of(
    model: &Gpt,
    ctx: &OpsContext,
    ws: &mut Workspace,
    x: &[u32],
    y: &[u32],
    b: usize,
    t: usize,
) -> f32 {
    model.forward(ctx, ws, x, b, t).unwrap();
    model.loss(ctx, ws, y, None).unwrap()
}

#[test]
fn gradients_match_finite_differences() {
    let seed = 21;
    let (cfg, b, t) = (tiny(), 2, 5);
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    // Perturb the init so that biases and LayerNorm parameters are not at special values.
    let layout = ParamLayout::new(cfg);
    let mut params = gpt2_init(&layout, seed);
    let mut r = init::NormalRng::new(seed + 1);
    params.iter_mut().for_each(|p| *p += 0.05 * r.next_normal() as f32);
    let mut model = Gpt::from_params(&Device::Cpu, cfg, &params).unwrap();
    let mut ws = Workspace::new(&Device::Cpu, &cfg, b, t, true).unwrap();
    let (x, y) = (tokens(seed, b * t, cfg.vocab_size), tokens(seed + 2, b * t, cfg.vocab_size));
    model.forward(&ctx, &mut ws, &x, b, t).unwrap();
    model.loss(&ctx, &mut ws, &y, Some(1.0 / (b * t) as f32)).unwrap();
    model.backward(&ctx, &mut ws).unwrap();
    let grads = model.grads().to_vec().unwrap();

    let h = 1e-3f32;
    let mut pairs = vec![];
    for tensor in ParamTensor::ALL {
        let range = layout.range(tensor);
        let len = if tensor == ParamTensor::Wte { cfg.vocab_size * cfg.channels } else { range.len() };
        for k in 0..6 {
            let i = range.start + (r.next_u64() as usize + k) % len;
            let mut p = params.clone();
            p[i] = params[i] + h;
            let up = loss_of(&Gpt::from_params(&Device::Cpu, cfg, &p).unwrap(), &ctx, &mut ws, &x, &y, b, t);
            p[i] = params[i] - h;
            let down =
                loss_of(&Gpt::from_params(&Device::Cpu, cfg, &p).unwrap(), &ctx, &mut ws, &x, &y, b, t);
            pairs.push((tensor, i, grads[i], (up - down) as f64 / (2.0 * h as f64)));
        }
    }
    let scale = pairs.iter().map(|p| p.3.abs()).fold(0.0, f64::max);
    assert!(scale > 1e-3, "gradients are not all tiny");
    for (tensor, i, analytic, numeric) in pairs {
        let err = (analytic as f64 - numeric).abs();
        assert!(
            err <= 2e-3 * scale + 2e-2 * numeric.abs(),
            "{tensor:?}[{i}]: backward {analytic:.6e}, finite differences {numeric:.6e} (seed {seed})"
        );
    }
}

#[test]
fn two_micro_batches_equal_one_double_batch() {
    let seed = 22;
    let cfg = GptConfig::new(16, 30, 2, 2, 16, 32).unwrap();
    let (b, t) = (2, 12);
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let x = tokens(seed, 2 * b * t, cfg.vocab_size);
    let y = tokens(seed + 1, 2 * b * t, cfg.vocab_size);
    let run = |micro: usize| {
        let mut model = Gpt::new(&Device::Cpu, cfg, seed).unwrap();
        let mb = 2 * b / micro;
        let mut ws = Workspace::new(&Device::Cpu, &cfg, mb, t, true).unwrap();
        model.zero_grads().unwrap();
        for m in 0..micro {
            let part = m * mb * t..(m + 1) * mb * t;
            model.forward(&ctx, &mut ws, &x[part.clone()], mb, t).unwrap();
            model.loss(&ctx, &mut ws, &y[part], Some(1.0 / (2 * b * t) as f32)).unwrap();
            model.backward(&ctx, &mut ws).unwrap();
        }
        let grads = model.grads().to_vec().unwrap();
        let mut opt = AdamW::new(&Device::Cpu, model.num_params(), AdamWConfig::default()).unwrap();
        opt.step(&ctx, &mut model, 1e-3, 1.0).unwrap();
        (grads, model.params().to_vec().unwrap())
    };
    let (g2, p2) = run(2);
    let (g1, p1) = run(1);
    let scale = g1.iter().map(|g| g.abs()).fold(0.0f32, f32::max);
    let diff = g1.iter().zip(&g2).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(diff <= 1e-5 * scale, "gradients differ by {diff:.3e} (largest {scale:.3e}; seed {seed})");
    let pdiff = p1.iter().zip(&p2).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    // Adam normalises each update to ~lr, so tiny gradient differences may move a parameter by
    // a fraction of lr; anything near lr itself would be a real mismatch.
    assert!(pdiff < 1e-4, "parameters after one step differ by {pdiff:.3e} (seed {seed})");
}

#[test]
fn loss_falls_on_a_learnable_sequence() {
    let seed = 23;
    let cfg = GptConfig::new(16, 16, 2, 2, 32, 16).unwrap();
    let (b, t) = (4, 16);
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let mut model = Gpt::new(&Device::Cpu, cfg, seed).unwrap();
    let mut ws = Workspace::new(&Device::Cpu, &cfg, b, t, true).unwrap();
    let mut opt = AdamW::new(&Device::Cpu, model.num_params(), AdamWConfig::default()).unwrap();
    // Each row counts up by a row-specific stride: the next token is a function of the last two.
    let seq = |row: usize, i: usize| ((row * 3 + 1) * i + row) as u32 % 16;
    let x: Vec<u32> = (0..b * t).map(|k| seq(k / t, k % t)).collect();
    let y: Vec<u32> = (0..b * t).map(|k| seq(k / t, k % t + 1)).collect();
    let mut losses = vec![];
    for _ in 0..40 {
        model.zero_grads().unwrap();
        model.forward(&ctx, &mut ws, &x, b, t).unwrap();
        losses.push(model.loss(&ctx, &mut ws, &y, Some(1.0 / (b * t) as f32)).unwrap());
        model.backward(&ctx, &mut ws).unwrap();
        opt.step(&ctx, &mut model, 1e-2, 1.0).unwrap();
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!((first - (16f32).ln()).abs() < 0.3, "initial loss {first} should be near ln(16)");
    assert!(last < 0.3 * first, "loss fell only from {first} to {last}: {losses:?}");
}

#[test]
fn shorter_passes_reuse_a_larger_workspace() {
    let cfg = tiny();
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let model = Gpt::new(&Device::Cpu, cfg, 24).unwrap();
    let x = tokens(24, 3, cfg.vocab_size);
    let mut big = Workspace::new(&Device::Cpu, &cfg, 2, 6, false).unwrap();
    let mut exact = Workspace::new(&Device::Cpu, &cfg, 1, 3, false).unwrap();
    model.forward(&ctx, &mut big, &x, 1, 3).unwrap();
    model.forward(&ctx, &mut exact, &x, 1, 3).unwrap();
    assert_eq!(model.logits_at(&big, 0, 2).unwrap(), model.logits_at(&exact, 0, 2).unwrap());
}

#[test]
fn bad_inputs_are_refused() {
    let cfg = tiny();
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let mut model = Gpt::new(&Device::Cpu, cfg, 25).unwrap();
    assert!(matches!(
        Workspace::new(&Device::Cpu, &cfg, 1, 7, true),
        Err(ModelError::SeqTooLong { seq: 7, max: 6 })
    ));
    let mut ws = Workspace::new(&Device::Cpu, &cfg, 1, 4, true).unwrap();
    let err = model.forward(&ctx, &mut ws, &[1, 2, 11, 3], 1, 4).unwrap_err();
    assert!(err.to_string().contains("token 11"), "{err}");
    assert!(matches!(model.forward(&ctx, &mut ws, &[1, 2], 1, 4), Err(ModelError::TokenCount { .. })));
    assert!(matches!(model.forward(&ctx, &mut ws, &[0; 10], 2, 5), Err(ModelError::BatchTooLarge { .. })));
    model.forward(&ctx, &mut ws, &[1, 2, 3, 4], 1, 4).unwrap();
    assert!(matches!(model.backward(&ctx, &mut ws), Err(ModelError::NoLossGradient)));
    let err = model.loss(&ctx, &mut ws, &[1, 2, 3, 99], Some(0.25)).unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
}

#[test]
fn logits_depend_only_on_earlier_tokens() {
    let cfg = GptConfig::new(70, 11, 2, 2, 8, 16).unwrap();
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let model = Gpt::new(&Device::Cpu, cfg, 26).unwrap();
    let t = 70; // two attention tiles
    let x = tokens(26, t, cfg.vocab_size);
    let mut y = x.clone();
    y[40] = (y[40] + 1) % cfg.vocab_size as u32;
    let mut ws = Workspace::new(&Device::Cpu, &cfg, 1, t, false).unwrap();
    model.forward(&ctx, &mut ws, &x, 1, t).unwrap();
    let before: Vec<Vec<f32>> = (0..t).map(|p| model.logits_at(&ws, 0, p).unwrap()).collect();
    model.forward(&ctx, &mut ws, &y, 1, t).unwrap();
    for (p, want) in before.iter().enumerate() {
        let got = model.logits_at(&ws, 0, p).unwrap();
        if p < 40 {
            assert_eq!(&got, want, "position {p} saw the change at position 40");
        } else {
            assert_ne!(&got, want, "position {p} ignored the change at position 40");
        }
    }
}
