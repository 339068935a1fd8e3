//! The GEMM's fused epilogue (`bias`, GeLU, residual add, f32 or 16-bit output) and the
//! split-K reduction kernels that apply it after summing the partial products.

use super::{Bf16, Input, Output, F16};
use crate::gelu::{CUBE, SQRT_2_OVER_PI};
use crate::simt::{self, Global, GlobalMut};

/// Epilogue flag: add `bias[col]` (f32).
pub const BIAS: u32 = 1;
/// Epilogue flag: GeLU (tanh form, as `gelu_forward_f32`) after the bias.
pub const GELU: u32 = 2;
/// Epilogue flag: add `residual[row * ldr + col]` (the output's element type) last.
pub const RESIDUAL: u32 = 4;

/// What the epilogue applies, and where it writes.
#[derive(Clone, Copy)]
pub struct Epilogue<O: Output> {
    pub c: GlobalMut<O>,
    pub ldc: usize,
    pub bias: Global<f32>,
    pub residual: Global<O>,
    pub ldr: usize,
    pub flags: u32,
    pub m: usize,
    pub n: usize,
}

impl<O: Output> Epilogue<O> {
    /// `v` after the bias, GeLU and residual the flags ask for, at (`row`, `col`).
    ///
    /// # Safety
    ///
    /// `row < m`, `col < n`, and the bias and residual hold the elements the flags read.
    #[inline(always)]
    unsafe fn apply<I: Input>(&self, row: usize, col: usize, mut v: f32) -> f32 {
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

/// `c = epilogue(sum over s of partial[s])` for every element of an `m x n` C: the second
/// half of a split-K GEMM, one thread per element pair, grid-stride.
///
/// # Safety
///
/// `partial` holds `splits` dense `m x n` f32 matrices; C, the bias and the residual as the
/// epilogue flags need (see [`Epilogue`]).
#[inline(always)]
unsafe fn reduce<I: Input, O: Output>(partial: Global<f32>, splits: usize, e: Epilogue<O>) {
    let pairs_per_row = e.n.div_ceil(2);
    let total = e.m * pairs_per_row;
    let stride = (simt::block_dim_x() * simt::grid_dim_x()) as usize;
    let mut i = (simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x()) as usize;
    while i < total {
        let (row, col) = (i / pairs_per_row, 2 * (i % pairs_per_row));
        let at = row * e.n + col;
        let mut v = [0.0f32; 2];
        for s in 0..splits {
            // SAFETY: (row, col) and, when below n, (row, col + 1) are inside each partial.
            unsafe {
                v[0] += partial.load(s * e.m * e.n + at);
                if col + 1 < e.n {
                    v[1] += partial.load(s * e.m * e.n + at + 1);
                }
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { e.store_pair::<I>(row, col, v) };
        i += stride;
    }
}

macro_rules! reduce_entries {
    ($($name:ident: $input:ty, $out:ty;)*) => {
        kernels! {$(
            /// Split-K reduction of the tensor-core GEMM (see `gemm_tc`): sums `splits` dense
            /// `m x n` f32 partial products in split order and applies the epilogue `flags`.
            /// Launch any 1-D grid (a grid-stride loop covers the `m * ceil(n / 2)` pairs).
            pub unsafe fn $name(
                c: GlobalMut<$out>, partial: Global<f32>, bias: Global<f32>, residual: Global<$out>,
                m: u32, n: u32, ldc: u32, ldr: u32, splits: u32, flags: u32,
            ) {
                let e = Epilogue {
                    c, ldc: ldc as usize, bias, residual, ldr: ldr as usize, flags,
                    m: m as usize, n: n as usize,
                };
                // SAFETY: the launch wrapper checked every buffer against these sizes.
                unsafe { reduce::<$input, $out>(partial, splits as usize, e) }
            }
        )*}
    };
}

reduce_entries! {
    gemm_tc_splitk_reduce_f32: Bf16, f32;
    gemm_tc_splitk_reduce_bf16: Bf16, u16;
    gemm_tc_splitk_reduce_f16: F16, u16;
}
