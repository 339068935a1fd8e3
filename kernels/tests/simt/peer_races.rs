//! The memory model between emulated devices: planted bugs of flag protocols, each reported
//! with a message naming both sides, and the correct protocol beside each, which passes.

use std::time::Duration;

use trident_kernels::simt::{self, GlobalMut};
use trident_simt::{set_poll_limit, HostKernel};

use crate::peers::{launch_on, on_devices, share};

/// How the planted kernels write and poll their flag.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flag {
    /// `st.release.sys` and `ld.acquire.sys`: correct.
    ReleaseAcquireSys,
    /// The flag written with a plain store.
    PlainStore,
    /// The flag polled with `ld.volatile`.
    VolatilePoll,
    /// `st.release.gpu` and `ld.acquire.gpu` between two devices: too narrow a scope.
    GpuScope,
}

const MODES: [Flag; 4] = [Flag::ReleaseAcquireSys, Flag::PlainStore, Flag::VolatilePoll, Flag::GpuScope];

/// Words: data (32 f32 of rank 1), flag (a word of rank 1), mode, rank, out (32 f32 of rank 1).
/// Rank 0 writes the data and raises the flag; rank 1 waits for the flag (at most a second)
/// and copies the data out.
fn handoff(words: &[u64]) {
    let data = GlobalMut::<f32>::from_ptr(words[0] as *mut f32);
    let flag = GlobalMut::<u32>::from_ptr(words[1] as *mut u32);
    let mode = MODES[words[2] as usize];
    let out = GlobalMut::<f32>::from_ptr(words[4] as *mut f32);
    let t = simt::thread_idx_x() as usize;
    // SAFETY: 32 elements of data and out, one flag word, all shared by the test.
    unsafe {
        if words[3] == 0 {
            data.store(t, t as f32);
            simt::sync_threads();
            if t == 0 {
                match mode {
                    Flag::ReleaseAcquireSys | Flag::VolatilePoll => flag.store_release_sys(0, 1),
                    Flag::PlainStore => flag.store(0, 1),
                    Flag::GpuScope => flag.store_release_gpu(0, 1),
                }
            }
        } else {
            if t == 0 {
                let deadline = simt::global_timer_ns() + 1_000_000_000;
                loop {
                    let v = match mode {
                        Flag::ReleaseAcquireSys | Flag::PlainStore => flag.load_acquire_sys(0),
                        Flag::VolatilePoll => flag.load_volatile(0),
                        Flag::GpuScope => flag.load_acquire_gpu(0),
                    };
                    if v == 1 || simt::global_timer_ns() > deadline {
                        break;
                    }
                }
            }
            simt::sync_threads();
            out.store(t, data.load(t));
        }
    }
}

const HANDOFF: HostKernel = HostKernel { name: "handoff", params: &[], param_names: &[], entry: handoff };

fn run_handoff(mode: Flag) -> Vec<Result<(), String>> {
    let data = vec![0f32; 32];
    let out = vec![0f32; 32];
    let flag = vec![0u32; 1];
    let _shared = [share(&data, "data"), share(&out, "out"), share(&flag, "flag")];
    let words = |rank: u64| {
        [
            data.as_ptr() as u64,
            flag.as_ptr() as u64,
            MODES.iter().position(|&m| m == mode).unwrap() as u64,
            rank,
            out.as_ptr() as u64,
        ]
    };
    on_devices(2, |rank| launch_on(&HANDOFF, 1, 32, &words(rank as u64)).map_err(|e| e.to_string()))
}

/// The first error among the ranks' outcomes.
fn first_error(outcomes: &[Result<(), String>], what: &str) -> String {
    outcomes
        .iter()
        .find_map(|o| o.clone().err())
        .unwrap_or_else(|| panic!("{what}: no rank reported an error"))
}

#[test]
fn a_release_acquire_handoff_between_devices_is_clean() {
    for (rank, outcome) in run_handoff(Flag::ReleaseAcquireSys).into_iter().enumerate() {
        outcome.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

#[test]
fn a_flag_written_with_a_plain_store_is_reported() {
    let message = first_error(&run_handoff(Flag::PlainStore), "plain flag store");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("device 0") && message.contains("device 1"), "{message}");
    assert!(message.contains("st.release.sys"), "{message}");
}

#[test]
fn a_flag_polled_with_a_volatile_load_is_reported() {
    let message = first_error(&run_handoff(Flag::VolatilePoll), "volatile poll");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("device 0") && message.contains("device 1"), "{message}");
    assert!(message.contains("ld.acquire.sys"), "{message}");
}

#[test]
fn a_gpu_scope_flag_between_devices_is_reported() {
    let message = first_error(&run_handoff(Flag::GpuScope), "gpu scope");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("scope"), "{message}");
}

/// Words: buffer (32 f32 of rank 0), flag (a word of rank 1), done (a word of rank 0), seq,
/// rank, out (32 f32 of rank 1), and whether rank 0 waits for `done` before it rewrites the
/// buffer. Rank 0 fills its buffer for collective `seq` and raises the flag; rank 1 reads the
/// buffer and acknowledges with `done`.
fn publish(words: &[u64]) {
    let buffer = GlobalMut::<f32>::from_ptr(words[0] as *mut f32);
    let flag = GlobalMut::<u32>::from_ptr(words[1] as *mut u32);
    let done = GlobalMut::<u32>::from_ptr(words[2] as *mut u32);
    let seq = words[3] as u32;
    let out = GlobalMut::<f32>::from_ptr(words[5] as *mut f32);
    let t = simt::thread_idx_x() as usize;
    // SAFETY: 32 elements of buffer and out and two flag words, all shared by the test.
    unsafe {
        if words[4] == 0 {
            if t == 0 && words[6] == 1 {
                while done.load_acquire_sys(0) + 1 < seq {}
            }
            simt::sync_threads();
            buffer.store(t, seq as f32);
            simt::sync_threads();
            if t == 0 {
                flag.store_release_sys(0, seq);
            }
        } else {
            if t == 0 {
                while flag.load_acquire_sys(0) < seq {}
            }
            simt::sync_threads();
            out.store(t, buffer.load(t));
            simt::sync_threads();
            if t == 0 {
                done.store_release_sys(0, seq);
            }
        }
    }
}

const PUBLISH: HostKernel = HostKernel { name: "publish", params: &[], param_names: &[], entry: publish };

/// Two collectives in a row on both ranks; `wait_for_readers` makes rank 0 wait for rank 1's
/// acknowledgement of the last one before it rewrites its buffer.
fn run_publish(wait_for_readers: bool) -> Vec<Result<(), String>> {
    let buffer = vec![0f32; 32];
    let out = vec![0f32; 32];
    let flags = vec![0u32; 2];
    let _shared = [share(&buffer, "buffer"), share(&out, "out"), share(&flags, "flags")];
    // Both ranks finish collective 1 before either starts collective 2: a host barrier the
    // emulator does not see, so only the kernels' own flags order the two collectives.
    let between = std::sync::Barrier::new(2);
    on_devices(2, |rank| {
        set_poll_limit(Duration::from_secs(5));
        for seq in 1..=2u64 {
            if seq == 2 {
                between.wait();
            }
            let words = [
                buffer.as_ptr() as u64,
                flags.as_ptr() as u64,
                flags[1..].as_ptr() as u64,
                seq,
                rank as u64,
                out.as_ptr() as u64,
                u64::from(wait_for_readers),
            ];
            launch_on(&PUBLISH, 1, 32, &words).map_err(|e| format!("collective {seq}: {e}"))?;
        }
        Ok(())
    })
}

#[test]
fn a_buffer_reused_after_every_reader_acknowledged_is_clean() {
    for (rank, outcome) in run_publish(true).into_iter().enumerate() {
        outcome.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

#[test]
fn a_buffer_reused_before_every_peer_finished_reading_is_reported() {
    let outcomes = run_publish(false);
    let message = first_error(&outcomes, "buffer reuse");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("device 0") && message.contains("device 1"), "{message}");
    assert!(message.contains("reused before every peer had finished reading it"), "{message}");
}

/// Polls a flag nobody writes, without a deadline.
fn wait_forever(words: &[u64]) {
    let flag = GlobalMut::<u32>::from_ptr(words[0] as *mut u32);
    if simt::thread_idx_x() == 0 {
        // SAFETY: one flag word shared by the test.
        while unsafe { flag.load_acquire_sys(0) } == 0 {}
    }
    simt::sync_threads();
}

#[test]
fn a_deadlocked_flag_wait_is_an_error_not_a_hang() {
    let flag = vec![0u32; 1];
    let _shared = share(&flag, "flag");
    let kernel = HostKernel { name: "wait_forever", params: &[], param_names: &[], entry: wait_forever };
    let outcomes = on_devices(2, |_| {
        set_poll_limit(Duration::from_millis(300));
        launch_on(&kernel, 1, 32, &[flag.as_ptr() as u64]).map_err(|e| e.to_string())
    });
    for outcome in outcomes {
        let message = outcome.expect_err("the wait can never complete");
        assert!(message.contains("never completes"), "{message}");
        assert!(message.contains("wait_forever"), "{message}");
    }
}
