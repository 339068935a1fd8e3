use rayon::prelude::*;

use super::math::{simd, DisjointMut};

/// Elements per task. Both functions below use the same chunks, so that [`drain_into`]'s
/// norm equals [`sum_of_squares`] of its result to the last bit.
const CHUNK: usize = 1 << 14;

/// `sum(x^2)`, accumulated in f64 across chunks.
pub fn sum_of_squares(x: &[f32]) -> f64 {
    // Per-chunk sums are collected in order and added serially: a parallel `sum()` would
    // associate them in an order that depends on work stealing, and the norm (hence gradient
    // clipping, hence every later step) would differ in its last bits from run to run.
    let partial: Vec<f64> = x.par_chunks(CHUNK).map(chunk_sum_of_squares).collect();
    partial.iter().sum()
}

/// `dst += parts[0] + parts[1] + ...`, added in that order, with every part zeroed once read;
/// returns `sum(dst^2)` of the result. One pass instead of a sum, a norm and a fill: this is
/// how the row shares' gradients become the step's gradient.
pub fn drain_into(dst: &mut [f32], parts: &mut [&mut [f32]]) -> f64 {
    assert!(parts.iter().all(|p| p.len() == dst.len()), "drain_into: parts of unequal length");
    let parts: Vec<DisjointMut<f32>> = parts.iter_mut().map(|p| DisjointMut::new(p)).collect();
    let partial: Vec<f64> = dst
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(i, out)| {
            for part in &parts {
                // SAFETY: chunk i's task is the only one touching elements
                // i * CHUNK .. i * CHUNK + out.len() of each part.
                let part = unsafe { part.slice(i * CHUNK, out.len()) };
                simd(
                    #[inline(always)]
                    || {
                        for (o, p) in out.iter_mut().zip(part.iter_mut()) {
                            *o += *p;
                            *p = 0.0;
                        }
                    },
                );
            }
            chunk_sum_of_squares(out)
        })
        .collect();
    partial.iter().sum()
}

fn chunk_sum_of_squares(ch: &[f32]) -> f64 {
    simd(
        #[inline(always)]
        || {
            let mut acc = [0.0f32; 16];
            let chunks = ch.chunks_exact(16);
            let tail: f32 = chunks.remainder().iter().map(|x| x * x).sum();
            for c in chunks {
                for k in 0..16 {
                    acc[k] += c[k] * c[k];
                }
            }
            acc.iter().map(|&a| a as f64).sum::<f64>() + tail as f64
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_into_sums_in_order_zeroes_the_parts_and_returns_the_norm_of_the_sum() {
        let n = 3 * CHUNK + 37;
        let wave = |k: f32| (0..n).map(|i| (i as f32 * k).sin()).collect::<Vec<f32>>();
        let (mut dst, mut a, mut b) = (wave(0.37), wave(0.11), wave(0.013));
        let want: Vec<f32> = (0..n).map(|i| dst[i] + a[i] + b[i]).collect();
        let sumsq = drain_into(&mut dst, &mut [&mut a, &mut b]);
        assert_eq!(dst, want);
        assert!(a.iter().chain(&b).all(|&x| x == 0.0));
        assert_eq!(sumsq.to_bits(), sum_of_squares(&want).to_bits());
        let exact: f64 = want.iter().map(|&x| x as f64 * x as f64).sum();
        assert!((sumsq - exact).abs() / exact < 1e-6, "{sumsq} vs {exact}");
    }
}
