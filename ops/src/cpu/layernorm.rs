use rayon::prelude::*;

use super::math::{simd, sum};
use super::scratch::with_scratch;

/// The epsilon added to the variance (GPT-2's), as the kernel's.
pub const LAYERNORM_EPS: f32 = 1e-5;

/// Normalises each of the `n` rows of `inp` (`[n, c]`) and applies `weight` and `bias`; saves
/// each row's mean and reciprocal standard deviation for the backward pass.
pub fn layernorm_forward(
    out: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
    inp: &[f32],
    weight: &[f32],
    bias: &[f32],
    c: usize,
) {
    out.par_chunks_mut(c)
        .zip(inp.par_chunks(c))
        .zip(mean.par_iter_mut().zip(rstd.par_iter_mut()))
        .with_min_len(8)
        .for_each(|((o, x), (m, s))| {
            simd(
                #[inline(always)]
                || {
                    let mu = sum(x) / c as f32;
                    let mut var = [0.0f32; 16];
                    let chunks = x.chunks_exact(16);
                    let mut tail = 0.0;
                    for &v in chunks.remainder() {
                        tail = (v - mu).mul_add(v - mu, tail);
                    }
                    for ch in chunks {
                        for k in 0..16 {
                            var[k] = (ch[k] - mu).mul_add(ch[k] - mu, var[k]);
                        }
                    }
                    let var = (var.iter().sum::<f32>() + tail) / c as f32;
                    let r = 1.0 / (var + LAYERNORM_EPS).sqrt();
                    for (((o, &v), &w), &b) in o.iter_mut().zip(x).zip(weight).zip(bias) {
                        *o = ((v - mu) * r).mul_add(w, b);
                    }
                    *m = mu;
                    *s = r;
                },
            )
        });
}

/// Rows per task of the backward pass. Each task leaves its share of the weight and bias
/// gradients in a scratch row; the rows are then summed in task order, so the result does not
/// depend on which thread ran which task.
const ROWS: usize = 32;

/// Accumulates the gradients of `layernorm_forward` into `dinp` (`+=`, it is the residual
/// stream's gradient), `dweight` and `dbias`, in one pass over the rows.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward(
    dinp: &mut [f32],
    dweight: &mut [f32],
    dbias: &mut [f32],
    dout: &[f32],
    inp: &[f32],
    weight: &[f32],
    mean: &[f32],
    rstd: &[f32],
    c: usize,
) {
    let tasks = mean.len().div_ceil(ROWS);
    with_scratch(tasks * 2 * c, |partials| {
        dinp.par_chunks_mut(ROWS * c).zip(partials.par_chunks_mut(2 * c)).enumerate().for_each(
            |(task, (di, part))| {
                let (pw, pb) = part.split_at_mut(c);
                let r0 = task * ROWS;
                simd(
                    #[inline(always)]
                    || {
                        pw.fill(0.0);
                        pb.fill(0.0);
                        for (i, di) in di.chunks_exact_mut(c).enumerate() {
                            let (mu, r) = (mean[r0 + i], rstd[r0 + i]);
                            let dy = &dout[(r0 + i) * c..][..c];
                            let x = &inp[(r0 + i) * c..][..c];
                            row_backward(di, pw, pb, dy, x, weight, mu, r);
                        }
                    },
                )
            },
        );
        const BLOCK: usize = 64;
        let partials = &*partials;
        dweight.par_chunks_mut(BLOCK).zip(dbias.par_chunks_mut(BLOCK)).enumerate().for_each(
            |(blk, (dw, db))| {
                let c0 = blk * BLOCK;
                for part in partials.chunks_exact(2 * c) {
                    for (d, p) in dw.iter_mut().zip(&part[c0..]) {
                        *d += p;
                    }
                    for (d, p) in db.iter_mut().zip(&part[c + c0..]) {
                        *d += p;
                    }
                }
            },
        );
    });
}

/// One row: `dx += r * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))` with `dnorm = w dy`;
/// `dw += norm * dy`, `db += dy`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn row_backward(
    dx: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
    dy: &[f32],
    x: &[f32],
    w: &[f32],
    mu: f32,
    r: f32,
) {
    let c = dx.len();
    let mut a = [0.0f32; 16];
    let mut b = [0.0f32; 16];
    let (mut ta, mut tb) = (0.0, 0.0);
    for ((dy, x), w) in dy.chunks_exact(16).zip(x.chunks_exact(16)).zip(w.chunks_exact(16)) {
        for k in 0..16 {
            let dn = w[k] * dy[k];
            a[k] += dn;
            b[k] = (dn * r).mul_add(x[k] - mu, b[k]);
        }
    }
    for k in c - c % 16..c {
        let dn = w[k] * dy[k];
        ta += dn;
        tb = (dn * r).mul_add(x[k] - mu, tb);
    }
    let dn_mean = (a.iter().sum::<f32>() + ta) / c as f32;
    let dn_norm_mean = (b.iter().sum::<f32>() + tb) / c as f32;
    let it = dx.iter_mut().zip(dw.iter_mut().zip(db.iter_mut())).zip(dy.iter().zip(x).zip(w));
    for ((dx, (dw, db)), ((&dy, &x), &w)) in it {
        let norm = (x - mu) * r;
        *dx = r.mul_add((-norm).mul_add(dn_norm_mean, w.mul_add(dy, -dn_mean)), *dx);
        *dw = norm.mul_add(dy, *dw);
        *db += dy;
    }
}
