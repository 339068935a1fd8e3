//! One rank's share of the GPT's parameters: the layers of its pipeline stage, split over
//! tensor-parallel ranks as Megatron-LM splits them, in one contiguous buffer.
//!
//! Each local layer's tensors are contiguous (so a layer's gradients form one bucket for the
//! data-parallel AllReduce), followed by the stage's embedding, position table and final
//! LayerNorm where the stage has them. Per tensor-parallel rank `r` of `tp`:
//!
//! | tensor | full shape | local share |
//! | --- | --- | --- |
//! | `qkvw`, `qkvb` | `[3C, C]`, `[3C]` | rows of heads `r*NH/tp..`, in each of Q, K, V (column parallel) |
//! | `attprojw` | `[C, C]` | columns `r*C/tp..` (row parallel) |
//! | `fcw`, `fcb` | `[4C, C]`, `[4C]` | rows `r*4C/tp..` (column parallel) |
//! | `fcprojw` | `[C, 4C]` | columns `r*4C/tp..` (row parallel) |
//! | `wte` | `[Vp, C]` | rows `r*Vp/tp..` (vocab parallel) |
//! | LayerNorms, `attprojb`, `fcprojb`, `wpe` | | replicated |

use std::ops::Range;

use super::{GptConfig, ParamLayout, ParamTensor};
pub use crate::parallel::ShardPlace;

/// One tensor of the local buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalTensor {
    /// Which parameter tensor (a layer's slice of it when per layer).
    pub tensor: ParamTensor,
    /// The model layer (0 for tensors that are not per layer).
    pub layer: usize,
    /// Element range in the local buffer ([`ShardLayout`] order).
    pub range: Range<usize>,
    /// Whether every tensor-parallel rank holds the same values (counted once in norms).
    pub tp_replicated: bool,
}

const LAYER_TENSORS: [ParamTensor; 12] = [
    ParamTensor::Ln1W,
    ParamTensor::Ln1B,
    ParamTensor::QkvW,
    ParamTensor::QkvB,
    ParamTensor::AttnProjW,
    ParamTensor::AttnProjB,
    ParamTensor::Ln2W,
    ParamTensor::Ln2B,
    ParamTensor::FcW,
    ParamTensor::FcB,
    ParamTensor::FcProjW,
    ParamTensor::FcProjB,
];

/// The local parameter buffer's layout for one [`ShardPlace`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardLayout {
    /// The whole model's shape.
    pub config: GptConfig,
    /// The rank's position in the tensor- and pipeline-parallel grid.
    pub place: ShardPlace,
    /// Model layers of each chunk this stage owns (one chunk without interleaving; with it,
    /// chunk `c` of stage `r` holds virtual stage `c p + r`'s layers).
    pub chunks: Vec<Range<usize>>,
    tensors: Vec<LocalTensor>,
    total: usize,
}

impl ShardLayout {
    /// The caller has checked that TP divides the heads and padded vocabulary and PP x the
    /// chunks the layers. The layers of the chunks come first, chunk after chunk.
    pub fn new(config: GptConfig, place: ShardPlace) -> Self {
        let (p, v) = (place.pp, place.chunks.max(1));
        let per_chunk = config.num_layers / (p * v);
        let chunks: Vec<Range<usize>> = (0..v)
            .map(|c| {
                let virtual_stage = c * p + place.stage;
                virtual_stage * per_chunk..(virtual_stage + 1) * per_chunk
            })
            .collect();
        let mut tensors = Vec::new();
        let mut total = 0;
        let mut push = |tensor: ParamTensor, layer: usize, total: &mut usize| {
            let len = local_len(&config, &place, tensor);
            let tp_replicated = place.tp > 1 && is_tp_replicated(tensor);
            tensors.push(LocalTensor { tensor, layer, range: *total..*total + len, tp_replicated });
            *total += len;
        };
        for layer in chunks.iter().flat_map(|c| c.clone()) {
            for t in LAYER_TENSORS {
                push(t, layer, &mut total);
            }
        }
        if place.is_first_stage() || place.is_last_stage() {
            push(ParamTensor::Wte, 0, &mut total);
        }
        if place.is_first_stage() {
            push(ParamTensor::Wpe, 0, &mut total);
        }
        if place.is_last_stage() {
            push(ParamTensor::LnfW, 0, &mut total);
            push(ParamTensor::LnfB, 0, &mut total);
        }
        Self { config, place, chunks, tensors, total }
    }

    /// Every layer this stage holds, in buffer order (chunk after chunk).
    pub fn layers(&self) -> impl Iterator<Item = usize> + '_ {
        self.chunks.iter().flat_map(|c| c.clone())
    }

    /// Elements of the local buffer (this rank's parameters).
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether the rank holds no parameters (only an inner stage given no layers).
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Every local tensor, in buffer order: each layer's twelve, chunk after chunk, then the
    /// stage's embedding, position table and final LayerNorm where it has them.
    pub fn tensors(&self) -> &[LocalTensor] {
        &self.tensors
    }

    /// Local range of `tensor` (of `layer` when per layer).
    pub fn range(&self, tensor: ParamTensor, layer: usize) -> Range<usize> {
        let layer = if tensor.per_layer() { layer } else { 0 };
        self.tensors
            .iter()
            .find(|t| t.tensor == tensor && t.layer == layer)
            .map(|t| t.range.clone())
            .unwrap_or_else(|| panic!("stage {} holds no {tensor:?} of layer {layer}", self.place.stage))
    }

    /// The local range covering all of `layer`'s tensors (one gradient bucket).
    pub fn layer_block(&self, layer: usize) -> Range<usize> {
        self.range(LAYER_TENSORS[0], layer).start..self.range(LAYER_TENSORS[11], layer).end
    }

    /// The local range after the layers: embedding, positions, final LayerNorm.
    pub fn stage_block(&self) -> Range<usize> {
        let start = self.tensors.iter().find(|t| !t.tensor.per_layer()).map_or(self.total, |t| t.range.start);
        start..self.total
    }

    /// Whether the tensor's gradient counts towards the global norm on this rank: replicated
    /// tensors count on tensor-parallel rank 0 only, and the tied embedding on the first stage
    /// only.
    pub fn counts_in_norm(&self, t: &LocalTensor) -> bool {
        if t.tp_replicated && self.place.tp_rank != 0 {
            return false;
        }
        t.tensor != ParamTensor::Wte || self.place.is_first_stage()
    }

    /// Pairs of (full-buffer range, local offset) that make up `t`.
    fn pieces(&self, full: &ParamLayout, t: &LocalTensor) -> Vec<(Range<usize>, usize)> {
        let c = self.config.channels;
        let (r, tp) = (self.place.tp_rank, self.place.tp);
        let whole =
            if t.tensor.per_layer() { full.layer_range(t.tensor, t.layer) } else { full.range(t.tensor) };
        let rows = |start: usize, n: usize, width: usize, local: usize| {
            (whole.start + start * width..whole.start + (start + n) * width, local)
        };
        match t.tensor {
            ParamTensor::QkvW | ParamTensor::QkvB => {
                let width = if t.tensor == ParamTensor::QkvW { c } else { 1 };
                let cl = c / tp;
                (0..3)
                    .map(|part| rows(part * c + r * cl, cl, width, t.range.start + part * cl * width))
                    .collect()
            }
            ParamTensor::FcW | ParamTensor::FcB | ParamTensor::Wte => {
                let (n, width) = match t.tensor {
                    ParamTensor::FcW => (4 * c / tp, c),
                    ParamTensor::FcB => (4 * c / tp, 1),
                    _ => (self.config.padded_vocab_size / tp, c),
                };
                vec![rows(r * n, n, width, t.range.start)]
            }
            ParamTensor::AttnProjW | ParamTensor::FcProjW => {
                let in_full = if t.tensor == ParamTensor::AttnProjW { c } else { 4 * c };
                let in_local = in_full / tp;
                (0..c)
                    .map(|o| {
                        let start = whole.start + o * in_full + r * in_local;
                        (start..start + in_local, t.range.start + o * in_local)
                    })
                    .collect()
            }
            _ => vec![(whole, t.range.start)],
        }
    }

    /// This rank's share of `full` (a whole model's parameters in [`ParamLayout`] order).
    pub fn extract(&self, full: &[f32]) -> Vec<f32> {
        let layout = ParamLayout::new(self.config);
        let mut local = vec![0.0; self.total];
        for t in &self.tensors {
            for (src, dst) in self.pieces(&layout, t) {
                let n = src.len();
                local[dst..dst + n].copy_from_slice(&full[src]);
            }
        }
        local
    }

    /// Writes this rank's share `local` into its place in `full`.
    pub fn insert(&self, local: &[f32], full: &mut [f32]) {
        let layout = ParamLayout::new(self.config);
        for t in &self.tensors {
            for (dst, src) in self.pieces(&layout, t) {
                let n = dst.len();
                full[dst].copy_from_slice(&local[src..src + n]);
            }
        }
    }
}

fn is_tp_replicated(t: ParamTensor) -> bool {
    !matches!(
        t,
        ParamTensor::QkvW
            | ParamTensor::QkvB
            | ParamTensor::AttnProjW
            | ParamTensor::FcW
            | ParamTensor::FcB
            | ParamTensor::FcProjW
            | ParamTensor::Wte
    )
}

fn local_len(config: &GptConfig, place: &ShardPlace, t: ParamTensor) -> usize {
    let full: usize = t.shape(config).iter().product();
    let per_layer = if t.per_layer() { full / config.num_layers } else { full };
    if is_tp_replicated(t) {
        per_layer
    } else {
        per_layer / place.tp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpt2_init;

    #[test]
    fn shards_of_every_rank_rebuild_the_model() {
        let config = GptConfig::new(8, 40, 4, 4, 16, 512).unwrap();
        let full = gpt2_init(&ParamLayout::new(config), 3);
        for (tp, pp) in [(1, 1), (2, 2), (4, 1), (1, 4), (4, 2)] {
            let mut rebuilt = vec![f32::NAN; full.len()];
            let mut matrix_elems = 0;
            for stage in 0..pp {
                for tp_rank in 0..tp {
                    let shard = ShardLayout::new(config, ShardPlace::new(tp_rank, tp, stage, pp));
                    let local = shard.extract(&full);
                    shard.insert(&local, &mut rebuilt);
                    if stage == 0 && tp_rank == 0 {
                        matrix_elems = shard.range(ParamTensor::FcW, 0).len();
                    }
                }
            }
            assert_eq!(rebuilt, full, "tp {tp}, pp {pp}");
            assert_eq!(matrix_elems * tp, 4 * 16 * 16, "tp {tp}: the MLP matrix is split {tp} ways");
        }
    }
}
