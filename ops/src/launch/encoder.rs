use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// Sizes of a token + position embedding: `b` sequences of `t` tokens, `c` channels, a token
/// table of `vp` rows and a position table of `max_t` rows.
#[derive(Clone, Copy, Debug)]
pub struct EncoderShape {
    /// Sequences.
    pub b: usize,
    /// Tokens per sequence (at most `max_t`).
    pub t: usize,
    /// Channels.
    pub c: usize,
    /// Rows of the token table (the padded vocabulary).
    pub vp: usize,
    /// Rows of the position table.
    pub max_t: usize,
}

fn check(ch: &Check, s: &EncoderShape) -> Result<()> {
    ch.shape(s.t <= s.max_t, || format!("sequence length {} exceeds the position table's {}", s.t, s.max_t))?;
    Ok(())
}

/// `out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]`. Token ids must be below `vp` (the data
/// loaders guarantee it; the kernel cannot check device data).
pub fn encoder_forward(
    k: &Kernels,
    out: &mut ViewMut<f32>,
    tokens: &View<u32>,
    wte: &View<f32>,
    wpe: &View<f32>,
    s: &EncoderShape,
) -> Result<()> {
    const KERNEL: &str = "encoder_forward_f32";
    let ch = Check::new(k.device(), KERNEL);
    let bt = s.b * s.t;
    ch.output("out", out, bt * s.c)?.input("tokens", tokens, bt)?.input("wte", wte, s.vp * s.c)?;
    ch.shape(wpe.len() >= s.max_t * s.c, || {
        format!("wpe holds {} elements, fewer than max_t x C", wpe.len())
    })?;
    check(&ch, s)?;
    let cfg = LaunchConfig::for_items(bt * s.c, ELEMENTWISE_THREADS, MAX_BLOCKS);
    to_u32("B*T*C", bt * s.c)?;
    let args = [
        out.arg_mut(),
        tokens.arg(),
        wte.arg(),
        wpe.arg(),
        to_u32("B*T", bt)?.into(),
        to_u32("T", s.t)?.into(),
        to_u32("C", s.c)?.into(),
    ];
    // SAFETY: sizes checked above; token ids index `wte` by the loader's guarantee.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}

/// `dwte[tokens[r], :] += dout[r, :]` and `dwpe[t, :] += sum_b dout[b, t, :]`.
pub fn encoder_backward(
    k: &Kernels,
    dwte: &mut ViewMut<f32>,
    dwpe: &mut ViewMut<f32>,
    dout: &View<f32>,
    tokens: &View<u32>,
    s: &EncoderShape,
) -> Result<()> {
    let ch = Check::new(k.device(), "encoder_backward");
    let bt = s.b * s.t;
    ch.output("dwte", dwte, s.vp * s.c)?.input("dout", dout, bt * s.c)?.input("tokens", tokens, bt)?;
    ch.shape(dwpe.len() >= s.max_t * s.c, || {
        format!("dwpe holds {} elements, fewer than max_t x C", dwpe.len())
    })?;
    check(&ch, s)?;
    to_u32("B*T*C", bt * s.c)?;
    let (bt32, t32, c32) = (to_u32("B*T", bt)?, to_u32("T", s.t)?, to_u32("C", s.c)?);
    let cfg = LaunchConfig::for_items(bt * s.c, ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [dwte.arg_mut(), dout.arg(), tokens.arg(), bt32.into(), c32.into()];
    // SAFETY: sizes checked above; token ids index `dwte` by the loader's guarantee.
    unsafe { k.launch("encoder_backward_wte_f32", &cfg, &args)? };
    let cfg = LaunchConfig::for_items(s.t * s.c, ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [dwpe.arg_mut(), dout.arg(), to_u32("B", s.b)?.into(), t32.into(), c32.into()];
    // SAFETY: `dwpe` holds at least t x C elements and `dout` b x t x C.
    unsafe { k.launch("encoder_backward_wpe_f32", &cfg, &args)? };
    Ok(())
}
