//! Whole-model checks: gradients against finite differences, gradient accumulation, learning,
//! and refusal of bad inputs.

use trident_runtime::Device;

use super::*;
use crate::ops::OpsContext;
use crate::optim::{AdamW, AdamWConfig};
use crate::parallel::TpGroup;

/// One micro-batch's pass state of a whole model on one rank.
struct Pass {
    tp: TpGroup,
    ws: Workspace,
    acts: MicroActs,
}

impl Pass {
    fn new(model: &Gpt, b: usize, t: usize) -> Pass {
        let ws = Workspace::new(&Device::Cpu, model, b, t).unwrap();
        let acts = MicroActs::new(&Device::Cpu, model, &ws).unwrap();
        Pass { tp: TpGroup::single(), ws, acts }
    }

    /// The forward pass; with targets the mean loss, with `dloss` the logits' gradient too.
    fn forward(
        &mut self,
        model: &Gpt,
        ctx: &OpsContext,
        x: &[u32],
        y: Option<&[u32]>,
        dloss: Option<f32>,
    ) -> Result<Option<f32>, ModelError> {
        model.embed(ctx, &mut self.tp, &mut self.ws, &mut self.acts, x)?;
        model.forward(ctx, &mut self.tp, &mut self.ws, &mut self.acts, y, dloss)
    }

    fn backward(&mut self, model: &mut Gpt, ctx: &OpsContext) -> Result<(), ModelError> {
        model.backward(ctx, &mut self.tp, &mut self.ws, &mut self.acts, None, &mut |_, _| Ok(()))
    }

    fn logits_at(&self, model: &Gpt, row: usize, pos: usize) -> Vec<f32> {
        model.logits_at(&self.ws, &self.acts, row, pos).unwrap()
    }
}

/// One AdamW step over every parameter of a whole model.
fn adamw_step(model: &mut Gpt, ctx: &OpsContext, opt: &mut AdamW, lr: f32) {
    let (params, grads) = model.params_and_grads();
    opt.step(ctx, params, grads, 0, lr, 1.0).unwrap();
}

fn adamw(model: &Gpt) -> AdamW {
    let layout = model.layout();
    AdamW::new(&Device::Cpu, layout, 0..layout.len(), AdamWConfig::default()).unwrap()
}

fn tiny() -> GptConfig {
    GptConfig::new(6, 11, 2, 2, 8, 16).unwrap()
}

fn tokens(seed: u64, n: usize, vocab: usize) -> Vec<u32> {
    let mut r = init::NormalRng::new(seed);
    (0..n).map(|_| (r.next_u64() % vocab as u64) as u32).collect()
}

fn loss_of(model: &Gpt, ctx: &OpsContext, x: &[u32], y: &[u32], b: usize, t: usize) -> f32 {
    Pass::new(model, b, t).forward(model, ctx, x, Some(y), None).unwrap().unwrap()
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
    let mut pass = Pass::new(&model, b, t);
    let (x, y) = (tokens(seed, b * t, cfg.vocab_size), tokens(seed + 2, b * t, cfg.vocab_size));
    pass.forward(&model, &ctx, &x, Some(&y), Some(1.0 / (b * t) as f32)).unwrap();
    pass.backward(&mut model, &ctx).unwrap();
    let grads = model.to_param_layout(model.grads()).unwrap();

    let h = 1e-3f32;
    let mut pairs = vec![];
    for tensor in ParamTensor::ALL {
        let range = layout.range(tensor);
        let len = if tensor == ParamTensor::Wte { cfg.vocab_size * cfg.channels } else { range.len() };
        for k in 0..6 {
            let i = range.start + (r.next_u64() as usize + k) % len;
            let mut p = params.clone();
            p[i] = params[i] + h;
            let up = loss_of(&Gpt::from_params(&Device::Cpu, cfg, &p).unwrap(), &ctx, &x, &y, b, t);
            p[i] = params[i] - h;
            let down = loss_of(&Gpt::from_params(&Device::Cpu, cfg, &p).unwrap(), &ctx, &x, &y, b, t);
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
        let mut model = Gpt::init(&Device::Cpu, cfg, seed).unwrap();
        let mb = 2 * b / micro;
        let mut pass = Pass::new(&model, mb, t);
        model.zero_grads().unwrap();
        for m in 0..micro {
            let part = m * mb * t..(m + 1) * mb * t;
            pass.forward(&model, &ctx, &x[part.clone()], Some(&y[part]), Some(1.0 / (2 * b * t) as f32))
                .unwrap();
            pass.backward(&mut model, &ctx).unwrap();
        }
        let grads = model.grads().to_vec().unwrap();
        let mut opt = adamw(&model);
        adamw_step(&mut model, &ctx, &mut opt, 1e-3);
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
    let mut model = Gpt::init(&Device::Cpu, cfg, seed).unwrap();
    let mut pass = Pass::new(&model, b, t);
    let mut opt = adamw(&model);
    // Each row counts up by a row-specific stride: the next token is a function of the last two.
    let seq = |row: usize, i: usize| ((row * 3 + 1) * i + row) as u32 % 16;
    let x: Vec<u32> = (0..b * t).map(|k| seq(k / t, k % t)).collect();
    let y: Vec<u32> = (0..b * t).map(|k| seq(k / t, k % t + 1)).collect();
    let mut losses = vec![];
    for _ in 0..40 {
        model.zero_grads().unwrap();
        losses.push(pass.forward(&model, &ctx, &x, Some(&y), Some(1.0 / (b * t) as f32)).unwrap().unwrap());
        pass.backward(&mut model, &ctx).unwrap();
        adamw_step(&mut model, &ctx, &mut opt, 1e-2);
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!((first - (16f32).ln()).abs() < 0.3, "initial loss {first} should be near ln(16)");
    assert!(last < 0.3 * first, "loss fell only from {first} to {last}: {losses:?}");
}

#[test]
fn bad_inputs_are_refused() {
    let cfg = tiny();
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let mut model = Gpt::init(&Device::Cpu, cfg, 25).unwrap();
    assert!(matches!(
        Workspace::new(&Device::Cpu, &model, 1, 7),
        Err(ModelError::SeqTooLong { seq: 7, max: 6 })
    ));
    assert!(matches!(Workspace::new(&Device::Cpu, &model, 0, 4), Err(ModelError::EmptyBatch { .. })));
    let mut pass = Pass::new(&model, 1, 4);
    let err = pass.forward(&model, &ctx, &[1, 2, 11, 3], None, None).unwrap_err();
    assert!(err.to_string().contains("token 11"), "{err}");
    let short = pass.forward(&model, &ctx, &[1, 2], None, None);
    assert!(matches!(short, Err(ModelError::TokenCount { .. })), "{short:?}");
    pass.forward(&model, &ctx, &[1, 2, 3, 4], None, None).unwrap();
    assert!(matches!(pass.backward(&mut model, &ctx), Err(ModelError::NoLossGradient)));
    let few_targets = pass.forward(&model, &ctx, &[1, 2, 3, 4], Some(&[1, 2]), Some(0.25));
    assert!(matches!(few_targets, Err(ModelError::TokenCount { .. })), "{few_targets:?}");
    let err = pass.forward(&model, &ctx, &[1, 2, 3, 4], Some(&[1, 2, 3, 99]), Some(0.25)).unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
    let grads = model.num_params() - 1;
    let mut wrong = trident_runtime::Buffer::zeros(&Device::Cpu, grads).unwrap();
    let Pass { tp, ws, acts } = &mut pass;
    let err = model.backward_into(&ctx, tp, ws, acts, None, &mut wrong, &mut |_, _| Ok(())).unwrap_err();
    assert!(matches!(err, ModelError::ParamCount { .. }), "{err}");
}

#[test]
fn logits_depend_only_on_earlier_tokens() {
    let cfg = GptConfig::new(70, 11, 2, 2, 8, 16).unwrap();
    let ctx = OpsContext::new(&Device::Cpu).unwrap();
    let model = Gpt::init(&Device::Cpu, cfg, 26).unwrap();
    let t = 70; // two attention tiles
    let x = tokens(26, t, cfg.vocab_size);
    let mut y = x.clone();
    y[40] = (y[40] + 1) % cfg.vocab_size as u32;
    let mut pass = Pass::new(&model, 1, t);
    pass.forward(&model, &ctx, &x, None, None).unwrap();
    let before: Vec<Vec<f32>> = (0..t).map(|p| pass.logits_at(&model, 0, p)).collect();
    pass.forward(&model, &ctx, &y, None, None).unwrap();
    for (p, want) in before.iter().enumerate() {
        let got = pass.logits_at(&model, 0, p);
        if p < 40 {
            assert_eq!(&got, want, "position {p} saw the change at position 40");
        } else {
            assert_ne!(&got, want, "position {p} ignored the change at position 40");
        }
    }
    // A shorter pass over the first tokens gives the same logits (what sampling relies on).
    let mut short = Pass::new(&model, 1, 30);
    short.forward(&model, &ctx, &x[..30], None, None).unwrap();
    let (got, want) = (short.logits_at(&model, 0, 29), &before[29]);
    // The same sums over a different number of rows: equal to rounding.
    assert!(got.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-6), "{got:?} vs {want:?}");
}
