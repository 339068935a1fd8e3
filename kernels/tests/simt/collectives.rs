//! Warp shuffles and votes.

use trident_kernels::simt::*;
use trident_simt::LaunchConfig;

use crate::rng::{seed, Rng};
use crate::{ptr, run, sum_tolerance};

/// Sum per warp by a butterfly of xor shuffles; lane 0 writes it.
fn warp_sum(args: &[u64]) {
    let (input, output) = (args[0] as *const f32, args[1] as *mut f32);
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    // SAFETY: one input per thread.
    let mut v = unsafe { *input.add(i) };
    let mut offset = 16;
    while offset > 0 {
        v += shfl_xor_f32(FULL_MASK, v, offset);
        offset /= 2;
    }
    // Everyone has the sum now; check with a down-shuffle reduction too.
    // SAFETY: one input per thread.
    let mut w = unsafe { *input.add(i) };
    for delta in [16, 8, 4, 2, 1] {
        w += shfl_down_f32(FULL_MASK, w, delta);
    }
    let w = shfl_idx_f32(FULL_MASK, w, 0);
    if lane_id() == 0 {
        // SAFETY: two outputs per warp.
        unsafe {
            *output.add(i / 32 * 2) = v;
            *output.add(i / 32 * 2 + 1) = w;
        }
    }
}

#[test]
fn warp_shuffle_reduction() {
    let mut rng = Rng::new(seed("warp_shuffle_reduction"));
    let (blocks, threads) = (3, 128);
    let input = rng.vec(blocks * threads);
    let mut output = vec![f32::NAN; blocks * threads / 32 * 2];
    run(
        warp_sum,
        LaunchConfig::linear(blocks as u32, threads as u32),
        &[input.as_ptr() as u64, ptr(&mut output)],
    )
    .unwrap();
    for (w, chunk) in input.chunks(32).enumerate() {
        let want: f64 = chunk.iter().map(|&x| f64::from(x)).sum();
        for got in &output[2 * w..2 * w + 2] {
            assert!((f64::from(*got) - want).abs() <= sum_tolerance(chunk), "warp {w}: {got} vs {want}");
        }
    }
}

/// Each lane records every shuffle kind of its own value, with per-lane source arguments.
fn all_shuffles(args: &[u64]) {
    let (input, out) = (args[0] as *const u32, args[1] as *mut u32);
    let lane = lane_id();
    let t = thread_idx_x() as usize;
    // SAFETY: one input per thread.
    let v = unsafe { *input.add(t) };
    let f = v as f32;
    let results = [
        shfl_idx_u32(FULL_MASK, v, (lane * 7 + 3) % 32),
        shfl_up_u32(FULL_MASK, v, 3),
        shfl_down_u32(FULL_MASK, v, 5),
        shfl_xor_u32(FULL_MASK, v, 6),
        shfl_idx_f32(FULL_MASK, f, 40 + lane) as u32,
        shfl_up_f32(FULL_MASK, f, lane % 4) as u32,
        shfl_down_f32(FULL_MASK, f, 31) as u32,
        shfl_xor_f32(FULL_MASK, f, 31) as u32,
    ];
    for (k, r) in results.iter().enumerate() {
        // SAFETY: eight outputs per thread.
        unsafe { *out.add(t * 8 + k) = *r };
    }
}

#[test]
fn every_shuffle_kind_follows_ptx_semantics() {
    let mut rng = Rng::new(seed("every_shuffle_kind"));
    let input: Vec<u32> = (0..64).map(|_| (rng.next_u64() % 1_000_000) as u32).collect();
    let mut out = vec![0u32; 64 * 8];
    run(all_shuffles, LaunchConfig::linear(1, 64), &[input.as_ptr() as u64, ptr(&mut out)]).unwrap();
    for t in 0..64 {
        let (warp, lane) = (t / 32 * 32, t % 32);
        let at = |l: usize| input[warp + l];
        let want = [
            at((lane * 7 + 3) % 32),
            if lane >= 3 { at(lane - 3) } else { at(lane) },
            if lane + 5 < 32 { at(lane + 5) } else { at(lane) },
            at(lane ^ 6),
            at((40 + lane) % 32),
            at(lane - lane % 4),
            if lane == 0 { at(31) } else { at(lane) },
            at(lane ^ 31),
        ];
        assert_eq!(&out[t * 8..t * 8 + 8], &want, "thread {t}");
    }
}

/// Votes with a random predicate per thread; the two half-warps also vote separately under
/// disjoint masks from diverged branches.
fn votes(args: &[u64]) {
    let (preds, out) = (args[0] as *const u32, args[1] as *mut u32);
    let t = thread_idx_x() as usize;
    // SAFETY: one predicate per thread.
    let p = unsafe { *preds.add(t) } != 0;
    let half = if lane_id() < 16 { vote_ballot(0x0000_FFFF, p) } else { vote_ballot(0xFFFF_0000, p) };
    let results = [
        u32::from(vote_all(FULL_MASK, p)),
        u32::from(vote_any(FULL_MASK, p)),
        vote_ballot(FULL_MASK, p),
        half,
        u32::from(vote_all(FULL_MASK, true)),
        u32::from(vote_any(FULL_MASK, false)),
    ];
    for (k, r) in results.iter().enumerate() {
        // SAFETY: six outputs per thread.
        unsafe { *out.add(t * 6 + k) = *r };
    }
}

#[test]
fn votes_and_divergent_disjoint_masks() {
    let mut rng = Rng::new(seed("votes"));
    // Warp 0: random; warp 1: all true; warp 2 (partial, 8 lanes): all false.
    let mut preds: Vec<u32> = (0..32).map(|_| (rng.next_u64() % 2) as u32).collect();
    preds.extend([1; 32]);
    preds.extend([0; 8]);
    let mut out = vec![u32::MAX; 72 * 6];
    run(votes, LaunchConfig::linear(1, 72), &[preds.as_ptr() as u64, ptr(&mut out)]).unwrap();
    for t in 0..72 {
        let warp = &preds[t / 32 * 32..(t / 32 * 32 + 32).min(72)];
        let ballot = warp.iter().enumerate().fold(0u32, |b, (l, &p)| b | (p << l));
        let lanes = if warp.len() == 32 { u32::MAX } else { (1 << warp.len()) - 1 };
        let half_mask = if t % 32 < 16 { 0x0000_FFFF } else { 0xFFFF_0000 };
        let want = [u32::from(ballot == lanes), u32::from(ballot != 0), ballot, ballot & half_mask, 1, 0];
        assert_eq!(&out[t * 6..t * 6 + 6], &want, "thread {t}");
    }
}

/// Lanes of one warp reach the same full-mask shuffle from two branches, and the two halves
/// run their own shuffles through one instruction with disjoint masks.
fn diverged_shuffles(args: &[u64]) {
    let out = args[0] as *mut u32;
    let lane = lane_id();
    let from_branch = if lane % 2 == 0 {
        shfl_idx_u32(FULL_MASK, lane * 10, 31 - lane)
    } else {
        shfl_idx_u32(FULL_MASK, lane * 10, 31 - lane) + 1
    };
    let half = if lane < 16 { 0x0000_FFFF } else { 0xFFFF_0000 };
    let within_half = shfl_xor_u32(half, lane, 8);
    // SAFETY: two outputs per thread.
    unsafe {
        *out.add(2 * lane as usize) = from_branch;
        *out.add(2 * lane as usize + 1) = within_half;
    }
}

#[test]
fn diverged_lanes_meet_at_one_collective() {
    let mut out = vec![0u32; 64];
    run(diverged_shuffles, LaunchConfig::linear(1, 32), &[ptr(&mut out)]).unwrap();
    for lane in 0..32u32 {
        let want = (31 - lane) * 10 + lane % 2;
        assert_eq!(out[2 * lane as usize], want, "lane {lane}");
        assert_eq!(out[2 * lane as usize + 1], lane ^ 8, "lane {lane}");
    }
}
