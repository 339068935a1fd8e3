use rayon::prelude::*;

use super::math::simd;

/// `out = a + b`
pub fn residual_forward(out: &mut [f32], a: &[f32], b: &[f32]) {
    const CHUNK: usize = 8192;
    out.par_chunks_mut(CHUNK).zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK))).for_each(|(o, (a, b))| {
        simd(
            #[inline(always)]
            || {
                for ((o, a), b) in o.iter_mut().zip(a).zip(b) {
                    *o = a + b;
                }
            },
        )
    });
}

/// `dst = sum of parts`, added in the order given (so the result does not depend on threads).
pub fn sum_into(dst: &mut [f32], parts: &[&[f32]]) {
    const CHUNK: usize = 8192;
    assert!(parts.iter().all(|p| p.len() == dst.len()), "sum_into: parts of unequal length");
    dst.par_chunks_mut(CHUNK).enumerate().for_each(|(i, out)| {
        let at = i * CHUNK;
        simd(
            #[inline(always)]
            || {
                out.fill(0.0);
                for part in parts {
                    for (o, p) in out.iter_mut().zip(&part[at..]) {
                        *o += p;
                    }
                }
            },
        )
    });
}
