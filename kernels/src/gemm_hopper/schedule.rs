//! The persistent grid's walk over output tiles, in groups of [`GROUP_M`] tile rows.
//!
//! Block `b` of a grid of `g` blocks computes tiles `b, b + g, b + 2g, ...` of the
//! `tiles_m x tiles_n` tile grid, numbered by [`tile_coords`]: the tile rows are cut into
//! groups of [`GROUP_M`], and within a group the numbering runs down the rows first, then
//! across the columns. The blocks resident at one moment (one per SM) therefore work on a
//! band of at most `GROUP_M` A row-panels and about `g / GROUP_M` B column-panels, instead of
//! one A panel and `g` B panels (row-major order), so the panels they share stay in L2
//! (the grouped ordering of Triton's matmul tutorial, "L2 Cache Optimizations").

/// Tile rows per group.
pub const GROUP_M: usize = 8;

/// The (tile row, tile column) of tile number `t` in a `tiles_m x tiles_n` grid of tiles,
/// `t < tiles_m * tiles_n` (see the module documentation). A bijection onto the grid:
///
/// ```
/// use trident_kernels::gemm_hopper::tile_coords;
///
/// // 3 x 2 tiles: one group (3 rows < GROUP_M), down the rows first.
/// let order: Vec<_> = (0..6).map(|t| tile_coords(t, 3, 2)).collect();
/// assert_eq!(order, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]);
/// ```
#[inline(always)]
pub fn tile_coords(t: usize, tiles_m: usize, tiles_n: usize) -> (usize, usize) {
    let per_group = GROUP_M * tiles_n;
    let first_m = (t / per_group) * GROUP_M;
    // The last group may hold fewer rows.
    let rows = (tiles_m - first_m).min(GROUP_M);
    let within = t % per_group;
    (first_m + within % rows, within / rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tile_is_walked_once() {
        for (tiles_m, tiles_n) in [(1, 1), (1, 7), (7, 1), (8, 3), (9, 5), (17, 4), (30, 30)] {
            let mut seen = vec![false; tiles_m * tiles_n];
            for t in 0..tiles_m * tiles_n {
                let (m, n) = tile_coords(t, tiles_m, tiles_n);
                assert!(m < tiles_m && n < tiles_n, "{tiles_m} x {tiles_n}: tile {t} -> ({m}, {n})");
                assert!(!std::mem::replace(&mut seen[m * tiles_n + n], true), "({m}, {n}) twice");
            }
        }
        // 17 x 4: the third group holds the one row left, walked along its columns.
        assert_eq!(tile_coords(64, 17, 4), (16, 0));
        assert_eq!(tile_coords(67, 17, 4), (16, 3));
        // Within the first group, tile 8 starts the second column.
        assert_eq!(tile_coords(8, 17, 4), (0, 1));
    }
}
