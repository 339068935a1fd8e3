//! What llm.c's `train_gpt2.c` trains with. Its `main` fixes these: 41 steps (0 to 40) of
//! AdamW (lr 1e-4, betas 0.9 and 0.999, eps 1e-8, no weight decay) on batches of 4 x 64 tokens,
//! constant learning rate, no clipping, the mean cross-entropy over all `B x T` positions; every
//! 10 steps, before that step's update, the mean of 5 validation batches read from the start.

use crate::optim::AdamWConfig;
use crate::train::{DecayStyle, LrSchedule, TrainSettings};

/// Sequences per batch (`B`).
pub const REFERENCE_BATCH: usize = 4;
/// Tokens per sequence (`T`).
pub const REFERENCE_SEQ_LEN: usize = 64;
/// Steps 0 to 40.
pub const REFERENCE_STEPS: u64 = 41;
/// Steps between validations.
pub const REFERENCE_EVAL_INTERVAL: u64 = 10;
/// Validation batches averaged.
pub const REFERENCE_EVAL_BATCHES: usize = 5;

/// The reference trainer's optimisation as Trident's settings (use with
/// [`DataOrder::Llmc`](trident_data::DataOrder::Llmc) for its batch order).
pub fn reference_settings() -> TrainSettings {
    let lr = 1e-4;
    TrainSettings {
        micro_batch: REFERENCE_BATCH,
        global_batch: REFERENCE_BATCH,
        seq_len: REFERENCE_SEQ_LEN,
        lr_schedule: LrSchedule {
            max_lr: lr,
            min_lr: lr,
            warmup_iters: 0,
            decay_iters: REFERENCE_STEPS,
            style: DecayStyle::Constant,
        },
        adamw: AdamWConfig { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        clip_grad: 0.0,
        precision: Default::default(),
        loss_scale: Default::default(),
    }
}
