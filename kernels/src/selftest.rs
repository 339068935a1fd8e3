//! Kernels that exercise every `simt` operation. Built for nvptx64 they show each operation
//! lowers to PTX that ptxas accepts; on the host, tests run the same bodies on the emulator
//! (and on a GPU the results must match the emulator's).

use crate::simt::*;
use crate::static_shared;

/// Values each thread of [`warp_ops`] writes.
pub const WARP_OPS_OUTPUTS: usize = 26;
/// Threads per block of [`warp_ops`].
pub const WARP_OPS_THREADS: u32 = 64;
/// Dynamic shared memory [`warp_ops`] needs.
pub const WARP_OPS_DYNAMIC_SMEM: u32 = WARP_OPS_THREADS * 4;

/// One block of [`WARP_OPS_THREADS`] threads; thread t reads `input[t]` and writes
/// `out[t * WARP_OPS_OUTPUTS..]`: shuffles, votes, fast math, global and shared atomics,
/// static and dynamic shared memory. `total` (one f32, zeroed) receives the sum of the inputs.
///
/// # Safety
///
/// `input` has `WARP_OPS_THREADS` values, `out` room for `WARP_OPS_THREADS *
/// WARP_OPS_OUTPUTS`, `total` one; launch with one block and `WARP_OPS_DYNAMIC_SMEM` bytes of
/// dynamic shared memory.
pub unsafe fn warp_ops(input: *const f32, out: *mut f32, total: *mut f32) {
    let t = thread_idx_x() as usize;
    let lane = lane_id();
    // SAFETY: one input per thread.
    let x = unsafe { *input.add(t) };
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
    unsafe { atomic_add_f32(total, x) };
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
        unsafe { *out.add(t * WARP_OPS_OUTPUTS + k) = *v };
    }
}

/// One warp computes D = A B + C (A 16x16, B 16x8 bf16; C, D 16x8 f32, all row-major) four
/// ways, writing 4 x 128 values to `d`:
/// 0. A by `ldmatrix_x4`, B by `ldmatrix_x2_trans` from B as stored (k by n);
/// 1. A by `ldmatrix_x4_trans` from A transposed, B by `ldmatrix_x2` from B transposed;
/// 2. A by four `ldmatrix_x1`, B by two `ldmatrix_x1_trans`;
/// 3. fragments gathered from global memory by the PTX ISA layout formulas.
///
/// # Safety
///
/// `a` has 256 elements, `b` 128, `c` 128 and `d` room for 512; launch one block of 32
/// threads.
pub unsafe fn mma_paths(a: *const u16, b: *const u16, c: *const f32, d: *mut f32) {
    let lane = thread_idx_x() as usize;
    let sa = static_shared!(SELFTEST_A, u16, 256);
    let sat = static_shared!(SELFTEST_AT, u16, 256);
    let sb = static_shared!(SELFTEST_B, u16, 128);
    let sbt = static_shared!(SELFTEST_BT, u16, 128);
    for i in (lane..256).step_by(32) {
        let (row, col) = (i / 16, i % 16);
        // SAFETY: i < 256.
        let v = unsafe { *a.add(i) };
        sa.store(i, v);
        sat.store(col * 16 + row, v);
    }
    for i in (lane..128).step_by(32) {
        let (k, n) = (i / 8, i % 8);
        // SAFETY: i < 128.
        let v = unsafe { *b.add(i) };
        sb.store(i, v);
        sbt.store(n * 16 + k, v);
    }
    sync_threads();

    let (group, pair) = (lane / 4, lane % 4);
    let (matrix, row) = (lane / 8, lane % 8);
    // SAFETY: indices stay within the 128 elements of `c`.
    let cf = unsafe {
        [
            *c.add(group * 8 + 2 * pair),
            *c.add(group * 8 + 2 * pair + 1),
            *c.add((group + 8) * 8 + 2 * pair),
            *c.add((group + 8) * 8 + 2 * pair + 1),
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
    let at = |r: usize, k: usize| unsafe { pack_bf16x2(*a.add(r * 16 + k), *a.add(r * 16 + k + 1)) };
    // SAFETY: k + 1 < 16 and n < 8 below.
    let bt = |k: usize, n: usize| unsafe { pack_bf16x2(*b.add(k * 8 + n), *b.add((k + 1) * 8 + n)) };
    let a3 =
        [at(group, 2 * pair), at(group + 8, 2 * pair), at(group, 2 * pair + 8), at(group + 8, 2 * pair + 8)];
    let b3 = [bt(2 * pair, group), bt(2 * pair + 8, group)];

    let results = [
        mma_m16n8k16_bf16(a0, b0, cf),
        mma_m16n8k16_bf16(a1, b1, cf),
        mma_m16n8k16_bf16(a2, b2, cf),
        mma_m16n8k16_bf16(a3, b3, cf),
    ];
    for (path, r) in results.iter().enumerate() {
        let base = path * 128;
        // SAFETY: d has room for 4 x 128 values.
        unsafe {
            *d.add(base + group * 8 + 2 * pair) = r[0];
            *d.add(base + group * 8 + 2 * pair + 1) = r[1];
            *d.add(base + (group + 8) * 8 + 2 * pair) = r[2];
            *d.add(base + (group + 8) * 8 + 2 * pair + 1) = r[3];
        }
    }
}

#[cfg(target_arch = "nvptx64")]
mod entries {
    /// # Safety
    ///
    /// As [`super::warp_ops`].
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn trident_selftest_warp_ops(
        input: *const f32,
        out: *mut f32,
        total: *mut f32,
    ) {
        // SAFETY: forwarded from the launcher.
        unsafe { super::warp_ops(input, out, total) }
    }

    /// # Safety
    ///
    /// As [`super::mma_paths`].
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn trident_selftest_mma(
        a: *const u16,
        b: *const u16,
        c: *const f32,
        d: *mut f32,
    ) {
        // SAFETY: forwarded from the launcher.
        unsafe { super::mma_paths(a, b, c, d) }
    }
}
