//! Training on every device: the same small GPT, data and seed give the same per-step losses
//! on `Emu` (the GPU kernels, emulated) as on `Cpu` (the CPU ops), and the loss falls on each.

mod common;

use trident::data::{AdditionTask, Batch, DataError, DataLoader, Dataset};
use trident::model::{gpt2_init, GptConfig, ParamLayout};
use trident::optim::AdamWConfig;
use trident::runtime::Device;
use trident::train::{BatchSource, DecayStyle, LrSchedule, TrainSettings, Trainer};

const STEPS: usize = 6;

/// One batch, over and over: the loss on it must fall fast.
struct Repeat(Batch);

impl BatchSource for Repeat {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        Ok(self.0.clone())
    }
}

/// Per-step losses of a small GPT on the addition data; `repeat` trains on one batch only.
fn losses(device: &Device, seed: u64, repeat: bool) -> Vec<f32> {
    let task = AdditionTask::new(2).unwrap();
    let (b, t) = (4, 24);
    let data = Dataset::addition(task, 2000, 100, seed, t).unwrap();
    let mut loader = DataLoader::new(data.train.clone(), b, t, seed, true).unwrap();
    let mut source: Box<dyn BatchSource> =
        if repeat { Box::new(Repeat(loader.next_batch().unwrap())) } else { Box::new(loader) };
    let config = GptConfig::new(t, data.vocab_size(), 2, 4, 32, 16).unwrap();
    let init = gpt2_init(&ParamLayout::new(config), seed);
    let settings = TrainSettings {
        micro_batch: b,
        global_batch: 2 * b,
        seq_len: t,
        schedule: LrSchedule {
            max_lr: 1e-2,
            min_lr: 1e-3,
            warmup_iters: 1,
            decay_iters: STEPS as u64,
            style: DecayStyle::Cosine,
        },
        adamw: AdamWConfig::default(),
        clip_grad: 1.0,
    };
    let mut trainer = Trainer::single(device, config, &init, settings).unwrap();
    (0..STEPS).map(|_| trainer.step(source.as_mut()).unwrap().loss).collect()
}

fn loss_falls(device: &Device) {
    let l = losses(device, 3, true);
    assert!(l.iter().all(|x| x.is_finite()), "{l:?}");
    assert!(l[STEPS - 1] < 0.8 * l[0], "loss on a repeated batch did not fall on {}: {l:?}", device.kind());
}

device_tests!(loss_falls);

#[test]
fn emu_matches_cpu_step_for_step() {
    let seed = 11;
    let cpu = losses(&Device::Cpu, seed, false);
    let emu = losses(&Device::Emu, seed, false);
    for (i, (c, e)) in cpu.iter().zip(&emu).enumerate() {
        let rel = ((c - e) / c).abs();
        assert!(rel <= 1e-4, "step {i}: cpu loss {c}, emu loss {e} (relative difference {rel:.2e})");
    }
}
