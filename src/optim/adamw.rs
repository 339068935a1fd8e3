use trident_runtime::{Buffer, Device};

use crate::model::{Gpt, ParamTensor};
use crate::ops::{self, AdamWParams, OpsContext, OpsError};

/// AdamW's hyper-parameters (the learning rate comes per step from the schedule).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWConfig {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// Applied to the tensors where [`ParamTensor::decays`] holds.
    pub weight_decay: f32,
}

impl Default for AdamWConfig {
    /// GPT-2/llm.c settings.
    fn default() -> Self {
        Self { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 }
    }
}

/// AdamW with its moment buffers on the model's device.
pub struct AdamW {
    pub config: AdamWConfig,
    m: Buffer<f32>,
    v: Buffer<f32>,
    step: u64,
}

impl AdamW {
    pub fn new(device: &Device, num_params: usize, config: AdamWConfig) -> Result<Self, OpsError> {
        Ok(Self {
            config,
            m: Buffer::zeros(device, num_params)?,
            v: Buffer::zeros(device, num_params)?,
            step: 0,
        })
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// First and second moments (for checkpoints).
    pub fn moments(&self) -> (&Buffer<f32>, &Buffer<f32>) {
        (&self.m, &self.v)
    }

    /// Restores the moments and step count from a checkpoint.
    pub fn restore(&mut self, m: &[f32], v: &[f32], step: u64) -> Result<(), OpsError> {
        self.m.copy_from_slice(m)?;
        self.v.copy_from_slice(v)?;
        self.step = step;
        Ok(())
    }

    /// One update of every parameter with learning rate `lr`, gradients multiplied by
    /// `grad_scale` first (clipping). Weight decay only where the tensor decays.
    pub fn step(
        &mut self,
        ctx: &OpsContext,
        model: &mut Gpt,
        lr: f32,
        grad_scale: f32,
    ) -> Result<(), OpsError> {
        self.step += 1;
        let layout = model.layout().clone();
        let (params, grads) = model.params_and_grads();
        for t in ParamTensor::ALL {
            let range = layout.range(t);
            let hp = AdamWParams {
                lr,
                beta1: self.config.beta1,
                beta2: self.config.beta2,
                eps: self.config.eps,
                weight_decay: if t.decays() { self.config.weight_decay } else { 0.0 },
                grad_scale,
                step: self.step,
            };
            ops::adamw_update(
                ctx,
                &mut params.view_mut(range.clone())?,
                grads.view(range.clone())?,
                &mut self.m.view_mut(range.clone())?,
                &mut self.v.view_mut(range)?,
                &hp,
            )?;
        }
        Ok(())
    }
}
