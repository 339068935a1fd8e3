//! Deliberately broken kernels: each must fail with the right fault, naming kernel, block
//! and thread.

use trident_kernels::simt::*;
use trident_kernels::static_shared;
use trident_simt::{AccessKind, EmuError, Fault, LaunchConfig};

use crate::{lend, run};

fn expect_fault(entry: fn(&[u64]), cfg: LaunchConfig) -> (EmuError, Fault) {
    let error = run(entry, cfg, &[]).expect_err("the broken kernel must fail");
    let message = error.to_string();
    assert!(
        message.contains("kernel `test_kernel`")
            && message.contains("block (")
            && message.contains("thread ("),
        "message must name kernel, block and thread: {message}"
    );
    let fault = error.fault().expect("a fault").clone();
    (error, fault)
}

/// Each thread writes its slot, then reads its neighbour's without a barrier.
fn missing_barrier(_: &[u64]) {
    let s = static_shared!(S, f32, 64);
    let t = thread_idx_x() as usize;
    s.store(t, t as f32);
    let _ = s.load((t + 1) % 64);
}

#[test]
fn missing_barrier_is_a_race() {
    let (error, fault) = expect_fault(missing_barrier, LaunchConfig::linear(2, 64));
    let Fault::SharedRace { earlier, later, byte, region } = fault else { panic!("{error}") };
    // Thread 0 runs first: it writes slot 0 and reads slot 1 before thread 1 writes it.
    assert_eq!((earlier.kind, later.kind), (AccessKind::Read, AccessKind::Write), "{error}");
    assert_eq!((earlier.thread.0, later.thread.0), ([0, 0, 0], [1, 0, 0]));
    assert!(region.contains("`") && region.contains("S@"), "{region}");
    assert_eq!(byte % 4, 0);
    assert!(error.to_string().contains("faults.rs"), "names the source lines: {error}");
}

/// Two threads write the same word between the same barriers.
fn write_write(_: &[u64]) {
    let s = static_shared!(S, u32, 8);
    sync_threads();
    s.store(thread_idx_x() as usize / 2, 1);
}

#[test]
fn two_writers_race() {
    let (error, fault) = expect_fault(write_write, LaunchConfig::linear(1, 16));
    let Fault::SharedRace { earlier, later, .. } = fault else { panic!("{error}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Write, AccessKind::Write));
    assert_eq!((earlier.thread.0, later.thread.0), ([0, 0, 0], [1, 0, 0]));
}

/// Plain read racing with an atomic of another thread.
fn atomic_vs_read(_: &[u64]) {
    let s = static_shared!(S, f32, 1);
    if thread_idx_x() == 0 {
        s.store(0, 0.0);
    }
    sync_threads();
    s.atomic_add(0, 1.0);
    if thread_idx_x() == 5 {
        let _ = s.load(0);
    }
}

#[test]
fn atomic_and_plain_access_race() {
    let (error, fault) = expect_fault(atomic_vs_read, LaunchConfig::linear(1, 8));
    let Fault::SharedRace { earlier, later, .. } = fault else { panic!("{error}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Atomic, AccessKind::Read), "{error}");
}

/// Half the threads take one barrier, half another.
#[allow(clippy::if_same_then_else, reason = "two barrier call sites are the point")]
fn divergent_barrier(_: &[u64]) {
    if thread_idx_x() < 16 {
        sync_threads();
    } else {
        sync_threads();
    }
}

#[test]
fn barrier_in_divergent_branches() {
    let (error, fault) = expect_fault(divergent_barrier, LaunchConfig::linear(1, 32));
    let Fault::DivergentBarrier { site, other_site, .. } = fault else { panic!("{error}") };
    assert_ne!(site.line(), other_site.line());
}

/// Threads past 40 return before the barrier.
fn early_return(_: &[u64]) {
    if thread_idx_x() >= 40 {
        return;
    }
    sync_threads();
}

#[test]
fn barrier_after_early_return() {
    let (error, fault) = expect_fault(early_return, LaunchConfig::linear(1, 64));
    let Fault::PartialBarrier { missing, missing_state, .. } = fault else { panic!("{error}") };
    assert_eq!(missing.0, [40, 0, 0]);
    assert!(missing_state.contains("exited"), "{error}");
}

fn static_out_of_range(_: &[u64]) {
    let s = static_shared!(S, f32, 32);
    s.store(thread_idx_x() as usize, 1.0);
}

fn dynamic_out_of_range(_: &[u64]) {
    // SAFETY: deliberately wrong: the window is larger than the launch's dynamic memory.
    let s = unsafe { dynamic_shared::<f32>(0, 64) };
    s.store(0, 1.0);
}

fn dynamic_index_out_of_range(_: &[u64]) {
    // SAFETY: the window fits the launch's 128 bytes.
    let s = unsafe { dynamic_shared::<f32>(0, 32) };
    let _ = s.load(32 + thread_idx_x() as usize);
}

#[test]
fn shared_accesses_out_of_range() {
    let (error, fault) = expect_fault(static_out_of_range, LaunchConfig::linear(1, 33));
    assert!(matches!(fault, Fault::SharedOutOfRange { .. }), "{error}");
    assert!(
        error.to_string().contains("thread (32, 0, 0)") && error.to_string().contains("index 32"),
        "{error}"
    );

    let cfg = LaunchConfig { dynamic_smem_bytes: 128, ..LaunchConfig::linear(1, 1) };
    let (error, fault) = expect_fault(dynamic_out_of_range, cfg);
    assert!(matches!(fault, Fault::SharedOutOfRange { .. }), "{error}");
    assert!(error.to_string().contains("128 bytes of dynamic shared memory"), "{error}");

    let cfg = LaunchConfig { dynamic_smem_bytes: 128, ..LaunchConfig::linear(1, 4) };
    let (error, fault) = expect_fault(dynamic_index_out_of_range, cfg);
    assert!(matches!(fault, Fault::SharedOutOfRange { .. }), "{error}");
}

/// Lanes 0..15 shuffle with the full mask, lanes 16..31 with only their half.
fn mismatched_masks(_: &[u64]) {
    if lane_id() < 16 {
        shfl_xor_u32(FULL_MASK, 1, 1);
    } else {
        shfl_xor_u32(0xFFFF_0000, 1, 1);
    }
}

/// Lane 3 shuffles with a mask that leaves it out.
fn own_lane_missing(_: &[u64]) {
    shfl_idx_f32(!(1 << 3), 1.0, 0);
}

/// Lane 7 votes while the others shuffle.
fn different_ops(_: &[u64]) {
    if lane_id() == 7 {
        vote_any(FULL_MASK, true);
    } else {
        shfl_down_u32(FULL_MASK, 0, 1);
    }
}

/// Lanes past 20 exit; the others shuffle with the full mask.
fn shuffle_after_exit(_: &[u64]) {
    if lane_id() > 20 {
        return;
    }
    shfl_up_f32(FULL_MASK, 1.0, 1);
}

/// Lane 0 waits at a barrier while the rest of the warp shuffles.
fn shuffle_vs_barrier(_: &[u64]) {
    if lane_id() == 0 {
        sync_threads();
    } else {
        shfl_idx_u32(FULL_MASK, 1, 0);
        sync_threads();
    }
}

#[test]
fn inconsistent_warp_collectives() {
    for (entry, needle) in [
        (mismatched_masks as fn(&[u64]), "wait for it at shfl.sync.bfly with member mask 0xffffffff"),
        (own_lane_missing, "own lane 3"),
        (different_ops, "vote.sync.any"),
        (shuffle_after_exit, "exited"),
        (shuffle_vs_barrier, "barrier"),
    ] {
        let (error, fault) = expect_fault(entry, LaunchConfig::linear(2, 32));
        assert!(matches!(fault, Fault::WarpCollective { .. }), "{error}");
        assert!(error.to_string().contains(needle), "expected `{needle}` in: {error}");
    }
}

/// mma by a block of 48 threads: the second warp is partial.
fn mma_partial_warp(_: &[u64]) {
    mma_m16n8k16_bf16([0; 4], [0; 2], [0.0; 4]);
}

#[test]
fn mma_needs_a_full_warp() {
    let (error, fault) = expect_fault(mma_partial_warp, LaunchConfig::linear(1, 48));
    assert!(matches!(fault, Fault::WarpCollective { .. }), "{error}");
    assert!(error.to_string().contains("all 32 lanes"), "{error}");
}

fn panics(_: &[u64]) {
    if block_idx_x() == 3 && thread_idx_x() == 9 {
        panic!("kernel bug {}", 42);
    }
}

#[test]
fn a_panic_becomes_an_error() {
    let (error, fault) = expect_fault(panics, LaunchConfig::linear(8, 16));
    let Fault::Panic { message } = fault else { panic!("{error}") };
    assert_eq!(message, "kernel bug 42");
    assert!(error.to_string().contains("block (3, 0, 0), thread (9, 0, 0)"), "{error}");
}

#[test]
fn invalid_launch_configurations_are_rejected() {
    let nothing = |_: &[u64]| {};
    for cfg in [
        LaunchConfig::linear(0, 32),
        LaunchConfig::linear(1, 0),
        LaunchConfig::linear(1, 1025),
        LaunchConfig { block: [32, 32, 2], ..LaunchConfig::linear(1, 1) },
        LaunchConfig { dynamic_smem_bytes: 300 * 1024, ..LaunchConfig::linear(1, 1) },
    ] {
        let error = run(nothing, cfg, &[]).expect_err("invalid config");
        assert!(matches!(error, EmuError::InvalidLaunch { .. }), "{error}");
    }
}

/// Lanes of different warps exchange values with only `sync_warp` between.
fn sync_warp_across_warps(_: &[u64]) {
    let s = static_shared!(S, u32, 64);
    let t = thread_idx_x() as usize;
    s.store(t, 1);
    sync_warp(FULL_MASK);
    let _ = s.load(63 - t);
}

#[test]
fn sync_warp_does_not_order_other_warps() {
    let (error, fault) = expect_fault(sync_warp_across_warps, LaunchConfig::linear(1, 64));
    let Fault::SharedRace { earlier, later, .. } = fault else { panic!("{error}") };
    // Warp 0 runs to its end first: lane 31 reads slot 32 before thread 32 writes it.
    assert_eq!((earlier.kind, later.kind), (AccessKind::Read, AccessKind::Write), "{error}");
    assert_eq!((earlier.thread.0, later.thread.0), ([31, 0, 0], [32, 0, 0]), "{error}");
}

/// Reads the destination of its own `cp.async` before waiting for it.
fn read_before_wait(args: &[u64]) {
    let s = static_shared!(S, f32, 128);
    let t = thread_idx_x() as usize;
    // SAFETY: the test passes 128 16-byte aligned floats.
    unsafe { cp_async_16(s, 4 * t, Global::from_ptr(args[0] as *const f32).add(4 * t)) };
    cp_async_commit_group();
    let _ = s.load(4 * t);
}

/// Waits for its copy but lets another thread read it without a barrier.
fn read_other_without_barrier(args: &[u64]) {
    let s = static_shared!(S, f32, 128);
    let t = thread_idx_x() as usize;
    // SAFETY: the test passes 128 16-byte aligned floats.
    unsafe { cp_async_16(s, 4 * t, Global::from_ptr(args[0] as *const f32).add(4 * t)) };
    cp_async_wait_all();
    let _ = s.load(4 * (31 - t));
}

#[test]
fn cp_async_destination_is_undefined_until_waited_for() {
    let input = vec![[1f32; 4]; 32];
    let _lent = lend(&input);
    let args = [input.as_ptr() as u64];
    let error = run(read_before_wait, LaunchConfig::linear(1, 32), &args).unwrap_err();
    let Some(Fault::AsyncCopyInFlight { copy, access, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!(copy.thread, access.thread, "{error}");
    assert_eq!(access.kind, AccessKind::Read, "{error}");

    let error = run(read_other_without_barrier, LaunchConfig::linear(1, 32), &args).unwrap_err();
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{error}") };
    assert_ne!(earlier.thread, later.thread, "{error}");
}

/// Lane 5 addresses a row past the end of the array.
fn ldmatrix_out_of_range(_: &[u64]) {
    let s = static_shared!(S, u16, 256);
    let lane = lane_id() as usize;
    for i in (lane..256).step_by(32) {
        s.store(i, 0);
    }
    sync_threads();
    let row = if lane == 5 { 32 } else { lane % 8 };
    ldmatrix_x4(s, row * 8);
}

/// Rows that are not 16-byte aligned.
fn ldmatrix_misaligned(_: &[u64]) {
    let s = static_shared!(S, u16, 512);
    ldmatrix_x2_trans(s, lane_id() as usize * 12 + 4);
}

#[test]
fn ldmatrix_rows_are_checked() {
    let (error, fault) = expect_fault(ldmatrix_out_of_range, LaunchConfig::linear(1, 32));
    let Fault::SharedOutOfRange { site, .. } = fault else { panic!("{error}") };
    assert!(site.file().ends_with("faults.rs"), "names the kernel line: {error}");
    assert!(error.to_string().contains("thread (5, 0, 0)"), "{error}");

    let (error, fault) = expect_fault(ldmatrix_misaligned, LaunchConfig::linear(1, 32));
    let Fault::BadOperand { site, .. } = fault else { panic!("{error}") };
    assert!(site.file().ends_with("faults.rs"), "names the kernel line: {error}");
}

fn sub_out_of_range(_: &[u64]) {
    let s = static_shared!(S, f32, 64);
    let _ = s.sub(32, 33);
}

fn misaligned_cast(_: &[u64]) {
    let s = static_shared!(S, u16, 64);
    let _ = s.sub(1, 8).cast::<u32>();
}

#[test]
fn views_are_checked() {
    let (error, fault) = expect_fault(sub_out_of_range, LaunchConfig::linear(1, 1));
    assert!(matches!(fault, Fault::SharedOutOfRange { .. }), "{error}");
    let (error, fault) = expect_fault(misaligned_cast, LaunchConfig::linear(1, 1));
    assert!(matches!(fault, Fault::BadOperand { .. }), "{error}");
}

/// Thread 3 of block 1 never leaves its loop.
fn endless_loop(_: &[u64]) {
    if block_idx_x() == 1 && thread_idx_x() == 3 {
        loop {
            std::hint::black_box(());
        }
    }
}

/// The watchdog aborts the process, so the endless kernel runs in a child copy of this test
/// binary with a one-second limit.
#[test]
fn endless_loop_is_reported() {
    if std::env::var_os("SIMT_TEST_WATCHDOG_CHILD").is_some() {
        let _ = run(endless_loop, LaunchConfig::linear(2, 8), &[]);
        unreachable!("the watchdog should have aborted the process");
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["faults::endless_loop_is_reported", "--exact", "--nocapture", "--test-threads=1"])
        .env("SIMT_TEST_WATCHDOG_CHILD", "1")
        .env("TRIDENT_EMU_WATCHDOG_SECS", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the child must abort: {stderr}");
    assert!(
        stderr.contains("kernel `test_kernel`, block (1, 0, 0), thread (3, 0, 0) has run for 1 s"),
        "{stderr}"
    );
}
