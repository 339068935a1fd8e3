//! The step prediction's launch list (`trident_bench::step`) against the trainer: for small
//! models under `--bf16` on `Emu`, one real optimizer step of `train::Trainer` records its
//! launches, and the list, each entry counted at its shapes and repeated its count, must make
//! the same launches — kernel, grid size, block size and shared memory, as many times each.
//! Then the prediction is a sum over the trainer's own launches, and a change of the trainer's
//! launches fails here until the list follows.

use std::collections::BTreeMap;

use trident::data::{Batch, DataError};
use trident::model::{gpt2_init, GptConfig, ParamLayout, Precision};
use trident::optim::AdamWConfig;
use trident::train::{BatchSource, DecayStyle, LrSchedule, TrainSettings, Trainer};
use trident_bench::step::{predict_step, step_launches, StepShape};
use trident_bench::Bench;
use trident_perfmodel::{Target, Workload};
use trident_runtime::Device;

/// Sequences of `b x t` tokens below `vocab`.
struct Tokens {
    b: usize,
    t: usize,
    vocab: u32,
    next: u32,
}

impl BatchSource for Tokens {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        let n = self.b * self.t;
        let at = |k: u32| (k * 7 + 3) % self.vocab;
        let inputs = (0..n as u32).map(|k| at(k + self.next)).collect();
        let targets = (0..n as u32).map(|k| at(k + self.next + 1)).collect();
        self.next += 1;
        Ok(Batch { batch_size: self.b, seq_len: self.t, inputs, targets })
    }
}

/// A launch as the comparison sees it: kernel, blocks, threads per block, shared memory.
type Key = (String, u64, u32, u32);

fn key(w: &Workload) -> Key {
    (w.kernel.clone(), w.blocks, w.threads_per_block, w.smem_per_block)
}

fn tally(keys: impl IntoIterator<Item = Key>) -> BTreeMap<Key, u64> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

/// The launches of the trainer's second bf16 step of `shape` on `Emu` (the first may differ
/// in set-up work).
fn trainer_launches(shape: &StepShape) -> BTreeMap<Key, u64> {
    let cfg = shape.config;
    let init = gpt2_init(&ParamLayout::new(cfg), 7);
    let settings = TrainSettings {
        micro_batch: shape.micro_batch,
        global_batch: shape.micro_batch * shape.micro_batches,
        seq_len: shape.seq_len,
        lr_schedule: LrSchedule {
            max_lr: 1e-3,
            min_lr: 0.0,
            warmup_iters: 0,
            decay_iters: 10,
            style: DecayStyle::Constant,
        },
        adamw: AdamWConfig::default(),
        clip_grad: 1.0,
        precision: Precision::Bf16,
        loss_scale: Default::default(),
    };
    let mut trainer = Trainer::single(&Device::Emu, cfg, &init, settings).unwrap();
    let mut data = Tokens { b: shape.micro_batch, t: shape.seq_len, vocab: cfg.vocab_size as u32, next: 0 };
    trainer.step(&mut data).unwrap();
    let (stats, log) = trident_runtime::record_launches(|| trainer.step(&mut data).unwrap());
    assert!(stats.loss.is_finite());
    tally(log.iter().map(|s| key(&Workload::from_stats(s))))
}

/// The launches `step_launches` lists for `shape`, counted on `Emu`.
fn listed_launches(bench: &Bench, shape: &StepShape) -> BTreeMap<Key, u64> {
    let mut all = Vec::new();
    for entry in step_launches(shape) {
        let works = entry.op.count(bench).unwrap_or_else(|e| panic!("{}: {e:#}", entry.name));
        for w in &works {
            all.extend(std::iter::repeat_n(key(w), entry.count as usize));
        }
    }
    tally(all)
}

fn assert_same(shape: &StepShape, what: &str) {
    let bench = Bench::load(&Device::Emu).unwrap();
    let (trainer, listed) = (trainer_launches(shape), listed_launches(&bench, shape));
    let mut diff = Vec::new();
    for k in trainer.keys().chain(listed.keys()) {
        let (a, b) = (trainer.get(k).copied().unwrap_or(0), listed.get(k).copied().unwrap_or(0));
        if a != b && !diff.iter().any(|(d, _, _): &(Key, u64, u64)| d == k) {
            diff.push((k.clone(), a, b));
        }
    }
    assert!(
        diff.is_empty(),
        "{what}: launches (kernel, blocks, threads, shared bytes) the trainer made / the list has:\n{}",
        diff.iter().map(|(k, a, b)| format!("  {k:?}: {a} / {b}")).collect::<Vec<_>>().join("\n")
    );
    let total: u64 = trainer.values().sum();
    assert!(total > 30, "{what}: only {total} launches");
}

#[test]
fn the_step_list_makes_the_trainers_launches_one_layer() {
    // One layer of one 64-wide head (flash attention's head size), 16 positions.
    let config = GptConfig::new(16, 40, 1, 1, 64, 64).unwrap();
    assert_same(&StepShape { config, micro_batch: 2, seq_len: 16, micro_batches: 1 }, "1 layer");
}

#[test]
fn the_step_list_makes_the_trainers_launches_with_layers_and_accumulation() {
    // Two layers, two heads of 64, a vocabulary that pads, two micro-batches a step.
    let config = GptConfig::new(32, 70, 2, 2, 128, 64).unwrap();
    assert_same(
        &StepShape { config, micro_batch: 1, seq_len: 32, micro_batches: 2 },
        "2 layers, 2 micro-batches",
    );
}

#[test]
fn a_step_prediction_sums_its_entries() {
    let config = GptConfig::new(16, 40, 1, 1, 64, 64).unwrap();
    let shape = StepShape { config, micro_batch: 2, seq_len: 16, micro_batches: 1 };
    let bench = Bench::load(&Device::Emu).unwrap();
    let target = Target::named("h100").unwrap();
    let p = predict_step(&bench, &target, &shape).unwrap();
    let sum: f64 = p.rows.iter().map(|r| r.seconds * r.count as f64).sum();
    assert!((p.seconds - sum).abs() <= 1e-12 * sum, "{} vs {sum}", p.seconds);
    let launches: u64 = p.rows.iter().map(|r| r.kernels.len() as u64 * r.count).sum();
    assert_eq!(p.launches, launches);
    assert_eq!(p.launches, trainer_launches(&shape).values().sum::<u64>());
    let peak = target.gpu.bf16_tflops.unwrap() * 1e12;
    assert!((p.mfu - shape.model_flops() / p.seconds / peak).abs() < 1e-12);
    // A shape the list does not mirror (32-wide heads run the f32 attention) is refused.
    let config = GptConfig::new(16, 40, 1, 2, 64, 64).unwrap();
    let other = StepShape { config, ..shape };
    let err = predict_step(&bench, &target, &other).unwrap_err().to_string();
    assert!(err.contains("head size 32"), "{err}");
}
