//! Causal flash attention on tensor cores, forward and backward, in the FlashAttention-2
//! manner (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
//! Partitioning", 2023): bf16 operands through `mma.sync.m16n8k16`, f32 accumulators and an
//! f32 online softmax.
//!
//! Layouts (element offsets; `C = NH * HS`):
//! - `qkv` bf16 `[B, T, 3, NH, HS]`, the model's packed projection (`[B, T, 3C]`, Q, K, V at
//!   channel offsets 0, C, 2C, head `h` at `h * HS`); `dqkv` the same;
//! - `out`, `dout` bf16 `[B, T, NH, HS]` (`[B, T, C]`);
//! - `lse` f32 `[B, NH, T]`: `ln sum_j exp(scale * q_i . k_j)` over the keys `j <= i`;
//! - `dsum` f32 `[B, NH, T]`: `D_i = dout_i . out_i`;
//! - `dq_accum` f32 `[B, T, NH, HS]`: `sum_j dS_ij k_j` (unscaled), accumulated by atomics.
//!
//! Output pointers to bf16 are typed `u32` (a pair of bf16, the lower column in the low half,
//! as the C fragments hold them): every bf16 store is a 4-byte store of two neighbours.
//!
//! Fragments are those of [`trident_simt::fragments`]: in a warp, lane `l` has group
//! `g = l / 4` and pair `p = l % 4`; a C fragment of a 16 x 8 tile holds rows `g`, `g + 8`,
//! columns `2p`, `2p + 1`. Shared tiles are row-major with a pitch of `HS + 8` (or `BLOCK + 8`)
//! elements: a row is then `16 (mod 128)` bytes from the next, so the 8 rows an `ldmatrix`
//! phase reads fall in 8 different 16-byte bank groups (no bank conflicts), and every row
//! start stays 16-byte aligned for `cp.async`.
//!
//! Forward (`flash_attention_forward_hs{64,128}`): grid `(ceil(T / 64), NH, B)`, 128 threads,
//! [`forward_smem_bytes`] of dynamic shared memory. A block owns 64 queries, 16 per warp, held
//! in registers as A fragments for the whole kernel; K and V stream through two shared stages
//! of 64 keys with `cp.async`, the next tile's copies in flight while the current one is
//! consumed. Key tiles after the block's last query are never visited; masking (causal and
//! `key >= T`) is applied only on the diagonal tile and the last tile. `P` goes from the C
//! fragments of `S = Q K^T` straight into the A fragments of `P V` (the two layouts coincide),
//! never through shared memory.
//!
//! Backward (`flash_attention_backward_prep`, `flash_attention_backward_hs{64,128}`,
//! `flash_attention_backward_dq`): the prep kernel writes `D` and zeroes `dq_accum`; the main
//! kernel, grid `(ceil(T / 64), NH, B)`, owns 64 keys (16 per warp) and iterates over the
//! query tiles from the diagonal to the end, Q, dO, lse and D double-buffered through
//! `cp.async`. Per tile it recomputes `P^T = exp(scale K Q^T - lse)`, adds `P^T dO` to dV,
//! forms `dS^T = P^T o (V dO^T - D)`, adds `dS^T Q` to dK, and writes `dS^T` to shared memory,
//! from which the warps, now split by queries, compute `dS K` and add it to `dq_accum` with
//! `red.global.add.f32`. Several key blocks add to the same dQ rows, so dQ needs a race-free
//! sum: the atomics cost one reduction per element per key block but keep the kernel a
//! single pass over K/V (a separate dQ pass, iterating over keys per query tile, would
//! recompute `P` and `dP`, two more GEMMs of the five). The dq kernel scales the sum and
//! converts it into the Q third of `dqkv`.

use crate::simt::{self, f32_to_bf16, pack_bf16x2, Global, GlobalMut, Shared};

/// Threads of every flash-attention block: four warps.
pub const THREADS: u32 = 128;
/// Queries per forward block and per backward step.
pub const BLOCK_Q: u32 = 64;
/// Keys per forward tile and per backward block.
pub const BLOCK_KV: u32 = 64;
/// Query rows of the prep kernel's block (one warp each).
pub const PREP_ROWS: u32 = THREADS / 32;

const BQ: usize = BLOCK_Q as usize;
const BKV: usize = BLOCK_KV as usize;
/// Pitch (elements) of the dS^T tile `[BLOCK_KV][BLOCK_Q + 8]`.
// The unrolled loops over tiles assume 64-row tiles: 4 k-steps, 8 n-tiles.
const _: () = assert!(BLOCK_Q == 64 && BLOCK_KV == 64);
const DS_PITCH: usize = BQ + 8;
const LOG2_E: f32 = core::f32::consts::LOG2_E;
const LN_2: f32 = core::f32::consts::LN_2;

/// Row pitch (elements) of a shared `[rows][HS]` tile.
const fn pitch(hs: usize) -> usize {
    hs + 8
}

/// Dynamic shared memory of the forward kernel for head size `hs`: Q `[64][hs + 8]`, then two
/// stages of K and two of V, each `[64][hs + 8]`, all bf16.
pub const fn forward_smem_bytes(hs: u32) -> u32 {
    2 * (BLOCK_Q + 4 * BLOCK_KV) * (hs + 8)
}

/// Dynamic shared memory of the backward kernel for head size `hs`: K and V `[64][hs + 8]`,
/// two stages each of Q and dO `[64][hs + 8]`, dS^T `[64][72]` (bf16), then two stages each
/// of lse and D `[64]` (f32).
pub const fn backward_smem_bytes(hs: u32) -> u32 {
    2 * (2 * BLOCK_KV + 4 * BLOCK_Q) * (hs + 8) + 2 * BLOCK_KV * (BLOCK_Q + 8) + 4 * 4 * BLOCK_Q
}

/// Issues the `cp.async` copies of rows `first .. first + 64` of a bf16 matrix with row stride
/// `stride` (columns `0..HS` from `src`) into `dst` `[64][HS + 8]`; rows at or past `t` are
/// zero-filled and read nothing. Thread `tid` copies the 16-byte chunks `tid + 128 i` for
/// `i < HS / 16`; chunk `c` is row `c / (HS / 8)`, columns `8 (c % (HS / 8))..+8`.
///
/// # Safety
///
/// Rows below `t` of `src` must be readable for `HS` elements, 16-byte aligned.
#[inline(always)]
unsafe fn load_tile<const HS: usize>(dst: Shared<u16>, src: Global<u16>, stride: usize, first: u32, t: u32) {
    let chunks = HS / 8;
    let tid = simt::thread_idx_x() as usize;
    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] where i < HS / 16 => {
        let c = tid + THREADS as usize * i;
        let (r, k) = (c / chunks, c % chunks);
        let row = first + r as u32;
        let at = r * pitch(HS) + 8 * k;
        if row < t {
            // SAFETY: row `row < t` of `src` holds `HS` elements from column 8k, per the caller.
            unsafe { simt::cp_async_16_zfill(dst, at, src.add(row as usize * stride + 8 * k), 16) };
        } else {
            // SAFETY: a zero-byte source read touches no memory.
            unsafe { simt::cp_async_16_zfill(dst, at, src, 0) };
        }
    });
}

/// A fragment (16 x 16, rows `row0..row0+16`, columns `col..col+16`) of a row-major shared
/// tile with pitch `ld`: lanes 0-15 address rows `row0 + l % 16` at column `col`, lanes 16-31
/// the same rows at `col + 8`, so matrices 0-3 are `a0`..`a3`.
#[inline(always)]
fn a_fragment(s: Shared<u16>, ld: usize, row0: usize, col: usize) -> [u32; 4] {
    let lane = simt::lane_id() as usize;
    simt::ldmatrix_x4(s, (row0 + lane % 16) * ld + col + (lane / 16) * 8)
}

/// B fragments of two adjacent n-tiles from a tile stored `[n][k]` (B = tile^T, as K in
/// `Q K^T`): rows `n0..n0+16`, columns `k0..k0+16`. Matrix `i` (lanes `8i..8i+7`) is rows
/// `n0 + 8 (i / 2)`, columns `k0 + 8 (i % 2)`: registers (0, 1) are `b0, b1` of n-tile `n0`,
/// (2, 3) those of `n0 + 8`.
#[inline(always)]
fn b_fragments_nk(s: Shared<u16>, ld: usize, n0: usize, k0: usize) -> [u32; 4] {
    let lane = simt::lane_id() as usize;
    simt::ldmatrix_x4(s, (n0 + (lane / 16) * 8 + lane % 8) * ld + k0 + ((lane / 8) % 2) * 8)
}

/// B fragments of two adjacent n-tiles from a tile stored `[k][n]` (as V in `P V`), through
/// `ldmatrix.trans`: matrix `i` is rows `k0 + 8 (i % 2)`, columns `n0 + 8 (i / 2)`; registers
/// (0, 1) are `b0, b1` of n-tile `n0`, (2, 3) those of `n0 + 8`.
#[inline(always)]
fn b_fragments_kn(s: Shared<u16>, ld: usize, k0: usize, n0: usize) -> [u32; 4] {
    let lane = simt::lane_id() as usize;
    simt::ldmatrix_x4_trans(s, (k0 + ((lane / 8) % 2) * 8 + lane % 8) * ld + n0 + (lane / 16) * 8)
}

/// The A fragment of k-step `kk` (columns `16kk..16kk+16`) of a 16-row matrix held as C
/// fragments of 8-column n-tiles: `a0, a1` come from n-tile `2kk`, `a2, a3` from `2kk + 1`.
#[inline(always)]
fn c_to_a(c: &[[f32; 4]], kk: usize) -> [u32; 4] {
    let pack = |x: f32, y: f32| pack_bf16x2(f32_to_bf16(x), f32_to_bf16(y));
    let (lo, hi) = (c[2 * kk], c[2 * kk + 1]);
    [pack(lo[0], lo[1]), pack(lo[2], lo[3]), pack(hi[0], hi[1]), pack(hi[2], hi[3])]
}

/// `max` over the four lanes of a group (one C-fragment row).
#[inline(always)]
fn group_max(x: f32) -> f32 {
    let x = simt::fmax(x, simt::shfl_xor_f32(simt::FULL_MASK, x, 1));
    simt::fmax(x, simt::shfl_xor_f32(simt::FULL_MASK, x, 2))
}

/// Sum over the four lanes of a group.
#[inline(always)]
fn group_sum(x: f32) -> f32 {
    let x = x + simt::shfl_xor_f32(simt::FULL_MASK, x, 1);
    x + simt::shfl_xor_f32(simt::FULL_MASK, x, 2)
}

/// Forward for head size `HS`; `HS8 = HS / 8` output n-tiles, `HS16 = HS / 16` k-steps.
///
/// Per warp: `qf[kk]` the A fragment of its 16 queries at k-step `kk`; `s[n]` the C fragment
/// of scores against keys `8n..8n+8` of the tile; `o[n]` the C fragment of output channels
/// `8n..8n+8`; `m[r]`, `l[r]` the running max (log2 units) and this lane's partial sum of row
/// `g + 8r`.
///
/// # Safety
///
/// The buffers hold the sizes the module documentation gives for `t`, `nh`.
#[inline(always)]
unsafe fn forward<const HS: usize, const HS8: usize, const HS16: usize>(
    out: GlobalMut<u32>,
    lse: GlobalMut<f32>,
    qkv: Global<u16>,
    t: u32,
    nh: u32,
    scale: f32,
) {
    const { assert!(HS8 * 8 == HS && HS16 * 16 == HS) };
    let ld = pitch(HS);
    let (warp, lane) = ((simt::thread_idx_x() / 32) as usize, simt::lane_id());
    let (g, p) = (lane / 4, lane % 4);
    // Blocks in reverse: the longest rows (most key tiles) start first.
    let q0 = (simt::grid_dim_x() - 1 - simt::block_idx_x()) * BLOCK_Q;
    let (h, b) = (simt::block_idx_y() as usize, simt::block_idx_z() as usize);
    let c = nh as usize * HS;
    let stride = 3 * c;
    let base = qkv.add(b * t as usize * stride + h * HS);
    let (q_src, k_src, v_src) = (base, base.add(c), base.add(2 * c));

    // SAFETY: the three windows tile `forward_smem_bytes(HS)` bytes, each 16-byte aligned.
    let (q_s, k_s, v_s) = unsafe {
        (
            simt::dynamic_shared::<u16>(0, BQ * ld),
            simt::dynamic_shared::<u16>(2 * BQ * ld, 2 * BKV * ld),
            simt::dynamic_shared::<u16>(2 * (BQ + 2 * BKV) * ld, 2 * BKV * ld),
        )
    };

    // Key tiles whose first key is at most the block's last query, and below T.
    let tiles = t.div_ceil(BLOCK_KV).min((q0 + BLOCK_Q - 1) / BLOCK_KV + 1);
    let issue = |tile: u32| {
        if tile < tiles {
            let stage = (tile % 2) as usize * BKV * ld;
            // SAFETY: rows below t of K and V hold HS elements; the stage is free (see loop).
            unsafe {
                load_tile::<HS>(k_s.sub(stage, BKV * ld), k_src, stride, tile * BLOCK_KV, t);
                load_tile::<HS>(v_s.sub(stage, BKV * ld), v_src, stride, tile * BLOCK_KV, t);
            }
        }
        simt::cp_async_commit_group();
    };
    // SAFETY: rows below t of Q hold HS elements.
    unsafe { load_tile::<HS>(q_s, q_src, stride, q0, t) };
    simt::cp_async_commit_group();
    issue(0);
    simt::cp_async_wait_group::<1>();
    simt::sync_threads();
    let mut qf = [[0u32; 4]; HS16];
    unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7] where kk < HS16 => {
        qf[kk] = a_fragment(q_s, ld, 16 * warp, 16 * kk);
    });

    let scale_log2 = scale * LOG2_E;
    let rows = [q0 + 16 * warp as u32 + g, q0 + 16 * warp as u32 + g + 8];
    let mut m = [f32::NEG_INFINITY; 2];
    let mut l = [0.0f32; 2];
    let mut o = [[0.0f32; 4]; HS8];
    for tile in 0..tiles {
        // Stage (tile + 1) % 2 was last read in iteration tile - 1, before its closing barrier.
        issue(tile + 1);
        simt::cp_async_wait_group::<1>();
        simt::sync_threads();
        let stage = (tile % 2) as usize * BKV * ld;
        let (k_t, v_t) = (k_s.sub(stage, BKV * ld), v_s.sub(stage, BKV * ld));

        // S = Q K^T: 16 queries x 64 keys per warp.
        let mut s = [[0.0f32; 4]; BKV / 8];
        unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7] where kk < HS16 => {
            unroll!(np in [0, 1, 2, 3] {
                let r = b_fragments_nk(k_t, ld, 16 * np, 16 * kk);
                s[2 * np] = simt::mma_m16n8k16_bf16(qf[kk], [r[0], r[1]], s[2 * np]);
                s[2 * np + 1] = simt::mma_m16n8k16_bf16(qf[kk], [r[2], r[3]], s[2 * np + 1]);
            });
        });
        // Scale to log2 units; on the diagonal tile and the last one, mask keys after the
        // query and keys at or past T.
        let kv0 = tile * BLOCK_KV;
        let masked = kv0 + BLOCK_KV > q0 || kv0 + BLOCK_KV > t;
        let mut m_new = m;
        unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(e in [0, 1, 2, 3] {
                let key = kv0 + 8 * n as u32 + 2 * p + (e as u32 & 1);
                let x = s[n][e] * scale_log2;
                s[n][e] = if masked && (key > rows[e / 2] || key >= t) { f32::NEG_INFINITY } else { x };
                m_new[e / 2] = simt::fmax(m_new[e / 2], s[n][e]);
            });
        });
        let mut alpha = [0.0f32; 2];
        let mut m_use = [0.0f32; 2];
        unroll!(r in [0, 1] {
            m_new[r] = group_max(m_new[r]);
            // A row with every score masked so far keeps max -inf; subtract 0 from it instead
            // (its probabilities are 0 either way).
            m_use[r] = if m_new[r] == f32::NEG_INFINITY { 0.0 } else { m_new[r] };
            alpha[r] = simt::exp2(m[r] - m_use[r]);
            m[r] = m_new[r];
            l[r] *= alpha[r];
        });
        unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(e in [0, 1, 2, 3] {
                s[n][e] = simt::exp2(s[n][e] - m_use[e / 2]);
                l[e / 2] += s[n][e];
            });
        });
        unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] where n < HS8 => {
            unroll!(e in [0, 1, 2, 3] {
                o[n][e] *= alpha[e / 2];
            });
        });
        // O += P V: P's C fragments are the A fragments of this product.
        unroll!(kk in [0, 1, 2, 3] {
            let a = c_to_a(&s, kk);
            unroll!(dp in [0, 1, 2, 3, 4, 5, 6, 7] where dp < HS16 => {
                let r = b_fragments_kn(v_t, ld, 16 * kk, 16 * dp);
                o[2 * dp] = simt::mma_m16n8k16_bf16(a, [r[0], r[1]], o[2 * dp]);
                o[2 * dp + 1] = simt::mma_m16n8k16_bf16(a, [r[2], r[3]], o[2 * dp + 1]);
            });
        });
        simt::sync_threads();
    }
    simt::cp_async_wait_all();

    let stat = (b * nh as usize + h) * t as usize;
    unroll!(r in [0, 1] {
        let total = group_sum(l[r]);
        let row = rows[r];
        if row < t {
            let inv = 1.0 / total;
            let at = (b * t as usize + row as usize) * c + h * HS + 2 * p as usize;
            unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] where n < HS8 => {
                let pair = pack_bf16x2(f32_to_bf16(o[n][2 * r] * inv), f32_to_bf16(o[n][2 * r + 1] * inv));
                // SAFETY: row < t; channels 8n + 2p, +1 of head h lie in `out`.
                unsafe { out.store((at + 8 * n) / 2, pair) };
            });
            if p == 0 {
                // SAFETY: row < t of this (batch, head) lies in `lse`.
                unsafe { lse.store(stat + row as usize, (m[r] + simt::log2(total)) * LN_2) };
            }
        }
    });
}

/// Backward for head size `HS` (see the module documentation); one block per 64 keys.
///
/// Per warp (keys `16w..16w+16` of the block): `s[n]` the C fragment of `S^T` (then `P^T`)
/// against queries `8n..8n+8` of the step, `pa[kk]` the bf16 A fragments of `P^T`, `dp[n]`
/// the C fragment of `dP^T = V dO^T` (then `dS^T`);
/// `dk[n]`, `dv[n]` the C fragments of channels `8n..8n+8` of its dK and dV rows. In the dQ
/// phase warp `w` owns queries `16w..16w+16` of the step.
///
/// # Safety
///
/// The buffers hold the sizes the module documentation gives for `t`, `nh`; `dq_accum` is
/// zeroed and `dsum` written (by the prep kernel) before the launch.
#[inline(always)]
unsafe fn backward<const HS: usize, const HS8: usize, const HS16: usize>(
    dqkv: GlobalMut<u32>,
    dq_accum: GlobalMut<f32>,
    dout: Global<u16>,
    qkv: Global<u16>,
    lse: Global<f32>,
    dsum: Global<f32>,
    t: u32,
    nh: u32,
    scale: f32,
) {
    const { assert!(HS8 * 8 == HS && HS16 * 16 == HS && THREADS as usize == 2 * BQ) };
    let ld = pitch(HS);
    let tid = simt::thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, simt::lane_id());
    let (g, p) = (lane / 4, lane % 4);
    // In order: the first key blocks see the most query tiles and start first.
    let kv0 = simt::block_idx_x() * BLOCK_KV;
    let (h, b) = (simt::block_idx_y() as usize, simt::block_idx_z() as usize);
    let c = nh as usize * HS;
    let stride = 3 * c;
    let base = qkv.add(b * t as usize * stride + h * HS);
    let (q_src, k_src, v_src) = (base, base.add(c), base.add(2 * c));
    let do_src = dout.add(b * t as usize * c + h * HS);
    let stat = (b * nh as usize + h) * t as usize;

    // Byte offsets: K, V (one tile each), Q and dO (two stages each), dS^T, lse, D.
    let tile = BKV * ld;
    let ds_at = 4 * tile + 8 * BQ * ld;
    let stat_at = ds_at + 2 * BKV * DS_PITCH;
    // SAFETY: the windows tile `backward_smem_bytes(HS)` bytes, each 16-byte aligned.
    let (k_s, v_s, q_s, do_s, ds_s, lse_s, d_s) = unsafe {
        (
            simt::dynamic_shared::<u16>(0, tile),
            simt::dynamic_shared::<u16>(2 * tile, tile),
            simt::dynamic_shared::<u16>(4 * tile, 2 * BQ * ld),
            simt::dynamic_shared::<u16>(4 * tile + 4 * BQ * ld, 2 * BQ * ld),
            simt::dynamic_shared::<u16>(ds_at, BKV * DS_PITCH),
            simt::dynamic_shared::<f32>(stat_at, 2 * BQ),
            simt::dynamic_shared::<f32>(stat_at + 8 * BQ, 2 * BQ),
        )
    };

    // Query tiles whose last query is at least the block's first key.
    let (first, steps) = (kv0 / BLOCK_Q, t.div_ceil(BLOCK_Q));
    let issue = |step: u32| {
        if step < steps {
            let st = (step % 2) as usize;
            let q = step * BLOCK_Q;
            // SAFETY: rows below t hold HS elements; the stage is free (see the loop).
            unsafe {
                load_tile::<HS>(q_s.sub(st * BQ * ld, BQ * ld), q_src, stride, q, t);
                load_tile::<HS>(do_s.sub(st * BQ * ld, BQ * ld), do_src, c, q, t);
            }
            // Threads 0..63 copy lse, 64..127 D, one f32 each; past T a 0 (never used).
            let (dst, src, i) = if tid < BQ { (lse_s, lse, tid) } else { (d_s, dsum, tid - BQ) };
            let row = q + i as u32;
            if row < t {
                // SAFETY: row < t of this (batch, head) lies in `lse` and `dsum`.
                unsafe { simt::cp_async_4(dst, st * BQ + i, src.add(stat + row as usize)) };
            } else {
                dst.store(st * BQ + i, 0.0);
            }
        }
        simt::cp_async_commit_group();
    };
    // SAFETY: rows below t of K and V hold HS elements.
    unsafe {
        load_tile::<HS>(k_s, k_src, stride, kv0, t);
        load_tile::<HS>(v_s, v_src, stride, kv0, t);
    }
    issue(first);

    let scale_log2 = scale * LOG2_E;
    let keys = [kv0 + 16 * warp as u32 + g, kv0 + 16 * warp as u32 + g + 8];
    let mut dk = [[0.0f32; 4]; HS8];
    let mut dv = [[0.0f32; 4]; HS8];
    for step in first..steps {
        issue(step + 1);
        simt::cp_async_wait_group::<1>();
        simt::sync_threads();
        let st = (step % 2) as usize;
        let (q_t, do_t) = (q_s.sub(st * BQ * ld, BQ * ld), do_s.sub(st * BQ * ld, BQ * ld));
        let q0 = step * BLOCK_Q;

        // S^T = K Q^T: 16 keys x 64 queries per warp.
        let mut s = [[0.0f32; 4]; BQ / 8];
        unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7] where kk < HS16 => {
            let ka = a_fragment(k_s, ld, 16 * warp, 16 * kk);
            unroll!(np in [0, 1, 2, 3] {
                let r = b_fragments_nk(q_t, ld, 16 * np, 16 * kk);
                s[2 * np] = simt::mma_m16n8k16_bf16(ka, [r[0], r[1]], s[2 * np]);
                s[2 * np + 1] = simt::mma_m16n8k16_bf16(ka, [r[2], r[3]], s[2 * np + 1]);
            });
        });
        // P^T = exp(scale S^T - lse), 0 for queries before the key or at or past T (and keys
        // past T), kept only as the bf16 A fragments `pa` of the products (k = queries), so
        // that the f32 scores die before dP^T is formed.
        let masked = q0 < kv0 + BLOCK_KV || q0 + BLOCK_Q > t || kv0 + BLOCK_KV > t;
        let (lse_pairs, d_pairs) = (lse_s.cast::<[f32; 2]>(), d_s.cast::<[f32; 2]>());
        unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7] {
            // Queries 8n + 2p and 8n + 2p + 1 of the step: columns of this lane's fragments.
            let lse2 = lse_pairs.load((st * BQ + 8 * n + 2 * p as usize) / 2);
            unroll!(e in [0, 1, 2, 3] {
                let query = q0 + 8 * n as u32 + 2 * p + (e as u32 & 1);
                let key = keys[e / 2];
                let live = !masked || (query >= key && query < t && key < t);
                let logit = simt::fma(s[n][e], scale_log2, -lse2[e & 1] * LOG2_E);
                s[n][e] = if live { simt::exp2(logit) } else { 0.0 };
            });
        });
        let mut pa = [[0u32; 4]; BQ / 16];
        unroll!(kk in [0, 1, 2, 3] {
            pa[kk] = c_to_a(&s, kk);
        });
        // dV += P^T dO.
        unroll!(kk in [0, 1, 2, 3] {
            unroll!(np in [0, 1, 2, 3, 4, 5, 6, 7] where np < HS16 => {
                let r = b_fragments_kn(do_t, ld, 16 * kk, 16 * np);
                dv[2 * np] = simt::mma_m16n8k16_bf16(pa[kk], [r[0], r[1]], dv[2 * np]);
                dv[2 * np + 1] = simt::mma_m16n8k16_bf16(pa[kk], [r[2], r[3]], dv[2 * np + 1]);
            });
        });
        // dP^T = V dO^T, then dS^T = P^T o (dP^T - D) in place, P^T from its bf16 fragments:
        // element e of n-tile n is half e % 2 of register 2 (n % 2) + e / 2 of `pa[n / 2]`.
        let mut dp = [[0.0f32; 4]; BQ / 8];
        unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7] where kk < HS16 => {
            let va = a_fragment(v_s, ld, 16 * warp, 16 * kk);
            unroll!(np in [0, 1, 2, 3] {
                let r = b_fragments_nk(do_t, ld, 16 * np, 16 * kk);
                dp[2 * np] = simt::mma_m16n8k16_bf16(va, [r[0], r[1]], dp[2 * np]);
                dp[2 * np + 1] = simt::mma_m16n8k16_bf16(va, [r[2], r[3]], dp[2 * np + 1]);
            });
        });
        unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7] {
            let d2 = d_pairs.load((st * BQ + 8 * n + 2 * p as usize) / 2);
            unroll!(e in [0, 1, 2, 3] {
                let (lo, hi) = simt::unpack_bf16x2(pa[n / 2][2 * (n % 2) + e / 2]);
                let prob = simt::bf16_to_f32(if e % 2 == 0 { lo } else { hi });
                dp[n][e] = prob * (dp[n][e] - d2[e & 1]);
            });
        });
        // dK += dS^T Q.
        unroll!(kk in [0, 1, 2, 3] {
            let dsa = c_to_a(&dp, kk);
            unroll!(np in [0, 1, 2, 3, 4, 5, 6, 7] where np < HS16 => {
                let r = b_fragments_kn(q_t, ld, 16 * kk, 16 * np);
                dk[2 * np] = simt::mma_m16n8k16_bf16(dsa, [r[0], r[1]], dk[2 * np]);
                dk[2 * np + 1] = simt::mma_m16n8k16_bf16(dsa, [r[2], r[3]], dk[2 * np + 1]);
            });
        });
        // dS^T to shared memory, [key][query] with pitch 72: lane (g, p) writes keys g, g + 8
        // of its warp's 16, queries 8n + 2p, +1, as one 4-byte store each.
        let ds_pairs = ds_s.cast::<u32>();
        unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(r in [0, 1] {
                let at = (16 * warp + g as usize + 8 * r) * DS_PITCH + 8 * n + 2 * p as usize;
                let pair = pack_bf16x2(f32_to_bf16(dp[n][2 * r]), f32_to_bf16(dp[n][2 * r + 1]));
                ds_pairs.store(at / 2, pair);
            });
        });
        simt::sync_threads();
        // dQ (queries 16w..16w+16 of the step) += dS K, over the block's 64 keys: A = dS, read
        // transposed from dS^T (matrix i: keys 16kk + 8 (i / 2), queries 16w + 8 (i % 2)); B =
        // K stored [key][channel].
        let mut dsa = [[0u32; 4]; BKV / 16];
        unroll!(kk in [0, 1, 2, 3] {
            let l = lane as usize;
            let at = (16 * kk + (l / 16) * 8 + l % 8) * DS_PITCH + 16 * warp + ((l / 8) % 2) * 8;
            dsa[kk] = simt::ldmatrix_x4_trans(ds_s, at);
        });
        let rows = [q0 + 16 * warp as u32 + g, q0 + 16 * warp as u32 + g + 8];
        // Channels in chunks of 16 (two n-tiles), to keep the live accumulators few.
        unroll!(chunk in [0, 1, 2, 3, 4, 5, 6, 7] where chunk < HS8 / 2 => {
            let mut dq = [[0.0f32; 4]; 2];
            unroll!(kk in [0, 1, 2, 3] {
                let r = b_fragments_kn(k_s, ld, 16 * kk, 16 * chunk);
                dq[0] = simt::mma_m16n8k16_bf16(dsa[kk], [r[0], r[1]], dq[0]);
                dq[1] = simt::mma_m16n8k16_bf16(dsa[kk], [r[2], r[3]], dq[1]);
            });
            unroll!(r in [0, 1] {
                if rows[r] < t {
                    let at = (b * t as usize + rows[r] as usize) * c + h * HS + 16 * chunk + 2 * p as usize;
                    unroll!(n in [0, 1] {
                        // SAFETY: rows[r] < t; channel 16 chunk + 8n + 2p (+1) of head h.
                        unsafe {
                            dq_accum.red_add(at + 8 * n, dq[n][2 * r]);
                            dq_accum.red_add(at + 8 * n + 1, dq[n][2 * r + 1]);
                        }
                    });
                }
            });
        });
        simt::sync_threads();
    }
    simt::cp_async_wait_all();

    unroll!(r in [0, 1] {
        if keys[r] < t {
            let at = (b * t as usize + keys[r] as usize) * stride + h * HS + 2 * p as usize;
            unroll!(n in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] where n < HS8 => {
                let k_pair = pack_bf16x2(f32_to_bf16(dk[n][2 * r] * scale), f32_to_bf16(dk[n][2 * r + 1] * scale));
                let v_pair = pack_bf16x2(f32_to_bf16(dv[n][2 * r]), f32_to_bf16(dv[n][2 * r + 1]));
                // SAFETY: key < t; channels 8n + 2p, +1 of head h in the K and V thirds.
                unsafe {
                    dqkv.store((at + c + 8 * n) / 2, k_pair);
                    dqkv.store((at + 2 * c + 8 * n) / 2, v_pair);
                }
            });
        }
    });
}

kernels! {
    /// Forward, head size 64: `out` (bf16 pairs) and `lse` from `qkv`; `scale` multiplies
    /// the scores (`1 / sqrt(64)` for standard attention).
    pub unsafe fn flash_attention_forward_hs64(
        out: GlobalMut<u32>, lse: GlobalMut<f32>, qkv: Global<u16>, t: u32, nh: u32, scale: f32,
    ) {
        // SAFETY: the launch wrapper checked the buffers against t, nh and head size 64.
        unsafe { forward::<64, 8, 4>(out, lse, qkv, t, nh, scale) }
    }

    /// Forward, head size 128 (see [`flash_attention_forward_hs64`]).
    pub unsafe fn flash_attention_forward_hs128(
        out: GlobalMut<u32>, lse: GlobalMut<f32>, qkv: Global<u16>, t: u32, nh: u32, scale: f32,
    ) {
        // SAFETY: the launch wrapper checked the buffers against t, nh and head size 128.
        unsafe { forward::<128, 16, 8>(out, lse, qkv, t, nh, scale) }
    }

    /// Backward prep: `dsum[b, h, i] = dout[b, i, h] . out[b, i, h]` and `dq_accum[b, i, h] = 0`,
    /// one warp per query row (`PREP_ROWS` rows per block, grid `(ceil(T / 4), NH, B)`); lane
    /// `l` reads bf16 pairs `l, l + 32, ..` of the row.
    pub unsafe fn flash_attention_backward_prep(
        dsum: GlobalMut<f32>, dq_accum: GlobalMut<f32>, dout: Global<u32>, out: Global<u32>, t: u32, nh: u32, hs: u32,
    ) {
        let (h, b) = (simt::block_idx_y(), simt::block_idx_z());
        let row = simt::block_idx_x() * PREP_ROWS + simt::thread_idx_x() / 32;
        if row >= t {
            return;
        }
        let lane = simt::lane_id();
        let c = (nh * hs) as usize;
        let at = (b * t + row) as usize * c + (h * hs) as usize;
        let mut acc = 0.0f32;
        let mut pair = lane;
        while pair < hs / 2 {
            let i = at / 2 + pair as usize;
            // SAFETY: row < t; pair < hs / 2 lies in head h of `dout`, `out` and `dq_accum`.
            unsafe {
                let (d0, d1) = simt::unpack_bf16x2(dout.load(i));
                let (o0, o1) = simt::unpack_bf16x2(out.load(i));
                acc = simt::fma(simt::bf16_to_f32(d0), simt::bf16_to_f32(o0), acc);
                acc = simt::fma(simt::bf16_to_f32(d1), simt::bf16_to_f32(o1), acc);
                dq_accum.store_v2(2 * i, [0.0, 0.0]);
            }
            pair += 32;
        }
        let total = crate::reduce::warp_sum(acc);
        if lane == 0 {
            // SAFETY: row < t of this (batch, head).
            unsafe { dsum.store(((b * nh + h) * t + row) as usize, total) };
        }
    }

    /// Backward, head size 64: dK and dV into `dqkv` (bf16 pairs), `sum_j dS_ij k_j` added
    /// into `dq_accum`.
    pub unsafe fn flash_attention_backward_hs64(
        dqkv: GlobalMut<u32>, dq_accum: GlobalMut<f32>, dout: Global<u16>, qkv: Global<u16>, lse: Global<f32>,
        dsum: Global<f32>, t: u32, nh: u32, scale: f32,
    ) {
        // SAFETY: the launch wrapper checked the buffers and ran the prep kernel first.
        unsafe { backward::<64, 8, 4>(dqkv, dq_accum, dout, qkv, lse, dsum, t, nh, scale) }
    }

    /// Backward, head size 128 (see [`flash_attention_backward_hs64`]).
    pub unsafe fn flash_attention_backward_hs128(
        dqkv: GlobalMut<u32>, dq_accum: GlobalMut<f32>, dout: Global<u16>, qkv: Global<u16>, lse: Global<f32>,
        dsum: Global<f32>, t: u32, nh: u32, scale: f32,
    ) {
        // SAFETY: the launch wrapper checked the buffers and ran the prep kernel first.
        unsafe { backward::<128, 16, 8>(dqkv, dq_accum, dout, qkv, lse, dsum, t, nh, scale) }
    }

    /// Backward, last step: the Q third of `dqkv` (bf16 pairs) = `scale * dq_accum`. `pairs`
    /// = `B * T * C / 2`; thread `i` of the grid-stride loop converts pair `i` (token `i / (C /
    /// 2)`, channel pair `i % (C / 2)`).
    pub unsafe fn flash_attention_backward_dq(
        dqkv: GlobalMut<u32>, dq_accum: Global<f32>, pairs: u32, c: u32, scale: f32,
    ) {
        let half = c / 2;
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < pairs {
            let (token, pair) = (i / half, i % half);
            // SAFETY: i < pairs = B * T * C / 2; token's Q third holds C / 2 pairs.
            unsafe {
                let [x, y] = dq_accum.load_v2(2 * i as usize);
                let packed = pack_bf16x2(f32_to_bf16(x * scale), f32_to_bf16(y * scale));
                dqkv.store((token * 3 * half + pair) as usize, packed);
            }
            i += simt::grid_dim_x() * simt::block_dim_x();
        }
    }
}
