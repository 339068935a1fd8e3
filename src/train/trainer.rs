//! One training step: gradient accumulation over micro-batches, global-norm clipping, AdamW.

use std::ops::Range;

use rayon::prelude::*;
use trident_runtime::{Buffer, Device, DeviceKind, RuntimeError, ViewMut};

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
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
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
    lanes: Lanes,
    /// Steps taken (the next step's 0-based iteration).
    pub iter: u64,
}

/// How a micro-batch runs through the model.
enum Lanes {
    /// All its rows through one workspace, each op using every core.
    Whole(Box<Workspace>),
    /// On the Cpu device with several cores, the rows are split into one share per core and
    /// the shares run side by side, each with its own activations and gradients; the shares'
    /// gradients are then summed into the first share's buffer, which becomes the model's. A
    /// core then runs whole forward and backward passes instead of meeting the others at the
    /// end of every op, and an idle core still takes work from a busy one's ops. The split is fixed by the core count, so a run
    /// is deterministic on a given machine.
    Shares(Vec<Share>),
}

struct Share {
    rows: Range<usize>,
    workspace: Workspace,
    grads: Buffer<f32>,
    /// Whether `grads` is known to hold zeros, so the next step need not clear it.
    zeroed: bool,
}

impl Share {
    /// Runs every share's rows of `batch` side by side and returns the mean loss over the
    /// batch. With `dloss`, each share's backward pass adds its gradients into its own buffer.
    fn mean_loss(
        shares: &mut [Share],
        model: &Gpt,
        ctx: &OpsContext,
        batch: &Batch,
        t: usize,
        dloss: Option<f32>,
    ) -> Result<f64, TrainError> {
        let sums = shares.par_iter_mut().map(|s| -> Result<f64, TrainError> {
            let (tokens, rows) = (s.rows.start * t..s.rows.end * t, s.rows.len());
            model.forward(ctx, &mut s.workspace, &batch.inputs[tokens.clone()], rows, t)?;
            let loss = model.loss(ctx, &mut s.workspace, &batch.targets[tokens], dloss)?;
            if dloss.is_some() {
                model.backward_into(ctx, &mut s.workspace, &mut s.grads)?;
            }
            Ok(loss as f64 * rows as f64)
        });
        Ok(sums.collect::<Result<Vec<_>, _>>()?.iter().sum::<f64>() / batch.batch_size as f64)
    }
}

impl Lanes {
    fn new(device: &Device, model: &Gpt, b: usize, t: usize, shares: usize) -> Result<Self, TrainError> {
        let shares = shares.min(b);
        if device.kind() != DeviceKind::Cpu || shares < 2 {
            return Ok(Lanes::Whole(Box::new(Workspace::new(device, model.config(), b, t, true)?)));
        }
        (0..shares)
            .map(|i| {
                let rows = i * b / shares..(i + 1) * b / shares;
                let workspace = Workspace::new(device, model.config(), rows.len(), t, true)?;
                let grads = Buffer::zeros(device, model.num_params())?;
                Ok(Share { rows, workspace, grads, zeroed: true })
            })
            .collect::<Result<_, TrainError>>()
            .map(Lanes::Shares)
    }
}

impl Trainer {
    /// A trainer that, on the Cpu device, splits each micro-batch into one share of rows per
    /// core.
    pub fn new(ctx: OpsContext, model: Gpt, settings: TrainSettings) -> Result<Self, TrainError> {
        Self::with_row_shares(ctx, model, settings, rayon::current_num_threads())
    }

    /// A trainer that splits each micro-batch into up to `shares` shares of rows run side by
    /// side (on the Cpu device; see [`new`](Self::new), which takes one share per core).
    pub fn with_row_shares(
        ctx: OpsContext,
        model: Gpt,
        settings: TrainSettings,
        shares: usize,
    ) -> Result<Self, TrainError> {
        settings.accumulation_steps()?;
        let device = ctx.device().clone();
        let lanes = Lanes::new(&device, &model, settings.micro_batch, settings.seq_len, shares)?;
        let optimizer = AdamW::new(&device, model.num_params(), settings.adamw)?;
        Ok(Self { ctx, model, optimizer, settings, lanes, iter: 0 })
    }

    /// One optimizer step over `global_batch / micro_batch` micro-batches from `data`.
    pub fn step(&mut self, data: &mut dyn BatchSource) -> Result<StepStats, TrainError> {
        let accum = self.settings.accumulation_steps()?;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        let dloss = 1.0 / (accum * b * t) as f32;
        let mut loss = 0.0f64;
        let norm = match &mut self.lanes {
            Lanes::Whole(ws) => {
                self.model.zero_grads()?;
                for _ in 0..accum {
                    let batch = checked_batch(&self.settings, data)?;
                    self.model.forward(&self.ctx, ws, &batch.inputs, b, t)?;
                    loss += self.model.loss(&self.ctx, ws, &batch.targets, Some(dloss))? as f64;
                    self.model.backward(&self.ctx, ws)?;
                }
                None
            }
            Lanes::Shares(shares) => {
                for share in shares.iter_mut().filter(|s| !s.zeroed) {
                    // Split across the cores: one core alone cannot saturate the memory bus.
                    host_mut(&mut share.grads.view_mut(..)?)
                        .par_chunks_mut(1 << 16)
                        .for_each(|c| c.fill(0.0));
                }
                shares.iter_mut().for_each(|s| s.zeroed = false);
                for _ in 0..accum {
                    let batch = checked_batch(&self.settings, data)?;
                    let (model, ctx) = (&self.model, &self.ctx);
                    loss += Share::mean_loss(shares, model, ctx, &batch, t, Some(dloss))?;
                }
                // The other shares drain into the first, which then trades buffers with the
                // model: its gradient is the sum, and the share takes the model's old buffer
                // (cleared at the next step).
                let (first, rest) = shares.split_first_mut().expect("at least two shares");
                let mut rest_views =
                    rest.iter_mut().map(|s| s.grads.view_mut(..)).collect::<Result<Vec<_>, _>>()?;
                let mut parts: Vec<&mut [f32]> = rest_views.iter_mut().map(|v| host_mut(v)).collect();
                let sumsq = crate::ops::cpu::drain_into(host_mut(&mut first.grads.view_mut(..)?), &mut parts);
                drop(rest_views);
                rest.iter_mut().for_each(|s| s.zeroed = true);
                std::mem::swap(self.model.grads_mut(), &mut first.grads);
                Some(sumsq.sqrt() as f32)
            }
        };
        let loss = (loss / accum as f64) as f32;
        if !loss.is_finite() {
            return Err(TrainError::NonFinite { loss, iter: self.iter });
        }
        let norm = match norm {
            Some(norm) => norm,
            None => grad_norm(&self.ctx, self.model.grads())?,
        };
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
            let batch = checked_batch(&self.settings, data)?;
            let (model, ctx) = (&self.model, &self.ctx);
            total += match &mut self.lanes {
                Lanes::Whole(ws) => {
                    model.forward(ctx, ws, &batch.inputs, b, t)?;
                    model.loss(ctx, ws, &batch.targets, None)? as f64
                }
                Lanes::Shares(shares) => Share::mean_loss(shares, model, ctx, &batch, t, None)?,
            };
        }
        Ok((total / iters.max(1) as f64) as f32)
    }
}

fn checked_batch(settings: &TrainSettings, data: &mut dyn BatchSource) -> Result<Batch, TrainError> {
    let batch = data.next_batch()?;
    let (b, t) = (settings.micro_batch, settings.seq_len);
    let tokens = b * t;
    if batch.batch_size != b
        || batch.seq_len != t
        || batch.inputs.len() != tokens
        || batch.targets.len() != tokens
    {
        return Err(TrainError::BatchShape { got_b: batch.batch_size, got_t: batch.seq_len, b, t });
    }
    Ok(batch)
}

/// The host memory of a view of a Cpu buffer.
fn host_mut<'a>(view: &'a mut ViewMut<'_, f32>) -> &'a mut [f32] {
    view.host_mut().expect("Cpu buffers live in host memory")
}

#[cfg(test)]
mod tests;
