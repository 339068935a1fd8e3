use rayon::prelude::*;

use super::math::simd;

/// `sum(x^2)`, accumulated in f64 across chunks.
pub fn sum_of_squares(x: &[f32]) -> f64 {
    const CHUNK: usize = 1 << 14;
    // Per-chunk sums are collected in order and added serially: a parallel `sum()` would
    // associate them in an order that depends on work stealing, and the norm (hence gradient
    // clipping, hence every later step) would differ in its last bits from run to run.
    let partial: Vec<f64> = x
        .par_chunks(CHUNK)
        .map(|ch| {
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
        })
        .collect();
    partial.iter().sum()
}
