//! Causal self-attention, flash style: for each (batch, head), query blocks run an online
//! softmax over key blocks, so only `BLOCK x BLOCK` score tiles are ever held; the backward pass
//! recomputes the probabilities from the saved per-row log-sum-exp (FlashAttention-2 order: key
//! blocks outside, query blocks inside). Tiles are multiplied with `gemm` straight out of the
//! strided `qkv` rows. Parallel over (batch, head).
//!
//! `qkv` is `[B, T, 3C]` (Q, K, V, each with head `h` in channels `h*hs..(h+1)*hs`), `out` is
//! `[B, T, C]`, `lse` is `[B, NH, T]`.

use gemm::Parallelism;
use rayon::prelude::*;

use super::math::{dot, exp, max, scale, simd, sum, DisjointMut};
use super::matmul::{gemm_into, Mat};

/// Longest head the CPU kernels hold in their tiles.
pub const MAX_HEAD_DIM: usize = 128;
/// Query rows and keys per tile.
const BLOCK: usize = 64;

/// `dst[m, n] (row stride ld) = (accumulate ? dst : 0) + lhs[m, k] @ rhs[k, n]`, one thread.
///
/// # Safety
/// As for [`gemm_into`].
#[allow(clippy::too_many_arguments)]
unsafe fn tile_gemm(
    dst: *mut f32,
    ld: usize,
    accumulate: bool,
    lhs: Mat,
    rhs: Mat,
    m: usize,
    n: usize,
    k: usize,
) {
    // SAFETY: forwarded from the caller.
    unsafe { gemm_into(dst, ld, accumulate, lhs, rhs, m, n, k, Parallelism::None) }
}

pub fn attention_forward(
    out: &mut [f32],
    lse: &mut [f32],
    qkv: &[f32],
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) {
    assert!(out.len() == b * t * c && lse.len() == b * nh * t && qkv.len() == 3 * out.len());
    let hs = c / nh;
    assert!(hs <= MAX_HEAD_DIM);
    let sc = 1.0 / (hs as f32).sqrt();
    let out = DisjointMut::new(out);
    lse.par_chunks_mut(t).enumerate().for_each(|(bh, lse)| {
        let (bi, h) = (bh / nh, bh % nh);
        let at = |row: usize, part: usize| bi * t * 3 * c + row * 3 * c + part * c + h * hs;
        let ld = (3 * c) as isize;
        let mut s = [0.0f32; BLOCK * BLOCK];
        let mut acc = [0.0f32; BLOCK * MAX_HEAD_DIM];
        let (mut m, mut l) = ([0.0f32; BLOCK], [0.0f32; BLOCK]);
        for i0 in (0..t).step_by(BLOCK) {
            let mq = BLOCK.min(t - i0);
            m.fill(f32::NEG_INFINITY);
            l.fill(0.0);
            acc[..mq * hs].fill(0.0);
            for j0 in (0..i0 + mq).step_by(BLOCK) {
                let nk = BLOCK.min(i0 + mq - j0);
                let q = Mat(qkv[at(i0, 0)..].as_ptr(), ld, 1);
                let kt = Mat(qkv[at(j0, 1)..].as_ptr(), 1, ld);
                // SAFETY: Q rows i0..i0+mq and K rows j0..j0+nk of this head lie in `qkv`; `s`
                // holds mq x nk at row stride BLOCK.
                unsafe { tile_gemm(s.as_mut_ptr(), BLOCK, false, q, kt, mq, nk, hs) };
                simd(
                    #[inline(always)]
                    || {
                        for r in 0..mq {
                            let row = &mut s[r * BLOCK..r * BLOCK + nk];
                            // Keys after the query are masked (only in the diagonal tile).
                            let visible = (i0 + r + 1).saturating_sub(j0).min(nk);
                            let (seen, masked) = row.split_at_mut(visible);
                            // Separate passes, the reductions over lane arrays: a loop that
                            // reduces in order does not vectorise, exp included.
                            scale(sc, seen);
                            let m_new = m[r].max(max(seen));
                            let correction = exp(m[r] - m_new);
                            for x in seen.iter_mut() {
                                *x = exp(*x - m_new);
                            }
                            masked.fill(0.0);
                            l[r] = l[r] * correction + sum(seen);
                            m[r] = m_new;
                            for a in acc[r * hs..(r + 1) * hs].iter_mut() {
                                *a *= correction;
                            }
                        }
                    },
                );
                let v = Mat(qkv[at(j0, 2)..].as_ptr(), ld, 1);
                // SAFETY: P is mq x nk in `s`; V rows j0..j0+nk lie in `qkv`; acc is mq x hs.
                unsafe {
                    tile_gemm(acc.as_mut_ptr(), hs, true, Mat(s.as_ptr(), BLOCK as isize, 1), v, mq, hs, nk)
                };
            }
            simd(
                #[inline(always)]
                || {
                    for r in 0..mq {
                        // SAFETY: task (bi, h) alone writes head h's columns of batch bi's rows.
                        let o = unsafe { out.slice((bi * t + i0 + r) * c + h * hs, hs) };
                        let inv = 1.0 / l[r];
                        for (o, a) in o.iter_mut().zip(&acc[r * hs..(r + 1) * hs]) {
                            *o = a * inv;
                        }
                        lse[i0 + r] = m[r] + l[r].ln();
                    }
                },
            );
        }
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
    assert!(out.len() == b * t * c && dout.len() == out.len() && lse.len() == b * nh * t);
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
        for i in 0..t {
            // SAFETY: task (bi, h) alone touches head h's columns of batch bi's rows.
            unsafe { dqkv.slice(at(i, 0), hs) }.fill(0.0);
        }
        let mut p = [0.0f32; BLOCK * BLOCK];
        let mut dp = [0.0f32; BLOCK * BLOCK];
        let mut dk = [0.0f32; BLOCK * MAX_HEAD_DIM];
        let mut dv = [0.0f32; BLOCK * MAX_HEAD_DIM];
        let mut delta = [0.0f32; BLOCK];
        for j0 in (0..t).step_by(BLOCK) {
            let nk = BLOCK.min(t - j0);
            dk[..nk * hs].fill(0.0);
            dv[..nk * hs].fill(0.0);
            for i0 in (j0 / BLOCK * BLOCK..t).step_by(BLOCK) {
                let mq = BLOCK.min(t - i0);
                let q = Mat(qkv[at(i0, 0)..].as_ptr(), ld, 1);
                let d_o = Mat(dout[at_out(i0)..].as_ptr(), ldo, 1);
                // SAFETY (all tile products below): the Q, K, V rows of this head and the dout
                // rows lie in their slices at the given strides; p, dp, dk, dv are local tiles
                // of BLOCK x BLOCK and BLOCK x hs; dq rows belong to this task alone.
                unsafe {
                    tile_gemm(
                        p.as_mut_ptr(),
                        BLOCK,
                        false,
                        q,
                        Mat(qkv[at(j0, 1)..].as_ptr(), 1, ld),
                        mq,
                        nk,
                        hs,
                    )
                };
                unsafe {
                    tile_gemm(
                        dp.as_mut_ptr(),
                        BLOCK,
                        false,
                        d_o,
                        Mat(qkv[at(j0, 2)..].as_ptr(), 1, ld),
                        mq,
                        nk,
                        hs,
                    )
                };
                simd(
                    #[inline(always)]
                    || {
                        for r in 0..mq {
                            let o = &out[at_out(i0 + r)..][..hs];
                            let dy = &dout[at_out(i0 + r)..][..hs];
                            delta[r] = dot(o, dy);
                        }
                        for r in 0..mq {
                            let visible = (i0 + r + 1).saturating_sub(j0).min(nk);
                            let (pr, dpr) =
                                (&mut p[r * BLOCK..r * BLOCK + nk], &mut dp[r * BLOCK..r * BLOCK + nk]);
                            let shift = lse[i0 + r];
                            for (x, d) in pr[..visible].iter_mut().zip(dpr[..visible].iter_mut()) {
                                *x = exp(*x * sc - shift);
                                *d = *x * (*d - delta[r]) * sc;
                            }
                            pr[visible..].fill(0.0);
                            dpr[visible..].fill(0.0);
                        }
                    },
                );
                let (pm, dsm) = (p.as_ptr(), dp.as_ptr());
                let bl = BLOCK as isize;
                unsafe {
                    // dV += P^T dO, dK += dS^T Q, dQ += dS K.
                    tile_gemm(dv.as_mut_ptr(), hs, true, Mat(pm, 1, bl), d_o, nk, hs, mq);
                    tile_gemm(dk.as_mut_ptr(), hs, true, Mat(dsm, 1, bl), q, nk, hs, mq);
                    let dq = dqkv.ptr(at(i0, 0));
                    tile_gemm(
                        dq,
                        3 * c,
                        true,
                        Mat(dsm, bl, 1),
                        Mat(qkv[at(j0, 1)..].as_ptr(), ld, 1),
                        mq,
                        hs,
                        nk,
                    );
                }
            }
            simd(
                #[inline(always)]
                || {
                    for r in 0..nk {
                        // SAFETY: as above.
                        unsafe { dqkv.slice(at(j0 + r, 1), hs) }.copy_from_slice(&dk[r * hs..(r + 1) * hs]);
                        // SAFETY: as above.
                        unsafe { dqkv.slice(at(j0 + r, 2), hs) }.copy_from_slice(&dv[r * hs..(r + 1) * hs]);
                    }
                },
            );
        }
    });
}
