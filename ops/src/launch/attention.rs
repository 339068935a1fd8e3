use trident_kernels::attention::{smem_floats, MAX_HEAD_DIM, ROWS};
use trident_runtime::{Arg, LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result};

/// Sizes of causal self-attention: `b` sequences of `t` tokens, `nh` heads of `hs` channels.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    /// Sequences.
    pub b: usize,
    /// Tokens per sequence.
    pub t: usize,
    /// Heads.
    pub nh: usize,
    /// Channels per head (at most `MAX_HEAD_DIM`, 128).
    pub hs: usize,
}

impl AttentionShape {
    fn c(&self) -> usize {
        self.nh * self.hs
    }

    fn config(&self, ch: &Check) -> Result<(LaunchConfig, [Arg; 3])> {
        ch.shape(self.hs >= 1 && self.hs <= MAX_HEAD_DIM as usize, || {
            format!("head size {} is outside 1..={MAX_HEAD_DIM}", self.hs)
        })?;
        to_u32("B*T*3C", super::product("B*T*3C", &[self.b, self.t, 3, self.nh, self.hs])?)?;
        let cfg = LaunchConfig {
            grid: [
                to_u32("query blocks", self.t.div_ceil(ROWS as usize).max(1))?,
                to_u32("heads", self.nh)?,
                to_u32("batch", self.b)?,
            ],
            block: [32 * ROWS, 1, 1],
            dynamic_smem_bytes: 4 * smem_floats(self.hs as u32),
        };
        Ok((cfg, [to_u32("t", self.t)?.into(), to_u32("nh", self.nh)?.into(), to_u32("hs", self.hs)?.into()]))
    }
}

/// Forward: `out` `[b, t, C]` and the per-query log-sum-exp `lse` `[b, nh, t]` from `qkv`
/// `[b, t, 3C]`.
pub fn attention_forward(
    k: &Kernels,
    out: &mut ViewMut<f32>,
    lse: &mut ViewMut<f32>,
    qkv: &View<f32>,
    s: &AttentionShape,
) -> Result<()> {
    const KERNEL: &str = "attention_forward_f32";
    let ch = Check::new(k.device(), KERNEL);
    let bt = s.b * s.t;
    ch.output("out", out, bt * s.c())?.output("lse", lse, bt * s.nh)?.input("qkv", qkv, bt * 3 * s.c())?;
    let (cfg, [t, nh, hs]) = s.config(&ch)?;
    if bt == 0 {
        return Ok(());
    }
    let args = [out.arg_mut(), lse.arg_mut(), qkv.arg(), t, nh, hs];
    // SAFETY: the views hold the sizes the shape implies.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}

/// Backward: writes (not accumulates) `dqkv` from `dout`, recomputing the scores from `qkv`
/// and `lse`. `dsum` `[b, nh, t]` is scratch.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    k: &Kernels,
    dqkv: &mut ViewMut<f32>,
    dsum: &mut ViewMut<f32>,
    dout: &View<f32>,
    qkv: &View<f32>,
    out: &View<f32>,
    lse: &View<f32>,
    s: &AttentionShape,
) -> Result<()> {
    let ch = Check::new(k.device(), "attention_backward");
    let bt = s.b * s.t;
    ch.output("dqkv", dqkv, bt * 3 * s.c())?.output("dsum", dsum, bt * s.nh)?;
    ch.input("dout", dout, bt * s.c())?.input("qkv", qkv, bt * 3 * s.c())?;
    ch.input("out", out, bt * s.c())?.input("lse", lse, bt * s.nh)?;
    let (cfg, [t, nh, hs]) = s.config(&ch)?;
    if bt == 0 {
        return Ok(());
    }
    let pre = LaunchConfig { dynamic_smem_bytes: 0, ..cfg };
    let args = [dsum.arg_mut(), dout.arg(), out.arg(), t, nh, hs];
    // SAFETY: the views hold the sizes the shape implies.
    unsafe { k.launch("attention_backward_dsum_f32", &pre, &args)? };
    let args = [dqkv.arg_mut(), dout.arg(), qkv.arg(), lse.arg(), dsum.arg_mut(), t, nh, hs];
    // SAFETY: as above; the dq and dkv kernels write disjoint thirds of `dqkv`.
    unsafe {
        k.launch("attention_backward_dq_f32", &cfg, &args)?;
        k.launch("attention_backward_dkv_f32", &cfg, &args)?;
    }
    Ok(())
}
