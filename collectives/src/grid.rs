//! The Megatron-LM rank grid: rank = tp + TP * (dp + DP * pp), tensor-parallel index
//! fastest-varying, then data-parallel, then pipeline.

use crate::error::{CommError, Result};

/// A world of ranks as a tensor x data x pipeline grid: rank `tp + TP (dp + DP pp)`, so the
/// ranks of a tensor-parallel group are consecutive (on one node, where the launcher places
/// ranks by node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankGrid {
    /// Tensor-parallel size.
    pub tp: usize,
    /// Pipeline-parallel size (stages).
    pub pp: usize,
    /// Data-parallel size (replicas).
    pub dp: usize,
}

/// A rank's position in the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridCoords {
    /// Index in its tensor-parallel group.
    pub tp: usize,
    /// Index of its replica.
    pub dp: usize,
    /// Index of its pipeline stage.
    pub pp: usize,
}

impl RankGrid {
    /// Fails unless `tp * pp * dp == world_size` and all are positive.
    pub fn new(tp: usize, pp: usize, dp: usize, world_size: usize) -> Result<Self> {
        if tp == 0 || pp == 0 || dp == 0 || tp * pp * dp != world_size {
            return Err(CommError::InvalidArgument(format!(
                "tensor ({tp}) x pipeline ({pp}) x data ({dp}) parallel sizes must multiply to the world size {world_size}"
            )));
        }
        Ok(RankGrid { tp, pp, dp })
    }

    /// `tp * pp * dp`.
    pub fn world_size(&self) -> usize {
        self.tp * self.pp * self.dp
    }

    /// Where `rank` sits.
    pub fn coords(&self, rank: usize) -> GridCoords {
        GridCoords { tp: rank % self.tp, dp: (rank / self.tp) % self.dp, pp: rank / (self.tp * self.dp) }
    }

    /// The rank at `c` (the inverse of [`RankGrid::coords`]).
    pub fn rank(&self, c: GridCoords) -> usize {
        c.tp + self.tp * (c.dp + self.dp * c.pp)
    }

    /// Ranks sharing `rank`'s data and pipeline indices, in tensor-parallel order.
    pub fn tp_group(&self, rank: usize) -> Vec<usize> {
        let c = self.coords(rank);
        (0..self.tp).map(|tp| self.rank(GridCoords { tp, ..c })).collect()
    }

    /// Ranks sharing `rank`'s tensor and pipeline indices, in data-parallel order.
    pub fn dp_group(&self, rank: usize) -> Vec<usize> {
        let c = self.coords(rank);
        (0..self.dp).map(|dp| self.rank(GridCoords { dp, ..c })).collect()
    }

    /// Ranks sharing `rank`'s tensor and data indices, in pipeline-stage order.
    pub fn pp_group(&self, rank: usize) -> Vec<usize> {
        let c = self.coords(rank);
        (0..self.pp).map(|pp| self.rank(GridCoords { pp, ..c })).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_layout() {
        // TP=2, PP=2, DP=2 over 8 ranks: TP groups [0,1],[2,3]...; DP groups [0,2],[1,3],
        // [4,6],[5,7]; PP groups [0,4],[1,5],[2,6],[3,7].
        let g = RankGrid::new(2, 2, 2, 8).unwrap();
        assert_eq!(g.tp_group(3), vec![2, 3]);
        assert_eq!(g.dp_group(5), vec![5, 7]);
        assert_eq!(g.pp_group(2), vec![2, 6]);
        for r in 0..8 {
            assert_eq!(g.rank(g.coords(r)), r);
        }
        assert!(RankGrid::new(2, 2, 3, 8).is_err());
    }
}
