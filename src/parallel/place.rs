//! Where a rank sits in the grid, as the model needs to know it.

/// Where a rank sits: its tensor-parallel index and pipeline stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardPlace {
    pub tp_rank: usize,
    pub tp: usize,
    pub stage: usize,
    pub pp: usize,
}

impl ShardPlace {
    pub fn is_first_stage(&self) -> bool {
        self.stage == 0
    }

    pub fn is_last_stage(&self) -> bool {
        self.stage + 1 == self.pp
    }
}

impl ShardPlace {
    /// The one rank of a run without tensor or pipeline parallelism.
    pub const SINGLE: ShardPlace = ShardPlace { tp_rank: 0, tp: 1, stage: 0, pp: 1 };
}
