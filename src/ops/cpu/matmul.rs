//! Linear layers through the `gemm` crate. Weights are `[out, in]` row-major, as in llm.c.

use gemm::Parallelism;
use rayon::prelude::*;

use super::math::simd;

fn parallelism(flops: usize) -> Parallelism {
    // Below ~1 MFLOP the fork/join costs more than it saves.
    if flops < 1 << 20 || rayon::current_num_threads() == 1 {
        Parallelism::None
    } else {
        Parallelism::Rayon(rayon::current_num_threads())
    }
}

/// `dst[m, n] = (accumulate ? dst : 0) + lhs[m, k] @ rhs[k, n]` for row-major `dst`, with
/// `lhs` and `rhs` given by (row, column) strides.
///
/// # Safety
/// Every element the strides reach must lie inside the slices' allocations.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_strided(
    dst: &mut [f32],
    accumulate: bool,
    lhs: (&[f32], isize, isize),
    rhs: (&[f32], isize, isize),
    m: usize,
    n: usize,
    k: usize,
) {
    assert!(dst.len() >= m * n, "gemm destination holds {} < {m}x{n}", dst.len());
    // SAFETY: `dst` is row-major m x n (checked); the caller vouches for `lhs` and `rhs`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.0.as_ptr(),
            lhs.2,
            lhs.1,
            rhs.0.as_ptr(),
            rhs.2,
            rhs.1,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism(2 * m * n * k),
        )
    }
}

/// `out[n, oc] = inp[n, ic] @ weight[oc, ic]^T + bias[oc]`
pub fn matmul_forward(
    out: &mut [f32],
    inp: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    ic: usize,
    oc: usize,
) {
    let n = inp.len() / ic;
    assert!(inp.len() == n * ic && out.len() == n * oc && weight.len() == oc * ic);
    if let Some(bias) = bias {
        out.par_chunks_mut(oc).with_min_len(16).for_each(|row| row.copy_from_slice(bias));
    }
    // SAFETY: inp is [n, ic] row-major (row stride ic); weight^T is [ic, oc] with element
    // (i, o) at o * ic + i (row stride 1, column stride ic). Lengths checked above.
    unsafe { gemm_strided(out, bias.is_some(), (inp, ic as isize, 1), (weight, 1, ic as isize), n, oc, ic) }
}

/// Gradients of `matmul_forward`: `dinp = dout @ weight` (overwritten), `dweight += dout^T @
/// inp`, `dbias += column sums of dout`.
pub fn matmul_backward(
    dinp: &mut [f32],
    dweight: &mut [f32],
    dbias: Option<&mut [f32]>,
    dout: &[f32],
    inp: &[f32],
    weight: &[f32],
    ic: usize,
    oc: usize,
) {
    let n = inp.len() / ic;
    assert!(inp.len() == n * ic && dinp.len() == n * ic && dout.len() == n * oc);
    assert!(weight.len() == oc * ic && dweight.len() == oc * ic);
    // SAFETY: dout is [n, oc] row-major and weight [oc, ic] row-major; lengths checked above.
    unsafe { gemm_strided(dinp, false, (dout, oc as isize, 1), (weight, ic as isize, 1), n, ic, oc) }
    // SAFETY: dout^T is [oc, n] with element (o, r) at r * oc + o (row stride 1, column stride
    // oc); inp is [n, ic] row-major. Lengths checked above.
    unsafe { gemm_strided(dweight, true, (dout, 1, oc as isize), (inp, ic as isize, 1), oc, ic, n) }
    if let Some(dbias) = dbias {
        const BLOCK: usize = 64;
        dbias.par_chunks_mut(BLOCK).enumerate().for_each(|(blk, db)| {
            let c0 = blk * BLOCK;
            simd(|| {
                for row in dout.chunks_exact(oc) {
                    for (d, g) in db.iter_mut().zip(&row[c0..]) {
                        *d += g;
                    }
                }
            })
        });
    }
}
