//! Causal self-attention on the CPU, one (batch, head) per task. Each block of `BLOCK` query
//! rows meets all the keys it can see at once: its scores are a `BLOCK x T` strip in a
//! per-thread scratch buffer, never a `T x T` matrix, so the softmax is exact (no running
//! rescale) and every product is one `gemm` call over the whole strip instead of one per tile.
//! The backward pass recomputes the probabilities from the saved per-row log-sum-exp.
//!
//! `qkv` is `[B, T, 3C]` (Q, K, V, each with head `h` in channels `h*hs..(h+1)*hs`), `out` is
//! `[B, T, C]`, `lse` is `[B, NH, T]`.

use gemm::Parallelism;
use rayon::prelude::*;

use super::elems;
use super::math::{dot, exp, max, simd, sum, DisjointMut};
use super::matmul::{gemm_into, Mat};
use super::scratch::with_scratch;

/// Longest head the CPU kernels accept (the GPU kernels' limit, so that every device takes
/// the same models).
pub const MAX_HEAD_DIM: usize = 128;
/// Query rows per strip.
const BLOCK: usize = 64;
/// The strip products run on their task's thread: the tasks are already one per core or more.
const ONE_THREAD: Parallelism = Parallelism::None;

/// Row `r` of a strip starting at query `i0` sees keys `0..i0 + r + 1`.
#[inline(always)]
fn visible(i0: usize, r: usize) -> usize {
    i0 + r + 1
}

/// Causal self-attention forward on the host: `out` `[b, t, C]` and the log-sum-exp `lse`
/// `[b, nh, t]` from `qkv` `[b, t, 3C]`, as the kernel computes them.
pub fn attention_forward(
    out: &mut [f32],
    lse: &mut [f32],
    qkv: &[f32],
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) {
    assert!(out.len() == elems(&[b, t, c]) && lse.len() == elems(&[b, nh, t]) && qkv.len() == 3 * out.len());
    let hs = c / nh;
    assert!(hs <= MAX_HEAD_DIM);
    let sc = 1.0 / (hs as f32).sqrt();
    let out = DisjointMut::new(out);
    lse.par_chunks_mut(t).enumerate().for_each(|(bh, lse)| {
        let (bi, h) = (bh / nh, bh % nh);
        let at = |row: usize, part: usize| bi * t * 3 * c + row * 3 * c + part * c + h * hs;
        let ld = (3 * c) as isize;
        with_scratch(BLOCK * t, |s| {
            for i0 in (0..t).step_by(BLOCK) {
                let mq = BLOCK.min(t - i0);
                let nk = i0 + mq;
                let q = Mat(qkv[at(i0, 0)..].as_ptr(), ld, 1);
                let kt = Mat(qkv[at(0, 1)..].as_ptr(), 1, ld);
                // SAFETY: Q rows i0..i0+mq and K rows 0..nk of this head lie in `qkv`; `s`
                // holds mq x nk at row stride nk.
                unsafe { gemm_into(s.as_mut_ptr(), nk, false, sc, q, kt, mq, nk, hs, ONE_THREAD) };
                let mut inv = [0.0f32; BLOCK];
                simd(
                    #[inline(always)]
                    || {
                        for r in 0..mq {
                            let (seen, masked) = s[r * nk..(r + 1) * nk].split_at_mut(visible(i0, r));
                            let m = max(seen);
                            for x in seen.iter_mut() {
                                *x = exp(*x - m);
                            }
                            masked.fill(0.0);
                            let l = sum(seen);
                            inv[r] = 1.0 / l;
                            lse[i0 + r] = m + l.ln();
                        }
                    },
                );
                let v = Mat(qkv[at(0, 2)..].as_ptr(), ld, 1);
                // SAFETY: P is mq x nk in `s`; V rows 0..nk of this head lie in `qkv`; the
                // destination is this head's columns of rows i0..i0+mq, which task (bi, h)
                // alone writes.
                unsafe {
                    let o = out.ptr((bi * t + i0) * c + h * hs);
                    gemm_into(o, c, false, 1.0, Mat(s.as_ptr(), nk as isize, 1), v, mq, hs, nk, ONE_THREAD)
                };
                simd(
                    #[inline(always)]
                    || {
                        for (r, &inv) in inv[..mq].iter().enumerate() {
                            // SAFETY: as above.
                            for o in unsafe { out.slice((bi * t + i0 + r) * c + h * hs, hs) } {
                                *o *= inv;
                            }
                        }
                    },
                );
            }
        });
    });
}

/// Gradient of `attention_forward` with respect to `qkv`, written to `dqkv` (overwritten).
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    dqkv: &mut [f32],
    dout: &[f32],
    qkv: &[f32],
    out: &[f32],
    lse: &[f32],
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) {
    assert!(out.len() == elems(&[b, t, c]) && dout.len() == out.len() && lse.len() == elems(&[b, nh, t]));
    assert!(qkv.len() == 3 * out.len() && dqkv.len() == qkv.len());
    let hs = c / nh;
    assert!(hs <= MAX_HEAD_DIM);
    let sc = 1.0 / (hs as f32).sqrt();
    let dqkv = DisjointMut::new(dqkv);
    (0..b * nh).into_par_iter().for_each(|bh| {
        let (bi, h) = (bh / nh, bh % nh);
        let at = |row: usize, part: usize| bi * t * 3 * c + row * 3 * c + part * c + h * hs;
        let at_out = |row: usize| (bi * t + row) * c + h * hs;
        let (ld, ldo) = ((3 * c) as isize, c as isize);
        let lse = &lse[bh * t..][..t];
        with_scratch(2 * BLOCK * t, |scratch| {
            let (p, ds) = scratch.split_at_mut(BLOCK * t);
            // The last strip sees every key, so it writes dK and dV whole and the strips before
            // it accumulate into them; dQ is written whole by each strip.
            for i0 in (0..t).step_by(BLOCK).rev() {
                let mq = BLOCK.min(t - i0);
                let nk = i0 + mq;
                let first = nk == t;
                let q = Mat(qkv[at(i0, 0)..].as_ptr(), ld, 1);
                let k = Mat(qkv[at(0, 1)..].as_ptr(), ld, 1);
                let kt = Mat(qkv[at(0, 1)..].as_ptr(), 1, ld);
                let vt = Mat(qkv[at(0, 2)..].as_ptr(), 1, ld);
                let d_o = Mat(dout[at_out(i0)..].as_ptr(), ldo, 1);
                // SAFETY (all strip products below): the Q, K, V rows of this head and the dout
                // rows lie in their slices at the given strides; p and ds hold mq x nk at row
                // stride nk; the dQ, dK, dV destinations are this head's columns, which task
                // (bi, h) alone touches.
                unsafe {
                    // S = sc Q K^T and dP = dO V^T over the strip.
                    gemm_into(p.as_mut_ptr(), nk, false, sc, q, kt, mq, nk, hs, ONE_THREAD);
                    gemm_into(ds.as_mut_ptr(), nk, false, 1.0, d_o, vt, mq, nk, hs, ONE_THREAD);
                }
                simd(
                    #[inline(always)]
                    || {
                        for r in 0..mq {
                            let row = i0 + r;
                            let delta = dot(&out[at_out(row)..][..hs], &dout[at_out(row)..][..hs]);
                            let (pr, dr) = (&mut p[r * nk..(r + 1) * nk], &mut ds[r * nk..(r + 1) * nk]);
                            let (seen, masked) = pr.split_at_mut(visible(i0, r));
                            let (dseen, dmasked) = dr.split_at_mut(visible(i0, r));
                            let shift = lse[row];
                            // dS = P (dP - delta) sc, delta = sum_j P dP = dO . O.
                            for (x, d) in seen.iter_mut().zip(dseen.iter_mut()) {
                                *x = exp(*x - shift);
                                *d = *x * (*d - delta) * sc;
                            }
                            masked.fill(0.0);
                            dmasked.fill(0.0);
                        }
                    },
                );
                let dsm = Mat(ds.as_ptr(), nk as isize, 1);
                let (pt, dst) = (Mat(p.as_ptr(), 1, nk as isize), Mat(ds.as_ptr(), 1, nk as isize));
                // SAFETY: as for the two products above.
                unsafe {
                    // dQ = dS K, dK += dS^T Q, dV += P^T dO.
                    gemm_into(dqkv.ptr(at(i0, 0)), 3 * c, false, 1.0, dsm, k, mq, hs, nk, ONE_THREAD);
                    gemm_into(dqkv.ptr(at(0, 1)), 3 * c, !first, 1.0, dst, q, nk, hs, mq, ONE_THREAD);
                    gemm_into(dqkv.ptr(at(0, 2)), 3 * c, !first, 1.0, pt, d_o, nk, hs, mq, ONE_THREAD);
                }
            }
        });
    });
}
