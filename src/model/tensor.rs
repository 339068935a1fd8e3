//! [`Act`]: an activation (or compute-weight) buffer as mixed precision stores it — real
//! 16-bit storage (bf16 or f16 bits as `u16`) on the kernel devices, f32 elsewhere.
//!
//! On `Emu` and `Cuda` under `--bf16`/`--fp16` the tensors the products and attention read and
//! write (LayerNorm outputs, QKV, attention output, the MLP's hidden layer, the logits, their
//! gradients, the compute weights) are 16-bit buffers; the `Cpu` computes in f32 and keeps
//! them as f32 buffers holding the same rounded values ([`store_acts`] rounds them), so the
//! two agree step for step. In fp32 every `Act` is f32 and nothing rounds.

use trident_kernels::simt::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use trident_runtime::{Buffer, Device};

use super::activations::Dims;
use super::ModelError;
use crate::ops::{self, HalfFormat, Operand, OperandMut, OpsContext};
use crate::parallel::on_host;

type Result<T> = std::result::Result<T, ModelError>;

/// A tensor's storage: f32, or 16-bit in `format`.
pub(super) enum Act {
    F32(Buffer<f32>),
    Half(Buffer<u16>, HalfFormat),
}

impl Act {
    /// `len` zeros, 16-bit in `storage` (see [`storage`]) or f32.
    pub fn zeros(device: &Device, len: usize, storage: Option<HalfFormat>) -> Result<Self> {
        Ok(match storage {
            None => Act::F32(Buffer::zeros(device, len)?),
            Some(f) => Act::Half(Buffer::zeros(device, len)?, f),
        })
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            Act::F32(b) => b.len(),
            Act::Half(b, _) => b.len(),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match self {
            Act::F32(b) => 4 * b.len(),
            Act::Half(b, _) => 2 * b.len(),
        }
    }

    /// Elements `range`, read-only.
    pub fn view(&self, range: std::ops::Range<usize>) -> Result<Operand<'_>> {
        Ok(match self {
            Act::F32(b) => Operand::F32(b.view(range)?),
            Act::Half(b, f) => Operand::Half(b.view(range)?, *f),
        })
    }

    /// Every element, read-only.
    pub fn all(&self) -> Result<Operand<'_>> {
        self.view(0..self.len())
    }

    /// Every element, writable.
    pub fn all_mut(&mut self) -> Result<OperandMut<'_>> {
        Ok(match self {
            Act::F32(b) => OperandMut::F32(b.view_mut(..)?),
            Act::Half(b, f) => OperandMut::Half(b.view_mut(..)?, *f),
        })
    }

    /// Elements `range` on the host as f32 (16-bit values widened, exactly).
    pub fn to_f32_vec(&self, range: std::ops::Range<usize>) -> Result<Vec<f32>> {
        Ok(match self {
            Act::F32(b) => b.view(range)?.to_vec()?,
            Act::Half(b, f) => b.view(range)?.to_vec()?.into_iter().map(widen(*f)).collect(),
        })
    }

    /// Runs `f` on every element as f32 on the host: an f32 buffer's own values
    /// ([`on_host`]), or 16-bit ones widened into a copy and rounded back (nearest, ties to
    /// even) afterwards, the bits the kernels store.
    pub fn on_host_f32<R>(&mut self, f: impl FnOnce(&mut [f32]) -> Result<R>) -> Result<R> {
        match self {
            Act::F32(b) => on_host(&mut b.view_mut(..)?, f),
            Act::Half(b, format) => {
                let mut wide: Vec<f32> = b.to_vec()?.into_iter().map(widen(*format)).collect();
                let r = f(&mut wide)?;
                let narrow = match format {
                    HalfFormat::Bf16 => f32_to_bf16,
                    HalfFormat::F16 => f32_to_f16,
                };
                let bits: Vec<u16> = wide.into_iter().map(narrow).collect();
                b.copy_from_slice(&bits)?;
                Ok(r)
            }
        }
    }
}

/// The exact widening of `format` bits to f32.
fn widen(format: HalfFormat) -> fn(u16) -> f32 {
    match format {
        HalfFormat::Bf16 => bf16_to_f32,
        HalfFormat::F16 => f16_to_f32,
    }
}

/// Where a pass of precision `half` on `device` keeps its 16-bit tensors in 16-bit buffers:
/// on the kernel devices; `Cpu` keeps f32 buffers of rounded values.
pub(super) fn storage(device: &Device, half: Option<HalfFormat>) -> Option<HalfFormat> {
    match device {
        Device::Cpu => None,
        Device::Emu | Device::Cuda(_) => half,
    }
}

/// Stores `acts` as the pass's precision stores activations: an f32 buffer of a mixed-precision
/// pass (on `Cpu`) is rounded to bf16 or f16 in place; a 16-bit buffer already holds the
/// rounded values; fp32 is untouched.
pub(super) fn store_acts(ctx: &OpsContext, d: Dims, acts: &mut [&mut Act]) -> Result<()> {
    if let Some(format) = d.half {
        for a in acts {
            if let Act::F32(b) = a {
                ops::round_to(ctx, &mut b.view_mut(..)?, format)?;
            }
        }
    }
    Ok(())
}
