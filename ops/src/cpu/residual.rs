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

/// `out += b`
pub fn accumulate(out: &mut [f32], b: &[f32]) {
    const CHUNK: usize = 8192;
    out.par_chunks_mut(CHUNK).zip(b.par_chunks(CHUNK)).for_each(|(o, b)| {
        simd(
            #[inline(always)]
            || {
                for (o, b) in o.iter_mut().zip(b) {
                    *o += b;
                }
            },
        )
    });
}
