//! Linear layers through the `gemm` crate. Weights are `[out, in]` row-major, as in llm.c.

use gemm::Parallelism;
use rayon::prelude::*;

use super::elems;
use super::math::simd;

/// What the destination of a product starts from.
#[derive(Clone, Copy)]
enum Start<'a> {
    Zero,
    /// Its current contents (gradients that accumulate).
    Current,
    /// This row in every row (a bias).
    Row(&'a [f32]),
    /// A matrix of the destination's shape, plus a row (a bias) when there is one.
    Sum(&'a [f32], Option<&'a [f32]>),
}

/// `dst[m, n] = start + lhs[m, k] @ rhs[k, n]` for row-major `dst`, with `lhs` and `rhs` given
/// by (row, column) strides, as one `gemm` call on every core: `gemm` packs each block of the
/// operands once and shares it between its threads, where tasks over rows of `dst` would each
/// pack all of `rhs` again (for a weight gradient, the whole activation matrix per task).
///
/// # Safety
/// Every element the strides reach must lie inside the slices' allocations.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_strided(
    dst: &mut [f32],
    start: Start,
    lhs: (&[f32], isize, isize),
    rhs: (&[f32], isize, isize),
    m: usize,
    n: usize,
    k: usize,
) {
    assert!(dst.len() >= elems(&[m, n]), "gemm destination holds {} < {m}x{n}", dst.len());
    if m == 0 || n == 0 {
        return;
    }
    const ROWS: usize = 16;
    match start {
        Start::Zero | Start::Current => {}
        Start::Row(row) => dst[..m * n]
            .par_chunks_mut(n * ROWS)
            .for_each(|rows| rows.chunks_exact_mut(n).for_each(|r| r.copy_from_slice(row))),
        Start::Sum(matrix, row) => {
            assert!(matrix.len() >= elems(&[m, n]), "gemm start holds {} < {m}x{n}", matrix.len());
            dst[..m * n].par_chunks_mut(n * ROWS).zip(matrix.par_chunks(n * ROWS)).for_each(|(d, a)| {
                simd(
                    #[inline(always)]
                    || match row {
                        Some(row) => {
                            for (d, a) in d.chunks_exact_mut(n).zip(a.chunks_exact(n)) {
                                for ((d, &a), &b) in d.iter_mut().zip(a).zip(row) {
                                    *d = a + b;
                                }
                            }
                        }
                        None => d.copy_from_slice(&a[..d.len()]),
                    },
                )
            })
        }
    }
    let accumulate = !matches!(start, Start::Zero);
    let (lhs, rhs) = (Mat(lhs.0.as_ptr(), lhs.1, lhs.2), Mat(rhs.0.as_ptr(), rhs.1, rhs.2));
    // SAFETY: the whole row-major destination, borrowed mutably; operands vouched for by the
    // caller.
    unsafe { gemm_into(dst.as_mut_ptr(), n, accumulate, 1.0, lhs, rhs, m, n, k, Parallelism::Rayon(0)) }
}

/// A matrix operand: first element, row stride, column stride (in elements).
#[derive(Clone, Copy)]
pub(super) struct Mat(pub *const f32, pub isize, pub isize);

/// `dst[m, n] (row stride ld) = (accumulate ? dst : 0) + scale * lhs[m, k] @ rhs[k, n]`, on
/// the threads `parallelism` allows.
///
/// # Safety
/// Every element the strides reach must be valid for reads (`lhs`, `rhs`) and for writes
/// (`dst`), and `dst` must not overlap the operands or be written by another thread meanwhile.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_into(
    dst: *mut f32,
    ld: usize,
    accumulate: bool,
    scale: f32,
    lhs: Mat,
    rhs: Mat,
    m: usize,
    n: usize,
    k: usize,
    parallelism: Parallelism,
) {
    // SAFETY: forwarded from the caller. `gemm` takes (column, row) strides.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            ld as isize,
            accumulate,
            lhs.0,
            lhs.2,
            lhs.1,
            rhs.0,
            rhs.2,
            rhs.1,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
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
    assert!(inp.len() == n * ic && out.len() == elems(&[n, oc]) && weight.len() == elems(&[oc, ic]));
    let start = bias.map_or(Start::Zero, Start::Row);
    // SAFETY: inp is [n, ic] row-major (row stride ic); weight^T is [ic, oc] with element
    // (i, o) at o * ic + i (row stride 1, column stride ic). Lengths checked above.
    unsafe { gemm_strided(out, start, (inp, ic as isize, 1), (weight, 1, ic as isize), n, oc, ic) }
}

/// `out[n, oc] = residual[n, oc] + inp[n, ic] @ weight[oc, ic]^T + bias[oc]`: the product
/// accumulates onto `residual + bias`, written in one pass.
pub fn matmul_residual_forward(
    out: &mut [f32],
    inp: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: &[f32],
    ic: usize,
    oc: usize,
) {
    let n = inp.len() / ic;
    assert!(
        inp.len() == n * ic
            && out.len() == elems(&[n, oc])
            && weight.len() == elems(&[oc, ic])
            && residual.len() == out.len()
    );
    let start = Start::Sum(residual, bias);
    // SAFETY: as in `matmul_forward`.
    unsafe { gemm_strided(out, start, (inp, ic as isize, 1), (weight, 1, ic as isize), n, oc, ic) }
}

/// Gradients of `matmul_forward`: `dinp = dout @ weight` (overwritten), `dweight += dout^T @
/// inp`, `dbias += column sums of dout`.
#[allow(clippy::too_many_arguments)]
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
    assert!(inp.len() == n * ic && dinp.len() == n * ic && dout.len() == elems(&[n, oc]));
    assert!(weight.len() == elems(&[oc, ic]) && dweight.len() == weight.len());
    // SAFETY: dout is [n, oc] row-major and weight [oc, ic] row-major; lengths checked above.
    unsafe { gemm_strided(dinp, Start::Zero, (dout, oc as isize, 1), (weight, ic as isize, 1), n, ic, oc) }
    // `gemm` allocates its packing buffer on every call, here up to n x oc floats of dout. A
    // buffer past glibc's largest mmap threshold (32 MiB, see `retain_freed_memory`) is mapped
    // afresh each time and every page of it faults, as for the 50,304 vocabulary rows of
    // GPT-2's tied embedding; blocks of output rows keep it under the threshold.
    const PACK_FLOATS: usize = 4 << 20;
    let block = (PACK_FLOATS / n.max(1)).max(64) / 64 * 64;
    for o0 in (0..oc).step_by(block) {
        let rows = block.min(oc - o0);
        let dst = &mut dweight[o0 * ic..(o0 + rows) * ic];
        // SAFETY: dout^T rows o0..o0 + rows are [rows, n] with element (o, r) at o0 + r * oc + o
        // (row stride 1, column stride oc), inside dout; inp is [n, ic] row-major; dst holds
        // rows x ic. Lengths checked above.
        unsafe {
            gemm_strided(
                dst,
                Start::Current,
                (&dout[o0..], 1, oc as isize),
                (inp, ic as isize, 1),
                rows,
                ic,
                n,
            )
        }
    }
    if let Some(dbias) = dbias {
        const BLOCK: usize = 64;
        dbias.par_chunks_mut(BLOCK).enumerate().for_each(|(blk, db)| {
            let c0 = blk * BLOCK;
            simd(
                #[inline(always)]
                || {
                    for row in dout.chunks_exact(oc) {
                        for (d, g) in db.iter_mut().zip(&row[c0..]) {
                            *d += g;
                        }
                    }
                },
            )
        });
    }
}
