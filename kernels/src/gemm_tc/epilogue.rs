//! The GEMM's fused epilogue: `bias`, GeLU, residual add, f32 or 16-bit output.

use super::{Input, Output};
use crate::gelu::{gelu_grad, CUBE, SQRT_2_OVER_PI};
use crate::simt::{self, Global, GlobalMut};

/// Epilogue flag: add `bias[col]` (f32).
pub const BIAS: u32 = 1;
/// Epilogue flag: GeLU (tanh form, [`crate::gelu`]) after the bias.
pub const GELU: u32 = 2;
/// Epilogue flag: add `residual[row * ldr + col]` (the output's element type) last.
pub const RESIDUAL: u32 = 4;
/// Epilogue flag: multiply by `gelu'(residual[row * ldr + col])` last, the residual operand
/// holding GeLU's input (the MLP's backward: the input gradient of the projection after GeLU
/// times GeLU's derivative, as `gelu_backward_*` computes it). Not with [`RESIDUAL`].
pub const GELU_GRAD: u32 = 8;

/// What the epilogue applies, and where it writes.
#[derive(Clone, Copy)]
pub struct Epilogue<O: Output> {
    /// The output, row-major with leading dimension `ldc`.
    pub c: GlobalMut<O>,
    /// C's leading dimension, in elements.
    pub ldc: usize,
    /// `n` values, read when `flags` has [`BIAS`].
    pub bias: Global<f32>,
    /// `m` rows of leading dimension `ldr`, read when `flags` has [`RESIDUAL`].
    pub residual: Global<O>,
    /// The residual's leading dimension, in elements.
    pub ldr: usize,
    /// [`BIAS`], [`GELU`], [`RESIDUAL`] or [`GELU_GRAD`], or'ed.
    pub flags: u32,
    /// C's rows: the stores are masked to them.
    pub m: usize,
    /// C's columns: the stores are masked to them.
    pub n: usize,
}

impl<O: Output> Epilogue<O> {
    /// `v` after the bias, GeLU and residual the flags ask for, at (`row`, `col`).
    ///
    /// # Safety
    ///
    /// `row < m`, `col < n`, and the bias and residual hold the elements the flags read.
    #[inline(always)]
    pub unsafe fn apply<I: Input>(&self, row: usize, col: usize, mut v: f32) -> f32 {
        if self.flags & BIAS != 0 {
            // SAFETY: the bias has `n` elements when the flag is set (checked by the wrapper).
            v += unsafe { self.bias.load(col) };
        }
        if self.flags & GELU != 0 {
            let u = SQRT_2_OVER_PI * (v + CUBE * v * v * v);
            v = 0.5 * v * (1.0 + simt::tanh(u));
        }
        if self.flags & RESIDUAL != 0 {
            // SAFETY: the residual covers `m` rows of `ldr` when the flag is set.
            v += unsafe { self.residual.load(row * self.ldr + col) }.to_f32::<I>();
        } else if self.flags & GELU_GRAD != 0 {
            // SAFETY: as for the residual, which holds GeLU's input under this flag.
            v *= gelu_grad(unsafe { self.residual.load(row * self.ldr + col) }.to_f32::<I>());
        }
        v
    }

    /// Stores the pair `v` at (`row`, `col`) and (`row`, `col + 1`), each if inside C.
    ///
    /// # Safety
    ///
    /// As for [`Epilogue::apply`], for the elements inside C.
    #[inline(always)]
    pub unsafe fn store_pair<I: Input>(&self, row: usize, col: usize, v: [f32; 2]) {
        if row >= self.m || col >= self.n {
            return;
        }
        // SAFETY: (row, col) is inside C, and so is col + 1 when it is below n.
        unsafe {
            let first = self.apply::<I>(row, col, v[0]);
            if col + 1 < self.n {
                let second = self.apply::<I>(row, col + 1, v[1]);
                O::store_pair::<I>(self.c, row * self.ldc + col, [first, second]);
            } else {
                self.c.store(row * self.ldc + col, O::from_f32::<I>(first));
            }
        }
    }
}

/// Applies the epilogue in place to a warp's accumulators, the 64 x 64 tile at `row0`,
/// `col0` of C (fragment layout as in [`store_tile_pairs`]); elements outside C become 0.
///
/// # Safety
///
/// The bias and the residual hold what C's rows and columns address.
#[inline(always)]
pub unsafe fn apply_tile<I: Input, O: Output>(
    e: &Epilogue<O>,
    acc: &mut [[[f32; 4]; 8]; 4],
    row0: usize,
    col0: usize,
    lane: usize,
) {
    let (g, p) = (lane / 4, lane % 4);
    unroll!(mi in [0, 1, 2, 3] {
        unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(reg in [0, 1, 2, 3] {
                let (row, col) = (row0 + mi * 16 + g + 8 * (reg / 2), col0 + nj * 8 + 2 * p + reg % 2);
                let v = &mut acc[mi][nj][reg];
                // SAFETY: (row, col) is inside C, where the bias and the residual are.
                *v = if row < e.m && col < e.n { unsafe { e.apply::<I>(row, col, *v) } } else { 0.0 };
            });
        });
    });
}

/// Applies the epilogue to a warp's accumulators and stores them by pairs. Accumulator
/// (mi, nj) of lane (g, p) = (lane / 4, lane % 4): registers 0, 1 are row g, columns 2p,
/// 2p + 1 of the 16 x 8 tile at (16 mi, 8 nj); registers 2, 3 the same at row g + 8.
///
/// # Safety
///
/// As for [`Epilogue::store_pair`].
#[inline(always)]
pub unsafe fn store_tile_pairs<I: Input, O: Output>(
    e: &Epilogue<O>,
    acc: &[[[f32; 4]; 8]; 4],
    row0: usize,
    col0: usize,
    lane: usize,
) {
    let (g, p) = (lane / 4, lane % 4);
    unroll!(mi in [0, 1, 2, 3] {
        unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
            let (row, col) = (row0 + mi * 16 + g, col0 + nj * 8 + 2 * p);
            let r = acc[mi][nj];
            // SAFETY: `store_pair` writes only elements inside C.
            unsafe {
                e.store_pair::<I>(row, col, [r[0], r[1]]);
                e.store_pair::<I>(row + 8, col, [r[2], r[3]]);
            }
        });
    });
}

/// Writes a warp's finished 64 x 64 tile of 16-bit outputs, rows `row0..`, columns `col0..`
/// of C, through `stage` (4096 elements of shared memory the warp owns): each lane stores its
/// fragments' pairs, then each quarter-warp writes one 128-byte row of the tile with 16-byte
/// stores. In the stage, row `r` holds its eight 16-byte chunks with chunk `c` at `c ^ (r %
/// 8)`: the pair stores of one request (8 rows, one chunk) and the chunk loads (one row, 8
/// chunks) each touch all 32 banks once.
///
/// # Safety
///
/// `values[mi][nj]` are the warp's accumulator fragments after [`apply_tile`]; `stage` is not
/// used by any other warp until the next barrier. C as in [`Epilogue::store_pair`].
#[inline(always)]
pub unsafe fn store_tile_b16<I: Input>(
    e: &Epilogue<u16>,
    stage: simt::Shared<u16>,
    values: &[[[f32; 4]; 8]; 4],
    row0: usize,
    col0: usize,
    lane: usize,
) {
    let at = |r: usize, c: usize| r * 64 + ((c / 8) ^ (r % 8)) * 8 + c % 8;
    let words = stage.cast::<u32>();
    let (g, p) = (lane / 4, lane % 4);
    unroll!(mi in [0, 1, 2, 3] {
        unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
            let (r, c) = (mi * 16 + g, nj * 8 + 2 * p);
            let v = values[mi][nj];
            words.store(at(r, c) / 2, simt::pack_bf16x2(I::round(v[0]), I::round(v[1])));
            words.store(at(r + 8, c) / 2, simt::pack_bf16x2(I::round(v[2]), I::round(v[3])));
        });
    });
    simt::sync_warp(simt::FULL_MASK);
    let chunks = stage.cast::<[u32; 4]>();
    let c = (lane % 8) * 8;
    let (col, aligned) = (col0 + c, e.ldc % 8 == 0);
    for i in 0..16 {
        let r = i * 4 + lane / 8;
        let row = row0 + r;
        let chunk = chunks.load(at(r, c) / 8);
        if row >= e.m || col >= e.n {
            continue;
        }
        // SAFETY: (row, col..col + 8) is inside C when col + 8 <= n; a 16-byte store needs
        // row * ldc + col to be a multiple of 8 on a 16-byte aligned base.
        unsafe {
            if aligned && col + 8 <= e.n {
                e.c.pairs().store_v4((row * e.ldc + col) / 2, chunk);
            } else {
                // Unrolled: constant indices keep the chunk in registers.
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if col + j < e.n {
                        e.c.store(row * e.ldc + col + j, (chunk[j / 2] >> (16 * (j % 2))) as u16);
                    }
                });
            }
        }
    }
}
