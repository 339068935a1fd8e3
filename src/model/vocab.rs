//! Vocab-parallel embedding lookup and cross-entropy: each tensor-parallel rank holds rows
//! `start..start + local` of the (padded) vocabulary, and the logits are never gathered.

use trident_collectives::ReduceOp;

use super::ModelError;
use crate::ops::cpu::math::{exp, max, simd, sum_exp};
use crate::parallel::TpGroup;

type Result<T> = std::result::Result<T, ModelError>;

/// The rows of the vocabulary a rank holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VocabShard {
    /// First (padded) vocabulary row held: `tp_rank * local`.
    pub start: usize,
    /// Rows held (padded vocabulary / TP).
    pub local: usize,
    /// Real (unpadded) vocabulary size.
    pub vocab: usize,
}

impl VocabShard {
    /// Rows of this shard that are real tokens (the rest is padding, masked out).
    pub fn valid(&self) -> usize {
        self.vocab.saturating_sub(self.start).min(self.local)
    }

    /// Local row of each token: its row here, or `local` (an extra zero row) when another rank
    /// holds it. The all-reduce after the lookup then gives every rank the real embedding.
    pub fn map_tokens(&self, tokens: &[u32]) -> Vec<u32> {
        tokens
            .iter()
            .map(|&t| {
                let t = t as usize;
                if (self.start..self.start + self.local).contains(&t) {
                    (t - self.start) as u32
                } else {
                    self.local as u32
                }
            })
            .collect()
    }
}

/// Cross-entropy over logits split by vocabulary. `logits` is `[n, local]`. The row maximum
/// is reduced with max, then the sums of exponentials and the target logit (held by one rank,
/// zero elsewhere) with sum, across `tp`. Writes each row's loss to `losses`; with
/// `dloss = Some(g)` overwrites the logits with `g * (softmax - onehot)` (zero on padding).
pub fn vocab_parallel_cross_entropy(
    tp: &mut TpGroup,
    shard: VocabShard,
    logits: &mut [f32],
    losses: &mut [f32],
    targets: &[u32],
    dloss: Option<f32>,
) -> Result<()> {
    let (n, local, valid) = (targets.len(), shard.local, shard.valid());
    if let Some(position) = targets.iter().position(|&x| x as usize >= shard.vocab) {
        let (token, vocab) = (targets[position], shard.vocab);
        return Err(ModelError::TokenOutOfRange { token, position, vocab });
    }
    let rows = || logits.chunks_exact(local);
    let mut row_max: Vec<f32> = rows()
        .map(|r| {
            simd(
                #[inline(always)]
                || max(&r[..valid]),
            )
        })
        .collect();
    tp.all_reduce(&mut row_max, ReduceOp::Max)?;
    let held = |tgt: u32| (tgt as usize).checked_sub(shard.start).filter(|&j| j < local);
    let mut sums = vec![0.0f32; 2 * n];
    for (i, r) in rows().enumerate() {
        sums[2 * i] = simd(
            #[inline(always)]
            || sum_exp(&r[..valid], row_max[i]),
        );
        sums[2 * i + 1] = held(targets[i]).map_or(0.0, |j| r[j]);
    }
    tp.all_reduce(&mut sums, ReduceOp::Sum)?;
    for (i, row) in logits.chunks_exact_mut(local).enumerate() {
        let lse = row_max[i] + sums[2 * i].ln();
        losses[i] = lse - sums[2 * i + 1];
        if let Some(g) = dloss {
            let (real, pad) = row.split_at_mut(valid);
            simd(
                #[inline(always)]
                || real.iter_mut().for_each(|x| *x = g * exp(*x - lse)),
            );
            pad.fill(0.0);
            if let Some(j) = held(targets[i]) {
                row[j] -= g;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::init::NormalRng;
    use crate::parallel::run_ranks;

    /// Two ranks' shards of random logits against an f64 softmax over the whole row.
    #[test]
    fn split_cross_entropy_matches_an_f64_reference() {
        let seed = 0x5eed_0c0e;
        let (n, vocab, padded, g) = (5, 200, 256, 0.25f32);
        let mut rng = NormalRng::new(seed);
        let logits: Vec<f32> = (0..n * padded).map(|_| (3.0 * rng.next_normal()) as f32).collect();
        let targets: Vec<u32> = (0..n).map(|i| [3, 130, 199, 127, 128][i]).collect();
        let results = run_ranks(2, |world| -> Result<_> {
            let mut tp = TpGroup::new(world);
            let shard = VocabShard { start: tp.rank * 128, local: 128, vocab };
            let mut mine: Vec<f32> =
                logits.chunks(padded).flat_map(|r| r[shard.start..shard.start + 128].to_vec()).collect();
            let mut losses = vec![0.0; n];
            vocab_parallel_cross_entropy(&mut tp, shard, &mut mine, &mut losses, &targets, Some(g))?;
            Ok((mine, losses))
        })
        .unwrap();
        for (i, row) in logits.chunks(padded).enumerate() {
            let real = &row[..vocab];
            let max = real.iter().fold(f64::MIN, |m, &x| m.max(x as f64));
            let lse = max + real.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln();
            let loss = lse - real[targets[i] as usize] as f64;
            for (rank, (grad, losses)) in results.iter().enumerate() {
                let e = (losses[i] as f64 - loss).abs() / loss.abs();
                assert!(e < 1e-5, "seed {seed:#x} row {i} rank {rank}: loss {} vs {loss} ({e:e})", losses[i]);
                for j in 0..128 {
                    let v = rank * 128 + j;
                    let want = if v < vocab {
                        g as f64
                            * ((row[v] as f64 - lse).exp() - if v == targets[i] as usize { 1.0 } else { 0.0 })
                    } else {
                        0.0
                    };
                    let got = grad[i * 128 + j] as f64;
                    assert!((got - want).abs() <= 1e-6, "seed {seed:#x} row {i} column {v}: {got} vs {want}");
                }
            }
        }
    }
}
