//! Launch wrappers of mixed precision's conversions (`trident_kernels::convert`) and of the
//! bias gradient on its own, from f32 or 16-bit `dout` (the tensor-core linear layer's
//! backward sums the bias gradient apart from its GEMMs).

use trident_kernels::bias::{
    BIAS16_COLS_PER_BLOCK, BIAS16_ROWS_PER_BLOCK, BIAS16_THREADS, BIAS_ROWS_PER_BLOCK,
};
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::vectorized::vectorized;
use super::{to_u32, HalfFormat, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// `out = format(x)` elementwise: f32 rounded to the nearest bf16 or f16 (ties to even), the
/// bits stored as `u16`.
pub fn narrow(k: &Kernels, out: &mut ViewMut<u16>, x: &View<f32>, format: HalfFormat) -> Result<()> {
    let kernel = match format {
        HalfFormat::Bf16 => "convert_f32_to_bf16",
        HalfFormat::F16 => "convert_f32_to_f16",
    };
    Check::new(k.device(), kernel).output("out", out, x.len())?.input("x", x, x.len())?;
    let n = to_u32("length", x.len())?;
    let cfg = LaunchConfig::for_items(x.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [out.arg_mut(), x.arg(), n.into()];
    // SAFETY: `out` and `x` hold `n` elements each on the kernels' device.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}

/// `out = f32(x)` elementwise (exact), `x` holding `format` bits.
pub fn widen(k: &Kernels, out: &mut ViewMut<f32>, x: &View<u16>, format: HalfFormat) -> Result<()> {
    let kernel = match format {
        HalfFormat::Bf16 => "convert_bf16_to_f32",
        HalfFormat::F16 => "convert_f16_to_f32",
    };
    Check::new(k.device(), kernel).output("out", out, x.len())?.input("x", x, x.len())?;
    let n = to_u32("length", x.len())?;
    let cfg = LaunchConfig::for_items(x.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [out.arg_mut(), x.arg(), n.into()];
    // SAFETY: `out` and `x` hold `n` elements each on the kernels' device.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}

/// `dbias[j] += sum over r of dout[r, j]` for `dout` `[rows, oc]` (accumulated, so that
/// micro-batches add up).
pub fn bias_backward(
    k: &Kernels,
    dbias: &mut ViewMut<f32>,
    dout: &View<f32>,
    rows: usize,
    oc: usize,
) -> Result<()> {
    let ch = Check::new(k.device(), "bias_backward_f32");
    ch.output("dbias", dbias, oc)?.input("dout", dout, rows * oc)?;
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
    Ok(())
}

/// [`bias_backward`] from 16-bit `dout` (`format` bits): column sums in f32, 8 values per
/// 128-bit load where `dout` is 16-byte aligned and `oc` a multiple of 8 (else one at a time,
/// the same sums). A block covers 256 columns by 64 rows and adds each column's sum with one
/// atomic, so the grid has `oc / 256 x rows / 64` blocks (rounded up).
pub fn bias_backward_half(
    k: &Kernels,
    dbias: &mut ViewMut<f32>,
    dout: &View<u16>,
    format: HalfFormat,
    rows: usize,
    oc: usize,
) -> Result<()> {
    let kernel = match format {
        HalfFormat::Bf16 => "bias_backward_bf16",
        HalfFormat::F16 => "bias_backward_f16",
    };
    let ch = Check::new(k.device(), kernel);
    ch.output("dbias", dbias, oc)?.input("dout", dout, super::product("rows*oc", &[rows, oc])?)?;
    to_u32("rows*oc", rows * oc)?;
    if rows == 0 || oc == 0 {
        return Ok(());
    }
    let vec = vectorized(&[dout.addr()]) * u32::from(oc % 8 == 0);
    let cfg = LaunchConfig {
        grid: [
            to_u32("column blocks", oc.div_ceil(BIAS16_COLS_PER_BLOCK as usize))?,
            to_u32("row blocks", rows.div_ceil(BIAS16_ROWS_PER_BLOCK as usize))?,
            1,
        ],
        block: [BIAS16_THREADS, 1, 1],
        dynamic_smem_bytes: 0,
    };
    let args =
        [dbias.arg_mut(), dout.arg(), to_u32("rows", rows)?.into(), to_u32("oc", oc)?.into(), vec.into()];
    // SAFETY: `dbias` holds oc elements and `dout` rows x oc; `vec` only where every row
    // starts 16-byte aligned.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}
