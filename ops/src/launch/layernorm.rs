use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result};

const ROWS_PER_BLOCK: usize = 8;

/// LayerNorm forward over `n` rows of `c`: writes `out`, and each row's `mean` and `rstd`.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward(
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
    const KERNEL: &str = "layernorm_forward_f32";
    let ch = Check::new(k.device(), KERNEL);
    ch.output("out", out, n * c)?.output("mean", mean, n)?.output("rstd", rstd, n)?;
    ch.input("inp", inp, n * c)?.input("weight", weight, c)?.input("bias", bias, c)?;
    to_u32("N*C", n * c)?;
    let cfg = LaunchConfig {
        grid: [to_u32("blocks", n.div_ceil(ROWS_PER_BLOCK).max(1))?, 1, 1],
        block: [32 * ROWS_PER_BLOCK as u32, 1, 1],
        dynamic_smem_bytes: 0,
    };
    let args = [
        out.arg_mut(),
        mean.arg_mut(),
        rstd.arg_mut(),
        inp.arg(),
        weight.arg(),
        bias.arg(),
        to_u32("N", n)?.into(),
        to_u32("C", c)?.into(),
    ];
    // SAFETY: every view holds the length its role needs for `n` rows of `c`.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}

/// LayerNorm backward: accumulates into `dinp`, `dweight` and `dbias`.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward(
    k: &Kernels,
    dinp: &mut ViewMut<f32>,
    dweight: &mut ViewMut<f32>,
    dbias: &mut ViewMut<f32>,
    dout: &View<f32>,
    inp: &View<f32>,
    weight: &View<f32>,
    mean: &View<f32>,
    rstd: &View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    const KERNEL: &str = "layernorm_backward_f32";
    let ch = Check::new(k.device(), KERNEL);
    ch.output("dinp", dinp, n * c)?.output("dweight", dweight, c)?.output("dbias", dbias, c)?;
    ch.input("dout", dout, n * c)?.input("inp", inp, n * c)?.input("weight", weight, c)?;
    ch.input("mean", mean, n)?.input("rstd", rstd, n)?;
    let smem = 2 * c * 4;
    ch.shape(smem <= 96 * 1024, || format!("C = {c} needs more shared memory than a block has"))?;
    to_u32("N*C", n * c)?;
    // A few blocks per SM's worth: each adds its C-wide partial sums once.
    let blocks = n.div_ceil(ROWS_PER_BLOCK).clamp(1, 256);
    let cfg = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [32 * ROWS_PER_BLOCK as u32, 1, 1],
        dynamic_smem_bytes: smem as u32,
    };
    let args = [
        dinp.arg_mut(),
        dweight.arg_mut(),
        dbias.arg_mut(),
        dout.arg(),
        inp.arg(),
        weight.arg(),
        mean.arg(),
        rstd.arg(),
        to_u32("N", n)?.into(),
        to_u32("C", c)?.into(),
    ];
    // SAFETY: every view holds the length its role needs for `n` rows of `c`.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
