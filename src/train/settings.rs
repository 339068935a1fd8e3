//! What a step is given and what it reports: the optimisation settings, the source of
//! batches, and the step's statistics.

use super::{LossScaleConfig, LrSchedule, TrainError};
use crate::model::Precision;
use crate::optim::AdamWConfig;
use trident_data::{Batch, DataError, DataLoader};

/// Where batches come from: the data loader, or anything else that yields `[b, t]` inputs and
/// next-token targets.
pub trait BatchSource {
    /// The next micro-batch: `b x t` input tokens and their `b x t` next-token targets,
    /// both row-major. The trainer refuses one of another shape
    /// ([`TrainError::BatchShape`]).
    fn next_batch(&mut self) -> Result<Batch, DataError>;
}

impl BatchSource for DataLoader {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        DataLoader::next_batch(self)
    }
}

/// Settings of the optimisation (the model's shape lives in its config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainSettings {
    /// Sequences per forward/backward pass on each rank.
    pub micro_batch: usize,
    /// Sequences per optimizer step, over all data-parallel ranks.
    pub global_batch: usize,
    /// Tokens per sequence (`--seq-length`), at most the model's positions.
    pub seq_len: usize,
    /// The learning rate of each iteration (`--lr`, `--min-lr`, `--lr-warmup-iters`,
    /// `--lr-decay-style`, `--train-iters`).
    pub lr_schedule: LrSchedule,
    /// AdamW's hyper-parameters (`--adam-beta1`, `--adam-beta2`, `--adam-eps`,
    /// `--weight-decay`).
    pub adamw: AdamWConfig,
    /// Global gradient-norm limit; 0 turns clipping off.
    pub clip_grad: f32,
    /// `--bf16`, `--fp16` or fp32.
    pub precision: Precision,
    /// fp16's loss scaling (unused otherwise).
    pub loss_scale: LossScaleConfig,
}

impl TrainSettings {
    /// Micro-batches per step on one rank without data parallelism.
    pub fn accumulation_steps(&self) -> Result<usize, TrainError> {
        if self.micro_batch == 0 || self.global_batch % self.micro_batch != 0 || self.global_batch == 0 {
            return Err(TrainError::BatchSizes { global: self.global_batch, micro: self.micro_batch });
        }
        Ok(self.global_batch / self.micro_batch)
    }
}

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// Mean loss over the step's tokens.
    pub loss: f32,
    /// Global gradient norm before clipping.
    pub grad_norm: f32,
    /// The learning rate the step's update used (the schedule's, for the updates taken so
    /// far).
    pub lr: f32,
    /// fp16: the loss scale the step ran with.
    pub loss_scale: Option<f32>,
    /// fp16: the gradients overflowed and the step was skipped.
    pub skipped: bool,
}
