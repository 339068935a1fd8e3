use rayon::prelude::*;

use super::math::{exp, max, simd, sum_exp};

/// Softmax over the first `v` of each row's `vp` logits and cross-entropy against `targets`:
/// `losses[i] = logsumexp(row) - row[target]`. With `dloss = Some(g)`, each row is overwritten
/// with its gradient `g * (softmax - onehot)`, zero on the padded entries `v..vp`.
pub fn softmax_cross_entropy(
    logits: &mut [f32],
    losses: &mut [f32],
    targets: &[u32],
    v: usize,
    vp: usize,
    dloss: Option<f32>,
) {
    logits.par_chunks_mut(vp).zip(losses.par_iter_mut().zip(targets.par_iter())).for_each(
        |(row, (loss, &tgt))| {
            simd(
                #[inline(always)]
                || {
                    let tgt = tgt as usize;
                    let (valid, pad) = row.split_at_mut(v);
                    let m = max(valid);
                    let lse = m + sum_exp(valid, m).ln();
                    *loss = lse - valid[tgt];
                    if let Some(g) = dloss {
                        for x in valid.iter_mut() {
                            *x = g * exp(*x - lse);
                        }
                        valid[tgt] -= g;
                        pad.fill(0.0);
                    }
                },
            )
        },
    );
}
