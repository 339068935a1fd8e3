//! Serial references for every collective, so tests and the `check` command of the
//! `trident-coll` binary can verify a communicator end to end: each rank regenerates every
//! rank's seeded input, computes the expected result in f64 and compares.

use crate::communicator::Communicator;
use crate::element::ReduceOp;
use crate::error::CommError;

/// Deterministic inputs in [-1, 1), distinct per (seed, rank, op), never all zero.
pub fn input(seed: u64, rank: usize, salt: u64, len: usize) -> Vec<f32> {
    let mut state = seed ^ (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt << 48;
    (0..len)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A collective's result differs from the reference.
    #[error("{op} with {len} elements on rank {rank}/{size} (seed {seed}): {detail}")]
    Wrong {
        /// The collective.
        op: &'static str,
        /// Its element count.
        len: usize,
        /// The rank that saw it.
        rank: usize,
        /// The communicator's size.
        size: usize,
        /// The seed of the inputs, to reproduce it.
        seed: u64,
        /// The first differing element and the tolerance.
        detail: String,
    },
    /// The collective itself failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

fn compare(got: &[f32], want: &[f64], scale: &[f64], tol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("length {} != {}", got.len(), want.len()));
    }
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (g as f64 - w).abs();
        if err.is_nan() || err > tol * s.max(f64::MIN_POSITIVE) {
            return Err(format!("element {i} is {g}, expected {w} (error {err:e}, allowed {:e})", tol * s));
        }
    }
    Ok(())
}

/// Runs every collective once for each length in `lens` and checks the results.
pub fn check_all(comm: &mut Communicator, seed: u64, lens: &[usize]) -> Result<(), CheckError> {
    let (rank, n) = (comm.rank(), comm.size());
    for &len in lens {
        let fail =
            |op: &'static str, detail: String| CheckError::Wrong { op, len, rank, size: n, seed, detail };
        let inputs =
            |salt: u64, len: usize| -> Vec<Vec<f32>> { (0..n).map(|r| input(seed, r, salt, len)).collect() };
        // f32 sums of n terms: relative to the sum of magnitudes, error stays below n * eps.
        let tol = (n as f64) * f32::EPSILON as f64;

        // all_reduce sum and max
        for (salt, op) in [(1, ReduceOp::Sum), (2, ReduceOp::Max)] {
            let all = inputs(salt, len);
            let mut buf = all[rank].clone();
            comm.all_reduce(&mut buf, op)?;
            let want: Vec<f64> = (0..len)
                .map(|i| {
                    let vals = all.iter().map(|v| v[i] as f64);
                    match op {
                        ReduceOp::Sum => vals.sum(),
                        ReduceOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                    }
                })
                .collect();
            let scale: Vec<f64> = (0..len).map(|i| all.iter().map(|v| (v[i] as f64).abs()).sum()).collect();
            let tol = if op == ReduceOp::Max { 0.0 } else { tol };
            compare(&buf, &want, &scale, tol).map_err(|d| fail("all_reduce", d))?;
            // The same on a registered buffer, reduced in place in every rank's memory.
            let mut shared = comm.shared_buffer::<f32>(len)?;
            shared.copy_from_slice(&all[rank]);
            comm.all_reduce_shared(&mut shared, op)?;
            compare(&shared, &want, &scale, tol).map_err(|d| fail("all_reduce_shared", d))?;
        }

        // reduce_scatter: each rank contributes n*len, gets chunk `rank` reduced
        let all = inputs(3, len * n);
        let mut out = vec![f32::NAN; len];
        comm.reduce_scatter(&all[rank], &mut out, ReduceOp::Sum)?;
        let range = rank * len..(rank + 1) * len;
        let want: Vec<f64> = range.clone().map(|i| all.iter().map(|v| v[i] as f64).sum()).collect();
        let scale: Vec<f64> = range.map(|i| all.iter().map(|v| (v[i] as f64).abs()).sum()).collect();
        compare(&out, &want, &scale, tol).map_err(|d| fail("reduce_scatter", d))?;

        // all_gather
        let all = inputs(4, len);
        let mut out = vec![f32::NAN; len * n];
        comm.all_gather(&all[rank], &mut out)?;
        let want: Vec<f64> = all.iter().flatten().map(|&x| x as f64).collect();
        compare(&out, &want, &vec![1.0; len * n], 0.0).map_err(|d| fail("all_gather", d))?;

        // broadcast from a root that moves with the length
        let root = len % n;
        let all = inputs(5, len);
        let mut buf = if rank == root { all[root].clone() } else { vec![f32::NAN; len] };
        comm.broadcast(&mut buf, root)?;
        let want: Vec<f64> = all[root].iter().map(|&x| x as f64).collect();
        compare(&buf, &want, &vec![1.0; len], 0.0).map_err(|d| fail("broadcast", d))?;

        // send/recv around the ring, both directions at once
        if n > 1 {
            let all = inputs(6, len);
            let mut got = vec![f32::NAN; len];
            let (right, left) = ((rank + 1) % n, (rank + n - 1) % n);
            comm.send_recv(Some((&all[rank][..], right)), Some((&mut got[..], left)), 7)?;
            let want: Vec<f64> = all[left].iter().map(|&x| x as f64).collect();
            compare(&got, &want, &vec![1.0; len], 0.0).map_err(|d| fail("send_recv", d))?;
        }

        comm.barrier()?;
    }
    Ok(())
}

/// Carves the TP, PP and DP groups of `grid` out of `world` and checks that an AllReduce
/// over each sums exactly its members (world ranks, as f64).
pub fn check_groups(world: &mut Communicator, grid: &crate::grid::RankGrid) -> Result<(), CheckError> {
    let rank = world.rank();
    let mut groups = world.parallel_groups(grid)?;
    let cases = [
        ("tp group", &mut groups.tp, grid.tp_group(rank)),
        ("pp group", &mut groups.pp, grid.pp_group(rank)),
        ("dp group", &mut groups.dp, grid.dp_group(rank)),
    ];
    for (name, comm, members) in cases {
        if comm.members() != members.as_slice() {
            return Err(CheckError::Wrong {
                op: name,
                len: 1,
                rank,
                size: grid.world_size(),
                seed: 0,
                detail: format!("members {:?}, expected {members:?}", comm.members()),
            });
        }
        let mut v = [rank as f64];
        comm.all_reduce(&mut v, ReduceOp::Sum)?;
        let want = members.iter().sum::<usize>() as f64;
        if v[0] != want {
            return Err(CheckError::Wrong {
                op: name,
                len: 1,
                rank,
                size: grid.world_size(),
                seed: 0,
                detail: format!("sum of member ranks is {}, expected {want}", v[0]),
            });
        }
    }
    Ok(())
}
