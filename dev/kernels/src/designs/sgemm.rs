//! The f32 GEMM designs of Simon Boehm's SGEMM worklog (2022), each as its author describes it,
//! written here from those descriptions: `C = alpha * A B + beta * C`, all row-major, `A` is
//! `M x K`, `B` is `K x N`. The worklog measured them on an RTX A6000 at `M = N = K = 4096`.
//!
//! | kernel | design | block | grid |
//! |---|---|---|---|
//! | [`design_sgemm_naive`] (1) | a thread per element of `C`, `threadIdx.x` along rows of `C` | 32 x 32 | (ceil(M/32), ceil(N/32)) |
//! | [`design_sgemm_coalesced`] (2) | the same, consecutive threads along a row of `C` | 1024 | (ceil(M/32), ceil(N/32)) |
//! | [`design_sgemm_smem`] (3) | 32 x 32 tiles of `A` and `B` staged in shared memory | 1024 | (M/32, N/32) |
//! | [`design_sgemm_tiled_1d`] (4) | 64 x 64 block tile, `BK` 8, 8 results per thread along a column | 512 | (N/64, M/64) |
//! | [`design_sgemm_tiled_2d`] (5) | 128 x 128 block tile, `BK` 8, an 8 x 8 tile per thread | 256 | (N/128, M/128) |
//! | [`design_sgemm_vectorized`] (6) | (5) with 128-bit global loads, `A` transposed in shared memory, 128-bit shared loads | 256 | (N/128, M/128) |
//!
//! Kernels 1 and 2 check bounds; 3 to 6, as published, need `M`, `N` multiples of their block
//! tile and `K` a multiple of `BK` (the launcher checks). Where the worklog's SASS shows that
//! nvcc vectorised shared loads (the row of `B` each thread reads in kernel 5), the kernel here
//! makes the same 128-bit loads, so that the emulator counts what the GPU executes.

use trident_kernels::{kernels, simt, unroll};

/// Block tile of kernel 3 (square).
pub const SMEM_TILE: u32 = 32;
/// Kernel 4: block tile `BM x BN`, k-slice `BK`, results per thread `TM`.
pub const TILED_1D: (u32, u32, u32, u32) = (64, 64, 8, 8);
/// Kernels 5 and 6: block tile `BM x BN`, k-slice `BK`, per-thread tile `TM x TN`.
pub const TILED_2D: (u32, u32, u32, u32, u32) = (128, 128, 8, 8, 8);

kernels! {
    /// Kernel 1: one thread per element of `C`; thread `(x, y)` of block `(bx, by)` computes
    /// row `32 bx + x`, column `32 by + y`. Consecutive lanes walk down a column of `C`, so
    /// their loads of `A` touch 32 different rows (32 sectors) while `B` is a broadcast.
    pub unsafe fn design_sgemm_naive(
        c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, m: u32, n: u32, k: u32, alpha: f32, beta: f32,
    ) {
        let row = (simt::block_idx_x() * 32 + simt::thread_idx_x()) as usize;
        let col = (simt::block_idx_y() * 32 + simt::thread_idx_y()) as usize;
        let (m, n, k) = (m as usize, n as usize, k as usize);
        if row < m && col < n {
            let mut acc = 0.0f32;
            for i in 0..k {
                acc = simt::fma(a.load(row * k + i), b.load(i * n + col), acc);
            }
            let idx = row * n + col;
            c.store(idx, alpha * acc + beta * c.load(idx));
        }
    }

    /// Kernel 2: as kernel 1, with the 1024 threads of a block laid out so that the 32 lanes
    /// of a warp share a row of `C` and take 32 consecutive columns: `A` is a broadcast, `B`
    /// and `C` are coalesced.
    pub unsafe fn design_sgemm_coalesced(
        c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, m: u32, n: u32, k: u32, alpha: f32, beta: f32,
    ) {
        let t = simt::thread_idx_x();
        let row = (simt::block_idx_x() * 32 + t / 32) as usize;
        let col = (simt::block_idx_y() * 32 + t % 32) as usize;
        let (m, n, k) = (m as usize, n as usize, k as usize);
        if row < m && col < n {
            let mut acc = 0.0f32;
            for i in 0..k {
                acc = simt::fma(a.load(row * k + i), b.load(i * n + col), acc);
            }
            let idx = row * n + col;
            c.store(idx, alpha * acc + beta * c.load(idx));
        }
    }

    /// Kernel 3: each block stages a 32 x 32 tile of `A` and of `B` in shared memory per step
    /// of 32 along `K` (one coalesced element per thread each), then every thread takes the
    /// dot product of its row of the `A` tile (a broadcast) with its column of the `B` tile.
    pub unsafe fn design_sgemm_smem(
        c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, _m: u32, n: u32, k: u32, alpha: f32, beta: f32,
    ) {
        const T: usize = SMEM_TILE as usize;
        let a_tile = simt::static_shared!(SGEMM3_A, f32, T * T);
        let b_tile = simt::static_shared!(SGEMM3_B, f32, T * T);
        let (n, k) = (n as usize, k as usize);
        let t = simt::thread_idx_x() as usize;
        let (tr, tc) = (t / T, t % T);
        let row0 = simt::block_idx_x() as usize * T;
        let col0 = simt::block_idx_y() as usize * T;
        let mut acc = 0.0f32;
        let mut k0 = 0;
        while k0 < k {
            a_tile.store(tr * T + tc, a.load((row0 + tr) * k + k0 + tc));
            b_tile.store(tr * T + tc, b.load((k0 + tr) * n + col0 + tc));
            simt::sync_threads();
            for dot in 0..T {
                acc = simt::fma(a_tile.load(tr * T + dot), b_tile.load(dot * T + tc), acc);
            }
            simt::sync_threads();
            k0 += T;
        }
        let idx = (row0 + tr) * n + col0 + tc;
        c.store(idx, alpha * acc + beta * c.load(idx));
    }

    /// Kernel 4: a 64 x 64 tile of `C` per block of 512 threads, `K` in slices of 8; thread
    /// `t` computes 8 consecutive rows of column `t % 64`, reusing each element of the `B`
    /// slice it loads from shared memory for 8 products.
    pub unsafe fn design_sgemm_tiled_1d(
        c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, _m: u32, n: u32, k: u32, alpha: f32, beta: f32,
    ) {
        const BM: usize = TILED_1D.0 as usize;
        const BN: usize = TILED_1D.1 as usize;
        const BK: usize = TILED_1D.2 as usize;
        const TM: usize = TILED_1D.3 as usize;
        // Shared tiles: `A` slice BM x BK and `B` slice BK x BN, both row-major.
        let a_tile = simt::static_shared!(SGEMM4_A, f32, BM * BK);
        let b_tile = simt::static_shared!(SGEMM4_B, f32, BK * BN);
        let (n, k) = (n as usize, k as usize);
        let t = simt::thread_idx_x() as usize;
        let (tr, tc) = (t / BN, t % BN);
        let (a_row, a_col) = (t / BK, t % BK);
        let (b_row, b_col) = (t / BN, t % BN);
        let row0 = simt::block_idx_y() as usize * BM;
        let col0 = simt::block_idx_x() as usize * BN;
        let mut acc = [0.0f32; TM];
        let mut k0 = 0;
        while k0 < k {
            a_tile.store(a_row * BK + a_col, a.load((row0 + a_row) * k + k0 + a_col));
            b_tile.store(b_row * BN + b_col, b.load((k0 + b_row) * n + col0 + b_col));
            simt::sync_threads();
            for dot in 0..BK {
                let bv = b_tile.load(dot * BN + tc);
                unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7] {
                    acc[r] = simt::fma(a_tile.load((tr * TM + r) * BK + dot), bv, acc[r]);
                });
            }
            simt::sync_threads();
            k0 += BK;
        }
        unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7] {
            let idx = (row0 + tr * TM + r) * n + col0 + tc;
            c.store(idx, alpha * acc[r] + beta * c.load(idx));
        });
    }

    /// Kernel 5: a 128 x 128 tile of `C` per block of 256 threads, `K` in slices of 8, an
    /// 8 x 8 tile of `C` per thread: per step of `K` a thread loads 8 values of the `A` slice
    /// (a column, scalar loads) and 8 of the `B` slice (a row, two 128-bit loads) into
    /// registers and accumulates their outer product.
    pub unsafe fn design_sgemm_tiled_2d(
        c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, _m: u32, n: u32, k: u32, alpha: f32, beta: f32,
    ) {
        const BM: usize = TILED_2D.0 as usize;
        const BN: usize = TILED_2D.1 as usize;
        const BK: usize = TILED_2D.2 as usize;
        const TM: usize = TILED_2D.3 as usize;
        const TN: usize = TILED_2D.4 as usize;
        const THREADS: usize = BM * BN / (TM * TN);
        // Shared tiles: `A` slice BM x BK and `B` slice BK x BN, both row-major.
        let a_tile = simt::static_shared!(SGEMM5_A, f32, BM * BK);
        let b_tile = simt::static_shared!(SGEMM5_B, f32, BK * BN);
        let b_tile4 = b_tile.cast::<[f32; 4]>();
        let (n, k) = (n as usize, k as usize);
        let t = simt::thread_idx_x() as usize;
        let (tr, tc) = (t / (BN / TN), t % (BN / TN));
        let (a_row, a_col) = (t / BK, t % BK);
        let (b_row, b_col) = (t / BN, t % BN);
        let row0 = simt::block_idx_y() as usize * BM;
        let col0 = simt::block_idx_x() as usize * BN;
        let mut acc = [[0.0f32; TN]; TM];
        let mut k0 = 0;
        while k0 < k {
            // THREADS / BK rows of the A slice per pass, THREADS / BN rows of the B slice.
            for o in (0..BM).step_by(THREADS / BK) {
                a_tile.store((a_row + o) * BK + a_col, a.load((row0 + a_row + o) * k + k0 + a_col));
            }
            for o in (0..BK).step_by(THREADS / BN) {
                b_tile.store((b_row + o) * BN + b_col, b.load((k0 + b_row + o) * n + col0 + b_col));
            }
            simt::sync_threads();
            for dot in 0..BK {
                let mut am = [0.0f32; TM];
                unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                    am[i] = a_tile.load((tr * TM + i) * BK + dot);
                });
                let lo = b_tile4.load((dot * BN + tc * TN) / 4);
                let hi = b_tile4.load((dot * BN + tc * TN) / 4 + 1);
                let bn = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
                unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                        acc[i][j] = simt::fma(am[i], bn[j], acc[i][j]);
                    });
                });
            }
            simt::sync_threads();
            k0 += BK;
        }
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let idx = (row0 + tr * TM + i) * n + col0 + tc * TN + j;
                c.store(idx, alpha * acc[i][j] + beta * c.load(idx));
            });
        });
    }

    /// Kernel 6: kernel 5 with 128-bit accesses: each thread loads 4 consecutive floats of the
    /// `A` slice and of the `B` slice per step; the `A` slice is stored transposed (k-major) so
    /// that both register tiles are read with 128-bit shared loads; `C` is read and written
    /// 4 floats at a time.
    pub unsafe fn design_sgemm_vectorized(
        c: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, _m: u32, n: u32, k: u32, alpha: f32, beta: f32,
    ) {
        const BM: usize = TILED_2D.0 as usize;
        const BN: usize = TILED_2D.1 as usize;
        const BK: usize = TILED_2D.2 as usize;
        const TM: usize = TILED_2D.3 as usize;
        const TN: usize = TILED_2D.4 as usize;
        // Shared tiles: `A` slice transposed, BK x BM; `B` slice BK x BN; both row-major.
        let a_tile = simt::static_shared!(SGEMM6_A, f32, BK * BM);
        let b_tile = simt::static_shared!(SGEMM6_B, f32, BK * BN);
        let (a_tile4, b_tile4) = (a_tile.cast::<[f32; 4]>(), b_tile.cast::<[f32; 4]>());
        let (n, k) = (n as usize, k as usize);
        let t = simt::thread_idx_x() as usize;
        let (tr, tc) = (t / (BN / TN), t % (BN / TN));
        // One float4 of A per thread: BM rows of BK / 4 float4s; one of B: BK rows of BN / 4.
        let (a_row, a_col4) = (t / (BK / 4), t % (BK / 4));
        let (b_row, b_col4) = (t / (BN / 4), t % (BN / 4));
        let row0 = simt::block_idx_y() as usize * BM;
        let col0 = simt::block_idx_x() as usize * BN;
        let mut acc = [[0.0f32; TN]; TM];
        let mut k0 = 0;
        while k0 < k {
            let v = a.load_v4((row0 + a_row) * k + k0 + a_col4 * 4);
            for j in 0..4 {
                a_tile.store((a_col4 * 4 + j) * BM + a_row, v[j]);
            }
            b_tile4.store((b_row * BN) / 4 + b_col4, b.load_v4((k0 + b_row) * n + col0 + b_col4 * 4));
            simt::sync_threads();
            for dot in 0..BK {
                let (m0, m1) = (a_tile4.load((dot * BM + tr * TM) / 4), a_tile4.load((dot * BM + tr * TM) / 4 + 1));
                let (n0, n1) = (b_tile4.load((dot * BN + tc * TN) / 4), b_tile4.load((dot * BN + tc * TN) / 4 + 1));
                let am = [m0[0], m0[1], m0[2], m0[3], m1[0], m1[1], m1[2], m1[3]];
                let bn = [n0[0], n0[1], n0[2], n0[3], n1[0], n1[1], n1[2], n1[3]];
                unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                        acc[i][j] = simt::fma(am[i], bn[j], acc[i][j]);
                    });
                });
            }
            simt::sync_threads();
            k0 += BK;
        }
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(j in [0, 4] {
                let idx = (row0 + tr * TM + i) * n + col0 + tc * TN + j;
                let old = c.load_v4(idx);
                let out = [
                    alpha * acc[i][j] + beta * old[0],
                    alpha * acc[i][j + 1] + beta * old[1],
                    alpha * acc[i][j + 2] + beta * old[2],
                    alpha * acc[i][j + 3] + beta * old[3],
                ];
                c.store_v4(idx, out);
            });
        });
    }
}
