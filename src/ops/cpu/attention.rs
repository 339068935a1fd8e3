//! Causal self-attention, flash style: each query row runs an online softmax over blocks of
//! keys, so no `T x T` matrix is ever held; the backward pass recomputes the probabilities from
//! the saved per-row log-sum-exp. Parallel over (batch, head).
//!
//! `qkv` is `[B, T, 3C]` (Q, K, V, each with head `h` in channels `h*hs..(h+1)*hs`), `out` is
//! `[B, T, C]`, `lse` is `[B, NH, T]`.

use rayon::prelude::*;

use super::math::{axpy, dot, exp, max, scale, simd, DisjointMut};

/// Longest head the CPU kernels hold on the stack.
pub const MAX_HEAD_DIM: usize = 256;
/// Keys scored per online-softmax step.
const KEY_BLOCK: usize = 64;

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
    let sc = 1.0 / (hs as f32).sqrt();
    let out = DisjointMut::new(out);
    lse.par_chunks_mut(t).enumerate().for_each(|(bh, lse)| {
        let (bi, h) = (bh / nh, bh % nh);
        let base = bi * t * 3 * c;
        let row = |j: usize, part: usize| &qkv[base + j * 3 * c + part * c + h * hs..][..hs];
        simd(|| {
            let mut acc = [0.0f32; MAX_HEAD_DIM];
            let acc = &mut acc[..hs];
            let mut s = [0.0f32; KEY_BLOCK];
            for (i, lse) in lse.iter_mut().enumerate() {
                let q = row(i, 0);
                let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
                acc.fill(0.0);
                for j0 in (0..=i).step_by(KEY_BLOCK) {
                    let s = &mut s[..(i + 1 - j0).min(KEY_BLOCK)];
                    for (jj, s) in s.iter_mut().enumerate() {
                        *s = dot(q, row(j0 + jj, 1)) * sc;
                    }
                    let m_new = m.max(max(s));
                    let correction = exp(m - m_new);
                    l *= correction;
                    scale(correction, acc);
                    for (jj, &s) in s.iter().enumerate() {
                        let p = exp(s - m_new);
                        l += p;
                        axpy(p, row(j0 + jj, 2), acc);
                    }
                    m = m_new;
                }
                // SAFETY: task (bi, h) alone writes head h's columns of batch bi's rows.
                let o = unsafe { out.slice((bi * t + i) * c + h * hs, hs) };
                let inv = 1.0 / l;
                for (o, a) in o.iter_mut().zip(acc.iter()) {
                    *o = a * inv;
                }
                *lse = m + l.ln();
            }
        })
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
    let hs = c / nh;
    let sc = 1.0 / (hs as f32).sqrt();
    let dqkv = DisjointMut::new(dqkv);
    (0..b * nh).into_par_iter().for_each(|bh| {
        let (bi, h) = (bh / nh, bh % nh);
        let base = bi * t * 3 * c;
        let offset = |j: usize, part: usize| base + j * 3 * c + part * c + h * hs;
        let row = |j: usize, part: usize| &qkv[offset(j, part)..][..hs];
        let lse = &lse[bh * t..][..t];
        simd(|| {
            for j in 0..t {
                for part in 1..3 {
                    // SAFETY: task (bi, h) alone touches head h's columns of batch bi's rows.
                    unsafe { dqkv.slice(offset(j, part), hs) }.fill(0.0);
                }
            }
            let mut dq = [0.0f32; MAX_HEAD_DIM];
            let dq = &mut dq[..hs];
            for i in 0..t {
                let q = row(i, 0);
                let o_at = (bi * t + i) * c + h * hs;
                let (o, d_o) = (&out[o_at..][..hs], &dout[o_at..][..hs]);
                let delta = dot(d_o, o);
                dq.fill(0.0);
                for j in 0..=i {
                    let (k, v) = (row(j, 1), row(j, 2));
                    let p = exp(dot(q, k) * sc - lse[i]);
                    let ds = p * (dot(d_o, v) - delta) * sc;
                    axpy(ds, k, dq);
                    // SAFETY: as above; the K and V rows are disjoint from each other and from dq.
                    axpy(ds, q, unsafe { dqkv.slice(offset(j, 1), hs) });
                    // SAFETY: as above.
                    axpy(p, d_o, unsafe { dqkv.slice(offset(j, 2), hs) });
                }
                // SAFETY: as above.
                unsafe { dqkv.slice(offset(i, 0), hs) }.copy_from_slice(dq);
            }
        })
    });
}
