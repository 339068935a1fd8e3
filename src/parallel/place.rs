//! Where a rank sits in the grid, as the model needs to know it.

/// Where a rank sits: its tensor-parallel index and pipeline stage, and how many model chunks
/// (virtual pipeline stages) the stage holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardPlace {
    /// Index of the rank in its tensor-parallel group, `0..tp`.
    pub tp_rank: usize,
    /// Tensor-parallel size (`--tensor-model-parallel-size`).
    pub tp: usize,
    /// Pipeline stage of the rank, `0..pp`.
    pub stage: usize,
    /// Pipeline stages (`--pipeline-model-parallel-size`).
    pub pp: usize,
    /// Model chunks of the stage (`v` of the interleaved schedule; 1 without interleaving):
    /// chunk `c` of stage `r` is virtual stage `c p + r` of `p v`.
    pub chunks: usize,
}

impl ShardPlace {
    /// The one rank of a run without tensor or pipeline parallelism.
    pub const SINGLE: ShardPlace = ShardPlace { tp_rank: 0, tp: 1, stage: 0, pp: 1, chunks: 1 };

    /// The place of a rank holding one chunk (no interleaving).
    pub fn new(tp_rank: usize, tp: usize, stage: usize, pp: usize) -> Self {
        Self { tp_rank, tp, stage, pp, chunks: 1 }
    }

    /// Whether the stage holds the first virtual stage (the embedding).
    pub fn is_first_stage(&self) -> bool {
        self.stage == 0
    }

    /// Whether the stage holds the last virtual stage (the LM head and the loss).
    pub fn is_last_stage(&self) -> bool {
        self.stage + 1 == self.pp
    }

    /// Whether chunk `chunk` of this stage is the model's first virtual stage.
    pub fn is_first_chunk(&self, chunk: usize) -> bool {
        self.is_first_stage() && chunk == 0
    }

    /// Whether chunk `chunk` of this stage is the model's last virtual stage.
    pub fn is_last_chunk(&self, chunk: usize) -> bool {
        self.is_last_stage() && chunk + 1 == self.chunks
    }
}
