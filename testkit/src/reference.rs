//! The f64 references the ops and kernels are checked against, written once, plainly (no
//! blocking, no fusion), and central differences for the gradients they do not state.
//!
//! Shapes follow the kernels: rows of `c` channels, row-major; weights `[oc, ic]` (a linear
//! layer computes `x · wᵀ + bias`); `qkv` rows of `3C` (queries, keys, values, each `nh` heads
//! of `C / nh`); logits rows of `vp` of which the first `v` are the vocabulary.

use std::f64::consts::PI;

/// GeLU, tanh approximation (GPT-2's): `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// The derivative of [`gelu`].
pub fn gelu_grad(x: f64) -> f64 {
    let a = (2.0 / PI).sqrt();
    let t = (a * (x + 0.044715 * x * x * x)).tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * a * (1.0 + 3.0 * 0.044715 * x * x)
}

/// LayerNorm over rows of `c` (epsilon 1e-5): `(out, mean, rstd)`, one mean and reciprocal
/// standard deviation per row.
pub fn layernorm(x: &[f64], w: &[f64], b: &[f64], c: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut out, mut means, mut rstds) = (vec![], vec![], vec![]);
    for row in x.chunks(c) {
        let m = row.iter().sum::<f64>() / c as f64;
        let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / c as f64;
        let r = 1.0 / (var + 1e-5).sqrt();
        out.extend(row.iter().zip(w).zip(b).map(|((v, w), b)| (v - m) * r * w + b));
        means.push(m);
        rstds.push(r);
    }
    (out, means, rstds)
}

/// The linear layer `x · wᵀ (+ bias)`: `x` `[n, ic]`, `w` `[oc, ic]`, out `[n, oc]`.
pub fn matmul(x: &[f64], w: &[f64], bias: Option<&[f64]>, ic: usize, oc: usize) -> Vec<f64> {
    let mut out = vec![];
    for row in x.chunks(ic) {
        for o in 0..oc {
            let acc: f64 = row.iter().zip(&w[o * ic..][..ic]).map(|(a, b)| a * b).sum();
            out.push(acc + bias.map_or(0.0, |b| b[o]));
        }
    }
    out
}

/// The gradients of [`matmul`] for `dout` `[n, oc]`: `(dinp, dweight, dbias)` = (`dout · w`,
/// `doutᵀ · x`, the column sums of `dout`), each on its own (not added to a starting value).
pub fn matmul_backward(
    dout: &[f64],
    x: &[f64],
    w: &[f64],
    ic: usize,
    oc: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = x.len() / ic;
    let dinp =
        (0..n * ic).map(|i| (0..oc).map(|o| dout[(i / ic) * oc + o] * w[o * ic + i % ic]).sum()).collect();
    let dweight = (0..oc * ic)
        .map(|i| (0..n).map(|row| dout[row * oc + i / ic] * x[row * ic + i % ic]).sum())
        .collect();
    let dbias = (0..oc).map(|o| (0..n).map(|row| dout[row * oc + o]).sum()).collect();
    (dinp, dweight, dbias)
}

/// A general matrix product as the BLAS states it, batched and strided:
/// `C[z] = alpha · op(A[z]) · op(B[z]) + beta · C[z]`, `op` a transposition where asked.
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// Products in the batch.
    pub batch: usize,
    /// Whether `A` is stored `[k, m]` (else `[m, k]`).
    pub trans_a: bool,
    /// Whether `B` is stored `[n, k]` (else `[k, n]`).
    pub trans_b: bool,
    /// The product's factor.
    pub alpha: f64,
    /// `C`'s factor; `0` ignores what `C` held (NaN included), as the BLAS does.
    pub beta: f64,
    /// Leading dimensions (elements between rows) of `A`, `B` and `C`.
    pub ld: (usize, usize, usize),
    /// Elements between the batch's matrices in `A`, `B` and `C`.
    pub stride: (usize, usize, usize),
}

impl Gemm {
    /// One dense row-major product `[m, k] · [k, n]`, no transposition, `C = alpha A B + beta C`.
    pub fn dense(m: usize, n: usize, k: usize, alpha: f64, beta: f64) -> Gemm {
        Gemm {
            m,
            n,
            k,
            batch: 1,
            trans_a: false,
            trans_b: false,
            alpha,
            beta,
            ld: (k, n, n),
            stride: (0, 0, 0),
        }
    }
}

/// [`Gemm`] on the stored operands; returns all of `C` (elements outside the product as `c`
/// held them).
pub fn gemm(g: &Gemm, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f64> {
    let mut out: Vec<f64> = c.iter().map(|&v| f64::from(v)).collect();
    let (ld, st) = (g.ld, g.stride);
    for z in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let mut acc = 0.0f64;
                for p in 0..g.k {
                    let av = if g.trans_a { a[z * st.0 + p * ld.0 + i] } else { a[z * st.0 + i * ld.0 + p] };
                    let bv = if g.trans_b { b[z * st.1 + j * ld.1 + p] } else { b[z * st.1 + p * ld.1 + j] };
                    acc += f64::from(av) * f64::from(bv);
                }
                let o = &mut out[z * st.2 + i * ld.2 + j];
                *o = g.alpha * acc + if g.beta == 0.0 { 0.0 } else { g.beta * *o };
            }
        }
    }
    out
}

/// Causal self-attention on `qkv` `[b, t, 3C]` with `nh` heads: `(out, lse)`, `out` `[b, t, C]`
/// and the log-sum-exp of each query's scaled scores, `[b, nh, t]`.
pub fn attention(qkv: &[f64], b: usize, t: usize, c: usize, nh: usize) -> (Vec<f64>, Vec<f64>) {
    let hs = c / nh;
    let mut out = vec![0.0; b * t * c];
    let mut lse = vec![0.0; b * nh * t];
    let at = |bi: usize, j: usize, part: usize, h: usize| (bi * t + j) * 3 * c + part * c + h * hs;
    for bi in 0..b {
        for h in 0..nh {
            for i in 0..t {
                let s: Vec<f64> = (0..=i)
                    .map(|j| {
                        (0..hs).map(|d| qkv[at(bi, i, 0, h) + d] * qkv[at(bi, j, 1, h) + d]).sum::<f64>()
                            / (hs as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|v| (v - m).exp()).sum();
                lse[(bi * nh + h) * t + i] = m + z.ln();
                for d in 0..hs {
                    out[(bi * t + i) * c + h * hs + d] =
                        (0..=i).map(|j| (s[j] - m).exp() / z * qkv[at(bi, j, 2, h) + d]).sum();
                }
            }
        }
    }
    (out, lse)
}

/// The gradient of [`attention`]'s `out` for `dout` `[b, t, C]`: `dqkv` `[b, t, 3C]`, from
/// `dP = dO · vᵀ`, `D = rowsum(P ∘ dP)`, `dS = P ∘ (dP - D)`.
pub fn attention_backward(qkv: &[f64], dout: &[f64], b: usize, t: usize, c: usize, nh: usize) -> Vec<f64> {
    let hs = c / nh;
    let scale = 1.0 / (hs as f64).sqrt();
    let mut dqkv = vec![0.0; b * t * 3 * c];
    for bi in 0..b {
        for h in 0..nh {
            // Element d of row i of part `part` (0 Q, 1 K, 2 V) of this (sequence, head).
            let at = |i: usize, part: usize, d: usize| ((bi * t + i) * 3 + part) * c + h * hs + d;
            let o_at = |i: usize, d: usize| (bi * t + i) * c + h * hs + d;
            for i in 0..t {
                let s: Vec<f64> = (0..=i)
                    .map(|j| scale * (0..hs).map(|d| qkv[at(i, 0, d)] * qkv[at(j, 1, d)]).sum::<f64>())
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|v| (v - m).exp()).sum();
                let p: Vec<f64> = s.iter().map(|v| (v - m).exp() / z).collect();
                let dp: Vec<f64> =
                    (0..=i).map(|j| (0..hs).map(|d| dout[o_at(i, d)] * qkv[at(j, 2, d)]).sum()).collect();
                let big_d: f64 = (0..=i).map(|j| p[j] * dp[j]).sum();
                for j in 0..=i {
                    let ds = p[j] * (dp[j] - big_d);
                    for d in 0..hs {
                        dqkv[at(i, 0, d)] += scale * ds * qkv[at(j, 1, d)];
                        dqkv[at(j, 1, d)] += scale * ds * qkv[at(i, 0, d)];
                        dqkv[at(j, 2, d)] += p[j] * dout[o_at(i, d)];
                    }
                }
            }
        }
    }
    dqkv
}

/// The softmax cross-entropy of each row of `logits` `[rows, vp]` (the first `v` columns count)
/// against its target.
pub fn cross_entropy(logits: &[f64], targets: &[u32], v: usize, vp: usize) -> Vec<f64> {
    logits
        .chunks(vp)
        .zip(targets)
        .map(|(row, &t)| {
            let m = row[..v].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + row[..v].iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            lse - row[t as usize]
        })
        .collect()
}

/// AdamW's settings for [`adamw`].
#[derive(Clone, Copy, Debug)]
pub struct AdamW {
    /// Learning rate.
    pub lr: f64,
    /// First moment's decay.
    pub beta1: f64,
    /// Second moment's decay.
    pub beta2: f64,
    /// Denominator term.
    pub eps: f64,
    /// Decoupled weight decay (0 for parameters that do not decay).
    pub weight_decay: f64,
    /// Factor on the gradient before use (unscaling, clipping).
    pub grad_scale: f64,
    /// The step, from 1: the bias corrections' exponent.
    pub step: i32,
}

/// One AdamW step of one parameter `p` with gradient `g` and moments `m`, `v`: the new
/// `(p, m, v)`.
pub fn adamw(p: f64, g: f64, m: f64, v: f64, h: &AdamW) -> (f64, f64, f64) {
    let g = g * h.grad_scale;
    let m = h.beta1 * m + (1.0 - h.beta1) * g;
    let v = h.beta2 * v + (1.0 - h.beta2) * g * g;
    let (bc1, bc2) = (1.0 - h.beta1.powi(h.step), 1.0 - h.beta2.powi(h.step));
    (p - h.lr * ((m / bc1) / ((v / bc2).sqrt() + h.eps) + h.weight_decay * p), m, v)
}

/// The gradient of `f` at `x` by central differences of step `h`.
pub fn central_differences(x: &[f64], h: f64, f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut x = x.to_vec();
    (0..x.len())
        .map(|i| {
            let orig = x[i];
            x[i] = orig + h;
            let up = f(&x);
            x[i] = orig - h;
            let down = f(&x);
            x[i] = orig;
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// The gradient of `sum(f(x) · weights)` at `x` by central differences of step `h`: a
/// backward pass's input gradient for the output gradient `weights`. The two sides are
/// subtracted element by element before weighting, which keeps small steps accurate.
pub fn weighted_differences(x: &[f64], weights: &[f64], h: f64, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mut x = x.to_vec();
    (0..x.len())
        .map(|i| {
            let orig = x[i];
            x[i] = orig + h;
            let up = f(&x);
            x[i] = orig - h;
            let down = f(&x);
            x[i] = orig;
            up.iter().zip(&down).zip(weights).map(|((a, b), w)| (a - b) * w).sum::<f64>() / (2.0 * h)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, |m, d| {
            if d.is_nan() {
                f64::INFINITY
            } else {
                m.max(d)
            }
        })
    }

    fn data(n: usize, seed: u64) -> Vec<f64> {
        // A fixed, irregular sequence in [-1, 1).
        (0..n).map(|i| ((i as u64 * 2654435761 + seed * 97) % 1000) as f64 / 500.0 - 1.0).collect()
    }

    #[test]
    fn gelu_grad_is_the_derivative_of_gelu() {
        let x = data(50, 1).iter().map(|v| v * 5.0).collect::<Vec<_>>();
        for &v in &x {
            let fd = central_differences(&[v], 1e-5, |x| gelu(x[0]))[0];
            assert!((gelu_grad(v) - fd).abs() < 1e-8, "at {v}: {} vs {fd}", gelu_grad(v));
        }
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(10.0) - 10.0).abs() < 1e-12 && gelu(-10.0).abs() < 1e-12);
    }

    #[test]
    fn layernorm_rows_have_zero_mean_and_unit_variance() {
        let c = 16;
        let x = data(3 * c, 2);
        let (out, mean, rstd) = layernorm(&x, &vec![1.0; c], &vec![0.0; c], c);
        for (r, row) in out.chunks(c).enumerate() {
            let m = row.iter().sum::<f64>() / c as f64;
            let var = row.iter().map(|v| v * v).sum::<f64>() / c as f64;
            assert!(m.abs() < 1e-12 && (var - 1.0).abs() < 1e-3, "row {r}: mean {m}, var {var}");
            assert!((mean[r] - x[r * c..][..c].iter().sum::<f64>() / c as f64).abs() < 1e-12);
            assert!(rstd[r] > 0.0);
        }
    }

    #[test]
    fn matmul_backward_is_the_gradient_and_gemm_is_the_same_product() {
        let (n, ic, oc) = (3, 4, 5);
        let (x, w, bias, dout) = (data(n * ic, 3), data(oc * ic, 4), data(oc, 5), data(n * oc, 6));
        let (dinp, dweight, dbias) = matmul_backward(&dout, &x, &w, ic, oc);
        let f = |x: &[f64], w: &[f64], b: &[f64]| matmul(x, w, Some(b), ic, oc);
        assert!(max_diff(&dinp, &weighted_differences(&x, &dout, 1e-5, |x| f(x, &w, &bias))) < 1e-8);
        assert!(max_diff(&dweight, &weighted_differences(&w, &dout, 1e-5, |w| f(&x, w, &bias))) < 1e-8);
        assert!(max_diff(&dbias, &weighted_differences(&bias, &dout, 1e-5, |b| f(&x, &w, b))) < 1e-8);
        // x · wᵀ as a GEMM with B transposed.
        let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
        let (xf, wf) = (f32s(&x), f32s(&w));
        let g = Gemm { trans_b: true, ld: (ic, ic, oc), ..Gemm::dense(n, oc, ic, 1.0, 0.0) };
        let want = matmul(&crate::f64s(&xf), &crate::f64s(&wf), None, ic, oc);
        assert!(max_diff(&gemm(&g, &xf, &wf, &vec![f32::NAN; n * oc]), &want) < 1e-12);
    }

    #[test]
    fn attention_of_one_position_is_its_value_and_lse_its_score() {
        let (c, nh) = (8, 2);
        let qkv = data(3 * c, 7);
        let (out, lse) = attention(&qkv, 1, 1, c, nh);
        assert!(max_diff(&out, &qkv[2 * c..]) < 1e-15);
        for h in 0..nh {
            let hs = c / nh;
            let s: f64 =
                (0..hs).map(|d| qkv[h * hs + d] * qkv[c + h * hs + d]).sum::<f64>() / (hs as f64).sqrt();
            assert!((lse[h] - s).abs() < 1e-15);
        }
    }

    #[test]
    fn attention_backward_is_the_gradient_of_attention() {
        let (b, t, c, nh) = (2, 4, 6, 2);
        let (qkv, dout) = (data(b * t * 3 * c, 8), data(b * t * c, 9));
        let fd = weighted_differences(&qkv, &dout, 1e-5, |q| attention(q, b, t, c, nh).0);
        assert!(max_diff(&attention_backward(&qkv, &dout, b, t, c, nh), &fd) < 1e-8);
    }

    #[test]
    fn cross_entropy_of_equal_logits_is_log_v_and_padding_is_ignored() {
        let (v, vp) = (7, 9);
        let mut logits = vec![0.5; 2 * vp];
        logits[v] = 1e9;
        let losses = cross_entropy(&logits, &[0, 6], v, vp);
        assert!(losses.iter().all(|l| (l - (v as f64).ln()).abs() < 1e-12), "{losses:?}");
    }

    #[test]
    fn adamw_first_step_moves_by_the_learning_rate() {
        let h =
            AdamW { lr: 0.1, beta1: 0.9, beta2: 0.95, eps: 0.0, weight_decay: 0.0, grad_scale: 2.0, step: 1 };
        let (p, m, v) = adamw(1.0, -3.0, 0.0, 0.0, &h);
        assert!((p - 1.1).abs() < 1e-12, "{p}");
        assert!((m - -0.6).abs() < 1e-12 && (v - 1.8).abs() < 1e-12, "{m} {v}");
    }
}
