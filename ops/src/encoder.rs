use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, Result};
use crate::launch::EncoderShape;

/// Token plus position embedding: `out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]`.
/// `out` is `[b, t, c]`, `tokens` `[b, t]`, `wte` `[vocab, c]`, `wpe` `[max_t >= t, c]`.
#[allow(clippy::too_many_arguments)]
pub fn encoder_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    tokens: View<u32>,
    wte: View<f32>,
    wpe: View<f32>,
    b: usize,
    t: usize,
    c: usize,
) -> Result<()> {
    const OP: &str = "encoder_forward";
    check_shapes(OP, out.len(), tokens, wte.len(), wpe.len(), b, t, c)?;
    let devices =
        [("out", out.device()), ("tokens", tokens.device()), ("wte", wte.device()), ("wpe", wpe.device())];
    check::devices(ctx, OP, &devices)?;
    match ctx.device() {
        Device::Cpu => {
            let (tok, wte, wpe) = (check::host(OP, tokens)?, check::host(OP, wte)?, check::host(OP, wpe)?);
            cpu::encoder_forward(check::host_mut(OP, out)?, tok, wte, wpe, t, c);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            let s = EncoderShape { b, t, c, vp: wte.len() / c.max(1), max_t: wpe.len() / c.max(1) };
            check::device_tokens(ctx, "encoder_forward", &tokens, s.vp)?;
            Ok(launch::encoder_forward(ctx.kernels()?, out, &tokens, &wte, &wpe, &s)?)
        }
    }
}

/// Gradient of [`encoder_forward`], accumulated: `dwte[tokens[b, t], :] += dout[b, t, :]` and
/// `dwpe[t, :] += dout[b, t, :]`.
#[allow(clippy::too_many_arguments)]
pub fn encoder_backward(
    ctx: &OpsContext,
    dwte: &mut ViewMut<f32>,
    dwpe: &mut ViewMut<f32>,
    dout: View<f32>,
    tokens: View<u32>,
    b: usize,
    t: usize,
    c: usize,
) -> Result<()> {
    const OP: &str = "encoder_backward";
    check_shapes(OP, dout.len(), tokens, dwte.len(), dwpe.len(), b, t, c)?;
    let devices = [
        ("dwte", dwte.device()),
        ("dwpe", dwpe.device()),
        ("dout", dout.device()),
        ("tokens", tokens.device()),
    ];
    check::devices(ctx, OP, &devices)?;
    match ctx.device() {
        Device::Cpu => {
            let (dout, tok) = (check::host(OP, dout)?, check::host(OP, tokens)?);
            let dwte = check::host_mut(OP, dwte)?;
            cpu::encoder_backward(dwte, check::host_mut(OP, dwpe)?, dout, tok, t, c);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            let s = EncoderShape { b, t, c, vp: dwte.len() / c.max(1), max_t: dwpe.len() / c.max(1) };
            Ok(launch::encoder_backward(ctx.kernels()?, dwte, dwpe, &dout, &tokens, &s)?)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check_shapes(
    op: &'static str,
    acts: usize,
    tokens: View<u32>,
    wte: usize,
    wpe: usize,
    b: usize,
    t: usize,
    c: usize,
) -> Result<()> {
    check::that(op, c > 0, || "the hidden size must be at least 1".into())?;
    check::len(op, "activations", acts, b * t * c, &format!("[B={b}, T={t}, C={c}]"))?;
    check::len(op, "tokens", tokens.len(), b * t, &format!("[B={b}, T={t}]"))?;
    check::that(op, wte % c == 0 && wte > 0, || {
        format!("the token embedding has {wte} elements, not a whole number of rows of {c}")
    })?;
    check::that(op, wpe % c == 0 && wpe >= t * c, || {
        format!("the position embedding has {} rows of {c}, fewer than the {t} positions asked for", wpe / c)
    })?;
    if let Some(tok) = tokens.host() {
        check::tokens(op, tok, wte / c)?;
    }
    Ok(())
}
