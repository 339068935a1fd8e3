//! Global memory through `Global`/`GlobalMut`: planted out-of-range, racing and uninitialized
//! accesses fail the launch naming kernel, block, thread, line, address and allocation; the
//! work counters match hand counts.

use trident_kernels::simt::*;
use trident_kernels::static_shared;
use trident_simt::{register, BlockSample, EmuError, Fault, LaunchConfig};

use crate::{lend, ptr, run};

fn input(args: &[u64], i: usize) -> Global<f32> {
    Global::from_ptr(args[i] as *const f32)
}

fn output(args: &[u64], i: usize) -> GlobalMut<f32> {
    GlobalMut::from_ptr(args[i] as *mut f32)
}

fn message(error: &EmuError) -> String {
    error.to_string()
}

/// Asserts the report names this file at `line`, and each of `parts`.
fn assert_names(error: &EmuError, line: u32, parts: &[&str]) {
    let text = message(error);
    assert!(text.contains(&format!("{}:{line}:", file!())), "no {}:{line} in: {text}", file!());
    for part in parts {
        assert!(text.contains(part), "no `{part}` in: {text}");
    }
}

const OOB_LINE: u32 = line!() + 8;
/// Thread t reads `x[t]` and `x[t + 1]` and keeps only the first: the last thread's second
/// read is past the end of the buffer but reaches no output.
fn read_one_past_the_end(args: &[u64]) {
    let (x, out) = (input(args, 0), output(args, 1));
    let t = thread_idx_x() as usize;
    // SAFETY: under test: the emulator must refuse the read past the end.
    unsafe {
        let (v, _next) = (x.load(t), x.load(t + 1));
        out.store(t, v);
    }
}

#[test]
fn a_read_past_the_end_is_refused_even_when_unused() {
    let x = vec![1f32; 32];
    let mut out = vec![0f32; 32];
    let _lent = (lend(&x), lend(&out));
    let error = run(read_one_past_the_end, LaunchConfig::linear(1, 32), &[x.as_ptr() as u64, ptr(&mut out)])
        .unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalOutOfRange { .. })), "{error}");
    let address = format!("{:#x}", x.as_ptr() as u64 + 128);
    assert_names(
        &error,
        OOB_LINE,
        &["kernel `test_kernel`", "block (0, 0, 0), thread (31, 0, 0)", &address, "`test buffer` (128 bytes"],
    );
}

#[test]
fn memory_no_allocation_holds_is_refused() {
    let x = [1f32; 32];
    let mut out = vec![0f32; 32];
    let _lent = lend(&out);
    let error = run(read_one_past_the_end, LaunchConfig::linear(1, 32), &[x.as_ptr() as u64, ptr(&mut out)])
        .unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalOutOfRange { .. })), "{error}");
    assert_names(&error, OOB_LINE, &["thread (0, 0, 0)", "outside every live allocation"]);
}

const SHIFT_READ_LINE: u32 = line!() + 9;
const SHIFT_WRITE_LINE: u32 = line!() + 12;
/// `x[t] = x[t + 1]` for t < 63 in place: thread t + 1 may overwrite its element before
/// thread t read it. With `barrier`, every read happens before any write.
fn shift_left(args: &[u64], barrier: bool) {
    let x = output(args, 0);
    let t = thread_idx_x() as usize;
    // SAFETY: t + 1 < 64 elements.
    unsafe {
        let v = if t < 63 { x.load(t + 1) } else { 0.0 };
        if barrier {
            sync_threads();
        }
        x.store(t, v);
    }
}

#[test]
fn a_read_and_an_overwrite_by_two_threads_race_unless_a_barrier_orders_them() {
    let mut x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let _lent = lend(&x);
    let args = [ptr(&mut x)];
    let error = run(|a| shift_left(a, false), LaunchConfig::linear(1, 64), &args).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalRace { .. })), "{error}");
    // Thread 0 reads x[1] (line SHIFT_READ_LINE), thread 1 writes it later.
    assert_names(
        &error,
        SHIFT_WRITE_LINE,
        &["thread (1, 0, 0)", "read by thread (0, 0, 0)", "no sync_threads()"],
    );
    assert!(message(&error).contains(&format!("{}:{SHIFT_READ_LINE}:", file!())), "{error}");
    assert!(message(&error).contains("byte 4 of allocation"), "{error}");

    let mut x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let _lent = lend(&x);
    run(|a| shift_left(a, true), LaunchConfig::linear(1, 64), &[ptr(&mut x)]).unwrap();
    let want: Vec<f32> = (1..64).map(|i| i as f32).chain([0.0]).collect();
    assert_eq!(x, want);
}

const ACCUMULATE_LINE: u32 = line!() + 9;
/// Every thread of every block adds its value into `sum[0]`: non-atomically (a lost-update
/// race), or with `atomic_add`.
fn accumulate(args: &[u64], atomic: bool) {
    let sum = output(args, 0);
    let v = (thread_idx_x() + 1) as f32;
    // SAFETY: `sum` has one element.
    unsafe {
        if !atomic {
            sum.store(0, sum.load(0) + v);
        } else {
            sum.atomic_add(0, v);
        }
    }
}

#[test]
fn a_non_atomic_accumulation_races_and_an_atomic_one_does_not() {
    let mut sum = [0f32];
    let _lent = lend(&sum);
    // One block: two threads of one block, unordered.
    let error = run(|a| accumulate(a, false), LaunchConfig::linear(1, 32), &[ptr(&mut sum)]).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalRace { .. })), "{error}");
    assert_names(&error, ACCUMULATE_LINE, &["write by thread", "no sync_threads()"]);

    sum[0] = 0.0;
    run(|a| accumulate(a, true), LaunchConfig::linear(3, 32), &[ptr(&mut sum)]).unwrap();
    assert_eq!(sum[0], 3.0 * (32.0 * 33.0 / 2.0));
}

const BLOCK_WRITE_LINE: u32 = line!() + 7;
/// Thread 0 of every block writes `out[0]`: blocks are never ordered.
fn every_block_writes_one_word(args: &[u64]) {
    let out = output(args, 0);
    if thread_idx_x() == 0 {
        // SAFETY: `out` has one element.
        unsafe {
            out.store(0, block_idx_x() as f32);
        }
    }
}

#[test]
fn writes_of_one_word_by_two_blocks_race() {
    let mut out = [0f32];
    let _lent = lend(&out);
    let error = run(every_block_writes_one_word, LaunchConfig::linear(2, 32), &[ptr(&mut out)]).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalRace { .. })), "{error}");
    assert_names(
        &error,
        BLOCK_WRITE_LINE,
        &["thread (0, 0, 0)", "write by thread (0, 0, 0) of block", "different blocks"],
    );
}

const UNINIT_LINE: u32 = line!() + 13;
/// Thread t writes `x[t]` for even t, then (after a barrier, or without one when `racy`)
/// reads `x[t ^ 1]`: odd threads read what an even thread wrote, even threads read bytes
/// nobody wrote.
fn read_neighbour(args: &[u64]) {
    let x = output(args, 0);
    let t = thread_idx_x() as usize;
    // SAFETY: t ^ 1 < 32 elements.
    unsafe {
        if t % 2 == 0 {
            x.store(t, 1.0);
        }
        sync_threads();
        let v = x.load(t ^ 1);
        let _ = v;
    }
}

#[test]
fn reads_of_never_written_device_memory_are_refused() {
    let x = [f32::NAN; 32];
    let registration = register(x.as_ptr().cast(), 128, false, "uninit buffer");
    let error = run(read_neighbour, LaunchConfig::linear(1, 32), &[x.as_ptr() as u64]).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalUninitialized { .. })), "{error}");
    // Thread 0 reads x[1], which no thread wrote.
    assert_names(
        &error,
        UNINIT_LINE,
        &["thread (0, 0, 0)", "byte 4 of allocation", "`uninit buffer`", "never written"],
    );

    // Once the host uploads the odd elements, every read finds data.
    for i in (1..32).step_by(2) {
        registration.mark_initialized(4 * i, 4);
    }
    run(read_neighbour, LaunchConfig::linear(1, 32), &[x.as_ptr() as u64]).unwrap();
}

/// One 16-byte load at element 1 of the buffer (4-byte aligned, not 16).
fn misaligned_vector_load(args: &[u64]) {
    // SAFETY: elements 1..5 lie in the buffer.
    let _ = unsafe { input(args, 0).load_v4(1) };
}

#[test]
fn misaligned_vector_loads_are_refused() {
    let x = vec![[0f32; 4]; 4];
    let _lent = lend(&x);
    let error = run(misaligned_vector_load, LaunchConfig::linear(1, 1), &[x.as_ptr() as u64]).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::BadOperand { .. })), "{error}");
    assert!(message(&error).contains("not 16-byte aligned"), "{error}");
}

/// One warp: a coalesced 4-byte load, a coalesced 16-byte load, a broadcast load, a load with a
/// 128-byte stride, a coalesced store; shared stores at stride 1, 2 and 32 words, 16-byte
/// shared loads; 3 fmas per lane and one barrier.
fn countable(args: &[u64]) {
    let (x, out) = (input(args, 0), output(args, 1));
    let t = thread_idx_x() as usize;
    let s1 = static_shared!(COUNTED_1, f32, 32);
    let s2 = static_shared!(COUNTED_2, f32, 64);
    let s32 = static_shared!(COUNTED_32, f32, 32 * 32);
    let v = static_shared!(COUNTED_V, [f32; 4], 32);
    // SAFETY: x has 32 * 32 elements, out 32.
    unsafe {
        let a = x.load(t);
        let b = x.load_v4(4 * t);
        let c = x.load(7);
        let d = x.load(32 * t);
        s1.store(t, a);
        s2.store(2 * t, b[0]);
        s32.store(32 * t, c);
        v.store(t, b);
        sync_threads();
        let w = v.load(31 - t);
        let mut acc = fma(a, d, w[0]);
        acc = fma(acc, c, 1.0);
        acc = fma(acc, b[1], 2.0);
        out.store(t, acc);
    }
}

/// Floats on a 128-byte boundary, so sector counts do not depend on where the allocator put
/// them.
#[repr(C, align(128))]
struct Aligned<const N: usize>([f32; N]);

#[test]
fn counters_match_hand_counts_for_one_warp() {
    let x = Box::new(Aligned(std::array::from_fn::<f32, 1024, _>(|i| i as f32)));
    let mut out = Box::new(Aligned([0f32; 32]));
    let _lent = (lend(&x.0), lend(&out.0));
    let stats = run(countable, LaunchConfig::linear(1, 32), &[x.0.as_ptr() as u64, ptr(&mut out.0)]).unwrap();
    assert_eq!((stats.blocks_total, stats.blocks_run, stats.warps_per_block), (1, 1, 1));
    // Global: 4 load requests: 4 + 16 + 1 + 32 sectors; one store of 4 sectors.
    assert_eq!(stats.global_loads.requests, 4);
    assert_eq!(stats.global_loads.sectors, 4 + 16 + 1 + 32);
    assert_eq!(stats.global_loads.bytes_requested, 32 * (4 + 16 + 4 + 4));
    assert_eq!(stats.global_stores.requests, 1);
    assert_eq!(stats.global_stores.sectors, 4);
    assert_eq!(stats.global_stores.bytes_moved(), 128);
    // Shared stores: stride 1 (1 wavefront), stride 2 (2-way conflict: 2), stride 32 (32-way:
    // 32), 16-byte consecutive (four quarter-warps: 4). Loads: 16-byte consecutive, reversed: 4.
    assert_eq!(stats.shared_stores.requests, 4);
    assert_eq!(stats.shared_stores.wavefronts, 1 + 2 + 32 + 4);
    assert_eq!(stats.shared_loads.requests, 1);
    assert_eq!(stats.shared_loads.wavefronts, 4);
    let w = stats.warp_instructions;
    assert_eq!(
        (w.fma, w.barrier, w.global_load, w.global_store, w.shared_store, w.shared_load),
        (3, 1, 4, 1, 4, 1)
    );
    assert_eq!(stats.thread_instructions.fma, 3 * 32);
    assert_eq!(trident_simt::last_launch_stats(), Some(stats));
}

/// A 1-D grid where every block but the last loads 64 elements with 64 threads; the last block
/// has work for only `n % 64` of them.
fn ragged(args: &[u64]) {
    let (x, out, n) = (input(args, 0), output(args, 1), args[2] as usize);
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < n {
        // SAFETY: i < n elements in both.
        unsafe { out.store(i, fma(x.load(i), 2.0, 1.0)) };
    }
}

#[test]
fn a_sampled_grid_scales_to_the_full_counts() {
    let n = 64 * 40 + 17;
    let x = vec![1f32; n];
    let mut out = vec![0f32; n];
    let _lent = (lend(&x), lend(&out));
    let cfg = LaunchConfig::linear(n.div_ceil(64) as u32, 64);
    let args = [x.as_ptr() as u64, ptr(&mut out), n as u64];
    // SAFETY: `ragged` reads `n` floats of `x` and writes `n` of `out`, both lent above.
    let full =
        unsafe { trident_simt::launch_with(&kernel(ragged), &cfg, &args, &[], BlockSample::All) }.unwrap();
    // SAFETY: as above.
    let sampled =
        unsafe { trident_simt::launch_with(&kernel(ragged), &cfg, &args, &[], BlockSample::Edges) }.unwrap();
    assert_eq!((full.blocks_run, sampled.blocks_run, sampled.blocks_total), (41, 5, 41));
    assert!(sampled.sampled() && !full.sampled());
    assert_eq!(full.thread_instructions.fma, n as u64);
    assert_eq!(sampled.thread_instructions, full.thread_instructions);
    assert_eq!(sampled.global_loads, full.global_loads);
    assert_eq!(sampled.global_stores, full.global_stores);
}

fn kernel(entry: fn(&[u64])) -> trident_simt::HostKernel {
    trident_simt::HostKernel { name: "test_kernel", params: &[], param_names: &[], entry }
}

/// Rows of 32 floats on 128-byte boundaries, so a matrix of them has aligned rows.
#[repr(C, align(128))]
#[derive(Clone, Copy)]
struct Row([f32; 32]);

fn matrix(rows: usize, cols: usize, value: impl Fn(usize) -> f32) -> Vec<Row> {
    assert_eq!(cols % 32, 0);
    (0..rows * cols / 32).map(|r| Row(std::array::from_fn(|i| value(32 * r + i)))).collect()
}

fn words(rows: &[Row]) -> &[f32] {
    // SAFETY: `Row` is 32 f32s with no padding (128 bytes, align 128).
    unsafe { std::slice::from_raw_parts(rows.as_ptr().cast::<f32>(), rows.len() * 32) }
}

/// Launches `gemm_nn_f32` for `C = A B` (`m x k` by `k x n`, dense) with `sample`.
fn gemm_stats(m: usize, n: usize, k: usize, sample: BlockSample) -> trident_simt::LaunchStats {
    use trident_simt::KernelArg;
    let a = matrix(m, k, |i| (i % 7) as f32);
    let b = matrix(k, n, |i| (i % 5) as f32);
    let mut c = matrix(m, n, |_| f32::NAN);
    let _lent = (lend(words(&a)), lend(words(&b)), lend(words(&c)));
    let gemm = trident_kernels::gemm::HOST_KERNELS.iter().find(|f| f.name == "gemm_nn_f32").unwrap();
    let cfg = LaunchConfig {
        grid: [(n / 64) as u32, (m / 64) as u32, 1],
        block: [16, 16, 1],
        dynamic_smem_bytes: 0,
    };
    let dims = [m, n, k, k, n, n].map(|d| d as u64);
    let mut args = vec![c.as_mut_ptr() as u64, a.as_ptr() as u64, b.as_ptr() as u64];
    args.extend(dims);
    args.extend([0, 0, 0, 1f32.to_word(), 0f32.to_word()]);
    // SAFETY: `a`, `b`, `c` are dense `m x k`, `k x n`, `m x n` with the leading dimensions
    // passed, all lent above.
    unsafe { trident_simt::launch_with(gemm, &cfg, &args, &[], sample) }.unwrap()
}

#[test]
fn gemm_counters_match_hand_counts() {
    let s = gemm_stats(128, 128, 128, BlockSample::All);
    // One FMA per multiply-add of the product.
    assert_eq!(s.thread_instructions.fma, 128 * 128 * 128);
    assert_eq!(s.warp_instructions.fma, 128 * 128 * 128 / 32);
    // 4 blocks of 8 warps, 8 k-tiles: 4 A and 4 B loads per thread and tile, two barriers per
    // tile. A warp's A load covers 2 rows x 16 floats (2 x 2 sectors), its B load 32
    // consecutive floats (4 sectors).
    assert_eq!(s.global_loads.requests, 4 * 8 * 8 * 8);
    assert_eq!(s.global_loads.sectors, 4 * 8 * 8 * 8 * 4);
    assert_eq!(s.global_loads.bytes_requested, 4 * 8 * 8 * 8 * 128);
    assert_eq!(s.warp_instructions.barrier, 4 * 8 * 16);
    // 16 stores per thread; a warp's store covers 2 rows x 16 floats.
    assert_eq!(s.global_stores.requests, 4 * 8 * 16);
    assert_eq!(s.global_stores.sectors, 4 * 8 * 16 * 4);
    assert_eq!(s.global_stores.bytes_moved(), 128 * 128 * 4);
    // Inner loop: per k, 4 A loads broadcast within half-warps (one word per half: 1
    // wavefront) and 4 B loads of 16 consecutive words (1 wavefront).
    assert_eq!(s.shared_loads.requests, 4 * 8 * 8 * 16 * 8);
    assert_eq!(s.shared_loads.wavefronts, s.shared_loads.requests);
}

#[test]
fn a_sampled_gemm_counts_as_the_full_grid() {
    let full = gemm_stats(384, 384, 64, BlockSample::All);
    let sampled = gemm_stats(384, 384, 64, BlockSample::Edges);
    assert_eq!((full.blocks_run, sampled.blocks_run), (36, 25));
    assert_eq!(sampled.thread_instructions, full.thread_instructions);
    assert_eq!(sampled.warp_instructions, full.warp_instructions);
    assert_eq!((sampled.global_loads, sampled.global_stores), (full.global_loads, full.global_stores));
    assert_eq!((sampled.shared_loads, sampled.shared_stores), (full.shared_loads, full.shared_stores));
}

/// Lane 0 writes `x[0]`; then, after a full-warp `sync_warp` when `synced`, lane 1 reads it.
fn hand_over_in_a_warp(args: &[u64], synced: bool) {
    let x = output(args, 0);
    let lane = lane_id();
    // SAFETY: `x` has one element.
    unsafe {
        if lane == 0 {
            x.store(0, 5.0);
        }
        if synced {
            sync_warp(FULL_MASK);
        }
        if lane == 1 {
            let _ = x.load(0);
        }
    }
}

#[test]
fn a_full_warp_sync_orders_global_accesses_of_its_lanes() {
    let x = [0f32];
    let _lent = lend(&x);
    let args = [x.as_ptr() as u64];
    run(|a| hand_over_in_a_warp(a, true), LaunchConfig::linear(1, 32), &args).unwrap();
    let error = run(|a| hand_over_in_a_warp(a, false), LaunchConfig::linear(1, 32), &args).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalRace { .. })), "{error}");
    assert!(message(&error).contains("thread (1, 0, 0)"), "{error}");
}
