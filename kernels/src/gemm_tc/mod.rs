//! Tensor-core GEMM: `C = epilogue(op(A) op(B))` with bf16 or f16 `A` and `B`, f32
//! accumulation in `mma.sync.m16n8k16`, row-major, for sm_80 and up.
//!
//! `op(A)` is `M x K`, `op(B)` is `K x N`. The layouts a linear layer `y = x W^T` needs:
//! forward `x W^T` is NT (`A` stored `M x K`, `B` stored `N x K`), the input gradient `dy W` is
//! NN (`B` stored `K x N`), the weight gradient `dy^T x` is TN (`A` stored `K x M`). Every
//! stored matrix's leading dimension must be a multiple of 8 and its base 16-byte aligned (one
//! `cp.async` moves 8 elements); M, N and K are otherwise arbitrary.
//!
//! A block computes a `BM x BN` tile of C with `WM x WN` warps, each a 64 x 64 warp tile (4 x 8
//! `mma` tiles of 16 x 8, 128 f32 accumulators per thread). The K loop walks `BK = 32` slices
//! through a ring of `STAGES` shared-memory stages filled by `cp.async` (`tile.rs` states the
//! swizzled layouts): with `S` stages, slice `t + S - 1` is in flight while slice `t` is
//! multiplied, and one barrier per slice both publishes slice `t` and retires the stage slice
//! `t - 1` used, which is the one refilled next. Out-of-range rows and columns are zero-filled
//! by the copies, so the main loop has no edge cases; the epilogue masks the stores.
//!
//! Block tiles ([`CONFIGS`]): `L` 128 x 256 (8 warps, 3 stages, 72 KiB of shared memory) for
//! large shapes, `S` 64 x 128 (2 warps, 4 stages, 48 KiB) for small or skinny ones. Split-K
//! runs the grid's z blocks over consecutive K ranges in the same launch; the last block of
//! each output tile to finish sums the tile's f32 partial products in split order and runs
//! the epilogue ([`splitk`]: deterministic, one launch).
//!
//! The epilogue applies, per element and as the `flags` ask, `+ bias[col]`, GeLU (tanh form),
//! `+ residual[row, col]`, and writes f32 (paired 8-byte stores) or the inputs' 16-bit type
//! (each warp's 64 x 64 tile staged in the drained stages, then written as 16-byte row chunks;
//! see [`epilogue::store_tile_b16`]).

pub mod epilogue;
pub mod splitk;
mod tile;

use crate::simt::{self, Global, GlobalMut, Shared};
pub use epilogue::Epilogue;
pub use epilogue::{BIAS, GELU, GELU_GRAD, RESIDUAL};
pub use splitk::Workspace;
pub use tile::BK;
use tile::{a_fragments, b_fragments, Operand, WARP_TILE};

/// The 16-bit input type of A and B.
pub trait Input: Copy {
    /// `mma.sync.m16n8k16` for this input type.
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
    /// Rounds to nearest even.
    fn round(v: f32) -> u16;
    /// The value of a bit pattern.
    fn widen(bits: u16) -> f32;
}

/// bfloat16 inputs.
#[derive(Clone, Copy)]
pub struct Bf16;
/// IEEE half-precision inputs.
#[derive(Clone, Copy)]
pub struct F16;

impl Input for Bf16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        simt::mma_m16n8k16_bf16(a, b, c)
    }
    #[inline(always)]
    fn round(v: f32) -> u16 {
        simt::f32_to_bf16(v)
    }
    #[inline(always)]
    fn widen(bits: u16) -> f32 {
        simt::bf16_to_f32(bits)
    }
}

impl Input for F16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        simt::mma_m16n8k16_f16(a, b, c)
    }
    #[inline(always)]
    fn round(v: f32) -> u16 {
        simt::f32_to_f16(v)
    }
    #[inline(always)]
    fn widen(bits: u16) -> f32 {
        simt::f16_to_f32(bits)
    }
}

/// The output element: f32, or `u16` holding the inputs' 16-bit type.
pub trait Output: Copy {
    /// Whether a block's tile is written through shared memory in 16-byte row chunks (16-bit
    /// outputs, whose pair stores would fill half of every sector) rather than by pairs.
    const STAGED: bool;
    /// `v` as an output element (rounded to the input type `I` for `u16`).
    fn from_f32<I: Input>(v: f32) -> Self;
    /// The element's value.
    fn to_f32<I: Input>(self) -> f32;
    /// Stores `v` at elements `at` and `at + 1` of `c`.
    ///
    /// # Safety
    ///
    /// Both elements must lie in `c`, whose base is 16-byte aligned.
    unsafe fn store_pair<I: Input>(c: GlobalMut<Self>, at: usize, v: [f32; 2]);
    /// Applies the epilogue to a warp's accumulators (`acc`, the 64 x 64 tile at `row0`,
    /// `col0` of C) and stores them; `stage` is shared memory the warp may use ([`STAGED`]).
    ///
    /// # Safety
    ///
    /// As for [`Epilogue::store_pair`]; `stage` holds 4096 elements no other warp uses until
    /// the next barrier.
    ///
    /// [`STAGED`]: Output::STAGED
    unsafe fn store_warp_tile<I: Input>(
        e: &Epilogue<Self>,
        stage: Shared<u16>,
        acc: &mut [[[f32; 4]; 8]; 4],
        row0: usize,
        col0: usize,
        lane: usize,
    );
}

impl Output for f32 {
    const STAGED: bool = false;
    #[inline(always)]
    fn from_f32<I: Input>(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn to_f32<I: Input>(self) -> f32 {
        self
    }
    #[inline(always)]
    unsafe fn store_warp_tile<I: Input>(
        e: &Epilogue<f32>,
        _stage: Shared<u16>,
        acc: &mut [[[f32; 4]; 8]; 4],
        row0: usize,
        col0: usize,
        lane: usize,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { epilogue::store_tile_pairs::<I, f32>(e, acc, row0, col0, lane) }
    }
    #[inline(always)]
    unsafe fn store_pair<I: Input>(c: GlobalMut<f32>, at: usize, v: [f32; 2]) {
        // SAFETY: forwarded from the caller; an even `at` on an aligned base is 8-byte aligned.
        unsafe {
            if at % 2 == 0 {
                c.store_v2(at, v);
            } else {
                c.store(at, v[0]);
                c.store(at + 1, v[1]);
            }
        }
    }
}

impl Output for u16 {
    const STAGED: bool = true;
    #[inline(always)]
    fn from_f32<I: Input>(v: f32) -> Self {
        I::round(v)
    }
    #[inline(always)]
    fn to_f32<I: Input>(self) -> f32 {
        I::widen(self)
    }
    #[inline(always)]
    unsafe fn store_warp_tile<I: Input>(
        e: &Epilogue<u16>,
        stage: Shared<u16>,
        acc: &mut [[[f32; 4]; 8]; 4],
        row0: usize,
        col0: usize,
        lane: usize,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            epilogue::apply_tile::<I, u16>(e, acc, row0, col0, lane);
            epilogue::store_tile_b16::<I>(e, stage, acc, row0, col0, lane);
        }
    }
    #[inline(always)]
    unsafe fn store_pair<I: Input>(c: GlobalMut<u16>, at: usize, v: [f32; 2]) {
        let (lo, hi) = (I::round(v[0]), I::round(v[1]));
        // SAFETY: forwarded from the caller; an even `at` on an aligned base is a 4-byte
        // aligned word holding exactly elements `at` and `at + 1`.
        unsafe {
            if at % 2 == 0 {
                c.pairs().store(at / 2, simt::pack_bf16x2(lo, hi));
            } else {
                c.store(at, lo);
                c.store(at + 1, hi);
            }
        }
    }
}

/// A block-tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Warps along M; the block tile is `64 warps_m x 64 warps_n`.
    pub warps_m: u32,
    /// Warps along N.
    pub warps_n: u32,
    /// Stages of the `cp.async` ring (at least 3).
    pub stages: u32,
    /// The suffix of its kernels' names.
    pub suffix: &'static str,
}

impl Config {
    /// Rows of C per block.
    pub const fn bm(&self) -> u32 {
        self.warps_m * WARP_TILE as u32
    }
    /// Columns of C per block.
    pub const fn bn(&self) -> u32 {
        self.warps_n * WARP_TILE as u32
    }
    /// Threads per block.
    pub const fn threads(&self) -> u32 {
        32 * self.warps_m * self.warps_n
    }
    /// Dynamic shared memory per block, bytes: the stages of both operand tiles.
    pub const fn smem_bytes(&self) -> u32 {
        self.stages * (self.bm() + self.bn()) * BK as u32 * 2
    }
}

/// 128 x 256 block tiles, for large shapes.
pub const LARGE: Config = Config { warps_m: 2, warps_n: 4, stages: 3, suffix: "l" };
/// 64 x 128 block tiles, for small and skinny shapes.
pub const SMALL: Config = Config { warps_m: 1, warps_n: 2, stages: 4, suffix: "s" };
/// Every configuration the kernels are built for.
pub const CONFIGS: [Config; 2] = [LARGE, SMALL];

/// The scalar arguments of one launch.
#[derive(Clone, Copy)]
struct Shape {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    /// K elements each z block of the grid reduces over (a multiple of `BK`).
    k_split: usize,
}

/// Float4 stores and loads of the split-K workspace assume 128 accumulators per thread.
const _: () = assert!(WARP_TILE * WARP_TILE == 32 * 128);

/// The GEMM for one block (see the module documentation). `TA`: A is stored transposed
/// (`K x M`); `TB`: B is (`N x K`). `WM x WN` warps, `STAGES` stages; `WAIT = STAGES - 2`, the
/// groups left in flight when a slice is consumed.
///
/// # Safety
///
/// A, B and the epilogue's buffers hold what the shape addresses, with leading dimensions
/// multiples of 8 and 16-byte aligned bases; launched with `WM * WN * 32` threads, a grid of
/// `(ceil(N / BN), ceil(M / BM), splits)` and `stages * (BM + BN) * BK * 2` bytes of dynamic
/// shared memory. With more than one split, `ws` is as [`splitk::reduce_tile`] requires.
#[inline(always)]
unsafe fn gemm_block<
    I: Input,
    O: Output,
    const TA: bool,
    const TB: bool,
    const WM: usize,
    const WN: usize,
    const STAGES: usize,
    const WAIT: u32,
>(
    a: Global<u16>,
    b: Global<u16>,
    s: Shape,
    ws: Workspace,
    e: Epilogue<O>,
) {
    let (bm, bn) = (WM * WARP_TILE, WN * WARP_TILE);
    let threads = WM * WN * 32;
    let tid = simt::thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let (wm0, wn0) = ((warp / WN) * WARP_TILE, (warp % WN) * WARP_TILE);
    let (m0, n0) = (simt::block_idx_y() as usize * bm, simt::block_idx_x() as usize * bn);
    let z = simt::block_idx_z() as usize;
    let k_begin = z * s.k_split;
    let k_end = s.k.min(k_begin + s.k_split);
    let k_tiles = k_end.saturating_sub(k_begin).div_ceil(BK);

    let stage_elems = (bm + bn) * BK;
    // The staged epilogue reuses the stages: one 64 x 64 16-bit tile per warp.
    const { assert!(WM * WN * WARP_TILE * WARP_TILE <= STAGES * (WM + WN) * WARP_TILE * BK) };
    // SAFETY: the launch provides `STAGES * stage_elems` 16-bit elements of dynamic shared
    // memory, 16-byte aligned at offset 0.
    let smem = unsafe { simt::dynamic_shared::<u16>(0, STAGES * stage_elems) };
    let a_tile = |stage: usize| smem.sub(stage * stage_elems, bm * BK);
    let b_tile = |stage: usize| smem.sub(stage * stage_elems + bm * BK, bn * BK);
    let op_a = Operand { base: a, ld: s.lda, mn0: m0, mn: s.m, k_end, k_major: !TA, rows: bm };
    let op_b = Operand { base: b, ld: s.ldb, mn0: n0, mn: s.n, k_end, k_major: TB, rows: bn };
    let load = |t: usize| {
        if t < k_tiles {
            let (stage, k0) = (t % STAGES, k_begin + t * BK);
            // SAFETY: the copies address only elements inside A and B (see `Operand::load`).
            unsafe {
                op_a.load(a_tile(stage), k0, tid, threads);
                op_b.load(b_tile(stage), k0, tid, threads);
            }
        }
        // Always one group per slice, empty past the end, so that `wait_group` counts slices.
        simt::cp_async_commit_group();
    };

    for t in 0..STAGES - 1 {
        load(t);
    }
    let mut acc = [[[0.0f32; 4]; 8]; 4];
    for t in 0..k_tiles {
        // Slice t's group has landed (at most STAGES - 2 newer ones are in flight); the
        // barrier shows it to every warp and tells the block that slice t - 1's stage, the
        // one refilled next, is no longer read.
        simt::cp_async_wait_group::<WAIT>();
        simt::sync_threads();
        load(t + STAGES - 1);
        let stage = t % STAGES;
        // BK / 16 = 2 steps of k16.
        unroll!(kk in [0, 1] {
            let af = a_fragments(a_tile(stage), !TA, bm, wm0, kk, lane);
            let bf = b_fragments(b_tile(stage), TB, bn, wn0, kk, lane);
            unroll!(mi in [0, 1, 2, 3] {
                unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
                    acc[mi][nj] = I::mma(af[mi], bf[nj], acc[mi][nj]);
                });
            });
        });
    }

    // SAFETY: the wrapper sized and zeroed the workspace for this grid (see `reduce_tile`);
    // every thread of the block gets here.
    // The split-K reduction's two buffers of 8 float4 per thread fit in the stages.
    const { assert!(2 * WM * WN * 32 * 32 * 4 <= STAGES * (WM + WN) * WARP_TILE * BK * 2) };
    let drained = smem.cast::<f32>().sub(0, threads * 64);
    if simt::grid_dim_z() > 1 && !unsafe { splitk::reduce_tile(&ws, drained, &mut acc, tid, threads) } {
        // Another block of the tile arrives later and finishes it.
        return;
    }
    if O::STAGED {
        // Every warp is done with the stages: each reuses 8 KiB of them for its tile.
        simt::sync_threads();
    }
    let tile = WARP_TILE * WARP_TILE;
    // SAFETY: the wrapper checked C, the bias and the residual against M, N and their leading
    // dimensions; the warp owns its part of the stages until the next barrier.
    unsafe { O::store_warp_tile::<I>(&e, smem.sub(warp * tile, tile), &mut acc, m0 + wm0, n0 + wn0, lane) };
}

macro_rules! gemm_tc_entries {
    ($($name:ident: $input:ty, $out:ty, $ta:literal, $tb:literal, $cfg:ident;)*) => {
        kernels! {$(
            /// One tensor-core GEMM variant (see the module documentation): inputs, layout,
            /// output (`b16`: the inputs' 16-bit type) and block tile are in its name. Launch
            /// with the configuration's threads and dynamic shared memory and a grid of
            /// `(ceil(n / BN), ceil(m / BM), splits)`; `k_split` (a multiple of `BK`) is the K
            /// range of each z block. With splits, `partial` and `counters` are the split-K
            /// workspace (`splitk`: `tiles x splits x BM x BN` f32 and `tiles` counters, zero
            /// at the first launch); unsplit launches never touch them.
            pub unsafe fn $name(
                c: GlobalMut<$out>, a: Global<u16>, b: Global<u16>, bias: Global<f32>, residual: Global<$out>,
                partial: GlobalMut<f32>, counters: GlobalMut<u32>,
                m: u32, n: u32, k: u32, lda: u32, ldb: u32, ldc: u32, ldr: u32,
                k_split: u32, flags: u32,
            ) {
                let s = Shape {
                    m: m as usize, n: n as usize, k: k as usize,
                    lda: lda as usize, ldb: ldb as usize, k_split: k_split as usize,
                };
                let e = Epilogue {
                    c, ldc: ldc as usize, bias, residual, ldr: ldr as usize, flags,
                    m: m as usize, n: n as usize,
                };
                // SAFETY: the launch wrapper checked every buffer, stride and alignment.
                unsafe {
                    gemm_block::<
                        $input, $out, $ta, $tb,
                        { $cfg.warps_m as usize }, { $cfg.warps_n as usize },
                        { $cfg.stages as usize }, { $cfg.stages - 2 },
                    >(a, b, s, Workspace { partial, counters }, e)
                }
            }
        )*}

        /// Every main-loop kernel's name.
        pub const KERNEL_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

gemm_tc_entries! {
    gemm_tc_bf16_nn_f32_l: Bf16, f32, false, false, LARGE;
    gemm_tc_bf16_nt_f32_l: Bf16, f32, false, true, LARGE;
    gemm_tc_bf16_tn_f32_l: Bf16, f32, true, false, LARGE;
    gemm_tc_bf16_nn_b16_l: Bf16, u16, false, false, LARGE;
    gemm_tc_bf16_nt_b16_l: Bf16, u16, false, true, LARGE;
    gemm_tc_bf16_tn_b16_l: Bf16, u16, true, false, LARGE;
    gemm_tc_f16_nn_f32_l: F16, f32, false, false, LARGE;
    gemm_tc_f16_nt_f32_l: F16, f32, false, true, LARGE;
    gemm_tc_f16_tn_f32_l: F16, f32, true, false, LARGE;
    gemm_tc_f16_nn_b16_l: F16, u16, false, false, LARGE;
    gemm_tc_f16_nt_b16_l: F16, u16, false, true, LARGE;
    gemm_tc_f16_tn_b16_l: F16, u16, true, false, LARGE;
    gemm_tc_bf16_nn_f32_s: Bf16, f32, false, false, SMALL;
    gemm_tc_bf16_nt_f32_s: Bf16, f32, false, true, SMALL;
    gemm_tc_bf16_tn_f32_s: Bf16, f32, true, false, SMALL;
    gemm_tc_bf16_nn_b16_s: Bf16, u16, false, false, SMALL;
    gemm_tc_bf16_nt_b16_s: Bf16, u16, false, true, SMALL;
    gemm_tc_bf16_tn_b16_s: Bf16, u16, true, false, SMALL;
    gemm_tc_f16_nn_f32_s: F16, f32, false, false, SMALL;
    gemm_tc_f16_nt_f32_s: F16, f32, false, true, SMALL;
    gemm_tc_f16_tn_f32_s: F16, f32, true, false, SMALL;
    gemm_tc_f16_nn_b16_s: F16, u16, false, false, SMALL;
    gemm_tc_f16_nt_b16_s: F16, u16, false, true, SMALL;
    gemm_tc_f16_tn_b16_s: F16, u16, true, false, SMALL;
}
