//! The parallel layout of a run and Megatron-LM's checks on it.

use super::{ParallelError, Result};
use trident_plan::Recompute;

/// How much of each parallelism a run uses, and its options.
///
/// [`from_world`](Self::from_world) derives DP from the world; [`validate`](Self::validate)
/// then checks a model and a batch against the grid, as Megatron-LM does at start-up:
///
/// ```
/// use trident::parallel::{SplitDims, ParallelConfig, ParallelError};
///
/// // 8 ranks as TP 2 x PP 2 leave 2 data-parallel replicas.
/// let mut par = ParallelConfig::from_world(8, 2, 2).unwrap();
/// assert_eq!((par.tp, par.pp, par.dp, par.world_size()), (2, 2, 2, 8));
/// assert!(matches!(ParallelConfig::from_world(6, 4, 1), Err(ParallelError::WorldSize { .. })));
///
/// // 4 heads, 4 layers, a vocabulary padded to 256 = 128 x TP: a global batch of 16 in
/// // micro-batches of 2 is 16 / (2 x 2) = 4 micro-batches per step on each replica.
/// let model = SplitDims { heads: 4, layers: 4, padded_vocab: 256 };
/// assert_eq!(par.validate(model, 2, 16).unwrap(), 4);
///
/// // 3 heads cannot split over 2 tensor-parallel ranks; the error names the flags.
/// let three_heads = SplitDims { heads: 3, ..model };
/// let err = par.validate(three_heads, 2, 16).unwrap_err();
/// assert!(matches!(err, ParallelError::HeadsNotDivisible { heads: 3, tp: 2 }));
/// assert!(err.to_string().contains("--tensor-model-parallel-size 2"));
///
/// // Interleaving 2 chunks per stage needs micro-batches per step in groups of PP:
/// // 12 / (2 x 2) = 3 is not.
/// par.virtual_stages = 2;
/// assert!(matches!(par.validate(model, 2, 12), Err(ParallelError::InterleavedMicroBatches { micro_batches: 3, pp: 2 })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParallelConfig {
    /// Tensor-parallel size (`--tensor-model-parallel-size`): ranks splitting each layer's
    /// heads, MLP columns and vocabulary rows.
    pub tp: usize,
    /// Pipeline-parallel size (`--pipeline-model-parallel-size`): stages splitting the layers.
    pub pp: usize,
    /// Data-parallel size: replicas of the model, each on its share of the global batch.
    /// Derived, `world / (tp pp)`, as Megatron-LM derives it.
    pub dp: usize,
    /// ZeRO-1: gradients reduce-scattered, optimizer state sharded over DP, parameters
    /// all-gathered (`--use-distributed-optimizer`).
    pub distributed_optimizer: bool,
    /// What the backward recomputes instead of keeping (`--recompute-granularity`).
    pub recompute: Recompute,
    /// Sequence parallelism (`--sequence-parallel`, Korthikanti et al. 2022): LayerNorms and
    /// the residual stream split over the tensor-parallel ranks by rows, all-gather and
    /// reduce-scatter in place of the tensor-parallel all-reduces. Off at TP = 1.
    pub sequence_parallel: bool,
    /// Model chunks per pipeline stage (`v` of Megatron-LM's interleaved 1F1B schedule,
    /// `--num-layers-per-virtual-pipeline-stage` = layers / (PP v)); 1 without interleaving.
    pub virtual_stages: usize,
}

/// The dimensions of a model the grid splits: heads and the padded vocabulary over the
/// tensor-parallel ranks, layers over the pipeline stages (the model itself is
/// `trident_plan::ModelShape` to the planner and `GptConfig` to the trainer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitDims {
    /// Attention heads (split over TP).
    pub heads: usize,
    /// Transformer layers (split over PP).
    pub layers: usize,
    /// The padded vocabulary (split over TP, a multiple of 128 per TP rank).
    pub padded_vocab: usize,
}

impl ParallelConfig {
    /// TP and PP given, DP = world / (TP x PP), as Megatron-LM derives it.
    pub fn from_world(world: usize, tp: usize, pp: usize) -> Result<Self> {
        for (what, v) in [
            ("--world-size", world),
            ("--tensor-model-parallel-size", tp),
            ("--pipeline-model-parallel-size", pp),
        ] {
            if v == 0 {
                return Err(ParallelError::Zero { what });
            }
        }
        if world % (tp * pp) != 0 {
            return Err(ParallelError::WorldSize { world, tp, pp });
        }
        Ok(Self {
            tp,
            pp,
            dp: world / (tp * pp),
            distributed_optimizer: false,
            recompute: Recompute::None,
            sequence_parallel: false,
            virtual_stages: 1,
        })
    }

    /// Ranks of the layout: `tp pp dp`.
    pub fn world_size(&self) -> usize {
        self.tp * self.pp * self.dp
    }

    /// The vocabulary multiple Megatron-LM pads to: 128 per tensor-parallel rank.
    pub fn vocab_multiple(&self) -> usize {
        128 * self.tp
    }

    /// Checks the model (its heads, layers and padded vocabulary) and the batch against the
    /// layout; returns the micro-batches per step (global batch / (micro-batch x DP)).
    pub fn validate(&self, model: SplitDims, micro_batch: usize, global_batch: usize) -> Result<usize> {
        if micro_batch == 0 || global_batch == 0 {
            return Err(ParallelError::Zero { what: "--micro-batch-size and --global-batch-size" });
        }
        if model.heads % self.tp != 0 {
            return Err(ParallelError::HeadsNotDivisible { heads: model.heads, tp: self.tp });
        }
        if model.layers % self.pp != 0 {
            return Err(ParallelError::LayersNotDivisible { layers: model.layers, pp: self.pp });
        }
        let v = self.virtual_stages.max(1);
        if v > 1 {
            let per_stage = model.layers / self.pp;
            if self.pp < 2 || per_stage % v != 0 {
                return Err(ParallelError::VirtualStages { layers: model.layers, pp: self.pp, chunks: v });
            }
            let micro_batches = global_batch / (micro_batch * self.dp).max(1);
            if global_batch % (micro_batch * self.dp) == 0 && micro_batches % self.pp != 0 {
                return Err(ParallelError::InterleavedMicroBatches { micro_batches, pp: self.pp });
            }
        }
        // At TP = 1 any padding works (the vocabulary is not split).
        if self.tp > 1 && model.padded_vocab % self.vocab_multiple() != 0 {
            return Err(ParallelError::PaddedVocab { padded: model.padded_vocab, tp: self.tp });
        }
        if global_batch % (micro_batch * self.dp) != 0 {
            return Err(ParallelError::GlobalBatch { global: global_batch, micro: micro_batch, dp: self.dp });
        }
        Ok(global_batch / (micro_batch * self.dp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_checks_name_the_flag() {
        let err = ParallelConfig::from_world(6, 4, 1).unwrap_err();
        assert!(err.to_string().contains("not a multiple of 4"), "{err}");
        let p = ParallelConfig::from_world(8, 2, 2).unwrap();
        assert_eq!(p.dp, 2);
        let shape = |heads, layers, padded_vocab| SplitDims { heads, layers, padded_vocab };
        let model = shape(4, 4, 256);
        assert_eq!(p.validate(model, 2, 8).unwrap(), 2);
        let err = p.validate(model, 2, 6).unwrap_err();
        assert!(err.to_string().contains("not divisible by --micro-batch-size 2"), "{err}");
        let three_heads = shape(3, 4, 256);
        assert!(p.validate(three_heads, 2, 8).unwrap_err().to_string().contains("heads 3"));
        let three_layers = shape(4, 3, 256);
        assert!(p.validate(three_layers, 2, 8).unwrap_err().to_string().contains("layers 3"));
        let pad128 = shape(4, 4, 128);
        assert!(matches!(p.validate(pad128, 2, 8), Err(ParallelError::PaddedVocab { .. })));
        assert_eq!("selective".parse::<Recompute>(), Ok(Recompute::Selective));
        assert!("some".parse::<Recompute>().is_err());
    }
}
