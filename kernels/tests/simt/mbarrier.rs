//! mbarriers, `elect.sync` and `fence.proxy.async` on the emulator: a producer/consumer ring
//! runs and is counted exactly; each planted misuse fails naming the place.

use trident_kernels::simt::*;
use trident_simt::{AccessKind, EmuError, Fault, LaunchConfig};

use crate::{ptr, run};

/// Stages of the ring, iterations, lanes per warp.
const STAGES: usize = 2;
const ITERS: usize = 6;
const LANES: usize = 32;
/// Byte offset of the mbarriers in dynamic shared memory (after the ring's data).
const BARS_AT: usize = STAGES * LANES * 4;
const SMEM: u32 = (BARS_AT + 2 * STAGES * 8) as u32;

/// How a ring kernel is broken.
#[derive(Clone, Copy, PartialEq)]
enum Plant {
    None,
    /// The producer refills a stage without waiting for the consumers to release it.
    NoEmptyWait,
    /// The consumers wait on parity 0 every time.
    FixedParity,
    /// A consumer reads the stage before waiting for it.
    ReadBeforeWait,
}

/// Warp 0 consumes, thread 32 produces: for iteration `it` it writes `100 * it + l` into slot
/// `l` of stage `it % STAGES` and arrives on `full` (count 1); consumer lane `l` waits on
/// `full`, adds its slot to its sum and arrives on `empty` (count 32), which the producer
/// waits on before refilling the stage. `args[0]`: 32 f32 sums; `args[1]`: the plant.
fn ring(args: &[u64]) {
    let out = args[0] as *mut f32;
    let plant = match args[1] {
        0 => Plant::None,
        1 => Plant::NoEmptyWait,
        2 => Plant::FixedParity,
        _ => Plant::ReadBeforeWait,
    };
    // SAFETY: the launch has SMEM bytes of dynamic shared memory.
    let (data, bars) =
        unsafe { (dynamic_shared::<f32>(0, STAGES * LANES), dynamic_shared::<u64>(BARS_AT, 2 * STAGES)) };
    let (full, empty) = (0, STAGES);
    let t = thread_idx_x() as usize;
    if t == 0 {
        for s in 0..STAGES {
            mbarrier_init(bars, full + s, 1);
            mbarrier_init(bars, empty + s, LANES as u32);
        }
    }
    sync_threads();
    let mut sum = 0.0;
    for it in 0..ITERS {
        let stage = it % STAGES;
        let parity = ((it / STAGES) & 1) as u32;
        if t == LANES {
            if plant != Plant::NoEmptyWait {
                // The first pass finds every stage free: parity 1 is the phase before phase 0.
                mbarrier_wait_parity(bars, empty + stage, parity ^ 1);
            }
            for l in 0..LANES {
                data.store(stage * LANES + l, (100 * it + l) as f32);
            }
            mbarrier_arrive(bars, full + stage);
        } else if t < LANES {
            if plant == Plant::ReadBeforeWait && it == 0 {
                sum += data.load(stage * LANES + t);
            }
            let parity = if plant == Plant::FixedParity { 0 } else { parity };
            mbarrier_wait_parity(bars, full + stage, parity);
            sum += data.load(stage * LANES + t);
            mbarrier_arrive(bars, empty + stage);
        }
    }
    if t < LANES {
        // SAFETY: 32 sums.
        unsafe { *out.add(t) = sum };
    }
}

fn run_ring(plant: u64) -> Result<(Vec<f32>, trident_simt::LaunchStats), EmuError> {
    let mut out = vec![f32::NAN; LANES];
    let cfg = LaunchConfig { grid: [2, 1, 1], block: [64, 1, 1], dynamic_smem_bytes: SMEM };
    let stats = run(ring, cfg, &[ptr(&mut out), plant])?;
    Ok((out, stats))
}

#[test]
fn a_producer_consumer_ring_runs_and_counts_its_mbarrier_operations() {
    let (out, stats) = run_ring(0).unwrap();
    for (lane, &got) in out.iter().enumerate() {
        let want: usize = (0..ITERS).map(|it| 100 * it + lane).sum();
        assert_eq!(got, want as f32, "lane {lane}");
    }
    // Per block: 4 inits; per iteration the producer's wait and arrival and each consumer
    // lane's wait and arrival (a wait counts once however long it blocks).
    let iters = ITERS as u64;
    assert_eq!(stats.thread_instructions.mbarrier, 2 * (4 + iters * (2 + 2 * LANES as u64)));
    assert_eq!(stats.warp_instructions.mbarrier, 2 * (4 + iters * 2 + iters * 2));
}

#[test]
fn refilling_a_stage_before_the_consumers_released_it_is_a_race() {
    let error = run_ring(1).unwrap_err();
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{error}") };
    // A consumer's read of stage 0, then the producer's refill, which waited for nothing.
    assert_eq!((earlier.kind, later.kind), (AccessKind::Read, AccessKind::Write), "{error}");
    assert_eq!((earlier.thread.0[0], later.thread.0[0]), (0, 32), "{error}");
    assert!(error.to_string().contains("tests/simt/mbarrier.rs"), "names the lines: {error}");
}

#[test]
fn a_wait_on_a_parity_that_never_completes_is_a_deadlock() {
    // Waiting on parity 0 while phase 1 is current succeeds at once (phase 0 completed), so
    // the consumers run ahead on stale stages and exit; the producer then waits for a release
    // of stage 0 that never comes.
    let error = run_ring(2).unwrap_err();
    let message = error.to_string();
    let Some(Fault::Deadlock { site, wait, why }) = error.fault() else { panic!("{error}") };
    assert!(
        message.contains("thread (32, 0, 0)") && site.file().ends_with("tests/simt/mbarrier.rs"),
        "{message}"
    );
    assert!(wait.contains("parity 1") && wait.contains("shared address 0x110"), "{message}");
    assert!(why.contains("32 of 32 arrivals pending") && why.contains("threads have exited"), "{message}");
}

#[test]
fn reading_a_stage_before_waiting_is_a_race() {
    let error = run_ring(3).unwrap_err();
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Read, AccessKind::Write), "{error}");
    assert_eq!((earlier.thread.0[0], later.thread.0[0]), (0, 32), "{error}");
}

/// Misuses of one mbarrier, chosen by `args[0]`.
fn misuse(args: &[u64]) {
    // SAFETY: the launch has 64 bytes of dynamic shared memory.
    let bars = unsafe { dynamic_shared::<u64>(0, 8) };
    let t = thread_idx_x();
    match args[0] {
        // Arrival on a barrier nobody initialized.
        0 => {
            mbarrier_arrive(bars, 3);
        }
        // A second arrival while the phase only waits for bytes.
        1 => {
            if t == 0 {
                mbarrier_init(bars, 0, 1);
                mbarrier_arrive_expect_tx(bars, 0, 64);
                mbarrier_arrive(bars, 0);
            }
        }
        // More bytes completed than expected once every arrival is in.
        2 => {
            if t == 0 {
                mbarrier_init(bars, 0, 1);
                mbarrier_complete_tx(bars, 0, 64);
                mbarrier_arrive_expect_tx(bars, 0, 32);
            }
        }
        // Thread 1 arrives with no barrier after thread 0's init.
        3 => {
            if t == 0 {
                mbarrier_init(bars, 0, 2);
            }
            mbarrier_arrive(bars, 0);
        }
        // init of a live barrier.
        4 => {
            if t == 0 {
                mbarrier_init(bars, 0, 1);
                mbarrier_init(bars, 0, 1);
            }
        }
        // A tx-count beyond 2^20 - 1.
        _ => {
            if t == 0 {
                mbarrier_init(bars, 0, 1);
                mbarrier_expect_tx(bars, 0, 1 << 20);
            }
        }
    }
}

fn misuse_error(case: u64) -> EmuError {
    let cfg = LaunchConfig { grid: [1, 1, 1], block: [2, 1, 1], dynamic_smem_bytes: 64 };
    run(misuse, cfg, &[case]).expect_err("the misuse must fail")
}

#[test]
fn mbarrier_misuses_are_reported_with_the_barrier_address() {
    let cases = [
        (0, "not initialized", "shared address 0x18"),
        (1, "more arrivals than the count 1", "shared address 0x0"),
        (2, "transaction-count underflow", "tx-count is -32"),
        (4, "live mbarrier", "shared address 0x0"),
        (5, "outside the range", "1048576"),
    ];
    for (case, what, detail) in cases {
        let error = misuse_error(case);
        let message = error.to_string();
        assert!(matches!(error.fault(), Some(Fault::Mbarrier { .. })), "case {case}: {message}");
        assert!(message.contains(what) && message.contains(detail), "case {case}: {message}");
        assert!(message.contains("tests/simt/mbarrier.rs:"), "case {case} names the line: {message}");
    }
    let error = misuse_error(3);
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Write, AccessKind::Atomic), "{error}");
}

/// Thread 0 polls with test_wait while thread 1 arrives after its own work.
fn polling(args: &[u64]) {
    let out = args[0] as *mut u32;
    // SAFETY: the launch has 64 bytes of dynamic shared memory.
    let bars = unsafe { dynamic_shared::<u64>(0, 1) };
    let t = thread_idx_x();
    if t == 0 {
        mbarrier_init(bars, 0, 1);
    }
    sync_threads();
    if t == 0 {
        let mut polls = 0;
        while !mbarrier_test_wait_parity(bars, 0, 0) {
            polls += 1;
        }
        // SAFETY: one word.
        unsafe { *out = polls };
    } else {
        mbarrier_arrive(bars, 0);
    }
}

#[test]
fn test_wait_yields_so_the_arriving_thread_runs() {
    let mut out = [u32::MAX];
    let cfg = LaunchConfig { grid: [1, 1, 1], block: [2, 1, 1], dynamic_smem_bytes: 64 };
    run(polling, cfg, &[ptr(&mut out)]).unwrap();
    assert_eq!(out[0], 1, "one failed poll, then thread 1 arrives and the next poll succeeds");
}

/// Each lane elects with `args[1]`'s mask and writes leader and flag; lanes outside the mask
/// skip unless `args[2]` is set.
fn elect(args: &[u64]) {
    let out = args[0] as *mut [u32; 2];
    let mask = args[1] as u32;
    let t = thread_idx_x();
    if mask & (1 << (t % 32)) != 0 || args[2] != 0 {
        let (leader, me) = elect_sync(mask);
        // SAFETY: one slot per thread.
        unsafe { *out.add(t as usize) = [leader, u32::from(me)] };
    }
}

#[test]
fn elect_sync_elects_the_lowest_lane_of_the_mask() {
    for mask in [u32::MAX, 0xF0F0_0000, 0x8000_0000] {
        let mut out = vec![[u32::MAX; 2]; 64];
        run(elect, LaunchConfig::linear(1, 64), &[ptr(&mut out), u64::from(mask), 0]).unwrap();
        let leader = mask.trailing_zeros();
        for (t, got) in out.iter().enumerate() {
            let lane = t as u32 % 32;
            let want =
                if mask & (1 << lane) != 0 { [leader, u32::from(lane == leader)] } else { [u32::MAX; 2] };
            assert_eq!(*got, want, "mask {mask:#x} thread {t}");
        }
    }
    let mut out = vec![[0u32; 2]; 32];
    let error = run(elect, LaunchConfig::linear(1, 32), &[ptr(&mut out), 0x0000_FFFF, 1]).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("elect.sync") && message.contains("own lane 16"), "{message}");
}
