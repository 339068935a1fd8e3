//! Kernels that exercise every `simt` operation. Built for nvptx64 they show each operation
//! lowers to PTX that ptxas accepts; tests run them on the emulator and, where there is one,
//! on a GPU, against the same references: that the two agree is what makes a kernel that
//! passes on the emulator right on the GPU.

use trident_kernels::simt::*;
use trident_kernels::{kernels, static_shared};

/// Values each thread of [`selftest_warp_ops`] writes.
pub const WARP_OPS_OUTPUTS: usize = 26;
/// Threads per block of [`selftest_warp_ops`].
pub const WARP_OPS_THREADS: u32 = 64;
/// Dynamic shared memory [`selftest_warp_ops`] needs.
pub const WARP_OPS_DYNAMIC_SMEM: u32 = WARP_OPS_THREADS * 4;

/// Threads per block of [`selftest_global_ops`] (one warp).
pub const GLOBAL_OPS_THREADS: u32 = 32;

/// Threads per block of [`selftest_async_copy`].
pub const PIPELINE_THREADS: u32 = 64;
/// Elements per tile of [`selftest_async_copy`]: four per thread.
pub const PIPELINE_TILE: u32 = PIPELINE_THREADS * 4;

kernels! {
/// One block of [`WARP_OPS_THREADS`] threads; thread t reads `input[t]` and writes
/// `out[t * WARP_OPS_OUTPUTS..]`: shuffles, votes, fast math, global and shared atomics,
/// static and dynamic shared memory. `total` (one f32, zeroed) receives the sum of the inputs.
/// `input` has `WARP_OPS_THREADS` values, `out` room for `WARP_OPS_THREADS *
/// WARP_OPS_OUTPUTS`, `total` one; launch one block with `WARP_OPS_DYNAMIC_SMEM` bytes of
/// dynamic shared memory.
pub unsafe fn selftest_warp_ops(input: Global<f32>, out: GlobalMut<f32>, total: GlobalMut<f32>) {
    let t = thread_idx_x() as usize;
    let lane = lane_id();
    // SAFETY: one input per thread.
    let x = unsafe { input.load(t) };
    let bits = x.to_bits();
    let sum = static_shared!(SELFTEST_SUM, f32, 1);
    let mirror = static_shared!(SELFTEST_MIRROR, u32, 64);
    // SAFETY: the launch has WARP_OPS_DYNAMIC_SMEM bytes of dynamic shared memory.
    let window = unsafe { dynamic_shared::<f32>(0, WARP_OPS_THREADS as usize) };
    if t == 0 {
        sum.store(0, 0.0);
    }
    mirror.store(t, bits);
    window.store(t, x * 2.0);
    sync_threads();
    sum.atomic_add(0, x);
    // SAFETY: `total` is only updated atomically.
    unsafe { total.atomic_add(0, x) };
    sync_warp(FULL_MASK);
    let values = [
        shfl_idx_f32(FULL_MASK, x, (lane + 1) % 32),
        shfl_up_f32(FULL_MASK, x, 1),
        shfl_down_f32(FULL_MASK, x, 2),
        shfl_xor_f32(FULL_MASK, x, 3),
        f32::from_bits(shfl_idx_u32(FULL_MASK, bits, 31 - lane)),
        f32::from_bits(shfl_up_u32(FULL_MASK, bits, 4)),
        f32::from_bits(shfl_down_u32(FULL_MASK, bits, 5)),
        f32::from_bits(shfl_xor_u32(FULL_MASK, bits, 16)),
        f32::from(u8::from(vote_all(FULL_MASK, x > -0.9))),
        f32::from(u8::from(vote_any(FULL_MASK, x > 0.9))),
        vote_ballot(FULL_MASK, x > 0.0).count_ones() as f32,
        exp2(x),
        exp(x),
        tanh(x),
        rsqrt(x.abs() + 0.5),
        log2(x.abs() + 0.5),
        sqrt(x.abs()),
        fma(x, 3.0, 0.25),
        fmax(x, 0.0),
        fmin(x, 0.0),
        lane as f32,
        f32::from_bits(mirror.load(63 - t)),
        window.load(63 - t),
        bf16_to_f32(f32_to_bf16(x)),
        (block_dim_x() * 100 + grid_dim_x()) as f32,
        0.0,
    ];
    sync_threads();
    let values = {
        let mut v = values;
        v[WARP_OPS_OUTPUTS - 1] = sum.load(0);
        v
    };
    for (k, v) in values.iter().enumerate() {
        // SAFETY: WARP_OPS_OUTPUTS outputs per thread.
        unsafe { out.store(t * WARP_OPS_OUTPUTS + k, *v) };
    }
}

/// One warp computes D = A B + C (A 16x16, B 16x8 bf16; C, D 16x8 f32, all row-major) four
/// ways, writing 4 x 128 values to `d`:
/// 0. A by `ldmatrix_x4`, B by `ldmatrix_x2_trans` from B as stored (k by n);
/// 1. A by `ldmatrix_x4_trans` from A transposed, B by `ldmatrix_x2` from B transposed;
/// 2. A by four `ldmatrix_x1`, B by two `ldmatrix_x1_trans`;
/// 3. fragments gathered from global memory by the PTX ISA layout formulas.
///
/// `a` has 256 elements, `b` 128, `c` 128 and `d` room for 512; launch one block of 32
/// threads.
pub unsafe fn selftest_mma(a: Global<u16>, b: Global<u16>, c: Global<f32>, d: GlobalMut<f32>) {
    // SAFETY: forwarded from the launch's contract.
    unsafe { mma_four_ways::<false>(a, b, c, d) }
}

/// [`selftest_mma`] with A and B as IEEE f16 (`mma_m16n8k16_f16`); the same buffers and launch.
pub unsafe fn selftest_mma_f16(a: Global<u16>, b: Global<u16>, c: Global<f32>, d: GlobalMut<f32>) {
    // SAFETY: forwarded from the launch's contract.
    unsafe { mma_four_ways::<true>(a, b, c, d) }
}

/// Streams `n` inputs through two shared-memory stages with `cp.async` (16-byte copies,
/// zero-filled past the end), one tile ahead of the compute: thread t sums elements t and
/// `PIPELINE_TILE - 1 - t` of every tile into `out[t]`. Then it adds, through 8- and 4-byte
/// copies, `input[2t] + input[2t + 1] + input[t]` (read back by another thread) into
/// `out[PIPELINE_THREADS + t]`.
///
/// `input` has `n >= 2 * PIPELINE_THREADS` elements and is 16-byte aligned, `out` has room for
/// `2 * PIPELINE_THREADS`; launch one block of `PIPELINE_THREADS` threads.
pub unsafe fn selftest_async_copy(input: Global<f32>, n: u32, out: GlobalMut<f32>) {
    let t = thread_idx_x();
    let stages = static_shared!(PIPELINE_STAGES, f32, 2 * PIPELINE_TILE as usize);
    let pairs = static_shared!(PIPELINE_PAIRS, f32, 2 * PIPELINE_THREADS as usize);
    let singles = static_shared!(PIPELINE_SINGLES, f32, PIPELINE_THREADS as usize);
    let tiles = n.div_ceil(PIPELINE_TILE);
    let issue = |tile: u32| {
        if tile < tiles {
            let first = tile * PIPELINE_TILE + 4 * t;
            let valid = n.saturating_sub(first).min(4);
            let slot = ((tile % 2) * PIPELINE_TILE + 4 * t) as usize;
            // SAFETY: `valid` elements from `first` lie within the input.
            unsafe { cp_async_16_zfill(stages, slot, input.wrapping_add(first as usize), valid * 4) };
        }
        cp_async_commit_group();
    };
    issue(0);
    let mut sum = 0.0;
    for tile in 0..tiles {
        issue(tile + 1);
        cp_async_wait_group::<1>();
        sync_threads();
        let base = ((tile % 2) * PIPELINE_TILE) as usize;
        sum += stages.load(base + t as usize) + stages.load(base + (PIPELINE_TILE - 1 - t) as usize);
        sync_threads();
    }
    // SAFETY: the input has at least 2 * PIPELINE_THREADS elements.
    unsafe {
        cp_async_8(pairs, 2 * t as usize, input.add(2 * t as usize));
        cp_async_4(singles, t as usize, input.add(t as usize));
    }
    cp_async_wait_all();
    sync_threads();
    let other = (PIPELINE_THREADS - 1 - t) as usize;
    let extra = pairs.load(2 * other) + pairs.load(2 * other + 1) + singles.load(other);
    // SAFETY: out has room for 2 * PIPELINE_THREADS values.
    unsafe {
        out.store(t as usize, sum);
        out.store((PIPELINE_THREADS + t) as usize, extra);
    }
}

/// One warp exercises every global access form: thread t reads `input[4t..4t + 4]` with
/// `load_v4` and again with `load_nc_v4`, `input[2t..2t + 2]` with `load_v2`, `input[t]` with
/// `load_nc`, and writes `out[4t..4t + 4]` (the two v4 reads summed) with `store_v4`,
/// `out[128 + 2t..]` (the v2 read) with `store_v2`, `out[192 + t]` (the nc read) with `store`;
/// `total[0]` (zeroed) receives the sum of `input[..32]` through `red_add` and `total[1]` the
/// same through `atomic_add`.
///
/// `input` has 128 elements, 16-byte aligned; `out` room for 224, `total` for 2; launch one
/// block of [`GLOBAL_OPS_THREADS`] threads.
pub unsafe fn selftest_global_ops(input: Global<f32>, out: GlobalMut<f32>, total: GlobalMut<f32>) {
    let t = thread_idx_x() as usize;
    // SAFETY: every index below stays within the sizes documented above.
    unsafe {
        let a = input.load_v4(4 * t);
        let b = input.load_nc_v4(4 * t);
        out.store_v4(4 * t, [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]);
        out.store_v2(128 + 2 * t, input.load_v2(2 * t));
        let x = input.load_nc(t);
        out.store(192 + t, x);
        total.red_add(0, x);
        total.atomic_add(1, x);
    }
}

/// A "last block" reduction across the grid: block b's thread t writes `2 values[32 b + t]`
/// to `partial[32 b + t]`, then thread 0 counts the block in at `counter[0]` (zeroed) with
/// `atomic_add`; the block that reads `gridDim.x - 1` sums the partials in block order into
/// `out[t]` and sets the counter back to 0. `fences` bit 0 puts a `fence_acq_rel_gpu` before
/// the count (the release), bit 1 one after it (the acquire); both are needed, and the
/// emulator reports the partials' accesses as a race between blocks without either.
///
/// `values` and `partial` have `32 gridDim.x` elements, `out` 32; launch 32 threads a block.
pub unsafe fn selftest_last_block(
    values: Global<f32>, partial: GlobalMut<f32>, counter: GlobalMut<u32>, out: GlobalMut<f32>, fences: u32,
) {
    let (t, b, blocks) = (thread_idx_x() as usize, block_idx_x() as usize, grid_dim_x() as usize);
    let arrived = static_shared!(SELFTEST_ARRIVED, u32, 1);
    // SAFETY: every index below stays within the sizes documented above.
    unsafe { partial.store(32 * b + t, 2.0 * values.load(32 * b + t)) };
    sync_threads();
    if t == 0 {
        if fences & 1 != 0 {
            fence_acq_rel_gpu();
        }
        // SAFETY: the counter is only updated atomically until the last block resets it.
        arrived.store(0, unsafe { counter.atomic_add(0, 1) });
        if fences & 2 != 0 {
            fence_acq_rel_gpu();
        }
    }
    sync_threads();
    if arrived.load(0) as usize != blocks - 1 {
        return;
    }
    let mut sum = 0.0;
    for other in 0..blocks {
        // SAFETY: as above.
        sum += unsafe { partial.load(32 * other + t) };
    }
    // SAFETY: as above; every other block has counted in.
    unsafe {
        out.store(t, sum);
        if t == 0 {
            counter.store(0, 0);
        }
    }
}
}

/// The body of [`selftest_mma`] (`F16`: f16 inputs, else bf16).
///
/// # Safety
///
/// The buffers of [`selftest_mma`]; one block of 32 threads.
#[inline(always)]
unsafe fn mma_four_ways<const F16: bool>(a: Global<u16>, b: Global<u16>, c: Global<f32>, d: GlobalMut<f32>) {
    let lane = thread_idx_x() as usize;
    let sa = static_shared!(SELFTEST_A, u16, 256);
    let sat = static_shared!(SELFTEST_AT, u16, 256);
    let sb = static_shared!(SELFTEST_B, u16, 128);
    let sbt = static_shared!(SELFTEST_BT, u16, 128);
    for i in (lane..256).step_by(32) {
        let (row, col) = (i / 16, i % 16);
        // SAFETY: i < 256.
        let v = unsafe { a.load(i) };
        sa.store(i, v);
        sat.store(col * 16 + row, v);
    }
    for i in (lane..128).step_by(32) {
        let (k, n) = (i / 8, i % 8);
        // SAFETY: i < 128.
        let v = unsafe { b.load(i) };
        sb.store(i, v);
        sbt.store(n * 16 + k, v);
    }
    sync_threads();

    let (group, pair) = (lane / 4, lane % 4);
    let (matrix, row) = (lane / 8, lane % 8);
    // SAFETY: indices stay within the 128 elements of `c`.
    let cf = unsafe {
        [
            c.load(group * 8 + 2 * pair),
            c.load(group * 8 + 2 * pair + 1),
            c.load((group + 8) * 8 + 2 * pair),
            c.load((group + 8) * 8 + 2 * pair + 1),
        ]
    };

    let a0 = ldmatrix_x4(sa, (row + 8 * (matrix % 2)) * 16 + 8 * (matrix / 2));
    let b0 = ldmatrix_x2_trans(sb, (row + 8 * (matrix % 2)) * 8);

    let a1 = ldmatrix_x4_trans(sat, (row + 8 * (matrix / 2)) * 16 + 8 * (matrix % 2));
    let b1 = ldmatrix_x2(sbt, row * 16 + 8 * (matrix % 2));

    let a2 = [
        ldmatrix_x1(sa, row * 16),
        ldmatrix_x1(sa, (row + 8) * 16),
        ldmatrix_x1(sa, row * 16 + 8),
        ldmatrix_x1(sa, (row + 8) * 16 + 8),
    ];
    let b2 = [ldmatrix_x1_trans(sb, row * 8), ldmatrix_x1_trans(sb, (row + 8) * 8)];

    // SAFETY: r < 16 and k + 1 < 16 below.
    let at = |r: usize, k: usize| unsafe { pack_bf16x2(a.load(r * 16 + k), a.load(r * 16 + k + 1)) };
    // SAFETY: k + 1 < 16 and n < 8 below.
    let bt = |k: usize, n: usize| unsafe { pack_bf16x2(b.load(k * 8 + n), b.load((k + 1) * 8 + n)) };
    let a3 =
        [at(group, 2 * pair), at(group + 8, 2 * pair), at(group, 2 * pair + 8), at(group + 8, 2 * pair + 8)];
    let b3 = [bt(2 * pair, group), bt(2 * pair + 8, group)];

    let mma = |a, b| if F16 { mma_m16n8k16_f16(a, b, cf) } else { mma_m16n8k16_bf16(a, b, cf) };
    let results = [mma(a0, b0), mma(a1, b1), mma(a2, b2), mma(a3, b3)];
    for (path, r) in results.iter().enumerate() {
        let base = path * 128;
        // SAFETY: d has room for 4 x 128 values.
        unsafe {
            d.store(base + group * 8 + 2 * pair, r[0]);
            d.store(base + group * 8 + 2 * pair + 1, r[1]);
            d.store(base + (group + 8) * 8 + 2 * pair, r[2]);
            d.store(base + (group + 8) * 8 + 2 * pair + 1, r[3]);
        }
    }
}
