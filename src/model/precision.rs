//! The precision a model stores its activations and computes its products in.
//!
//! Mixed precision as Megatron-LM runs it (`--bf16`, `--fp16`): fp32 master weights and AdamW
//! state, gradients accumulated and reduced in fp32; the weight matrices the products read,
//! the activations and activation gradients the products and attention read and write stored
//! as bf16 (fp16) values; the residual stream and its gradient (Megatron-LM's
//! `--fp32-residual-connection`), LayerNorm statistics, softmax, the log-sum-exp and the loss
//! in fp32. On `Emu` and `Cuda` the tensors
//! the products and attention read are real 16-bit buffers, run on the tensor-core GEMM and
//! flash attention (see `model::tensor` and [`ops::mixed`](crate::ops::mixed)); `Cpu` stores
//! the same values (rounded to nearest, ties to even) in f32 buffers and computes in f32, so
//! `Cpu` and `Emu` agree up to the order of f32 sums.

use crate::ops::HalfFormat;

/// `--bf16`, `--fp16`, or fp32 (neither).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in fp32 (`--fp32`; the default on cpu and emu).
    #[default]
    Fp32,
    /// bf16 activations and compute weights, fp32 master weights and reductions (`--bf16`;
    /// the default on cuda).
    Bf16,
    /// fp16 activations and compute weights with loss scaling, fp32 master weights and
    /// reductions (`--fp16`).
    Fp16,
}

impl Precision {
    /// The 16-bit format values are stored in, or `None` for fp32.
    pub fn format(self) -> Option<HalfFormat> {
        match self {
            Precision::Fp32 => None,
            Precision::Bf16 => Some(HalfFormat::Bf16),
            Precision::Fp16 => Some(HalfFormat::F16),
        }
    }

    /// The name the flags and checkpoints use.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
