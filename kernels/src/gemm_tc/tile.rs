//! Shared-memory tiles of the tensor-core GEMM: their XOR-swizzled layouts, the `cp.async`
//! copies that fill them from global memory (zero-filled past the matrix edges), and the
//! `ldmatrix` reads that turn them into `mma.m16n8k16` fragments.
//!
//! One stage holds a `BK = 32` slice of K for both operands. An operand tile is stored in one
//! of two layouts, by which dimension is contiguous in global memory; 16-byte chunks (8
//! elements) are the unit of every copy and of every `ldmatrix` row.
//!
//! - **K-major** (`A` as stored `M x K`, `B` as stored `N x K`): `R` rows of 32 k-elements,
//!   64 bytes each. Rows pair into 128-byte lines: row `r`, chunk `c` (`c < 4`) sits at
//!   position `p = 4 (r % 2) + c` of line `r / 2`, stored at position `p ^ (line % 8)`.
//!   `ldmatrix` reads 8 consecutive rows (8-aligned) at one chunk: 4 lines, positions `c` and
//!   `c + 4` of each, XORed with 4 consecutive line numbers (4-aligned), land on 8 distinct
//!   positions of a 128-byte line, that is on all 32 banks once. A quarter-warp of copies
//!   writes the 8 chunks of one line: again all 32 banks.
//! - **MN-major** (`A` as stored `K x M`, `B` as stored `K x N`): 32 k-rows of `W` (the
//!   tile's `BM` or `BN`, a multiple of 64) elements. Chunk `c` of k-row `k` is stored at
//!   chunk `c ^ (k % 8)` of its row (the XOR changes only the low 3 bits, so it stays within
//!   the aligned group of 8 chunks, 128 bytes). `ldmatrix.trans` reads 8 consecutive k-rows
//!   (8-aligned) at one chunk: 8 distinct chunks of a group, all 32 banks. A quarter-warp of
//!   copies writes 8 consecutive chunks of one row: one group, all 32 banks.
//!
//! Both layouts therefore make every `ldmatrix` and every `cp.async` of the main loop a
//! conflict-free request (one wavefront per 128 bytes), which the emulator's counters check.

use crate::simt::{self, Global, Shared};

/// K-extent of a stage.
pub const BK: usize = 32;
/// Elements per 16-byte chunk.
const CHUNK: usize = 8;
/// Rows and columns of one warp's tile of C.
pub const WARP_TILE: usize = 64;

/// Element offset of chunk `chunk` (< 4) of row `row` in a K-major tile.
#[inline(always)]
fn kmajor(row: usize, chunk: usize) -> usize {
    let line = row / 2;
    let position = (row % 2) * 4 + chunk;
    line * 2 * BK + (position ^ (line % 8)) * CHUNK
}

/// Element offset of chunk `chunk` of k-row `krow` in an MN-major tile `width` elements wide.
#[inline(always)]
fn mnmajor(krow: usize, chunk: usize, width: usize) -> usize {
    krow * width + (chunk ^ (krow % 8)) * CHUNK
}

/// One operand's slice of global memory for a block, and how it is stored.
#[derive(Clone, Copy)]
pub struct Operand {
    /// The stored matrix.
    pub base: Global<u16>,
    /// Leading dimension (elements per stored row, a multiple of 8).
    pub ld: usize,
    /// First row (of M for A, of N for B) of the block's tile.
    pub mn0: usize,
    /// Rows of M (or N) the matrix has.
    pub mn: usize,
    /// End of the K range this block reduces over.
    pub k_end: usize,
    /// Whether K is the stored matrix's contiguous dimension (K-major tile).
    pub k_major: bool,
    /// Rows of the block's tile (`BM` or `BN`).
    pub rows: usize,
}

impl Operand {
    /// Issues the copies of the slice `k0..k0 + BK` into `tile` (this thread's share of
    /// `threads`): 16 bytes each, with the bytes past M/N or `k_end` zero-filled.
    ///
    /// # Safety
    ///
    /// `base` must hold every element the valid (in-range) chunks address; the chunks out of
    /// range read nothing.
    #[inline(always)]
    pub unsafe fn load(&self, tile: Shared<u16>, k0: usize, tid: usize, threads: usize) {
        let chunks_per_row = if self.k_major { BK / CHUNK } else { self.rows / CHUNK };
        let total = self.rows * BK / CHUNK;
        let mut idx = tid;
        while idx < total {
            let (row, chunk) = (idx / chunks_per_row, idx % chunks_per_row);
            // (rows of M/N, k) of the chunk's first element, its offset in the tile, and the
            // elements of it that exist.
            let (mn, k, dst, valid) = if self.k_major {
                let (mn, k) = (self.mn0 + row, k0 + chunk * CHUNK);
                let valid = if mn < self.mn { self.k_end.saturating_sub(k).min(CHUNK) } else { 0 };
                (mn, k, kmajor(row, chunk), valid)
            } else {
                let (k, mn) = (k0 + row, self.mn0 + chunk * CHUNK);
                let valid = if k < self.k_end { self.mn.saturating_sub(mn).min(CHUNK) } else { 0 };
                (mn, k, mnmajor(row, chunk, self.rows), valid)
            };
            let src = if valid == 0 {
                // Nothing is read; any address will do, the matrix's first element is valid.
                self.base
            } else if self.k_major {
                self.base.add(mn * self.ld + k)
            } else {
                self.base.add(k * self.ld + mn)
            };
            // SAFETY: `valid` elements from `src` lie in the matrix (checked above against its
            // extent); rows start 16-byte aligned because `ld` is a multiple of 8 and the
            // buffer is 16-byte aligned (the launch wrapper checks both).
            unsafe { simt::cp_async_16_zfill(tile, dst, src, (valid * 2) as u32) };
            idx += threads;
        }
    }
}

/// The A fragments (4 tiles of 16 x 16, rows `wm0..wm0 + 64`) of k16 step `kk` (0 or 1) of a
/// stage, from an A tile `bm` rows wide.
#[inline(always)]
pub fn a_fragments(
    tile: Shared<u16>,
    k_major: bool,
    bm: usize,
    wm0: usize,
    kk: usize,
    lane: usize,
) -> [[u32; 4]; 4] {
    // Lane l addresses row l % 8 of matrix l / 8; matrices 0..3 are a0..a3: (rows 0-7, k 0-7),
    // (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) of the 16 x 16 tile.
    let (matrix, r) = (lane / 8, lane % 8);
    let mut out = [[0u32; 4]; 4];
    unroll!(mi in [0, 1, 2, 3] {
        let m = wm0 + mi * 16 + (matrix % 2) * 8;
        out[mi] = if k_major {
            simt::ldmatrix_x4(tile, kmajor(m + r, kk * 2 + matrix / 2))
        } else {
            // Stored k by m: k-row r of each 8 x 8 block, transposed on the way out.
            simt::ldmatrix_x4_trans(tile, mnmajor(kk * 16 + (matrix / 2) * 8 + r, m / CHUNK, bm))
        };
    });
    out
}

/// The B fragments (8 tiles of 16 x 8, columns `wn0..wn0 + 64`) of k16 step `kk` of a stage,
/// from a B tile `bn` columns wide.
#[inline(always)]
pub fn b_fragments(
    tile: Shared<u16>,
    k_major: bool,
    bn: usize,
    wn0: usize,
    kk: usize,
    lane: usize,
) -> [[u32; 2]; 8] {
    // One ldmatrix.x4 per pair of n8 tiles; matrices 0..3 are b0, b1 of tile 2p and b0, b1 of
    // tile 2p + 1: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
    let (matrix, r) = (lane / 8, lane % 8);
    let mut out = [[0u32; 2]; 8];
    unroll!(p in [0, 1, 2, 3] {
        let n = wn0 + p * 16 + (matrix / 2) * 8;
        let regs = if k_major {
            simt::ldmatrix_x4(tile, kmajor(n + r, kk * 2 + matrix % 2))
        } else {
            simt::ldmatrix_x4_trans(tile, mnmajor(kk * 16 + (matrix % 2) * 8 + r, n / CHUNK, bn))
        };
        out[2 * p] = [regs[0], regs[1]];
        out[2 * p + 1] = [regs[2], regs[3]];
    });
    out
}
