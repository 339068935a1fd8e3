//! Argument checks shared by the op dispatchers.

use trident_runtime::{Device, View, ViewMut};

use super::{launch, OpsContext, OpsError, Result};

/// Fails unless `got == expected`.
pub(super) fn len(
    op: &'static str,
    arg: &'static str,
    got: usize,
    expected: usize,
    shape: &str,
) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(OpsError::Length { op, arg, got, expected, shape: shape.to_string() })
    }
}

/// Fails unless every argument lives on the context's device.
pub(super) fn devices(ctx: &OpsContext, op: &'static str, args: &[(&'static str, &Device)]) -> Result<()> {
    for &(arg, device) in args {
        if !device.same_as(ctx.device()) {
            return Err(OpsError::WrongDevice { op, arg, got: device.kind(), expected: ctx.device().kind() });
        }
    }
    Ok(())
}

/// Fails unless `cond`, with `what` as the message.
pub(super) fn that(op: &'static str, cond: bool, what: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(OpsError::Shape { op, what: what() })
    }
}

/// Fails on the first token `>= vocab`, where the tokens can be read from the host.
pub(super) fn tokens(op: &'static str, tokens: &[u32], vocab: usize) -> Result<()> {
    match tokens.iter().position(|&tok| tok as usize >= vocab) {
        None => Ok(()),
        Some(position) => Err(OpsError::TokenOutOfRange { op, token: tokens[position], position, vocab }),
    }
}

/// The host slice behind a view of a host device (`Cpu`).
pub(super) fn host<'a, T: bytemuck::Pod>(op: &'static str, v: View<'a, T>) -> Result<&'a [T]> {
    v.host().ok_or(OpsError::Unsupported { op, device: v.device().kind() })
}

/// The host slice behind a mutable view of a host device (`Cpu`).
pub(super) fn host_mut<'a, T: bytemuck::Pod>(
    op: &'static str,
    v: &'a mut ViewMut<'_, T>,
) -> Result<&'a mut [T]> {
    let device = v.device().kind();
    v.host_mut().ok_or(OpsError::Unsupported { op, device })
}

/// Token ids that live on the device (`Cuda`) are range-checked by a kernel before a kernel
/// indexes with them, with the same error as the host check ([`tokens`]) gives for ids
/// the host can read.
pub(super) fn device_tokens(
    ctx: &OpsContext,
    op: &'static str,
    tokens: &View<u32>,
    vocab: usize,
) -> Result<()> {
    if tokens.host().is_some() {
        return Ok(());
    }
    match launch::first_token_out_of_range(ctx.kernels()?, tokens, vocab)? {
        None => Ok(()),
        Some(position) => {
            let mut token = [0u32];
            tokens.sub(position..position + 1)?.copy_to_slice_on(ctx.stream(), &mut token)?;
            let token = token[0];
            Err(OpsError::TokenOutOfRange { op, token, position, vocab })
        }
    }
}
