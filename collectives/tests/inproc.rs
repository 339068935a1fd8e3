//! Every collective on in-process ranks: world sizes 1 to 8, lengths 0, 1, primes and
//! a few MiB, against the f64 serial reference.

use std::sync::Arc;
use trident_collectives::verify::check_all;
use trident_collectives::{
    AbortReason, CommConfig, CommError, Communicator, InprocFabric, LargeAllReduce, RankGrid, ReduceOp,
};

fn run<R: Send + 'static>(
    n: usize,
    config: CommConfig,
    f: impl Fn(Communicator) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let fabric = Arc::new(InprocFabric::new());
    let f = Arc::new(f);
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let (fabric, f, config) = (fabric.clone(), f.clone(), config.clone());
            std::thread::spawn(move || {
                let comm = Communicator::world(fabric, rank, n, config).expect("world");
                f(comm)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank thread panicked")).collect()
}

fn short_timeout() -> CommConfig {
    CommConfig { timeout: std::time::Duration::from_secs(20), ..CommConfig::default() }
}

#[test]
fn every_collective_every_world_size() {
    let seed = 0x5eed_0001;
    for n in 1..=8 {
        let lens = [0, 1, 2, 7, 61, 1021, 16411];
        for (rank, r) in
            run(n, short_timeout(), move |mut c| check_all(&mut c, seed, &lens)).into_iter().enumerate()
        {
            r.unwrap_or_else(|e| panic!("world {n} rank {rank}: {e}"));
        }
    }
}

#[test]
fn multi_mib_buffers() {
    let seed = 0x5eed_0002;
    for large_all_reduce in [LargeAllReduce::Auto, LargeAllReduce::Ring] {
        for n in [2, 5] {
            let lens = [786_433]; // prime, 3 MiB of f32
            let config = CommConfig { large_all_reduce, ..short_timeout() };
            for r in run(n, config, move |mut c| {
                let want = if large_all_reduce == LargeAllReduce::Auto { "direct" } else { "ring" };
                assert_eq!(c.large_all_reduce_path(), want);
                check_all(&mut c, seed, &lens)
            }) {
                r.unwrap_or_else(|e| panic!("world {n}, {large_all_reduce:?}: {e}"));
            }
        }
    }
}

#[test]
fn small_and_ring_paths_agree_across_ranks() {
    // Every AllReduce path must give every rank bitwise equal results.
    for (small_bytes, large_all_reduce) in
        [(0, LargeAllReduce::Auto), (0, LargeAllReduce::Ring), (1 << 20, LargeAllReduce::Auto)]
    {
        let config = CommConfig { small_bytes, large_all_reduce, ..short_timeout() };
        let outs = run(6, config, |mut c| {
            let mut buf = trident_collectives::verify::input(9, c.rank(), 0, 4099);
            c.all_reduce(&mut buf, ReduceOp::Sum).unwrap();
            buf
        });
        for o in &outs[1..] {
            assert!(o.iter().zip(&outs[0]).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}

#[test]
fn megatron_groups() {
    // TP=2, PP=2, DP=2: AllReduce of the world rank over each group sums its members.
    let outs = run(8, short_timeout(), |mut world| {
        let grid = RankGrid::new(2, 2, 2, 8).unwrap();
        let mut g = world.parallel_groups(&grid).unwrap();
        let me = world.rank() as f32;
        let mut sums = Vec::new();
        for comm in [&mut g.tp, &mut g.pp, &mut g.dp] {
            let mut v = [me];
            comm.all_reduce(&mut v, ReduceOp::Sum).unwrap();
            sums.push(v[0]);
        }
        (world.rank(), sums)
    });
    let grid = RankGrid::new(2, 2, 2, 8).unwrap();
    for (rank, sums) in outs {
        let expect = |m: Vec<usize>| m.iter().sum::<usize>() as f32;
        assert_eq!(
            sums,
            vec![expect(grid.tp_group(rank)), expect(grid.pp_group(rank)), expect(grid.dp_group(rank))]
        );
    }
}

#[test]
fn mismatched_sizes_are_reported() {
    let outs = run(3, short_timeout(), |mut c| {
        let len = if c.rank() == 1 { 100_001 } else { 100_000 };
        let mut buf = vec![1.0f32; len];
        c.all_reduce(&mut buf, ReduceOp::Sum)
    });
    for r in outs {
        let err = r.expect_err("mismatch must fail");
        assert!(
            matches!(
                err,
                CommError::Mismatch { .. } | CommError::PeerFailed { reason: AbortReason::Mismatch, .. }
            ),
            "{err}"
        );
    }
}

#[test]
fn mismatched_collectives_are_reported() {
    let outs = run(2, short_timeout(), |mut c| {
        let mut buf = vec![1.0f32; 64];
        if c.rank() == 0 {
            c.all_reduce(&mut buf, ReduceOp::Sum)
        } else {
            c.broadcast(&mut buf, 0)
        }
    });
    for r in outs {
        let err = r.expect_err("mismatch must fail");
        assert!(
            matches!(
                err,
                CommError::Mismatch { .. } | CommError::PeerFailed { reason: AbortReason::Mismatch, .. }
            ),
            "{err}"
        );
    }
}

#[test]
fn departed_rank_fails_the_others_naming_it() {
    let outs = run(4, short_timeout(), |mut c| {
        let mut buf = vec![1.0f32; 1 << 16];
        c.all_reduce(&mut buf, ReduceOp::Sum)?;
        if c.rank() == 2 {
            return Ok(()); // leaves before the second AllReduce
        }
        c.all_reduce(&mut buf, ReduceOp::Sum)
    });
    for (rank, r) in outs.into_iter().enumerate() {
        if rank == 2 {
            r.unwrap();
        } else {
            let err = r.expect_err("must fail");
            assert_eq!(err.culprit(), Some(2), "rank {rank}: {err}");
        }
    }
}

#[test]
fn timeout_names_the_peer() {
    let config = CommConfig { timeout: std::time::Duration::from_millis(300), ..CommConfig::default() };
    let outs = run(2, config, |mut c| {
        let mut buf = [1.0f32; 4];
        if c.rank() == 0 {
            c.recv(&mut buf, 1, 0)
        } else {
            // Rank 1 is slow: it sends nothing until rank 0 has given up.
            std::thread::sleep(std::time::Duration::from_millis(1000));
            Ok(())
        }
    });
    let err = outs[0].as_ref().expect_err("rank 0 must time out");
    assert!(matches!(err, CommError::Timeout { peer: 1, .. }), "{err}");
}

#[test]
fn bf16_and_f64_all_reduce() {
    use half::bf16;
    let n = 4;
    let len = 40_009; // ring path
    let inputs = move |rank: usize| trident_collectives::verify::input(21, rank, 0, len);
    let outs = run(n, short_timeout(), move |mut c| {
        let mine = inputs(c.rank());
        let mut h: Vec<bf16> = mine.iter().map(|&x| bf16::from_f32(x)).collect();
        c.all_reduce(&mut h, ReduceOp::Sum).unwrap();
        let mut d: Vec<f64> = mine.iter().map(|&x| x as f64).collect();
        c.all_reduce(&mut d, ReduceOp::Max).unwrap();
        (h, d)
    });
    let all: Vec<Vec<f32>> = (0..n).map(inputs).collect();
    for (h, d) in &outs {
        for i in 0..len {
            let vals: Vec<f64> = all.iter().map(|v| bf16::from_f32(v[i]).to_f64()).collect();
            let sum: f64 = vals.iter().sum();
            let scale: f64 = vals.iter().map(|v| v.abs()).sum();
            // n-1 bf16 roundings of partial sums, each at most 2^-8 relative.
            let err = (h[i].to_f64() - sum).abs();
            assert!(err <= scale * n as f64 * 2f64.powi(-8), "bf16 element {i}: {} vs {sum}", h[i]);
            let max = all.iter().map(|v| v[i] as f64).fold(f64::MIN, f64::max);
            assert_eq!(d[i], max, "f64 max element {i}");
        }
    }
}

#[test]
fn ranks_leaving_right_after_their_last_step_are_not_reported() {
    // A rank may post its last message and drop its communicator before the receiver looks;
    // the receiver must still take the message instead of reporting the rank as gone.
    for round in 0..300 {
        let config = CommConfig { small_bytes: if round % 2 == 0 { 0 } else { 1 << 20 }, ..short_timeout() };
        for r in run(6, config, |mut c| {
            let mut buf = trident_collectives::verify::input(3, c.rank(), 0, 1031);
            c.all_reduce(&mut buf, ReduceOp::Sum)
        }) {
            r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
    }
}

#[test]
fn inproc_world_hands_out_one_communicator_per_thread() {
    let comms = Communicator::inproc_world(3, short_timeout()).unwrap();
    let handles: Vec<_> = comms
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || {
                let mut v = [c.rank() as f32 + 1.0];
                c.all_reduce(&mut v, ReduceOp::Max).map(|_| v[0])
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), 3.0);
    }
}

#[test]
fn shared_buffers_belong_to_the_communicator_that_made_them() {
    let outs = run(2, short_timeout(), |mut world| {
        let mut pair = world.new_group("pair", &[1, 0]).expect("group");
        let mut buf = world.shared_buffer::<f32>(70_000).expect("shared buffer");
        buf.fill(world.rank() as f32 + 1.0);
        let misuse = pair.all_reduce_shared(&mut buf, ReduceOp::Sum).expect_err("another group's buffer");
        world.all_reduce_shared(&mut buf, ReduceOp::Sum).expect("its own group");
        (misuse.to_string(), buf.iter().all(|&v| v == 3.0))
    });
    for (err, summed) in outs {
        assert!(err.contains("use it with the communicator that made it"), "{err}");
        assert!(summed);
    }
}

#[test]
fn agree_names_the_first_setting_that_differs_on_every_rank() {
    // Rank 2 of 3 has another learning rate and lacks a setting the others have.
    let results = run(3, short_timeout(), |mut c| {
        let lr = if c.rank() == 2 { "0.002" } else { "0.001" };
        let mut settings = vec![("seed", "1234".to_string()), ("lr", lr.to_string())];
        if c.rank() != 2 {
            settings.push(("clip-grad", "1.0".to_string()));
        }
        let first = c.agree("the training configuration", &settings);
        // Only the agreed part: the same call now passes, and the communicator still works.
        let same = c.agree("the training configuration", &[("seed", "1234")]);
        let mut x = [1.0f32];
        c.all_reduce(&mut x, ReduceOp::Sum).unwrap();
        (first, same, x[0])
    });
    for (rank, (first, same, sum)) in results.into_iter().enumerate() {
        match first {
            Err(CommError::Disagreement { what, name, rank_a, value_a, rank_b, value_b }) => {
                assert_eq!(what, "the training configuration");
                assert_eq!((name.as_str(), rank_a, value_a.as_str()), ("lr", 0, "0.001"), "rank {rank}");
                assert_eq!((rank_b, value_b.as_str()), (2, "0.002"), "rank {rank}");
            }
            other => panic!("rank {rank}: expected a disagreement, got {other:?}"),
        }
        same.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        assert_eq!(sum, 3.0);
    }
}

#[test]
fn ranks_asking_for_different_grids_fail_naming_the_size() {
    // Rank 1 thinks the job is data-parallel only; the others ask for TP 2.
    let results = run(4, short_timeout(), |mut c| {
        let (tp, dp) = if c.rank() == 1 { (1, 4) } else { (2, 2) };
        let grid = RankGrid::new(tp, 1, dp, 4).unwrap();
        c.parallel_groups(&grid).err().map(|e| e.to_string())
    });
    for (rank, err) in results.into_iter().enumerate() {
        let err = err.unwrap_or_else(|| panic!("rank {rank}: different grids were accepted"));
        assert!(
            err.contains("tensor-parallel size is \"2\" on rank 0 but \"1\" on rank 1"),
            "rank {rank}: {err}"
        );
    }
}

/// In sub-groups, survivors name a stopped peer by its world rank and its role in the group,
/// not by its index in the group; a survivor that shares no group with it names it too,
/// through the neighbour that gave up because of it.
#[test]
fn sub_group_errors_name_world_ranks_and_roles() {
    let config = CommConfig { timeout: std::time::Duration::from_secs(5), ..CommConfig::default() };
    // TP 2 x PP 2: TP groups [0, 1], [2, 3]; pipeline groups [0, 2], [1, 3].
    let outs = run(4, config, |mut world| {
        let grid = RankGrid::new(2, 2, 1, 4)?;
        let mut g = world.parallel_groups(&grid)?;
        if world.rank() == 3 {
            return Ok(()); // stops before its groups' first collective
        }
        let mut buf = vec![1.0f32; 64];
        g.tp.all_reduce(&mut buf, ReduceOp::Sum)?;
        g.pp.all_reduce(&mut buf, ReduceOp::Sum)
    });
    let expect = [
        (0, "rank 2 gave up because of rank 3"),
        (1, "world rank 3 is pipeline stage 1 of group [1, 3]"),
        (2, "world rank 3 is tensor-parallel rank 1 of group [2, 3]"),
    ];
    for (rank, words) in expect {
        let err = outs[rank].as_ref().expect_err("a survivor must fail");
        let text = err.to_string();
        assert_eq!(err.culprit(), Some(3), "rank {rank}: {text}");
        assert!(text.contains(words), "rank {rank}: {text}");
        assert!(text.contains("rank 3"), "rank {rank}: {text}");
    }
    for rank in [1, 2] {
        assert!(matches!(outs[rank], Err(CommError::InGroup { .. })), "rank {rank}: {:?}", outs[rank]);
    }
    outs[3].as_ref().expect("the stopped rank returns Ok");
}
