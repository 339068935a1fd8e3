//! Mixed precision's storage rounding kernels.

use trident_runtime::{LaunchConfig, ViewMut};

use super::{to_u32, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// The 16-bit floating-point formats: mixed precision's storage, the tensor-core GEMM's and
/// flash attention's inputs and 16-bit outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfFormat {
    /// bfloat16: 8 exponent bits, 7 mantissa bits.
    Bf16,
    /// IEEE binary16: 5 exponent bits, 10 mantissa bits (largest finite 65504).
    F16,
}

impl HalfFormat {
    /// The name kernels carry for it (`bf16`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            HalfFormat::Bf16 => "bf16",
            HalfFormat::F16 => "f16",
        }
    }
}

/// Rounds every element of `x` in place to the nearest `format` value (kept as f32).
pub fn round_to(k: &Kernels, x: &mut ViewMut<f32>, format: HalfFormat) -> Result<()> {
    let kernel = match format {
        HalfFormat::Bf16 => "round_bf16_f32",
        HalfFormat::F16 => "round_f16_f32",
    };
    k.check_device(x.device())?;
    let n = to_u32("length", x.len())?;
    let cfg = LaunchConfig::for_items(x.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [x.arg_mut(), n.into()];
    // SAFETY: `x` holds `n` elements on the kernels' device; each thread rewrites its own.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}
