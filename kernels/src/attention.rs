//! Causal self-attention, flash style: no `T x T` matrix is ever stored.
//!
//! Layouts (llm.c's): `qkv` is `[B, T, 3C]` with Q, K, V at channel offsets 0, C, 2C of each
//! token, head `h` owning channels `h*hs .. (h+1)*hs` of each; `out` and `dout` are `[B, T, C]`;
//! `lse` (the log-sum-exp of each query's scaled scores, saved by forward) and `dsum`
//! (`dout . out` per query) are `[B, NH, T]`.
//!
//! Launch: grid `(ceil(T / ROWS), NH, B)`, `32 * ROWS` threads, one warp per query row (per key
//! row in `attention_backward_dkv_f32`), dynamic shared memory as [`smem_floats`] says. Keys and
//! queries stream through shared memory in tiles of 32: lane `j` of a warp scores the tile's
//! `j`-th row, and lane `l` owns output channels `l, l + 32, ..` (hs <= 128).

use crate::reduce::{warp_max, warp_sum};
use crate::simt;

/// Query rows per block: one warp each, so a block has `32 * ROWS` threads.
pub const ROWS: u32 = 4;
/// Keys per tile staged in shared memory.
pub const TILE: u32 = 32;
/// Largest head size the kernels take (each lane holds `MAX_HEAD_DIM / 32` elements of a row).
pub const MAX_HEAD_DIM: u32 = 128;
const PER_LANE: usize = (MAX_HEAD_DIM / 32) as usize;
const LN_2: f32 = core::f32::consts::LN_2;

/// Floats of dynamic shared memory each attention kernel needs for head size `hs`.
pub const fn smem_floats(hs: u32) -> u32 {
    // Two blocks of ROWS rows (stride hs) and two tiles of TILE rows (stride hs + 1), plus two
    // per-row scalars for a tile.
    2 * ROWS * hs + 2 * TILE * (hs + 1) + 2 * TILE
}

/// The shared-memory regions of one launch.
struct Smem {
    rows_a: simt::Shared<f32>,
    rows_b: simt::Shared<f32>,
    tile_a: simt::Shared<f32>,
    tile_b: simt::Shared<f32>,
    tile_s: simt::Shared<f32>,
    tile_t: simt::Shared<f32>,
}

unsafe fn smem(hs: u32) -> Smem {
    let (rows, tile) = ((ROWS * hs) as usize, (TILE * (hs + 1)) as usize);
    let at = |i: usize| i * 4;
    Smem {
        rows_a: simt::dynamic_shared(at(0), rows),
        rows_b: simt::dynamic_shared(at(rows), rows),
        tile_a: simt::dynamic_shared(at(2 * rows), tile),
        tile_b: simt::dynamic_shared(at(2 * rows + tile), tile),
        tile_s: simt::dynamic_shared(at(2 * rows + 2 * tile), TILE as usize),
        tile_t: simt::dynamic_shared(at(2 * rows + 2 * tile + TILE as usize), TILE as usize),
    }
}

/// Geometry of one (batch, head) and this block's first row.
#[derive(Clone, Copy)]
struct Geo {
    t: u32,
    c: u32,
    hs: u32,
    /// Element offset of row 0 of this batch in `qkv`.
    qkv_base: usize,
    /// Element offset of row 0 of this batch in `out`/`dout`.
    out_base: usize,
    /// Offset of this (batch, head) in `lse`/`dsum`.
    stat_base: usize,
    head_off: usize,
    row0: u32,
    scale: f32,
}

fn geo(t: u32, nh: u32, hs: u32) -> Geo {
    let (b, h) = (simt::block_idx_z(), simt::block_idx_y());
    let c = nh * hs;
    Geo {
        t,
        c,
        hs,
        qkv_base: (b * t * 3 * c) as usize,
        out_base: (b * t * c) as usize,
        stat_base: ((b * nh + h) * t) as usize,
        head_off: (h * hs) as usize,
        row0: simt::block_idx_x() * ROWS,
        scale: 1.0 / simt::sqrt(hs as f32),
    }
}

/// Copies rows `first..first + count` (those below `t`) of a `[T, stride]` matrix, channels
/// `off..off + hs`, into `dst` with row pitch `pitch`; rows past `t` become zeros.
#[inline(always)]
unsafe fn stage(
    dst: simt::Shared<f32>,
    pitch: u32,
    src: simt::Global<f32>,
    stride: usize,
    off: usize,
    first: u32,
    count: u32,
    g: &Geo,
) {
    let mut idx = simt::thread_idx_x();
    while idx < count * g.hs {
        let (r, d) = (idx / g.hs, idx % g.hs);
        let row = first + r;
        let v = if row < g.t { src.load(row as usize * stride + off + d as usize) } else { 0.0 };
        dst.store((r * pitch + d) as usize, v);
        idx += simt::block_dim_x();
    }
}

/// `a[row_a, ..hs] . b[row_b, ..hs]` for two shared matrices.
#[inline(always)]
fn dot(a: simt::Shared<f32>, a_at: usize, b: simt::Shared<f32>, b_at: usize, hs: u32) -> f32 {
    let mut acc = 0.0f32;
    for d in 0..hs as usize {
        acc = simt::fma(a.load(a_at + d), b.load(b_at + d), acc);
    }
    acc
}

kernels! {
    /// Forward: `out` and the per-query log-sum-exp `lse`.
    pub unsafe fn attention_forward_f32(
        out: simt::GlobalMut<f32>, lse: simt::GlobalMut<f32>, qkv: simt::Global<f32>, t: u32, nh: u32, hs: u32,
    ) {
        let g = geo(t, nh, hs);
        let s = smem(hs);
        let (q_rows, k_tile, v_tile) = (s.rows_a, s.tile_a, s.tile_b);
        let warp = simt::thread_idx_x() / 32;
        let lane = simt::lane_id();
        let i = g.row0 + warp;
        let stride = 3 * g.c as usize;
        stage(q_rows, hs, qkv.add(g.qkv_base), stride, g.head_off, g.row0, ROWS, &g);

        let mut m = f32::NEG_INFINITY;
        let mut l = 0.0f32;
        let mut o = [0.0f32; PER_LANE];
        let last = if g.row0 + ROWS < t { g.row0 + ROWS } else { t };
        let mut kt = 0;
        while kt < last {
            stage(k_tile, hs + 1, qkv.add(g.qkv_base), stride, g.head_off + g.c as usize, kt, TILE, &g);
            stage(v_tile, hs + 1, qkv.add(g.qkv_base), stride, g.head_off + 2 * g.c as usize, kt, TILE, &g);
            simt::sync_threads();
            // Warp-uniform: a warp whose query precedes the whole tile has nothing to add.
            if i < t && kt <= i {
                let j = kt + lane;
                let score = if j <= i {
                    dot(q_rows, (warp * hs) as usize, k_tile, (lane * (hs + 1)) as usize, hs) * g.scale
                } else {
                    f32::NEG_INFINITY
                };
                let m_new = m.max(warp_max(score));
                let p = if j <= i { simt::exp(score - m_new) } else { 0.0 };
                let corr = simt::exp(m - m_new);
                l = l * corr + warp_sum(p);
                for r in 0..PER_LANE {
                    o[r] *= corr;
                }
                for jj in 0..TILE {
                    let pj = simt::shfl_idx_f32(simt::FULL_MASK, p, jj);
                    for r in 0..PER_LANE {
                        let d = lane + 32 * r as u32;
                        if d < hs {
                            o[r] = simt::fma(pj, v_tile.load((jj * (hs + 1) + d) as usize), o[r]);
                        }
                    }
                }
                m = m_new;
            }
            simt::sync_threads();
            kt += TILE;
        }
        if i < t {
            let inv = 1.0 / l;
            for r in 0..PER_LANE {
                let d = lane + 32 * r as u32;
                if d < hs {
                    out.store(g.out_base + i as usize * g.c as usize + g.head_off + d as usize, o[r] * inv);
                }
            }
            if lane == 0 {
                lse.store(g.stat_base + i as usize, m + simt::log2(l) * LN_2);
            }
        }
    }

    /// `dsum[b, h, i] = dout[b, i, head] . out[b, i, head]`, for the backward kernels.
    pub unsafe fn attention_backward_dsum_f32(
        dsum: simt::GlobalMut<f32>, dout: simt::Global<f32>, out: simt::Global<f32>, t: u32, nh: u32, hs: u32,
    ) {
        let g = geo(t, nh, hs);
        let i = g.row0 + simt::thread_idx_x() / 32;
        if i >= t {
            return;
        }
        let base = g.out_base + i as usize * g.c as usize + g.head_off;
        let mut acc = 0.0f32;
        let mut d = simt::lane_id();
        while d < hs {
            acc = simt::fma(dout.load(base + d as usize), out.load(base + d as usize), acc);
            d += 32;
        }
        let total = warp_sum(acc);
        if simt::lane_id() == 0 {
            dsum.store(g.stat_base + i as usize, total);
        }
    }

    /// The query gradient: one warp per query row, streaming keys and values.
    pub unsafe fn attention_backward_dq_f32(
        dqkv: simt::GlobalMut<f32>, dout: simt::Global<f32>, qkv: simt::Global<f32>, lse: simt::Global<f32>, dsum: simt::Global<f32>,
        t: u32, nh: u32, hs: u32,
    ) {
        let g = geo(t, nh, hs);
        let s = smem(hs);
        let (q_rows, do_rows, k_tile, v_tile) = (s.rows_a, s.rows_b, s.tile_a, s.tile_b);
        let warp = simt::thread_idx_x() / 32;
        let lane = simt::lane_id();
        let i = g.row0 + warp;
        let stride = 3 * g.c as usize;
        stage(q_rows, hs, qkv.add(g.qkv_base), stride, g.head_off, g.row0, ROWS, &g);
        stage(do_rows, hs, dout.add(g.out_base), g.c as usize, g.head_off, g.row0, ROWS, &g);
        let (lse_i, d_i) = if i < t {
            (lse.load(g.stat_base + i as usize), dsum.load(g.stat_base + i as usize))
        } else {
            (0.0, 0.0)
        };

        let mut dq = [0.0f32; PER_LANE];
        let last = if g.row0 + ROWS < t { g.row0 + ROWS } else { t };
        let mut kt = 0;
        while kt < last {
            stage(k_tile, hs + 1, qkv.add(g.qkv_base), stride, g.head_off + g.c as usize, kt, TILE, &g);
            stage(v_tile, hs + 1, qkv.add(g.qkv_base), stride, g.head_off + 2 * g.c as usize, kt, TILE, &g);
            simt::sync_threads();
            if i < t && kt <= i {
                let j = kt + lane;
                let ds = if j <= i {
                    let row = (lane * (hs + 1)) as usize;
                    let score = dot(q_rows, (warp * hs) as usize, k_tile, row, hs) * g.scale;
                    let p = simt::exp(score - lse_i);
                    let dp = dot(do_rows, (warp * hs) as usize, v_tile, row, hs);
                    p * (dp - d_i)
                } else {
                    0.0
                };
                for jj in 0..TILE {
                    let dsj = simt::shfl_idx_f32(simt::FULL_MASK, ds, jj) * g.scale;
                    for r in 0..PER_LANE {
                        let d = lane + 32 * r as u32;
                        if d < hs {
                            dq[r] = simt::fma(dsj, k_tile.load((jj * (hs + 1) + d) as usize), dq[r]);
                        }
                    }
                }
            }
            simt::sync_threads();
            kt += TILE;
        }
        if i < t {
            for r in 0..PER_LANE {
                let d = lane + 32 * r as u32;
                if d < hs {
                    dqkv.store(g.qkv_base + i as usize * stride + g.head_off + d as usize, dq[r]);
                }
            }
        }
    }

    /// The key and value gradients: one warp per key row, streaming the queries after it.
    pub unsafe fn attention_backward_dkv_f32(
        dqkv: simt::GlobalMut<f32>, dout: simt::Global<f32>, qkv: simt::Global<f32>, lse: simt::Global<f32>, dsum: simt::Global<f32>,
        t: u32, nh: u32, hs: u32,
    ) {
        let g = geo(t, nh, hs);
        let s = smem(hs);
        let (k_rows, v_rows, q_tile, do_tile) = (s.rows_a, s.rows_b, s.tile_a, s.tile_b);
        let (lse_tile, dsum_tile) = (s.tile_s, s.tile_t);
        let warp = simt::thread_idx_x() / 32;
        let lane = simt::lane_id();
        let j = g.row0 + warp;
        let stride = 3 * g.c as usize;
        stage(k_rows, hs, qkv.add(g.qkv_base), stride, g.head_off + g.c as usize, g.row0, ROWS, &g);
        stage(v_rows, hs, qkv.add(g.qkv_base), stride, g.head_off + 2 * g.c as usize, g.row0, ROWS, &g);

        let mut dk = [0.0f32; PER_LANE];
        let mut dv = [0.0f32; PER_LANE];
        // Queries before the block's first key attend to none of its keys.
        let mut qt = g.row0 - g.row0 % TILE;
        while qt < t {
            stage(q_tile, hs + 1, qkv.add(g.qkv_base), stride, g.head_off, qt, TILE, &g);
            stage(do_tile, hs + 1, dout.add(g.out_base), g.c as usize, g.head_off, qt, TILE, &g);
            let tid = simt::thread_idx_x();
            if tid < TILE {
                let q = qt + tid;
                let (a, b) = if q < t {
                    (lse.load(g.stat_base + q as usize), dsum.load(g.stat_base + q as usize))
                } else {
                    (0.0, 0.0)
                };
                lse_tile.store(tid as usize, a);
                dsum_tile.store(tid as usize, b);
            }
            simt::sync_threads();
            if j < t && qt + TILE > j {
                let i = qt + lane;
                let (p, ds) = if i >= j && i < t {
                    let row = (lane * (hs + 1)) as usize;
                    let score = dot(q_tile, row, k_rows, (warp * hs) as usize, hs) * g.scale;
                    let p = simt::exp(score - lse_tile.load(lane as usize));
                    let dp = dot(do_tile, row, v_rows, (warp * hs) as usize, hs);
                    (p, p * (dp - dsum_tile.load(lane as usize)))
                } else {
                    (0.0, 0.0)
                };
                for ii in 0..TILE {
                    let pi = simt::shfl_idx_f32(simt::FULL_MASK, p, ii);
                    let dsi = simt::shfl_idx_f32(simt::FULL_MASK, ds, ii) * g.scale;
                    for r in 0..PER_LANE {
                        let d = lane + 32 * r as u32;
                        if d < hs {
                            let at = (ii * (hs + 1) + d) as usize;
                            dv[r] = simt::fma(pi, do_tile.load(at), dv[r]);
                            dk[r] = simt::fma(dsi, q_tile.load(at), dk[r]);
                        }
                    }
                }
            }
            simt::sync_threads();
            qt += TILE;
        }
        if j < t {
            let base = g.qkv_base + j as usize * stride + g.head_off;
            for r in 0..PER_LANE {
                let d = lane + 32 * r as u32;
                if d < hs {
                    dqkv.store(base + g.c as usize + d as usize, dk[r]);
                    dqkv.store(base + 2 * g.c as usize + d as usize, dv[r]);
                }
            }
        }
    }
}
