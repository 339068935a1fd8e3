//! Send/receive and broadcast on 2, 3, 4 and 8 emulated devices: lengths 0, 1, odd and
//! larger, f32 and bf16, several transfers in a row on one set of flags (the two flag sets in
//! turn, no reset), every root of the broadcast; and the protocols' planted bugs, each
//! reported: a plain store for the release, a writer that ignores the reader's `free`, a peer
//! that never arrives.

// Element indices address several ranks' buffers at once.
#![allow(clippy::needless_range_loop)]

use std::sync::Barrier;
use std::time::Duration;

use trident_kernels::collective::{broadcast, planted, send_recv};
use trident_kernels::simt::{self, f32_to_bf16, GlobalMut};
use trident_simt::{set_poll_limit, HostKernel};

use crate::peers::{kernel, launch_on, on_devices, share, Comm};
use crate::rng::{seed, Rng};

const WORLDS: [usize; 4] = [2, 3, 4, 8];
const LENGTHS: [usize; 5] = [0, 1, 7, 1001, 4099];
/// Long enough for a loaded machine; a correct run never waits that long.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The deadline of the tests where a peer never arrives.
const SHORT: Duration = Duration::from_millis(300);

/// An element type as the tests see it: f32, or bf16 bits.
trait Elem: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync {
    const NAME: &'static str;
    fn from_f32(v: f32) -> Self;
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Elem for u16 {
    const NAME: &'static str = "bf16";
    fn from_f32(v: f32) -> Self {
        f32_to_bf16(v)
    }
}

fn inputs<T: Elem>(rng: &mut Rng, world: usize, n: usize) -> Vec<Vec<T>> {
    (0..world).map(|_| rng.vec(n).into_iter().map(T::from_f32).collect()).collect()
}

fn all_ok(outcomes: Vec<Result<(), String>>, what: &str) {
    for (r, o) in outcomes.into_iter().enumerate() {
        if let Err(e) = o {
            panic!("{what}: rank {r}: {e}");
        }
    }
}

/// A pipeline's transfers: rank `r` receives from `r - 1` then sends to `r + 1` (forward),
/// and the reverse (backward), three times each, new data each time; the link's transfers
/// are numbered 1, 2, 3 in each direction.
fn send_recv_family<T: Elem>(test: &str) {
    let mut rng = Rng::new(seed(test));
    let send = kernel(send_recv::HOST_KERNELS, &format!("send_{}", T::NAME));
    let recv = kernel(send_recv::HOST_KERNELS, &format!("recv_{}", T::NAME));
    for world in WORLDS {
        for n in LENGTHS {
            let mut comm = Comm::new(inputs::<T>(&mut rng, world, n), 2, false);
            for seq in 1..=3u32 {
                for forward in [true, false] {
                    let what = format!("{} world {world} n {n} transfer {seq} forward {forward}", T::NAME);
                    let x: Vec<Vec<T>> = inputs(&mut rng, world, n);
                    for (r, row) in x.iter().enumerate() {
                        comm.set(r, row);
                    }
                    let outcomes = on_devices(world, |r| {
                        let (prev, next) = (r.checked_sub(1), Some(r + 1).filter(|&p| p < world));
                        let (from, to) = if forward { (prev, next) } else { (next, prev) };
                        if let Some(from) = from {
                            comm.launch(recv, r, seq, TIMEOUT, Some(from as u64))?;
                        }
                        if let Some(to) = to {
                            comm.launch(send, r, seq, TIMEOUT, Some(to as u64))?;
                        }
                        Ok(())
                    });
                    all_ok(outcomes, &what);
                    for r in 0..world {
                        let from =
                            if forward { r.checked_sub(1) } else { Some(r + 1).filter(|&p| p < world) };
                        if let Some(from) = from {
                            assert_eq!(comm.out[r], x[from], "{what}: rank {r} received from rank {from}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn send_recv_f32_delivers_along_a_pipeline_both_ways() {
    send_recv_family::<f32>("send_recv_f32_delivers_along_a_pipeline_both_ways");
}

#[test]
fn send_recv_bf16_delivers_along_a_pipeline_both_ways() {
    send_recv_family::<u16>("send_recv_bf16_delivers_along_a_pipeline_both_ways");
}

/// A broadcast from every root in turn, numbered 1, 2, ... on one communicator.
fn broadcast_family<T: Elem>(test: &str) {
    let mut rng = Rng::new(seed(test));
    let cast = kernel(broadcast::HOST_KERNELS, &format!("broadcast_{}", T::NAME));
    for world in WORLDS {
        for n in LENGTHS {
            let mut comm = Comm::new(inputs::<T>(&mut rng, world, n), 2, true);
            for root in 0..world {
                let seq = root as u32 + 1;
                let what = format!("{} world {world} n {n} root {root} (collective {seq})", T::NAME);
                let x: Vec<Vec<T>> = inputs(&mut rng, world, n);
                for (r, row) in x.iter().enumerate() {
                    comm.set(r, row);
                }
                let outcomes = on_devices(world, |r| comm.launch(cast, r, seq, TIMEOUT, Some(root as u64)));
                all_ok(outcomes, &what);
                for r in 0..world {
                    assert_eq!(comm.data[r], x[root], "{what}: rank {r}");
                }
            }
        }
    }
}

#[test]
fn broadcast_f32_from_every_root_matches() {
    broadcast_family::<f32>("broadcast_f32_from_every_root_matches");
}

#[test]
fn broadcast_bf16_from_every_root_matches() {
    broadcast_family::<u16>("broadcast_bf16_from_every_root_matches");
}

/// Words: rank `r`'s output (`n` f32) and a sink of its own: every thread copies the output
/// into the sink, as a kernel that consumes a received buffer does.
fn consume(words: &[u64]) {
    let out = GlobalMut::<f32>::from_ptr(words[0] as *mut f32);
    let sink = GlobalMut::<f32>::from_ptr(words[1] as *mut f32);
    let n = words[2] as usize;
    let mut i = simt::thread_idx_x() as usize;
    while i < n {
        // SAFETY: `n` elements of the output and the sink, both shared by the test.
        unsafe { sink.store(i, out.load(i)) };
        i += simt::block_dim_x() as usize;
    }
}

const CONSUME: HostKernel = HostKernel { name: "consume", params: &[], param_names: &[], entry: consume };

/// Rank 0 sends to rank 1 twice with `send`; rank 1 receives each and consumes it (a kernel
/// reading its output). Between the two, a host barrier the emulator does not see makes rank 1
/// read the first transfer before rank 0 sends the second, so that only the kernels' flags
/// order the second send's stores after those reads.
fn two_sends(send: &HostKernel) -> (Vec<Result<(), String>>, Vec<f32>, Vec<f32>) {
    let n = 64;
    let x = vec![(0..n).map(|i| i as f32).collect::<Vec<f32>>(), vec![0.0; n]];
    let comm = Comm::new(x, 1, false);
    let recv = kernel(send_recv::HOST_KERNELS, "recv_f32");
    let sink = vec![0f32; n];
    let _shared = share(&sink, "sink");
    let between = Barrier::new(2);
    // Every rank reaches the barrier whatever its first transfer's outcome (no rank waits
    // there for one that returned early).
    let outcomes = on_devices(2, |r| {
        set_poll_limit(Duration::from_secs(5));
        let step = |seq: u32| -> Result<(), String> {
            if r == 0 {
                return comm.launch(send, 0, seq, TIMEOUT, Some(1)).map_err(|e| format!("send {seq}: {e}"));
            }
            comm.launch(recv, 1, seq, TIMEOUT, Some(0)).map_err(|e| format!("recv {seq}: {e}"))?;
            let words = [comm.out[1].as_ptr() as u64, sink.as_ptr() as u64, n as u64];
            launch_on(&CONSUME, 1, 32, &words).map_err(|e| format!("consume {seq}: {e}"))
        };
        let first = step(1);
        between.wait();
        first?;
        step(2)
    });
    (outcomes, comm.out[1].clone(), sink)
}

/// The first error among the ranks' outcomes.
fn first_error(outcomes: &[Result<(), String>], what: &str) -> String {
    outcomes
        .iter()
        .find_map(|o| o.clone().err())
        .unwrap_or_else(|| panic!("{what}: no rank reported an error"))
}

#[test]
fn a_buffer_received_and_consumed_then_received_again_is_clean() {
    let send = kernel(send_recv::HOST_KERNELS, "send_f32");
    let (outcomes, out, sink) = two_sends(send);
    all_ok(outcomes, "two sends");
    let want: Vec<f32> = (0..64).map(|i| i as f32).collect();
    assert_eq!(out, want, "the second transfer");
    assert_eq!(sink, want, "what the second consumer read");
}

#[test]
fn a_send_that_ignores_the_receivers_free_is_reported_as_a_race() {
    let send = kernel(planted::HOST_KERNELS, "send_f32_ignoring_free");
    let (outcomes, _, _) = two_sends(send);
    let message = first_error(&outcomes, "send ignoring free");
    eprintln!("reported: {message}");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("device 0") && message.contains("device 1"), "{message}");
    assert!(message.contains("send_f32_ignoring_free"), "{message}");
    // The place: the planted kernel's store into the receiver's output, after `consume` read it.
    assert!(message.contains("collective/send_recv.rs") && message.contains("`output`"), "{message}");
    assert!(message.contains("read by device 1, kernel `consume`"), "{message}");
}

#[test]
fn a_send_whose_release_is_a_plain_store_is_reported() {
    let send = kernel(planted::HOST_KERNELS, "send_f32_plain_release");
    let (outcomes, _, _) = two_sends(send);
    let message = first_error(&outcomes, "plain release");
    eprintln!("reported: {message}");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("st.release.sys"), "{message}");
    // The place: the sender's store of the flag word, against the receiver's acquire.
    assert!(message.contains("collective/send_recv.rs") && message.contains("`flags`"), "{message}");
    assert!(message.contains("kernel `send_f32_plain_release`"), "{message}");
}

/// A broadcast from rank 0 over three ranks with `cast`, twice, each rank consuming its data
/// after the first; a host barrier the emulator does not see between the two, as in
/// [`two_sends`].
fn two_broadcasts(cast: &HostKernel) -> Vec<Result<(), String>> {
    let n = 64;
    let comm = Comm::new(vec![vec![1.0f32; n]; 3], 1, true);
    let sinks: Vec<Vec<f32>> = vec![vec![0.0; n]; 3];
    let _shared: Vec<_> = sinks.iter().map(|s| share(s, "sink")).collect();
    let between = Barrier::new(3);
    on_devices(3, |r| {
        set_poll_limit(Duration::from_secs(5));
        let step = |seq: u32| -> Result<(), String> {
            comm.launch(cast, r, seq, TIMEOUT, Some(0)).map_err(|e| format!("broadcast {seq}: {e}"))?;
            let words = [comm.data[r].as_ptr() as u64, sinks[r].as_ptr() as u64, n as u64];
            launch_on(&CONSUME, 1, 32, &words).map_err(|e| format!("consume {seq}: {e}"))
        };
        let first = step(1);
        between.wait();
        first?;
        step(2)
    })
}

#[test]
fn two_broadcasts_with_readers_between_are_clean() {
    let cast = kernel(broadcast::HOST_KERNELS, "broadcast_f32");
    all_ok(two_broadcasts(cast), "two broadcasts");
}

#[test]
fn a_broadcast_that_ignores_the_peers_ready_is_reported_as_a_race() {
    let cast = kernel(planted::HOST_KERNELS, "broadcast_f32_ignoring_ready");
    let message = first_error(&two_broadcasts(cast), "broadcast ignoring ready");
    eprintln!("reported: {message}");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("broadcast_f32_ignoring_ready"), "{message}");
    assert!(message.contains("collective/broadcast.rs") && message.contains("`data`"), "{message}");
    assert!(message.contains("kernel `consume`"), "{message}");
}

#[test]
fn a_broadcast_whose_release_is_a_plain_store_is_reported() {
    let cast = kernel(planted::HOST_KERNELS, "broadcast_f32_plain_release");
    let message = first_error(&two_broadcasts(cast), "broadcast plain release");
    eprintln!("reported: {message}");
    assert!(message.contains("data race between devices"), "{message}");
    assert!(message.contains("st.release.sys"), "{message}");
    assert!(message.contains("collective/broadcast.rs") && message.contains("`flags`"), "{message}");
}

#[test]
fn a_receiver_whose_sender_never_arrives_times_out_naming_it() {
    let comm = Comm::new(vec![vec![1.0f32; 10]; 2], 1, false);
    let recv = kernel(send_recv::HOST_KERNELS, "recv_f32");
    let outcomes = on_devices(2, |r| if r == 1 { comm.launch(recv, 1, 1, SHORT, Some(0)) } else { Ok(()) });
    let message = outcomes[1].as_ref().expect_err("the receiver must time out");
    assert!(message.contains("recv_f32 (collective #1): rank 1 waited for rank 0"), "{message}");
}

#[test]
fn a_sender_whose_receiver_never_arrives_times_out_naming_it() {
    let comm = Comm::new(vec![vec![1.0f32; 10]; 3], 2, false);
    let send = kernel(send_recv::HOST_KERNELS, "send_bf16");
    let outcomes = on_devices(3, |r| if r == 2 { comm.launch(send, 2, 1, SHORT, Some(0)) } else { Ok(()) });
    let message = outcomes[2].as_ref().expect_err("the sender must time out");
    assert!(message.contains("send_bf16 (collective #1): rank 2 waited for rank 0"), "{message}");
}

#[test]
fn a_broadcast_with_a_stopped_rank_ends_with_its_name() {
    let comm = Comm::new(vec![vec![1.0f32; 10]; 4], 1, true);
    let cast = kernel(broadcast::HOST_KERNELS, "broadcast_f32");
    // Rank 3 stops: the root (1) waits for it and names it.
    let outcomes = on_devices(4, |r| if r == 3 { Ok(()) } else { comm.launch(cast, r, 1, SHORT, Some(1)) });
    let message = outcomes[1].as_ref().expect_err("the root must time out");
    assert!(message.contains("rank 1 waited for rank 3"), "{message}");
    // The ranks the root served before it reached rank 3 are done.
    outcomes[2].as_ref().unwrap_or_else(|e| panic!("rank 2: {e}"));
    // The root stops: every other rank waits for it and names it (fresh status words).
    let comm = Comm::new(vec![vec![1.0f32; 10]; 4], 1, true);
    let outcomes = on_devices(4, |r| if r == 1 { Ok(()) } else { comm.launch(cast, r, 2, SHORT, Some(1)) });
    for r in [0, 2, 3] {
        let message = outcomes[r].as_ref().expect_err("a rank must time out");
        assert!(message.contains(&format!("rank {r} waited for rank 1")), "rank {r}: {message}");
    }
}
