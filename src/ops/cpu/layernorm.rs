use rayon::prelude::*;

use super::math::{simd, sum};

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
                        tail += (v - mu) * (v - mu);
                    }
                    for ch in chunks {
                        for k in 0..16 {
                            var[k] += (ch[k] - mu) * (ch[k] - mu);
                        }
                    }
                    let var = (var.iter().sum::<f32>() + tail) / c as f32;
                    let r = 1.0 / (var + LAYERNORM_EPS).sqrt();
                    for (((o, &v), &w), &b) in o.iter_mut().zip(x).zip(weight).zip(bias) {
                        *o = (v - mu) * r * w + b;
                    }
                    *m = mu;
                    *s = r;
                },
            )
        });
}

/// Accumulates the gradients of `layernorm_forward` into `dinp` (`+=`, it is the residual
/// stream's gradient), `dweight` and `dbias`.
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
    dinp.par_chunks_mut(c)
        .zip(dout.par_chunks(c).zip(inp.par_chunks(c)))
        .zip(mean.par_iter().zip(rstd.par_iter()))
        .with_min_len(8)
        .for_each(|((di, (dy, x)), (&mu, &r))| {
            simd(
                #[inline(always)]
                || {
                    // dnorm = weight * dy; dx = r * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
                    let mut a = [0.0f32; 16];
                    let mut b = [0.0f32; 16];
                    let (mut ta, mut tb) = (0.0, 0.0);
                    let it = dy.chunks_exact(16).zip(x.chunks_exact(16)).zip(weight.chunks_exact(16));
                    for ((dy, x), w) in it {
                        for k in 0..16 {
                            let dn = w[k] * dy[k];
                            a[k] += dn;
                            b[k] += dn * (x[k] - mu) * r;
                        }
                    }
                    let full = c - c % 16;
                    for k in full..c {
                        let dn = weight[k] * dy[k];
                        ta += dn;
                        tb += dn * (x[k] - mu) * r;
                    }
                    let dn_mean = (a.iter().sum::<f32>() + ta) / c as f32;
                    let dn_norm_mean = (b.iter().sum::<f32>() + tb) / c as f32;
                    for (((d, &dy), &x), &w) in di.iter_mut().zip(dy).zip(x).zip(weight) {
                        let norm = (x - mu) * r;
                        *d += r * (w * dy - dn_mean - norm * dn_norm_mean);
                    }
                },
            )
        });
    // Weight and bias gradients: reduce over rows, parallel over column blocks.
    const BLOCK: usize = 64;
    let rows = mean.len();
    dweight.par_chunks_mut(BLOCK).zip(dbias.par_chunks_mut(BLOCK)).enumerate().for_each(|(blk, (dw, db))| {
        let c0 = blk * BLOCK;
        let w = dw.len();
        simd(
            #[inline(always)]
            || {
                for row in 0..rows {
                    let (mu, r) = (mean[row], rstd[row]);
                    let dy = &dout[row * c + c0..][..w];
                    let x = &inp[row * c + c0..][..w];
                    for k in 0..w {
                        dw[k] += (x[k] - mu) * r * dy[k];
                        db[k] += dy[k];
                    }
                }
            },
        )
    });
}
