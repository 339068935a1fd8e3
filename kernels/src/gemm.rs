//! Tiled f32 GEMM: `C = alpha * op(A) * op(B) + beta * C`, row-major, batched over `grid.z`.
//!
//! `op(A)` is `M x K` and `op(B)` is `K x N`. `A` is stored `M x K` (`lda >= K`) or, transposed,
//! `K x M` (`lda >= M`); `B` is stored `K x N` or, transposed, `N x K`. A linear layer needs all
//! of them: forward `x W^T` is NT, the input gradient `dy W` is NN, the weight gradient `dy^T x`
//! is TN.
//!
//! A block of 16 x 16 threads computes a 64 x 64 tile of `C`, staging 64 x 16 slices of `op(A)`
//! and 16 x 64 slices of `op(B)` in shared memory, both stored k-major so the inner loop reads a
//! column of `op(A)` and a row of `op(B)` along contiguous addresses. Thread `(tx, ty)` owns rows
//! `ty + 16 i` and columns `tx + 16 j` (`i, j < 4`): in a warp the A reads broadcast and the B
//! reads hit 16 consecutive words, and the stores of `C` are coalesced along `tx`. Rows of the
//! tiles are padded by 4 words to spread the transposing stores over banks.

use crate::simt;

/// Rows of `C` per block (grid y).
pub const TILE_M: u32 = 64;
/// Columns of `C` per block (grid x).
pub const TILE_N: u32 = 64;
/// Depth of the `A` and `B` tiles staged in shared memory per step.
pub const TILE_K: u32 = 16;
/// Threads per block: 16 x 16, each computing a 4 x 4 patch of the block's tile.
pub const THREADS: u32 = 256;
const LD: usize = TILE_M as usize + 4;
const PER_THREAD: usize = 4;

/// The shape and strides of one GEMM launch; `batch_*` are element strides between the
/// matrices of consecutive `blockIdx.z`.
#[derive(Clone, Copy)]
struct Shape {
    m: u32,
    n: u32,
    k: u32,
    lda: u32,
    ldb: u32,
    ldc: u32,
}

#[inline(always)]
unsafe fn gemm_tile<const TRANS_A: bool, const TRANS_B: bool>(
    c: simt::GlobalMut<f32>,
    a: simt::Global<f32>,
    b: simt::Global<f32>,
    s: Shape,
    batch: [u64; 3],
    alpha: f32,
    beta: f32,
) {
    let a_tile = simt::static_shared!(GEMM_A_TILE, f32, TILE_K as usize * LD);
    let b_tile = simt::static_shared!(GEMM_B_TILE, f32, TILE_K as usize * LD);

    let z = simt::block_idx_z() as usize;
    let a = a.add(z * batch[0] as usize);
    let b = b.add(z * batch[1] as usize);
    let c = c.add(z * batch[2] as usize);

    let tx = simt::thread_idx_x() as usize;
    let ty = simt::thread_idx_y() as usize;
    let tid = ty * 16 + tx;
    let m0 = (simt::block_idx_y() * TILE_M) as usize;
    let n0 = (simt::block_idx_x() * TILE_N) as usize;
    let (m, n, k) = (s.m as usize, s.n as usize, s.k as usize);
    let (lda, ldb, ldc) = (s.lda as usize, s.ldb as usize, s.ldc as usize);

    let mut acc = [[0.0f32; PER_THREAD]; PER_THREAD];
    let mut k0 = 0;
    while k0 < k {
        // Each thread stages 4 elements of each operand, walking the stored matrix along its
        // contiguous dimension so the global loads coalesce.
        for r in 0..4 {
            let idx = tid + r * THREADS as usize;
            let (mi, ki) = if TRANS_A { (idx % 64, idx / 64) } else { (idx / 16, idx % 16) };
            let (gm, gk) = (m0 + mi, k0 + ki);
            let v = if gm < m && gk < k {
                if TRANS_A {
                    a.load(gk * lda + gm)
                } else {
                    a.load(gm * lda + gk)
                }
            } else {
                0.0
            };
            a_tile.store(ki * LD + mi, v);

            let (ni, ki) = if TRANS_B { (idx / 16, idx % 16) } else { (idx % 64, idx / 64) };
            let (gn, gk) = (n0 + ni, k0 + ki);
            let v = if gn < n && gk < k {
                if TRANS_B {
                    b.load(gn * ldb + gk)
                } else {
                    b.load(gk * ldb + gn)
                }
            } else {
                0.0
            };
            b_tile.store(ki * LD + ni, v);
        }
        simt::sync_threads();
        for kk in 0..TILE_K as usize {
            let mut av = [0.0f32; PER_THREAD];
            let mut bv = [0.0f32; PER_THREAD];
            for i in 0..PER_THREAD {
                av[i] = a_tile.load(kk * LD + ty + 16 * i);
                bv[i] = b_tile.load(kk * LD + tx + 16 * i);
            }
            for i in 0..PER_THREAD {
                for j in 0..PER_THREAD {
                    acc[i][j] = simt::fma(av[i], bv[j], acc[i][j]);
                }
            }
        }
        simt::sync_threads();
        k0 += TILE_K as usize;
    }

    for i in 0..PER_THREAD {
        let row = m0 + ty + 16 * i;
        if row >= m {
            continue;
        }
        for j in 0..PER_THREAD {
            let col = n0 + tx + 16 * j;
            if col < n {
                let at = row * ldc + col;
                // With beta == 0, C is never read: it may hold anything, NaN included.
                let v = if beta == 0.0 { alpha * acc[i][j] } else { alpha * acc[i][j] + beta * c.load(at) };
                c.store(at, v);
            }
        }
    }
}

macro_rules! gemm_entries {
    ($($name:ident: $ta:literal, $tb:literal;)*) => {
        kernels! {$(
            /// One GEMM variant; see the module documentation. Launch with 16 x 16 threads and
            /// a grid of `(ceil(N/64), ceil(M/64), batch)` blocks.
            pub unsafe fn $name(
                c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>,
                m: u32, n: u32, k: u32, lda: u32, ldb: u32, ldc: u32,
                batch_a: u64, batch_b: u64, batch_c: u64, alpha: f32, beta: f32,
            ) {
                gemm_tile::<$ta, $tb>(
                    c, a, b, Shape { m, n, k, lda, ldb, ldc }, [batch_a, batch_b, batch_c], alpha, beta,
                )
            }
        )*}
    };
}

gemm_entries! {
    gemm_nn_f32: false, false;
    gemm_nt_f32: false, true;
    gemm_tn_f32: true, false;
    gemm_tt_f32: true, true;
}
