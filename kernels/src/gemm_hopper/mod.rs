//! Hopper GEMM (sm_90a): `C = epilogue(A B^T)` with bf16 `A` (`M x K`, row-major) and `B`
//! (`N x K`, row-major: a linear layer's weight, so this is the forward `x W^T`), f32
//! accumulation in `wgmma.mma_async`, operands brought by TMA, f32 or bf16 output.
//!
//! # Tile
//!
//! A block computes [`BM`] x [`BN`] = 128 x 256 tiles of C, walking K in [`BK`] = 64 slices.
//! Its 384 threads are three warpgroups (PTX ISA, "Asynchronous Warpgroup Level Matrix
//! Multiply-Accumulate Instructions": a warpgroup is four contiguous warps, the first a
//! multiple of four):
//!
//! - warpgroup 0, the producer: one elected thread issues the TMA loads; the warpgroup gives
//!   its registers away first (`setmaxnreg.dec` to [`PRODUCER_REGISTERS`]);
//! - warpgroups 1 and 2, the consumers (`setmaxnreg.inc` to [`CONSUMER_REGISTERS`]):
//!   consumer `c` owns rows `64c .. 64c + 64` of the tile and all 256 columns, one
//!   `wgmma.mma_async.m64n256k16` per 16 of K, so four per slice.
//!
//! # Persistent grid
//!
//! The grid has at most one block per SM (the launcher sizes it); block `b` computes tiles
//! `b, b + gridDim.x, ...` in the grouped order of [`schedule`] (groups of [`GROUP_M`] tile
//! rows, so that concurrently computed tiles share A and B panels in L2). The producer runs
//! ahead into the next tile while the consumers finish the epilogue of the current one.
//!
//! # Pipeline and mbarrier protocol
//!
//! Shared memory holds a ring of [`STAGES`] = 4 stages, each an A tile (128 x 64 bf16,
//! 16 KiB) and a B tile (256 x 64 bf16, 32 KiB), and two mbarriers per stage (PTX ISA,
//! "Parallel Synchronization and Communication Instructions: mbarrier"):
//!
//! - `full[s]`, arrival count 1: the producer's `mbarrier.arrive.expect_tx` of the stage's
//!   49152 bytes, then the two `cp.async.bulk.tensor` loads complete those bytes on it
//!   (`mbarrier::complete_tx::bytes`; a box partly out of bounds still completes all its
//!   bytes, PTX ISA "cp.async.bulk.tensor"). The phase completes when both loads landed.
//! - `empty[s]`, arrival count 256: every consumer thread arrives once it no longer reads
//!   the stage.
//!
//! Both sides count the slices they have handled since the kernel began, across tiles
//! (`it`): slice `it` uses stage `s = it % STAGES` in its `it / STAGES`-th pass, so it waits
//! for phase parity `(it / STAGES) & 1` of `full[s]` (consumers) and for the release of the
//! previous pass, parity `((it / STAGES) & 1) ^ 1` of `empty[s]` (producer). On the first
//! pass that parity is 1, the phase "before" phase 0, which `try_wait.parity` reports
//! complete on a fresh barrier (PTX ISA, "mbarrier.test_wait/try_wait": waiting on the parity
//! of the preceding phase returns at once), so the ring starts empty without a prologue.
//!
//! A consumer issues slice `it`'s four `wgmma` as one group (`wgmma.commit_group`), then
//! `wgmma.wait_group 1`: at most this group is in flight, so slice `it - 1`'s group retired
//! and read all its operands, and the consumer releases that stage (`empty`). After a tile's
//! last slice `wgmma.wait_group 0` retires everything before the accumulators are read, and
//! the last stage is released. The `wgmma.fence` before each slice's first `mma_async`
//! orders the epilogue's reads of the accumulator registers (and the zeroing of a new tile)
//! before the asynchronous writes (PTX ISA, "wgmma.fence").
//!
//! # Swizzle and descriptors
//!
//! Each TMA box is 64 elements of K (128 bytes, the widest row the 128-byte swizzle allows)
//! by 128 (A) or 256 (B) rows, written with `CU_TENSOR_MAP_SWIZZLE_128B`: the 16-byte chunk
//! `c` of row `r` lands at chunk `c ^ (r % 8)` (the XOR of the address bits 4-6 with bits
//! 7-9; CUDA C++ Programming Guide, "Tensor Memory Access", the swizzle modes), which is why
//! every tile starts at a multiple of 1024 bytes (the pattern's repeat; the kernel aligns the
//! dynamic shared window itself). The `wgmma` matrix descriptors (PTX ISA, "Matrix Descriptor
//! Format") describe the same K-major layout: swizzle mode 1 (128-byte), stride byte offset
//! 1024 (eight 128-byte rows, one core-matrix group), leading byte offset 16 (unused for a
//! swizzled K-major operand), and the start address advanced by 32 bytes (16 bf16) per k16
//! step; the hardware applies the XOR to the computed address, so the steps inside a swizzled
//! row read what TMA wrote. Consumer `c`'s A operand starts `64c` rows (8 KiB) into the A tile.
//!
//! # Accumulator fragment
//!
//! A consumer thread `t` of its warpgroup (warp `w = t / 32`, lane `l`) holds 128 f32: for
//! each 8-column block `j < 32`, `d[4j .. 4j + 4]` = `D(r, c)`, `D(r, c + 1)`, `D(r + 8, c)`,
//! `D(r + 8, c + 1)` with `r = 16w + l / 4`, `c = 8j + 2 (l % 4)` (PTX ISA, "Register
//! Fragments and Shared Memory Matrix Layouts": the `wgmma` D fragment for `.m64nNk16`). The
//! epilogue ([`Epilogue::store_pair`], the tensor-core GEMM's) applies the bias, GeLU and
//! residual the flags ask for and writes each pair, masked to C.
//!
//! # Edges
//!
//! TMA loads boxes past `M`, `N` or `K` with zeros (the maps' out-of-bounds fill), so the main
//! loop has no edge cases and any M, N, K work; the epilogue masks rows and columns. The
//! maps need 16-byte aligned bases and row strides (`K` a multiple of 8).

pub mod schedule;

use crate::gemm_tc::{Bf16, Epilogue, Output};
use crate::simt::{self, Global, GlobalMut, TensorMapRef, WgmmaAccumulator};
pub use schedule::{tile_coords, GROUP_M};

/// Rows of C per tile.
pub const BM: usize = 128;
/// Columns of C per tile.
pub const BN: usize = 256;
/// K elements per slice (one 128-byte swizzled row of bf16).
pub const BK: usize = 64;
/// Stages of the TMA ring.
pub const STAGES: usize = 4;
/// Consumer warpgroups.
pub const CONSUMERS: usize = 2;
/// Threads per block: the producer warpgroup and the consumers.
pub const THREADS: u32 = 128 * (1 + CONSUMERS as u32);
/// Bytes of one stage's A tile.
pub const A_STAGE_BYTES: usize = BM * BK * 2;
/// Bytes of one stage's B tile.
pub const B_STAGE_BYTES: usize = BN * BK * 2;
/// Bytes of one stage: what its `full` barrier expects.
pub const STAGE_BYTES: usize = A_STAGE_BYTES + B_STAGE_BYTES;
/// Byte offset of the mbarriers (after the ring) from the aligned base.
const BARS_AT: usize = STAGES * STAGE_BYTES;
/// The alignment the swizzled tiles need (the 128-byte swizzle's repeat).
const TILE_ALIGN: usize = 1024;
/// Dynamic shared memory per block: the ring, `2 * STAGES` mbarriers, and the slack that lets
/// the kernel align the ring to 1024 bytes wherever the window starts.
pub const SMEM_BYTES: u32 = (BARS_AT + 2 * STAGES * 8 + TILE_ALIGN) as u32;
/// The producer warpgroup's registers per thread after `setmaxnreg.dec`.
pub const PRODUCER_REGISTERS: u32 = 40;
/// The consumers' registers per thread after `setmaxnreg.inc`: 128 accumulators and the
/// epilogue's addressing. `40 * 128 + 232 * 256 = 64512` of the SM's 65536.
pub const CONSUMER_REGISTERS: u32 = 232;

const _: () = assert!(STAGE_BYTES % TILE_ALIGN == 0 && A_STAGE_BYTES % TILE_ALIGN == 0);
const _: () = assert!(PRODUCER_REGISTERS * 128 + CONSUMER_REGISTERS * 128 * CONSUMERS as u32 <= 65536);

/// Index of `full[s]` among the mbarriers is `FULL + s`, of `empty[s]` `EMPTY + s`.
const FULL: usize = 0;
const EMPTY: usize = STAGES;

/// Which step of the protocol a build leaves out, to show that the emulator refuses it:
/// [`plant::NONE`] in every kernel; the others only in tests.
pub mod plant {
    /// The kernel as it is.
    pub const NONE: u32 = 0;
    /// The producer refills a stage without waiting for the consumers to release it.
    pub const NO_EMPTY_WAIT: u32 = 1;
    /// The consumers read an accumulator before `wgmma.wait_group` retired its group.
    pub const READ_BEFORE_WAIT: u32 = 2;
}

/// The problem's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Rows of A and C.
    pub m: usize,
    /// Rows of B, columns of C.
    pub n: usize,
    /// Columns of A and B.
    pub k: usize,
}

/// The GEMM for one block of the persistent grid (see the module documentation), with the
/// protocol step `PLANT` names left out ([`plant`]).
///
/// # Safety
///
/// `map_a` describes A (`K x M` elements innermost first, box 64 x 128, 128-byte swizzle,
/// zero fill) and `map_b` B (`K x N`, box 64 x 256, the same), both bf16; the epilogue's
/// buffers hold what M, N and its leading dimensions address. Launched with [`THREADS`]
/// threads, [`SMEM_BYTES`] bytes of dynamic shared memory and a one-dimensional grid.
#[inline(always)]
pub unsafe fn gemm_block<O: Output, const PLANT: u32>(
    map_a: TensorMapRef,
    map_b: TensorMapRef,
    s: Shape,
    e: Epilogue<O>,
) {
    let tid = simt::thread_idx_x() as usize;
    let (role, wg_tid) = (tid / 128, tid % 128);
    // SAFETY: one byte at the start of the window, to read its address.
    let base = unsafe { simt::dynamic_shared::<u8>(0, 1) }.shared_address(0) as usize;
    let pad = base.wrapping_neg() % TILE_ALIGN;
    // SAFETY: the launch has SMEM_BYTES, which leave room for the padding; the windows do not
    // overlap, and pad is a multiple of 16 (the window's alignment).
    let (tiles, bars) = unsafe {
        (
            simt::dynamic_shared::<u16>(pad, BARS_AT / 2),
            simt::dynamic_shared::<u64>(pad + BARS_AT, 2 * STAGES),
        )
    };
    if tid == 0 {
        for st in 0..STAGES {
            simt::mbarrier_init(bars, FULL + st, 1);
            simt::mbarrier_init(bars, EMPTY + st, (128 * CONSUMERS) as u32);
        }
        // The inits are generic-proxy writes; the TMA loads complete bytes on the barriers
        // through the async proxy.
        simt::fence_proxy_async_shared_cta();
    }
    simt::sync_threads();

    let tiles_m = s.m.div_ceil(BM);
    let tiles_n = s.n.div_ceil(BN);
    let total = tiles_m * tiles_n;
    let k_tiles = s.k.div_ceil(BK);
    let (first, step) = (simt::block_idx_x() as usize, simt::grid_dim_x() as usize);

    if role == 0 {
        simt::setmaxnreg_dec::<PRODUCER_REGISTERS>();
        if wg_tid >= 32 {
            return;
        }
        let (_, leader) = simt::elect_sync(simt::FULL_MASK);
        if !leader {
            return;
        }
        let mut it = 0;
        let mut tile = first;
        while tile < total {
            let (tm, tn) = tile_coords(tile, tiles_m, tiles_n);
            for kt in 0..k_tiles {
                let stage = it % STAGES;
                let parity = ((it / STAGES) & 1) as u32;
                if PLANT != plant::NO_EMPTY_WAIT {
                    simt::mbarrier_wait_parity(bars, EMPTY + stage, parity ^ 1);
                }
                simt::mbarrier_arrive_expect_tx(bars, FULL + stage, STAGE_BYTES as u32);
                let at = stage * STAGE_BYTES / 2;
                let k0 = (kt * BK) as i32;
                // SAFETY: the maps describe A and B (the caller's contract); the boxes land in
                // this stage, which the consumers released.
                unsafe {
                    simt::tma_load_2d(tiles, at, map_a, [k0, (tm * BM) as i32], bars, FULL + stage);
                    simt::tma_load_2d(
                        tiles,
                        at + A_STAGE_BYTES / 2,
                        map_b,
                        [k0, (tn * BN) as i32],
                        bars,
                        FULL + stage,
                    );
                }
                it += 1;
            }
            tile += step;
        }
        return;
    }

    simt::setmaxnreg_inc::<CONSUMER_REGISTERS>();
    let consumer = role - 1;
    let (warp, lane) = (wg_tid / 32, wg_tid % 32);
    let mut it = 0;
    let mut tile = first;
    while tile < total {
        let (tm, tn) = tile_coords(tile, tiles_m, tiles_n);
        let mut acc = WgmmaAccumulator::<128>::zeroed();
        for kt in 0..k_tiles {
            let stage = it % STAGES;
            let parity = ((it / STAGES) & 1) as u32;
            simt::mbarrier_wait_parity(bars, FULL + stage, parity);
            // This consumer's 64 rows of the A tile, and the B tile.
            let a0 = tiles.shared_address(stage * STAGE_BYTES / 2) + (consumer * 64 * BK * 2) as u32;
            let b0 = tiles.shared_address((stage * STAGE_BYTES + A_STAGE_BYTES) / 2);
            simt::wgmma_fence();
            unroll!(kk in [0, 1, 2, 3] {
                let step = (kk * 32) as u32;
                simt::wgmma_m64n256k16_bf16(
                    &mut acc,
                    simt::matrix_descriptor(a0 + step, 16, 1024, 1),
                    simt::matrix_descriptor(b0 + step, 16, 1024, 1),
                    kt > 0 || kk > 0,
                );
            });
            simt::wgmma_commit_group();
            if PLANT == plant::READ_BEFORE_WAIT {
                acc.get(0);
            }
            // Slice it - 1's group retired: its stage may be refilled.
            simt::wgmma_wait_group::<1>();
            if kt > 0 {
                simt::mbarrier_arrive(bars, EMPTY + (it - 1) % STAGES);
            }
            it += 1;
        }
        simt::wgmma_wait_group::<0>();
        if k_tiles > 0 {
            simt::mbarrier_arrive(bars, EMPTY + (it - 1) % STAGES);
        }
        let row = tm * BM + consumer * 64 + 16 * warp + lane / 4;
        let col = tn * BN + 2 * (lane % 4);
        unroll!(j in [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
            16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
        ] {
            // SAFETY: the wrapper checked C, the bias and the residual against M, N and their
            // leading dimensions; `store_pair` masks what lies outside C.
            unsafe {
                e.store_pair::<Bf16>(row, col + 8 * j, [acc.get(4 * j), acc.get(4 * j + 1)]);
                e.store_pair::<Bf16>(row + 8, col + 8 * j, [acc.get(4 * j + 2), acc.get(4 * j + 3)]);
            }
        });
        tile += step;
    }
}

macro_rules! gemm_hopper_entries {
    ($($name:ident: $out:ty;)*) => {
        kernels! {$(
            /// The Hopper GEMM (see the module documentation), bf16 `A` (`M x K`) times `B^T`
            /// (`B` stored `N x K`), output type in the name (`b16`: bf16). `map_a` and
            /// `map_b` are the addresses of the operands' tensor maps (`CUtensorMap` in global
            /// memory on the GPU); `flags` are the tensor-core GEMM's epilogue flags
            /// ([`crate::gemm_tc::BIAS`], ...). Launch [`THREADS`] threads, [`SMEM_BYTES`] of
            /// dynamic shared memory, and a grid of at most one block per SM and at most one per
            /// tile.
            pub unsafe fn $name(
                c: GlobalMut<$out>, map_a: u64, map_b: u64, bias: Global<f32>, residual: Global<$out>,
                m: u32, n: u32, k: u32, ldc: u32, ldr: u32, flags: u32,
            ) {
                let e = Epilogue {
                    c, ldc: ldc as usize, bias, residual, ldr: ldr as usize, flags,
                    m: m as usize, n: n as usize,
                };
                let s = Shape { m: m as usize, n: n as usize, k: k as usize };
                // SAFETY: the launch wrapper built the maps and checked every buffer.
                unsafe {
                    gemm_block::<$out, { plant::NONE }>(
                        TensorMapRef::from_address(map_a), TensorMapRef::from_address(map_b), s, e,
                    )
                }
            }
        )*}

        /// Every Hopper GEMM kernel's name.
        pub const KERNEL_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

gemm_hopper_entries! {
    gemm_hopper_bf16_nt_f32: f32;
    gemm_hopper_bf16_nt_b16: u16;
}
