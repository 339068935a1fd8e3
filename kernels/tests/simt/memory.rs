//! Indices, shared memory (static and dynamic) and atomics.

use trident_kernels::simt::*;
use trident_kernels::static_shared;
use trident_simt::LaunchConfig;

use crate::rng::{seed, Rng};
use crate::{lend, ptr, run, sum_tolerance};

fn write_indices(args: &[u64]) {
    let out = args[0] as *mut [u32; 4];
    let (bx, by) = (block_dim_x(), block_dim_y());
    let threads = bx * by * block_dim_z();
    let block = block_idx_x() + grid_dim_x() * (block_idx_y() + grid_dim_y() * block_idx_z());
    let t = thread_idx_x() + bx * (thread_idx_y() + by * thread_idx_z());
    let packed = |x: u32, y: u32, z: u32| x | (y << 10) | (z << 20);
    let value = [
        packed(thread_idx_x(), thread_idx_y(), thread_idx_z()),
        packed(block_idx_x(), block_idx_y(), block_idx_z()),
        packed(block_dim_x(), block_dim_y(), block_dim_z())
            ^ packed(grid_dim_x(), grid_dim_y(), grid_dim_z()),
        lane_id() | (warp_size() << 8),
    ];
    // SAFETY: one slot per thread of the grid.
    unsafe { *out.add((block * threads + t) as usize) = value };
}

#[test]
fn indices_cover_a_3d_grid_of_3d_blocks() {
    let cfg = LaunchConfig { grid: [3, 2, 2], block: [5, 4, 3], dynamic_smem_bytes: 0 };
    let mut out = vec![[u32::MAX; 4]; 12 * 60];
    run(write_indices, cfg, &[ptr(&mut out)]).unwrap();
    let packed = |x: u32, y: u32, z: u32| x | (y << 10) | (z << 20);
    let mut slot = 0;
    for (bz, by, bx) in (0..2).flat_map(|z| (0..2).flat_map(move |y| (0..3).map(move |x| (z, y, x)))) {
        for (tz, ty, tx) in (0..3).flat_map(|z| (0..4).flat_map(move |y| (0..5).map(move |x| (z, y, x)))) {
            let linear = tx + 5 * ty + 20 * tz;
            let want = [
                packed(tx, ty, tz),
                packed(bx, by, bz),
                packed(5, 4, 3) ^ packed(3, 2, 2),
                (linear % 32) | (32 << 8),
            ];
            assert_eq!(out[slot], want, "block ({bx},{by},{bz}) thread ({tx},{ty},{tz})");
            slot += 1;
        }
    }
}

/// Per-block sum of 256 inputs by a shared-memory tree with a barrier per level.
fn tree_sum(args: &[u64]) {
    let (input, output) = (args[0] as *const f32, args[1] as *mut f32);
    let partial = static_shared!(PARTIAL, f32, 256);
    let t = thread_idx_x() as usize;
    let block = block_idx_x() as usize;
    // SAFETY: the launch has 256 inputs per block.
    partial.store(t, unsafe { *input.add(block * 256 + t) });
    sync_threads();
    let mut stride = 128;
    while stride > 0 {
        if t < stride {
            partial.store(t, partial.load(t) + partial.load(t + stride));
        }
        sync_threads();
        stride /= 2;
    }
    if t == 0 {
        // SAFETY: one output per block.
        unsafe { *output.add(block) = partial.load(0) };
    }
}

#[test]
fn shared_memory_tree_reduction() {
    let mut rng = Rng::new(seed("shared_memory_tree_reduction"));
    let blocks = 6;
    let input = rng.vec(blocks * 256);
    let mut output = vec![f32::NAN; blocks];
    run(tree_sum, LaunchConfig::linear(blocks as u32, 256), &[input.as_ptr() as u64, ptr(&mut output)])
        .unwrap();
    for (b, got) in output.iter().enumerate() {
        let terms = &input[b * 256..(b + 1) * 256];
        let want: f64 = terms.iter().map(|&x| f64::from(x)).sum();
        assert!((f64::from(*got) - want).abs() <= sum_tolerance(terms), "block {b}: {got} vs {want}");
    }
}

/// Histogram of inputs into 16 bins of dynamic shared memory with shared atomics, then added
/// into the global histogram with global atomics.
fn histogram(args: &[u64]) {
    let (input, weights, bins, n) =
        (args[0] as *const u32, args[1] as *const f32, args[2] as *mut f32, args[3] as usize);
    // SAFETY: the launch provides 16 * 4 bytes of dynamic shared memory.
    let local = unsafe { dynamic_shared::<f32>(0, 16) };
    let t = thread_idx_x() as usize;
    if t < 16 {
        local.store(t, 0.0);
    }
    sync_threads();
    let mut i = block_idx_x() as usize * block_dim_x() as usize + t;
    while i < n {
        // SAFETY: i < n.
        let (bin, w) = unsafe { (*input.add(i) as usize % 16, *weights.add(i)) };
        local.atomic_add(bin, w);
        i += (grid_dim_x() * block_dim_x()) as usize;
    }
    sync_threads();
    if t < 16 {
        // SAFETY: bins has 16 entries, updated only atomically.
        unsafe { GlobalMut::from_ptr(bins).atomic_add(t, local.load(t)) };
    }
}

#[test]
fn shared_and_global_f32_atomics() {
    let mut rng = Rng::new(seed("shared_and_global_f32_atomics"));
    let n = 5000;
    let input: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let weights = rng.vec(n);
    let mut bins = vec![0f32; 16];
    let _lent = lend(&bins);
    let cfg = LaunchConfig { grid: [7, 1, 1], block: [96, 1, 1], dynamic_smem_bytes: 64 };
    run(histogram, cfg, &[input.as_ptr() as u64, weights.as_ptr() as u64, ptr(&mut bins), n as u64]).unwrap();
    let mut want = [0f64; 16];
    for (x, w) in input.iter().zip(&weights) {
        want[*x as usize % 16] += f64::from(*w);
    }
    for (bin, (got, want)) in bins.iter().zip(want).enumerate() {
        assert!((f64::from(*got) - want).abs() < 1e-3, "bin {bin}: {got} vs {want}");
    }
}

/// Two static arrays and a dynamic window, each written by one thread and read by another
/// after a barrier.
fn shared_kinds(args: &[u64]) {
    let out = args[0] as *mut u32;
    let a = static_shared!(A, u32, 64);
    let b = static_shared!(B, u16, 64);
    // SAFETY: the launch has 64 * 4 bytes of dynamic shared memory after 16 bytes.
    let d = unsafe { dynamic_shared::<u32>(16, 64) };
    let t = thread_idx_x() as usize;
    a.store(t, t as u32 * 3);
    b.store(t, t as u16 + 1000);
    d.store(t, t as u32 * 7);
    sync_threads();
    let other = 63 - t;
    let v = a.load(other) + u32::from(b.load(other)) + d.load(other);
    // SAFETY: one output per thread.
    unsafe { *out.add(t) = v };
}

#[test]
fn static_and_dynamic_shared_arrays_are_separate() {
    let cfg = LaunchConfig { grid: [2, 1, 1], block: [64, 1, 1], dynamic_smem_bytes: 16 + 256 };
    let mut out = vec![0u32; 64];
    run(shared_kinds, cfg, &[ptr(&mut out)]).unwrap();
    for (t, got) in out.iter().enumerate() {
        let o = 63 - t as u32;
        assert_eq!(*got, o * 3 + o + 1000 + o * 7, "thread {t}");
    }
}

#[test]
fn bf16_round_trip_rounds_to_nearest_even() {
    assert_eq!(f32_to_bf16(1.0), 0x3F80);
    // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8001)), 0x3F81);
    assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
    assert_eq!(f32_to_bf16(f32::MAX), 0x7F80, "overflow rounds to infinity");
    let mut rng = Rng::new(seed("bf16_round_trip"));
    for _ in 0..1000 {
        let x = rng.f32() * 100.0;
        let r = bf16_to_f32(f32_to_bf16(x));
        assert!(trident_testkit::rel_err(&[r], &[f64::from(x)]) <= 1.0 / 256.0, "{x} -> {r}");
    }
    assert_eq!(pack_bf16x2(0x1234, 0xABCD), 0xABCD_1234);
}

/// Each warp stages values in shared memory and reads its neighbour lane's after `sync_warp`.
fn warp_staging(args: &[u64]) {
    let out = args[0] as *mut u32;
    let stage = static_shared!(STAGE, u32, 96);
    let t = thread_idx_x() as usize;
    let warp_base = t / 32 * 32;
    for round in 0..3u32 {
        stage.store(t, t as u32 * 10 + round);
        sync_warp(FULL_MASK);
        let v = stage.load(warp_base + (t + 1) % 32);
        sync_warp(FULL_MASK);
        // SAFETY: three outputs per thread.
        unsafe { *out.add(t * 3 + round as usize) = v };
    }
}

#[test]
fn sync_warp_orders_shared_memory_within_a_warp() {
    let mut out = vec![0u32; 96 * 3];
    run(warp_staging, LaunchConfig::linear(2, 96), &[ptr(&mut out)]).unwrap();
    for t in 0..96 {
        for round in 0..3 {
            let neighbour = t / 32 * 32 + (t + 1) % 32;
            assert_eq!(out[t * 3 + round], neighbour as u32 * 10 + round as u32);
        }
    }
}

/// Writes bf16 pairs as `u32` words into one stage of a two-stage buffer, reads them back as
/// `u16` through `sub` and `cast`.
fn views(args: &[u64]) {
    let out = args[0] as *mut u16;
    let stages = static_shared!(STAGES, u32, 64);
    let t = thread_idx_x() as usize;
    let stage = stages.sub(32, 32);
    stage.store(t, pack_bf16x2(2 * t as u16, 2 * t as u16 + 1));
    sync_threads();
    let halves = stage.cast::<u16>();
    assert_eq!(halves.len(), 64);
    // SAFETY: two outputs per thread.
    unsafe {
        *out.add(2 * t) = halves.load(63 - 2 * t);
        *out.add(2 * t + 1) = halves.load(62 - 2 * t);
    }
}

#[test]
fn sub_arrays_and_casts_share_bytes() {
    let mut out = vec![0u16; 64];
    run(views, LaunchConfig::linear(1, 32), &[ptr(&mut out)]).unwrap();
    // Halves read back in element order: element j holds j, and thread t reads 63 - 2t, 62 - 2t.
    for (i, v) in out.iter().enumerate() {
        assert_eq!(usize::from(*v), 63 - i, "element {i}");
    }
}

/// A full 1024-thread block (32 warps, 3D) exchanging values through shared memory.
fn largest_block(args: &[u64]) {
    let out = args[0] as *mut u32;
    let s = static_shared!(EXCHANGE, u32, 1024);
    let t = (thread_idx_x() + block_dim_x() * (thread_idx_y() + block_dim_y() * thread_idx_z())) as usize;
    s.store(t, t as u32 * 3 + block_idx_x());
    sync_threads();
    let v = s.load(1023 - t);
    // SAFETY: one output per thread of each block.
    unsafe { *out.add(block_idx_x() as usize * 1024 + t) = v };
}

#[test]
fn largest_block_runs() {
    let cfg = LaunchConfig { grid: [3, 1, 1], block: [16, 16, 4], dynamic_smem_bytes: 0 };
    let mut out = vec![0u32; 3 * 1024];
    run(largest_block, cfg, &[ptr(&mut out)]).unwrap();
    for (i, v) in out.iter().enumerate() {
        let (block, t) = (i / 1024, i % 1024);
        assert_eq!(*v as usize, (1023 - t) * 3 + block, "block {block} thread {t}");
    }
}
