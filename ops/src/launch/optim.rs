use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// Blocks of the sum-of-squares reduction: fixed, so that its result is deterministic.
const NORM_BLOCKS: usize = 128;

/// AdamW hyper-parameters of one step.
#[derive(Clone, Copy, Debug)]
pub struct AdamW {
    /// Learning rate.
    pub lr: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the root of the second moment.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
    /// 1-based step number, for the bias corrections.
    pub step: u32,
    /// Factor applied to the gradients first (gradient clipping).
    pub grad_scale: f32,
}

/// One fused AdamW update of `params` from `grads`, updating the moments `m` and `v`.
pub fn adamw(
    k: &Kernels,
    params: &mut ViewMut<f32>,
    m: &mut ViewMut<f32>,
    v: &mut ViewMut<f32>,
    grads: &View<f32>,
    h: &AdamW,
) -> Result<()> {
    const KERNEL: &str = "adamw_f32";
    let n = params.len();
    let ch = Check::new(k.device(), KERNEL);
    ch.output("m", m, n)?.output("v", v, n)?.input("grads", grads, n)?;
    ch.shape(h.step >= 1, || "the step number starts at 1".into())?;
    let bc1 = 1.0 - h.beta1.powi(h.step as i32);
    let bc2 = 1.0 - h.beta2.powi(h.step as i32);
    let cfg = LaunchConfig::for_items(n, ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [
        params.arg_mut(),
        grads.arg(),
        m.arg_mut(),
        v.arg_mut(),
        to_u32("n", n)?.into(),
        h.lr.into(),
        h.beta1.into(),
        h.beta2.into(),
        h.eps.into(),
        h.weight_decay.into(),
        bc1.into(),
        bc2.into(),
        h.grad_scale.into(),
    ];
    // SAFETY: all four views hold `n` elements.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}

/// Sum of squares of `x`, reduced on the device per block and finished in f64 on the host.
pub fn sum_squares(k: &Kernels, x: &View<f32>) -> Result<f64> {
    const KERNEL: &str = "sum_squares_f32";
    Check::new(k.device(), KERNEL).input("x", x, x.len())?;
    let n = to_u32("n", x.len())?;
    let blocks = x.len().div_ceil(ELEMENTWISE_THREADS as usize).clamp(1, NORM_BLOCKS);
    let mut partial = trident_runtime::Buffer::<f32>::zeros(k.device(), blocks)?;
    k.after_default_stream()?;
    let cfg = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [ELEMENTWISE_THREADS, 1, 1],
        dynamic_smem_bytes: 0,
    };
    let args = [partial.view_mut(..)?.arg_mut(), x.arg(), n.into()];
    // SAFETY: `partial` holds one element per block and `x` `n` elements.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    let mut sums = vec![0.0f32; blocks];
    partial.view(..)?.copy_to_slice_on(k.stream(), &mut sums)?;
    Ok(sums.iter().map(|&p| p as f64).sum())
}

/// The position of the first token of `tokens` that is `>= vocab`, if any: the range check of
/// token ids on the device, one launch and a download of one word per block.
pub fn first_token_out_of_range(k: &Kernels, tokens: &View<u32>, vocab: usize) -> Result<Option<usize>> {
    const KERNEL: &str = "first_token_out_of_range_u32";
    Check::new(k.device(), KERNEL).input("tokens", tokens, tokens.len())?;
    let n = to_u32("n", tokens.len())?;
    let vocab = to_u32("vocab", vocab)?;
    let blocks = tokens.len().div_ceil(ELEMENTWISE_THREADS as usize).clamp(1, NORM_BLOCKS);
    let mut first = trident_runtime::Buffer::<u32>::zeros(k.device(), blocks)?;
    k.after_default_stream()?;
    let cfg = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [ELEMENTWISE_THREADS, 1, 1],
        dynamic_smem_bytes: 0,
    };
    let args = [first.view_mut(..)?.arg_mut(), tokens.arg(), n.into(), vocab.into()];
    // SAFETY: `first` holds one element per block and `tokens` `n` elements.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    let mut firsts = vec![0u32; blocks];
    first.view(..)?.copy_to_slice_on(k.stream(), &mut firsts)?;
    let first = firsts.into_iter().min().unwrap_or(u32::MAX);
    Ok((first != u32::MAX).then_some(first as usize))
}

/// `x *= s`.
pub fn scale(k: &Kernels, x: &mut ViewMut<f32>, s: f32) -> Result<()> {
    const KERNEL: &str = "scale_f32";
    let n = to_u32("n", x.len())?;
    Check::new(k.device(), KERNEL).output("x", x, x.len())?;
    let cfg = LaunchConfig::for_items(x.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [x.arg_mut(), s.into(), n.into()];
    // SAFETY: `x` holds `n` elements.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
