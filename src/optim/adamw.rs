//! AdamW over the range of parameters a rank owns: all of its share of the model, or under
//! ZeRO-1 (`--use-distributed-optimizer`) its 1/DP part of that share. One optimizer, one
//! update function; ZeRO-1 is only a smaller range.

use std::ops::Range;

use trident_runtime::{Buffer, Device};

use crate::model::ShardLayout;
use crate::ops::{self, AdamWParams, OpsContext, OpsError};

type Result<T> = std::result::Result<T, OpsError>;

/// AdamW's hyper-parameters (the learning rate comes per step from the schedule).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWConfig {
    /// Decay of the first moment (the gradient's running mean; `--adam-beta1`, 0.9).
    pub beta1: f32,
    /// Decay of the second moment (the squared gradient's running mean; `--adam-beta2`,
    /// 0.95).
    pub beta2: f32,
    /// Added to the second moment's square root in the denominator (`--adam-eps`, 1e-8).
    pub eps: f32,
    /// Decoupled weight decay per unit of learning rate (`--weight-decay`, 0.1): each update
    /// also subtracts `lr * weight_decay * w`. Applied to the tensors where
    /// [`ParamTensor::decays`](crate::model::ParamTensor::decays) holds.
    pub weight_decay: f32,
}

impl Default for AdamWConfig {
    /// GPT-2/llm.c settings.
    fn default() -> Self {
        Self { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 }
    }
}

/// AdamW state (both moments, on the model's device) for the local parameter range `owned`.
pub struct AdamW {
    /// The hyper-parameters every step uses.
    pub config: AdamWConfig,
    /// The part of the local parameter buffer this rank updates.
    pub owned: Range<usize>,
    m: Buffer<f32>,
    v: Buffer<f32>,
    step: u64,
    /// `(range within owned, decays)` per tensor piece.
    pieces: Vec<(Range<usize>, bool)>,
}

impl AdamW {
    /// State for the parameters `owned` of the local buffer laid out as `layout`, zero
    /// moments, no step taken.
    pub fn new(
        device: &Device,
        layout: &ShardLayout,
        owned: Range<usize>,
        config: AdamWConfig,
    ) -> Result<Self> {
        let pieces = layout
            .tensors()
            .iter()
            .filter_map(|t| {
                let start = t.range.start.max(owned.start);
                let end = t.range.end.min(owned.end);
                (start < end).then(|| (start - owned.start..end - owned.start, t.tensor.decays()))
            })
            .collect();
        Ok(Self {
            config,
            m: Buffer::zeros(device, owned.len())?,
            v: Buffer::zeros(device, owned.len())?,
            owned,
            step: 0,
            pieces,
        })
    }

    /// Bytes of optimizer state.
    pub fn bytes(&self) -> usize {
        (self.m.len() + self.v.len()) * 4
    }

    /// Updates taken so far (AdamW's `t`, which its bias corrections use); skipped fp16
    /// steps do not count.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The moments of the owned range (for checkpoints).
    pub fn moments(&self) -> Result<(Vec<f32>, Vec<f32>)> {
        Ok((self.m.to_vec()?, self.v.to_vec()?))
    }

    /// Restores the owned range's moments and the step count from a checkpoint.
    pub fn restore(&mut self, m: &[f32], v: &[f32], step: u64) -> Result<()> {
        self.m.copy_from_slice(m)?;
        self.v.copy_from_slice(v)?;
        self.step = step;
        Ok(())
    }

    /// One update of `params[owned]` with learning rate `lr`, from `grads` (the owned range's
    /// gradients, starting at `grads_offset`) multiplied by `grad_scale` first (clipping).
    /// Weight decay only where the tensor decays.
    pub fn step(
        &mut self,
        ctx: &OpsContext,
        params: &mut Buffer<f32>,
        grads: &Buffer<f32>,
        grads_offset: usize,
        lr: f32,
        grad_scale: f32,
    ) -> Result<()> {
        self.step += 1;
        let hp = AdamWParams {
            lr,
            beta1: self.config.beta1,
            beta2: self.config.beta2,
            eps: self.config.eps,
            weight_decay: self.config.weight_decay,
            grad_scale,
            step: self.step,
        };
        // Every piece in one launch, over the span the pieces cover.
        let span = self.pieces.iter().map(|(r, _)| r.end).max().unwrap_or(0);
        let p = self.owned.start..self.owned.start + span;
        ops::adamw_update_pieces(
            ctx,
            &mut params.view_mut(p)?,
            grads.view(grads_offset..grads_offset + span)?,
            &mut self.m.view_mut(..span)?,
            &mut self.v.view_mut(..span)?,
            &self.pieces,
            &hp,
        )?;
        Ok(())
    }
}
