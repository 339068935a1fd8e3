//! The single rank's trainer: row shares ("lanes") on the Cpu train like the whole batch and
//! deterministically; bad batches are refused without leaving anything behind.

use trident_runtime::Device;

use crate::model::init::NormalRng;
use crate::model::{gpt2_init, GptConfig, ParamLayout};
use crate::optim::AdamWConfig;
use crate::train::{BatchSource, DecayStyle, LrSchedule, TrainError, TrainSettings, Trainer};
use trident_data::{Batch, DataError};

/// Seeded random tokens: every source made with the same seed serves the same batches.
struct RandomTokens {
    rng: NormalRng,
    vocab: u64,
    b: usize,
    t: usize,
}

impl BatchSource for RandomTokens {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        let mut draw = || (0..self.b * self.t).map(|_| (self.rng.next_u64() % self.vocab) as u32).collect();
        let (inputs, targets) = (draw(), draw());
        Ok(Batch { batch_size: self.b, seq_len: self.t, inputs, targets })
    }
}

const SEED: u64 = 11;
const B: usize = 6;
const T: usize = 16;

/// A Cpu trainer over `micro_batches` micro-batches of B x T a step, with `shares` row shares,
/// its learning rate decaying over `iters` steps.
fn trainer(shares: usize, micro_batches: usize, config: GptConfig, iters: u64) -> Trainer {
    let init = gpt2_init(&ParamLayout::new(config), SEED);
    let settings = TrainSettings {
        micro_batch: B,
        global_batch: micro_batches * B,
        seq_len: T,
        lr_schedule: LrSchedule {
            max_lr: 3e-3,
            min_lr: 0.0,
            warmup_iters: 0,
            decay_iters: iters,
            style: DecayStyle::Cosine,
        },
        adamw: AdamWConfig::default(),
        clip_grad: 1.0,
        precision: Default::default(),
        loss_scale: Default::default(),
    };
    Trainer::single_with_lanes(&Device::Cpu, config, &init, settings, shares).unwrap()
}

/// Losses of four steps (two micro-batches each) and the final parameters, with each
/// micro-batch split into `shares` shares of rows.
fn train(shares: usize) -> (Vec<f32>, f32, Vec<f32>) {
    let mut trainer = trainer(shares, 2, GptConfig::new(32, 50, 2, 4, 64, 16).unwrap(), 4);
    let mut data = RandomTokens { rng: NormalRng::new(SEED), vocab: 50, b: B, t: T };
    let losses = (0..4).map(|_| trainer.step(&mut data).unwrap().loss).collect();
    let val = trainer.evaluate(&mut data, 2).unwrap();
    (losses, val, trainer.model.params().to_vec().unwrap())
}

#[test]
fn row_shares_train_like_the_whole_batch() {
    let (whole, whole_val, whole_params) = train(1);
    for shares in [2, 4] {
        let (split, split_val, split_params) = train(shares);
        // Only the order of the gradient sums differs.
        for (step, (a, b)) in whole.iter().zip(&split).enumerate() {
            let rel = ((a - b) / a).abs();
            assert!(rel < 1e-5, "{shares} shares, step {step}: loss {b} vs {a} (seed {SEED})");
        }
        assert!(
            ((whole_val - split_val) / whole_val).abs() < 1e-5,
            "{shares} shares: validation {split_val} vs {whole_val}"
        );
        let scale = whole_params.iter().fold(0f32, |m, x| m.max(x.abs()));
        let worst = whole_params.iter().zip(&split_params).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst < 1e-4 * scale, "{shares} shares: parameters differ by {worst} (largest {scale})");
    }
}

#[test]
fn row_shares_are_deterministic() {
    let (a, a_val, a_params) = train(3);
    let (b, b_val, b_params) = train(3);
    assert_eq!(a, b);
    assert_eq!(a_val.to_bits(), b_val.to_bits());
    assert!(
        a_params.iter().zip(&b_params).all(|(x, y)| x.to_bits() == y.to_bits()),
        "parameters differ between runs"
    );
}

/// Serves batches whose targets are one token short.
struct ShortTargets(RandomTokens);

impl BatchSource for ShortTargets {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        let mut batch = self.0.next_batch()?;
        batch.targets.pop();
        Ok(batch)
    }
}

#[test]
fn a_batch_with_missing_targets_is_refused() {
    for shares in [1, 2] {
        let mut trainer = trainer(shares, 1, GptConfig::new(32, 50, 1, 2, 32, 16).unwrap(), 1);
        let mut data = ShortTargets(RandomTokens { rng: NormalRng::new(SEED), vocab: 50, b: B, t: T });
        let err = trainer.step(&mut data).unwrap_err();
        assert!(matches!(err, TrainError::BatchShape { .. }), "{shares} shares: {err}");
    }
}

/// Serves `good` batches, then batches whose targets are one token short.
struct FailsAfter {
    good: usize,
    data: RandomTokens,
}

impl BatchSource for FailsAfter {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        let mut batch = self.data.next_batch()?;
        match self.good {
            0 => drop(batch.targets.pop()),
            _ => self.good -= 1,
        }
        Ok(batch)
    }
}

#[test]
fn a_step_that_fails_midway_leaves_no_gradient_behind() {
    let config = GptConfig::new(32, 50, 1, 2, 32, 16).unwrap();
    // The first micro-batch's backward pass has added into every share when the second fails.
    let mut recovered = trainer(2, 2, config, 2);
    let mut broken =
        FailsAfter { good: 1, data: RandomTokens { rng: NormalRng::new(SEED + 1), vocab: 50, b: B, t: T } };
    let err = recovered.step(&mut broken).unwrap_err();
    assert!(matches!(err, TrainError::BatchShape { .. }), "{err}");
    let mut fresh = trainer(2, 2, config, 2);
    let run = |trainer: &mut Trainer| {
        let mut data = RandomTokens { rng: NormalRng::new(SEED), vocab: 50, b: B, t: T };
        let stats: Vec<_> = (0..2)
            .map(|_| trainer.step(&mut data).map(|s| (s.loss.to_bits(), s.grad_norm.to_bits())).unwrap())
            .collect();
        (stats, trainer.model.params().to_vec().unwrap())
    };
    let (got, got_params) = run(&mut recovered);
    let (want, want_params) = run(&mut fresh);
    assert_eq!(got, want, "losses and gradient norms (as bits) after a failed step");
    assert!(
        got_params.iter().zip(&want_params).all(|(a, b)| a.to_bits() == b.to_bits()),
        "parameters differ"
    );
}
