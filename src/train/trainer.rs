//! One training step: gradient accumulation over micro-batches, global-norm clipping, AdamW.

use crate::data::{Batch, DataError, DataLoader};
use crate::model::{Gpt, ModelError, Workspace};
use crate::ops::{OpsContext, OpsError};
use crate::optim::{clip_scale, grad_norm, AdamW, AdamWConfig};

use super::LrSchedule;

/// Where batches come from: the data loader, or anything else that yields `[b, t]` inputs and
/// next-token targets.
pub trait BatchSource {
    fn next_batch(&mut self) -> Result<Batch, DataError>;
}

impl BatchSource for DataLoader {
    fn next_batch(&mut self) -> Result<Batch, DataError> {
        DataLoader::next_batch(self)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("--global-batch-size {global} is not a multiple of --micro-batch-size {micro}")]
    BatchSizes { global: usize, micro: usize },
    #[error("the data gave a {got_b} x {got_t} batch, the trainer expects {b} x {t}")]
    BatchShape { got_b: usize, got_t: usize, b: usize, t: usize },
    #[error("the loss became {loss} at iteration {iter}; lower --lr or set --clip-grad")]
    NonFinite { loss: f32, iter: u64 },
}

/// Settings of the optimisation (the model's shape lives in its config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainSettings {
    pub micro_batch: usize,
    pub global_batch: usize,
    pub seq_len: usize,
    pub schedule: LrSchedule,
    pub adamw: AdamWConfig,
    /// Global gradient-norm limit; 0 turns clipping off.
    pub clip_grad: f32,
}

impl TrainSettings {
    /// Micro-batches per step.
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
    pub lr: f32,
}

pub struct Trainer {
    pub ctx: OpsContext,
    pub model: Gpt,
    pub optimizer: AdamW,
    pub settings: TrainSettings,
    workspace: Workspace,
    /// Steps taken (the next step's 0-based iteration).
    pub iter: u64,
}

impl Trainer {
    pub fn new(ctx: OpsContext, model: Gpt, settings: TrainSettings) -> Result<Self, TrainError> {
        settings.accumulation_steps()?;
        let device = ctx.device().clone();
        let workspace =
            Workspace::new(&device, model.config(), settings.micro_batch, settings.seq_len, true)?;
        let optimizer = AdamW::new(&device, model.num_params(), settings.adamw)?;
        Ok(Self { ctx, model, optimizer, settings, workspace, iter: 0 })
    }

    /// One optimizer step over `global_batch / micro_batch` micro-batches from `data`.
    pub fn step(&mut self, data: &mut dyn BatchSource) -> Result<StepStats, TrainError> {
        let accum = self.settings.accumulation_steps()?;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        let dloss = 1.0 / (accum * b * t) as f32;
        self.model.zero_grads()?;
        let mut loss = 0.0f64;
        for _ in 0..accum {
            let batch = self.checked_batch(data)?;
            self.model.forward(&self.ctx, &mut self.workspace, &batch.inputs, b, t)?;
            loss += self.model.loss(&self.ctx, &mut self.workspace, &batch.targets, Some(dloss))? as f64;
            self.model.backward(&self.ctx, &mut self.workspace)?;
        }
        let loss = (loss / accum as f64) as f32;
        if !loss.is_finite() {
            return Err(TrainError::NonFinite { loss, iter: self.iter });
        }
        let norm = grad_norm(&self.ctx, self.model.grads())?;
        let lr = self.settings.schedule.lr(self.iter);
        self.optimizer.step(&self.ctx, &mut self.model, lr, clip_scale(norm, self.settings.clip_grad))?;
        self.iter += 1;
        Ok(StepStats { loss, grad_norm: norm, lr })
    }

    /// Mean loss over `iters` micro-batches of `data`, without touching the gradients.
    pub fn evaluate(&mut self, data: &mut dyn BatchSource, iters: usize) -> Result<f32, TrainError> {
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        let mut total = 0.0f64;
        for _ in 0..iters.max(1) {
            let batch = self.checked_batch(data)?;
            self.model.forward(&self.ctx, &mut self.workspace, &batch.inputs, b, t)?;
            total += self.model.loss(&self.ctx, &mut self.workspace, &batch.targets, None)? as f64;
        }
        Ok((total / iters.max(1) as f64) as f32)
    }

    fn checked_batch(&self, data: &mut dyn BatchSource) -> Result<Batch, TrainError> {
        let batch = data.next_batch()?;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        if batch.batch_size != b || batch.seq_len != t || batch.inputs.len() != b * t {
            return Err(TrainError::BatchShape { got_b: batch.batch_size, got_t: batch.seq_len, b, t });
        }
        Ok(batch)
    }
}
