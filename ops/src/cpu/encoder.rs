use rayon::prelude::*;

use super::math::simd;

/// `out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]`
pub fn encoder_forward(out: &mut [f32], tokens: &[u32], wte: &[f32], wpe: &[f32], t: usize, c: usize) {
    out.par_chunks_mut(c).zip(tokens.par_iter()).enumerate().with_min_len(8).for_each(|(row, (o, &tok))| {
        let tok = tok as usize;
        let (we, pe) = (&wte[tok * c..][..c], &wpe[(row % t) * c..][..c]);
        simd(
            #[inline(always)]
            || {
                for ((o, w), p) in o.iter_mut().zip(we).zip(pe) {
                    *o = w + p;
                }
            },
        )
    });
}

/// `dwte[tokens[b, t], :] += dout[b, t, :]` and `dwpe[t, :] += dout[b, t, :]`.
pub fn encoder_backward(
    dwte: &mut [f32],
    dwpe: &mut [f32],
    dout: &[f32],
    tokens: &[u32],
    t: usize,
    c: usize,
) {
    let rows = tokens.len();
    rayon::join(
        || {
            // Rows sharing a token add into the same embedding row: one task, in row order.
            for (row, &tok) in tokens.iter().enumerate() {
                let d = &dout[row * c..][..c];
                let w = &mut dwte[tok as usize * c..][..c];
                simd(
                    #[inline(always)]
                    || super::math::axpy(1.0, d, w),
                );
            }
        },
        || {
            dwpe[..t * c].par_chunks_mut(c).enumerate().for_each(|(pos, w)| {
                for row in (pos..rows).step_by(t) {
                    simd(
                        #[inline(always)]
                        || super::math::axpy(1.0, &dout[row * c..][..c], w),
                    );
                }
            })
        },
    );
}
