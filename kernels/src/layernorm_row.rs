//! LayerNorm forward with one read of its input: one warp per row, the row held in registers.
//!
//! Blocks stage the weights and biases in shared memory once, then each warp normalizes rows
//! `blockIdx.x * warps + warp`, `+ gridDim.x * warps`, ... (so the f32 weights, which outweigh a
//! bf16 row, cross from global memory once per block, not once per row). Lane `l` holds the
//! 16-byte groups `u * 32 + l` (`u < U`) of its row: 4 f32 or 8 bf16
//! each, columns `(u * 32 + l) * W ..+ W`, so every warp access is 512 contiguous bytes. The
//! mean and then the variance of the deviations (two passes, both over registers) are exact
//! f32 statistics; the row is normalized from the same registers and written once. Rows of up
//! to [`MAX_C`] channels fit.
//!
//! Holding 64 floats per lane costs a wide kernel 220-255 registers, so one block of 8 warps runs
//! per SM and the global round trip after its barrier is exposed. The bf16 forward has a narrow
//! variant for rows of up to [`NARROW_MAX_C`] channels (GPT-2's 768 among them): 4 groups of 8
//! per lane, 32 floats, with the registers for several blocks per SM; the launch wrapper picks
//! it by `C`.
//!
//! The residual variants add a second input first and write the sum too (`res = x + r`, the
//! residual stream of the next block), then normalize the sum as stored (rounded to bf16 in the
//! bf16 variant, so the backward sees what the forward normalized). Weights, biases, means and
//! reciprocal standard deviations are f32 in every variant; inputs and outputs are f32
//! (`_f32`) or bf16 (`_bf16`), or f32 input and bf16 output (`_f32_bf16`: the normalized f32
//! value rounded once, to nearest, ties to even, as the store's conversion). That variant keeps
//! the f32 variant's groups of 4 columns, so each lane sums the same columns in the same order
//! and the f32 results are the f32 variant's bit for bit; it writes each group as 8 bytes
//! (`st.global.v2.b32`, 256 contiguous bytes per warp). With `vectorized = 0` (a pointer not 16-byte aligned, or `C` not
//! a multiple of the group) the same registers are filled and written one element at a time.

use crate::layernorm::EPS;
use crate::reduce::warp_sum;
use crate::simt::{self, Global, GlobalMut};
use crate::vector::{self, Elem};

/// Floats each lane holds: 64 (16 groups of f32, 8 of bf16).
const FLOATS_PER_LANE: usize = 64;

/// The widest row the kernels take: 32 lanes x 64 floats.
pub const MAX_C: u32 = 32 * FLOATS_PER_LANE as u32;

/// Groups of 8 bf16 each lane of the narrow bf16 kernel holds: 4 (32 floats).
const NARROW_GROUPS: usize = 4;

/// The widest row `layernorm_forward_row_bf16_narrow` takes: 32 lanes x 4 groups x 8 bf16.
pub const NARROW_MAX_C: u32 = 32 * (NARROW_GROUPS * 8) as u32;

/// The body once per group index `u` in `0..16` with `u < $n`: the indices are constants (a
/// loop LLVM left rolled would put the row on the stack), and those past `$n` fold away.
macro_rules! for_groups {
    ($u:ident < $n:expr => $body:block) => {
        for_groups!(@ $u, $n, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $u:ident, $n:expr, $body:block, $($v:literal)*) => {
        $({
            let $u: usize = $v;
            if $u < $n $body
        })*
    };
}

/// Normalizes the block's rows of `x` (plus `r` where given, the sum written to `res`) into
/// `out`; dynamic shared memory holds `2 * c` floats. `W` elements per group (a whole 16-byte
/// group of `T`; of `O`, a whole one or half of one), `U <= 16` groups per lane: rows of up to
/// `32 * U * W` channels.
#[inline(always)]
unsafe fn layernorm_row<T: Elem, O: Elem, const W: usize, const U: usize>(
    res: Option<GlobalMut<T>>,
    out: GlobalMut<O>,
    mean: GlobalMut<f32>,
    rstd: GlobalMut<f32>,
    inp: Global<T>,
    r: Option<Global<T>>,
    weight: Global<f32>,
    bias: Global<f32>,
    n: u32,
    c: u32,
    vectorized: u32,
) {
    let (lane, len, vec) = (simt::lane_id() as usize, c as usize, vectorized != 0);
    // The weights and biases, staged in dynamic shared memory (`2 * c` floats) once per block
    // and read from there for every row the block normalizes.
    let ws = simt::dynamic_shared::<f32>(0, len);
    let bs = simt::dynamic_shared::<f32>(len * 4, len);
    vector::for_range::<4>(0, c, simt::thread_idx_x(), simt::block_dim_x(), vec, |i, whole| {
        if whole {
            ws.cast::<[f32; 4]>().store(i / 4, weight.load_v4(i));
            bs.cast::<[f32; 4]>().store(i / 4, bias.load_v4(i));
        } else {
            ws.store(i, weight.load(i));
            bs.store(i, bias.load(i));
        }
    });
    simt::sync_threads();
    let warps = simt::block_dim_x() / 32;
    let mut row = simt::block_idx_x() * warps + simt::thread_idx_x() / 32;
    while row < n {
        normalize_row::<T, O, W, U>(res, out, mean, rstd, inp, r, ws, bs, row, c, vec, lane);
        row += simt::grid_dim_x() * warps;
    }
}

/// One row of [`layernorm_row`], by the calling warp.
///
/// # Safety
///
/// As for [`layernorm_row`]; `ws` and `bs` hold the `c` weights and biases.
#[inline(always)]
unsafe fn normalize_row<T: Elem, O: Elem, const W: usize, const U: usize>(
    res: Option<GlobalMut<T>>,
    out: GlobalMut<O>,
    mean: GlobalMut<f32>,
    rstd: GlobalMut<f32>,
    inp: Global<T>,
    r: Option<Global<T>>,
    ws: simt::Shared<f32>,
    bs: simt::Shared<f32>,
    row: u32,
    c: u32,
    vec: bool,
    lane: usize,
) {
    let len = c as usize;
    let base = row as usize * len;
    let x = inp.add(base);
    // v[u][k]: column (u * 32 + lane) * W + k; zero past the row's end.
    let mut v = [[0.0f32; W]; U];
    let mut sum = 0.0f32;
    for_groups!(u < U => {
        let col = (u * 32 + lane) * W;
        if col < len {
            let mut xs = vector::load::<T, W>(x, col, len, vec);
            if let (Some(r), Some(res)) = (r, res) {
                let rs = vector::load::<T, W>(r.add(base), col, len, vec);
                for k in 0..W {
                    xs[k] = T::from_f32(xs[k] + rs[k]).to_f32();
                }
                vector::store::<T, W>(res.add(base), col, len, vec, &xs);
            }
            for k in 0..W {
                sum += xs[k];
            }
            v[u] = xs;
        }
    });
    let m = warp_sum(sum) / c as f32;
    let mut var = 0.0f32;
    for_groups!(u < U => {
        let col = (u * 32 + lane) * W;
        for k in 0..W {
            if col + k < len {
                let d = v[u][k] - m;
                var = simt::fma(d, d, var);
            }
        }
    });
    let s = simt::rsqrt(warp_sum(var) / c as f32 + EPS);
    let y = out.add(base);
    for_groups!(u < U => {
        let col = (u * 32 + lane) * W;
        if col < len {
            let (w, b) = (shared_group::<W>(ws, col, len, vec), shared_group::<W>(bs, col, len, vec));
            let mut o = [0.0f32; W];
            for k in 0..W {
                o[k] = (v[u][k] - m) * s * w[k] + b[k];
            }
            vector::store::<O, W>(y, col, len, vec, &o);
        }
    });
    if lane == 0 {
        mean.store(row as usize, m);
        rstd.store(row as usize, s);
    }
}

/// `W` floats of `s` from `col` (16 bytes at a time where `vec`; zero past `len`).
#[inline(always)]
fn shared_group<const W: usize>(s: simt::Shared<f32>, col: usize, len: usize, vec: bool) -> [f32; W] {
    let mut v = [0.0f32; W];
    if vec {
        let s4 = s.cast::<[f32; 4]>();
        for q in 0..W / 4 {
            let x = s4.load(col / 4 + q);
            v[4 * q..4 * q + 4].copy_from_slice(&x);
        }
    } else {
        for k in 0..W {
            if col + k < len {
                v[k] = s.load(col + k);
            }
        }
    }
    v
}

kernels! {
    /// `out = layernorm(inp) * weight + bias` over `n` rows of `c <= MAX_C` f32 channels,
    /// saving each row's mean and rstd; launch with 32 threads per row.
    pub unsafe fn layernorm_forward_row_f32(
        out: GlobalMut<f32>, mean: GlobalMut<f32>, rstd: GlobalMut<f32>,
        inp: Global<f32>, weight: Global<f32>, bias: Global<f32>, n: u32, c: u32, vectorized: u32,
    ) {
        layernorm_row::<f32, f32, 4, 16>(None, out, mean, rstd, inp, None, weight, bias, n, c, vectorized);
    }

    /// `res = inp + r`, then `out = layernorm(res) * weight + bias`, f32; as
    /// `layernorm_forward_row_f32` otherwise.
    pub unsafe fn layernorm_residual_forward_f32(
        res: GlobalMut<f32>, out: GlobalMut<f32>, mean: GlobalMut<f32>, rstd: GlobalMut<f32>,
        inp: Global<f32>, r: Global<f32>, weight: Global<f32>, bias: Global<f32>, n: u32, c: u32, vectorized: u32,
    ) {
        layernorm_row::<f32, f32, 4, 16>(Some(res), out, mean, rstd, inp, Some(r), weight, bias, n, c, vectorized);
    }

    /// `layernorm_forward_row_f32` with bf16 input and output (f32 statistics and math).
    pub unsafe fn layernorm_forward_row_bf16(
        out: GlobalMut<u16>, mean: GlobalMut<f32>, rstd: GlobalMut<f32>,
        inp: Global<u16>, weight: Global<f32>, bias: Global<f32>, n: u32, c: u32, vectorized: u32,
    ) {
        layernorm_row::<u16, u16, 8, 8>(None, out, mean, rstd, inp, None, weight, bias, n, c, vectorized);
    }

    /// `layernorm_forward_row_f32` with a bf16 output: f32 input, statistics and math, each
    /// output rounded once (the f32 variant's value, narrowed).
    pub unsafe fn layernorm_forward_row_f32_bf16(
        out: GlobalMut<u16>, mean: GlobalMut<f32>, rstd: GlobalMut<f32>,
        inp: Global<f32>, weight: Global<f32>, bias: Global<f32>, n: u32, c: u32, vectorized: u32,
    ) {
        layernorm_row::<f32, u16, 4, 16>(None, out, mean, rstd, inp, None, weight, bias, n, c, vectorized);
    }

    /// `layernorm_forward_row_bf16` for rows of `c <= NARROW_MAX_C`: each lane holds 4 groups
    /// of 8 (32 floats) instead of 8, so the kernel needs fewer registers (128-168 against
    /// 254-255) and several blocks share an SM.
    pub unsafe fn layernorm_forward_row_bf16_narrow(
        out: GlobalMut<u16>, mean: GlobalMut<f32>, rstd: GlobalMut<f32>,
        inp: Global<u16>, weight: Global<f32>, bias: Global<f32>, n: u32, c: u32, vectorized: u32,
    ) {
        layernorm_row::<u16, u16, 8, NARROW_GROUPS>(None, out, mean, rstd, inp, None, weight, bias, n, c, vectorized);
    }

    /// `layernorm_residual_forward_f32` with bf16 inputs and outputs: `res = bf16(inp + r)`,
    /// normalized as stored.
    pub unsafe fn layernorm_residual_forward_bf16(
        res: GlobalMut<u16>, out: GlobalMut<u16>, mean: GlobalMut<f32>, rstd: GlobalMut<f32>,
        inp: Global<u16>, r: Global<u16>, weight: Global<f32>, bias: Global<f32>, n: u32, c: u32, vectorized: u32,
    ) {
        layernorm_row::<u16, u16, 8, 8>(Some(res), out, mean, rstd, inp, Some(r), weight, bias, n, c, vectorized);
    }
}
