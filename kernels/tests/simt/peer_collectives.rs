//! The collective kernels on 2, 3, 4 and 8 emulated devices, lengths 0, 1, odd and larger,
//! f32 and bf16, two collectives in a row (the second on the other flag set, with no reset),
//! equal to a host reference that sums in the kernels' order: exact.

// Element indices address several ranks' buffers and the reference at once.
#![allow(clippy::needless_range_loop)]

use std::time::Duration;

use trident_kernels::collective::layout::part;
use trident_kernels::collective::{one_shot, ring, two_shot};
use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};

use crate::peers::{kernel, Comm};
use crate::rng::{seed, Rng};

const WORLDS: [usize; 4] = [2, 3, 4, 8];
const LENGTHS: [usize; 4] = [0, 1, 7, 1001];
/// Long enough for a loaded machine; a correct run never waits that long.
const TIMEOUT: Duration = Duration::from_secs(60);

/// An element type as the tests see it: f32, or bf16 bits.
trait Elem: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync {
    const NAME: &'static str;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

impl Elem for f32 {
    const NAME: &'static str = "f32";
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Elem for u16 {
    const NAME: &'static str = "bf16";
    fn to_f32(self) -> f32 {
        bf16_to_f32(self)
    }
    fn from_f32(v: f32) -> Self {
        f32_to_bf16(v)
    }
}

fn inputs<T: Elem>(rng: &mut Rng, world: usize, n: usize) -> Vec<Vec<T>> {
    (0..world).map(|_| rng.vec(n).into_iter().map(T::from_f32).collect()).collect()
}

/// Sum of element `i` over the ranks in the ring's order for segment `c`: `c + 1, ..., c`.
fn ring_sum<T: Elem>(x: &[Vec<T>], c: usize, i: usize) -> T {
    let w = x.len();
    let mut acc = x[(c + 1) % w][i].to_f32();
    for k in 2..=w {
        acc += x[(c + k) % w][i].to_f32();
    }
    T::from_f32(acc)
}

/// Sum of element `i` over the ranks in rank order.
fn rank_sum<T: Elem>(x: &[Vec<T>], i: usize) -> T {
    let mut acc = x[0][i].to_f32();
    for row in &x[1..] {
        acc += row[i].to_f32();
    }
    T::from_f32(acc)
}

/// The segment of `[0, n)` that element `i` lies in.
fn segment_of(n: usize, world: usize, i: usize) -> usize {
    (0..world).find(|&c| (part(n, world, c).0..part(n, world, c).1).contains(&i)).expect("i < n")
}

fn all_ok(outcomes: Vec<Result<(), String>>, what: &str) {
    for (r, o) in outcomes.into_iter().enumerate() {
        if let Err(e) = o {
            panic!("{what}: rank {r}: {e}");
        }
    }
}

/// The ring kernels of one element type: all-reduce, reduce-scatter and all-gather.
fn ring_family<T: Elem>(test: &str) {
    let mut rng = Rng::new(seed(test));
    let ar = kernel(ring::HOST_KERNELS, &format!("ring_all_reduce_{}", T::NAME));
    let rs = kernel(ring::HOST_KERNELS, &format!("ring_reduce_scatter_{}", T::NAME));
    let ag = kernel(ring::HOST_KERNELS, &format!("ring_all_gather_{}", T::NAME));
    for world in WORLDS {
        for n in LENGTHS {
            let what = format!("{} world {world} n {n}", T::NAME);
            let x: Vec<Vec<T>> = inputs(&mut rng, world, n);
            let mut comm = Comm::new(x.clone(), 2, true);
            // All-reduce twice in a row: collective 1 on flag set 1, collective 2 on set 0.
            all_ok(comm.run(ar, 1, TIMEOUT, &[]), &format!("ring all-reduce {what}"));
            for r in 0..world {
                for i in 0..n {
                    let want = ring_sum(&x, segment_of(n, world, i), i);
                    assert_eq!(comm.data[r][i], want, "ring all-reduce {what}: rank {r} element {i}");
                }
            }
            let y: Vec<Vec<T>> = inputs(&mut rng, world, n);
            for (r, row) in y.iter().enumerate() {
                comm.set(r, row);
            }
            all_ok(comm.run(rs, 2, TIMEOUT, &[]), &format!("ring reduce-scatter {what}"));
            for r in 0..world {
                let (s, e) = part(n, world, r);
                for i in 0..n {
                    let want = if (s..e).contains(&i) { ring_sum(&y, r, i) } else { y[r][i] };
                    assert_eq!(comm.data[r][i], want, "ring reduce-scatter {what}: rank {r} element {i}");
                }
            }
            // All-gather of the reduce-scatter's segments: every rank ends with all sums.
            all_ok(comm.run(ag, 3, TIMEOUT, &[]), &format!("ring all-gather {what}"));
            for r in 0..world {
                for i in 0..n {
                    let want = ring_sum(&y, segment_of(n, world, i), i);
                    assert_eq!(comm.data[r][i], want, "ring all-gather {what}: rank {r} element {i}");
                }
            }
        }
    }
}

#[test]
fn ring_collectives_f32_match_the_reference() {
    ring_family::<f32>("ring_collectives_f32_match_the_reference");
}

#[test]
fn ring_collectives_bf16_match_the_reference() {
    ring_family::<u16>("ring_collectives_bf16_match_the_reference");
}

/// One-shot (out of place) and two-shot (in place) all-reduce, twice each.
fn shot_family<T: Elem>(test: &str) {
    let mut rng = Rng::new(seed(test));
    let one = kernel(one_shot::HOST_KERNELS, &format!("one_shot_all_reduce_{}", T::NAME));
    let two = kernel(two_shot::HOST_KERNELS, &format!("two_shot_all_reduce_{}", T::NAME));
    for world in WORLDS {
        for n in LENGTHS {
            let what = format!("{} world {world} n {n}", T::NAME);
            let x: Vec<Vec<T>> = inputs(&mut rng, world, n);
            let comm = Comm::new(x.clone(), 2, false);
            for seq in [1, 2] {
                all_ok(comm.run(one, seq, TIMEOUT, &[]), &format!("one-shot {what}"));
                for r in 0..world {
                    for i in 0..n {
                        assert_eq!(
                            comm.out[r][i],
                            rank_sum(&x, i),
                            "one-shot {what} #{seq}: rank {r} element {i}"
                        );
                    }
                }
            }
            let mut comm = Comm::new(x.clone(), 2, true);
            let mut expect = x;
            for seq in [1, 2] {
                all_ok(comm.run(two, seq, TIMEOUT, &[]), &format!("two-shot {what}"));
                let want: Vec<T> = (0..n).map(|i| rank_sum(&expect, i)).collect();
                for r in 0..world {
                    assert_eq!(comm.data[r], want, "two-shot {what} #{seq}: rank {r}");
                }
                // The next collective sums the results again.
                expect = vec![want; world];
                for r in 0..world {
                    let row = comm.data[r].clone();
                    comm.set(r, &row);
                }
            }
        }
    }
}

#[test]
fn one_and_two_shot_f32_match_the_reference() {
    shot_family::<f32>("one_and_two_shot_f32_match_the_reference");
}

#[test]
fn one_and_two_shot_bf16_match_the_reference() {
    shot_family::<u16>("one_and_two_shot_bf16_match_the_reference");
}

#[test]
fn a_stopped_peer_ends_every_survivor_with_its_name() {
    let x: Vec<Vec<f32>> = vec![vec![1.0; 10]; 3];
    let comm = Comm::new(x, 1, true);
    let ar = kernel(ring::HOST_KERNELS, "ring_all_reduce_f32");
    let outcomes = comm.run(ar, 1, Duration::from_millis(300), &[2]);
    for (r, o) in outcomes.iter().enumerate().take(2) {
        let message = o.as_ref().expect_err("a survivor must time out");
        assert!(message.contains("ring_all_reduce_f32"), "rank {r}: {message}");
        assert!(message.contains(&format!("rank {r} waited for rank 2")), "rank {r}: {message}");
    }
}
