//! Launch wrappers of the one-read LayerNorm forward (`kernels/src/layernorm_row.rs`): a warp
//! per row, the row in registers, optionally the residual add fused in, f32 or bf16 tensors
//! (and f32 rows into a bf16 output).

use bytemuck::Pod;
use trident_kernels::layernorm_row::{MAX_C, NARROW_MAX_C};
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::vectorized::vectorized;
use super::{to_u32, Kernels, Result};

/// Warps per block of the wide kernels (64 floats a lane, 220-255 registers: one such block
/// per SM).
const ROWS_PER_BLOCK: usize = 8;

/// Warps per block of the narrow bf16 kernel (32 floats a lane, 128-168 registers): blocks of 4
/// warps let 3 share an SM at 168 (12 warps), where blocks of 8 would still run one at a time.
const NARROW_ROWS_PER_BLOCK: usize = 4;

/// Most blocks: 4 per SM of a 132-SM GPU. Each stages the weights once and takes every
/// `blocks * warps`-th row, so fewer blocks read the weights fewer times.
const MAX_BLOCKS: usize = 528;

/// Checks and launches `kernel` (elements per lane's vector access: `group`; `warps` rows per
/// block) over `n` rows of `c` of `T` into `out`'s `O`; `res` and `r` are the residual
/// variants' sum and second input.
#[allow(clippy::too_many_arguments)]
fn launch_row<T: Pod, O: Pod>(
    k: &Kernels,
    kernel: &'static str,
    group: usize,
    warps: usize,
    mut res: Option<&mut ViewMut<T>>,
    out: &mut ViewMut<O>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: &View<T>,
    r: Option<&View<T>>,
    weight: &View<f32>,
    bias: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    let ch = Check::new(k.device(), kernel);
    let nc = super::product("N*C", &[n, c])?;
    ch.output("out", out, nc)?.output("mean", mean, n)?.output("rstd", rstd, n)?;
    ch.input("inp", inp, nc)?.input("weight", weight, c)?.input("bias", bias, c)?;
    ch.shape(c >= 1 && c <= MAX_C as usize, || {
        format!("C = {c} is not in 1..={MAX_C} (a row per warp, in registers)")
    })?;
    to_u32("N*C", nc)?;
    let mut addrs = vec![out.addr_mut(), inp.addr(), weight.addr(), bias.addr()];
    if let (Some(res), Some(r)) = (res.as_deref_mut(), r) {
        ch.output("res", res, nc)?.input("r", r, nc)?;
        addrs.extend([res.addr_mut(), r.addr()]);
    }
    // Rows start aligned only when C holds whole groups.
    let vec = vectorized(&addrs) * u32::from(c % group == 0);
    let cfg = LaunchConfig {
        grid: [n.div_ceil(warps).clamp(1, MAX_BLOCKS) as u32, 1, 1],
        block: [32 * warps as u32, 1, 1],
        // The weights and biases: 16 KiB at the widest row.
        dynamic_smem_bytes: (2 * c * 4) as u32,
    };
    let mut args = Vec::with_capacity(11);
    if let Some(res) = res {
        args.push(res.arg_mut());
    }
    args.extend([out.arg_mut(), mean.arg_mut(), rstd.arg_mut(), inp.arg()]);
    if let Some(r) = r {
        args.push(r.arg());
    }
    args.extend([weight.arg(), bias.arg(), to_u32("N", n)?.into(), to_u32("C", c)?.into(), vec.into()]);
    // SAFETY: every view holds the length its role needs for `n` rows of `c`, aligned as
    // `vec` says.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}

/// LayerNorm forward over `n` rows of `c <= 2048` f32, reading `inp` once: writes `out` and
/// each row's `mean` and `rstd`, as [`super::layernorm_forward`] does. Wider rows go to that
/// kernel.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_row(
    k: &Kernels,
    out: &mut ViewMut<f32>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: &View<f32>,
    weight: &View<f32>,
    bias: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    if c > MAX_C as usize {
        return super::layernorm_forward(k, out, mean, rstd, inp, weight, bias, n, c);
    }
    launch_row(
        k,
        "layernorm_forward_row_f32",
        4,
        ROWS_PER_BLOCK,
        None,
        out,
        mean,
        rstd,
        inp,
        None,
        weight,
        bias,
        n,
        c,
    )
}

/// `res = inp + r` and LayerNorm forward of `res` in one pass, f32, `c <= 2048`.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_residual_forward(
    k: &Kernels,
    res: &mut ViewMut<f32>,
    out: &mut ViewMut<f32>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: &View<f32>,
    r: &View<f32>,
    weight: &View<f32>,
    bias: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    launch_row(
        k,
        "layernorm_residual_forward_f32",
        4,
        ROWS_PER_BLOCK,
        Some(res),
        out,
        mean,
        rstd,
        inp,
        Some(r),
        weight,
        bias,
        n,
        c,
    )
}

/// The kernel [`layernorm_forward_row_bf16`] launches for rows of `c`: the narrow one (32
/// floats per lane, several blocks per SM) up to 1024 channels, the wide one (64) above.
pub fn layernorm_forward_row_bf16_kernel(c: usize) -> &'static str {
    if c <= NARROW_MAX_C as usize {
        "layernorm_forward_row_bf16_narrow"
    } else {
        "layernorm_forward_row_bf16"
    }
}

/// [`layernorm_forward_row`] on bf16 input and output (f32 weights, statistics and math), `c
/// <= 2048`; rows of up to 1024 take the narrow kernel
/// ([`layernorm_forward_row_bf16_kernel`]).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_row_bf16(
    k: &Kernels,
    out: &mut ViewMut<u16>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: &View<u16>,
    weight: &View<f32>,
    bias: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    let kernel = layernorm_forward_row_bf16_kernel(c);
    let warps = if c <= NARROW_MAX_C as usize { NARROW_ROWS_PER_BLOCK } else { ROWS_PER_BLOCK };
    launch_row(k, kernel, 8, warps, None, out, mean, rstd, inp, None, weight, bias, n, c)
}

/// [`layernorm_forward_row`] of f32 rows into a bf16 `out` (`c <= 2048`): the f32 kernel's
/// values, each rounded once to bf16 (nearest, ties to even), so the bits are those of the
/// f32 kernel followed by a narrowing conversion.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_row_f32_bf16(
    k: &Kernels,
    out: &mut ViewMut<u16>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: &View<f32>,
    weight: &View<f32>,
    bias: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    // Groups of 4 columns: 16 bytes of input, 8 of output, per lane and access.
    launch_row(
        k,
        "layernorm_forward_row_f32_bf16",
        4,
        ROWS_PER_BLOCK,
        None,
        out,
        mean,
        rstd,
        inp,
        None,
        weight,
        bias,
        n,
        c,
    )
}

/// [`layernorm_residual_forward`] on bf16 tensors: `res = bf16(inp + r)`, normalized as
/// stored.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_residual_forward_bf16(
    k: &Kernels,
    res: &mut ViewMut<u16>,
    out: &mut ViewMut<u16>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: &View<u16>,
    r: &View<u16>,
    weight: &View<f32>,
    bias: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    launch_row(
        k,
        "layernorm_residual_forward_bf16",
        8,
        ROWS_PER_BLOCK,
        Some(res),
        out,
        mean,
        rstd,
        inp,
        Some(r),
        weight,
        bias,
        n,
        c,
    )
}
