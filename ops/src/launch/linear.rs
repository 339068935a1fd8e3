//! A linear layer on the GEMM and bias kernels: `out = inp W^T + bias`, `W` stored `[oc, c]`.

use trident_kernels::bias::BIAS_ROWS_PER_BLOCK;
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{gemm, to_u32, Gemm, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// `out[rows, oc] = inp[rows, c] W[oc, c]^T (+ bias[oc])`.
#[allow(clippy::too_many_arguments)]
pub fn linear_forward(
    k: &Kernels,
    out: &mut ViewMut<f32>,
    inp: &View<f32>,
    weight: &View<f32>,
    bias: Option<&View<f32>>,
    rows: usize,
    c: usize,
    oc: usize,
) -> Result<()> {
    const KERNEL: &str = "add_bias_f32";
    let ch = Check::new(k.device(), "linear_forward");
    ch.output("out", out, rows * oc)?.input("inp", inp, rows * c)?.input("weight", weight, oc * c)?;
    gemm(k, out, inp, weight, &Gemm::new(rows, oc, c).trans_b())?;
    if let Some(bias) = bias {
        ch.input("bias", bias, oc)?;
        let cfg = LaunchConfig::for_items(rows * oc, ELEMENTWISE_THREADS, MAX_BLOCKS);
        let args = [out.arg_mut(), bias.arg(), to_u32("rows", rows)?.into(), to_u32("oc", oc)?.into()];
        // SAFETY: `out` holds rows x oc elements and `bias` oc.
        unsafe { k.launch(KERNEL, &cfg, &args)? };
    }
    Ok(())
}

/// Writes `dinp = dout W`, and accumulates `dweight += dout^T inp` and `dbias += column sums of
/// dout` (so that micro-batches add up).
#[allow(clippy::too_many_arguments)]
pub fn linear_backward(
    k: &Kernels,
    dinp: &mut ViewMut<f32>,
    dweight: &mut ViewMut<f32>,
    dbias: Option<&mut ViewMut<f32>>,
    dout: &View<f32>,
    inp: &View<f32>,
    weight: &View<f32>,
    rows: usize,
    c: usize,
    oc: usize,
) -> Result<()> {
    let ch = Check::new(k.device(), "linear_backward");
    ch.output("dinp", dinp, rows * c)?.output("dweight", dweight, oc * c)?;
    ch.input("dout", dout, rows * oc)?.input("inp", inp, rows * c)?.input("weight", weight, oc * c)?;
    gemm(k, dinp, dout, weight, &Gemm::new(rows, c, oc))?;
    gemm(k, dweight, dout, inp, &Gemm::new(oc, c, rows).trans_a().beta(1.0))?;
    if let Some(dbias) = dbias {
        ch.output("dbias", dbias, oc)?;
        let cfg = LaunchConfig {
            grid: [
                to_u32("oc", oc.div_ceil(ELEMENTWISE_THREADS as usize))?,
                to_u32("row blocks", rows.div_ceil(BIAS_ROWS_PER_BLOCK as usize).max(1))?,
                1,
            ],
            block: [ELEMENTWISE_THREADS, 1, 1],
            dynamic_smem_bytes: 0,
        };
        let args = [dbias.arg_mut(), dout.arg(), to_u32("rows", rows)?.into(), to_u32("oc", oc)?.into()];
        // SAFETY: `dbias` holds oc elements and `dout` rows x oc.
        unsafe { k.launch("bias_backward_f32", &cfg, &args)? };
    }
    Ok(())
}
