//! A multi-process run (`trident launch`, one process per rank over shared memory) gives the
//! same losses as the same run with ranks as threads.

mod common;

use std::process::Command;

use common::metric_losses as losses;

#[test]
fn launched_processes_match_threads() {
    let exe_path = common::trident_exe();
    let exe = exe_path.to_str().expect("the `trident` path is UTF-8");
    let dir = tempfile::tempdir().unwrap();
    let train = |metrics: &std::path::Path| -> Vec<String> {
        [
            "train",
            "--device",
            "cpu",
            "--num-layers",
            "2",
            "--hidden-size",
            "32",
            "--num-attention-heads",
            "2",
            "--seq-length",
            "16",
            "--micro-batch-size",
            "2",
            "--global-batch-size",
            "8",
            "--train-iters",
            "3",
            "--tensor-model-parallel-size",
            "2",
            "--pipeline-model-parallel-size",
            "2",
            "--metrics-file",
            metrics.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let threads = dir.path().join("threads.jsonl");
    let status = Command::new(exe).args(train(&threads)).args(["--world-size", "4"]).status().unwrap();
    assert!(status.success());
    let procs = dir.path().join("procs.jsonl");
    let status = Command::new(exe)
        .args(["launch", "--nproc-per-node", "4", "--", exe])
        .args(train(&procs))
        .env("TRIDENT_TRANSPORT", "shm")
        .status()
        .unwrap();
    assert!(status.success());
    let (a, b) = (losses(&threads), losses(&procs));
    assert_eq!(a.len(), 3);
    assert_eq!(a.len(), b.len());
    for (step, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= 1e-5 * y.abs(), "step {step}: threads {x} vs processes {y}");
    }
}

/// Ranks started with different training flags are refused at start, naming the flag.
#[test]
fn launched_ranks_with_different_flags_are_refused_naming_the_flag() {
    let exe_path = common::trident_exe();
    let exe = exe_path.to_str().expect("the `trident` path is UTF-8");
    let base = "train --device cpu --num-layers 2 --hidden-size 32 --num-attention-heads 2 \
                --seq-length 16 --micro-batch-size 2 --train-iters 3";
    // Data-parallel ranks with another --lr each; tensor-parallel ranks with another --seed; ranks
    // with different tensor-parallel sizes.
    let cases = [
        (
            "--global-batch-size 4 --lr 0.00$((RANK + 1))",
            "--lr is \"0.001\" on rank 0 but \"0.002\" on rank 1",
        ),
        (
            "--tensor-model-parallel-size 2 --seed $((RANK + 7))",
            "--seed is \"7\" on rank 0 but \"8\" on rank 1",
        ),
        // Another tensor-parallel size pads the vocabulary differently: the size is named.
        (
            "--global-batch-size 4 --tensor-model-parallel-size $((RANK + 1))",
            "--tensor-model-parallel-size is \"1\" on rank 0 but \"2\" on rank 1",
        ),
    ];
    for (flags, message) in cases {
        let script = format!("exec \"$0\" {base} {flags}");
        let out = Command::new(exe)
            .args(["launch", "--nproc-per-node", "2", "--", "sh", "-c", &script, exe])
            .env("TRIDENT_TRANSPORT", "shm")
            .env("TRIDENT_TIMEOUT_S", "30")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags}: {stderr}");
        assert!(stderr.contains(message), "{flags}: {stderr}");
    }
}

/// The `rank R: data-parallel gradient buckets reduced: N in registered shared buffers, M
/// ordinary` lines of a run's standard error, as (rank, N, M), sorted by rank.
fn bucket_paths(stderr: &[u8]) -> Vec<(usize, u64, u64)> {
    let text = String::from_utf8_lossy(stderr);
    let mut found: Vec<(usize, u64, u64)> = text
        .lines()
        .filter_map(|l| {
            // The launcher prefixes each line of a process with `[rank R] `.
            let (head, rest) = l.split_once(": data-parallel gradient buckets reduced: ")?;
            let rank = &head[head.rfind("rank ")? + 5..];
            let (registered, rest) = rest.split_once(" in registered shared buffers, ")?;
            let ordinary = rest.strip_suffix(" ordinary")?;
            Some((rank.parse().ok()?, registered.parse().ok()?, ordinary.parse().ok()?))
        })
        .collect();
    found.sort();
    found
}

/// Over shared memory across processes every data-parallel gradient bucket (each layer's
/// block and the stage block, all above the small-message size at hidden 64) is reduced in
/// the registered mappings; ranks as threads have no mappings and take the ordinary path;
/// both give the same losses.
#[test]
fn launched_data_parallel_buckets_take_the_registered_path() {
    let exe_path = common::trident_exe();
    let exe = exe_path.to_str().expect("the `trident` path is UTF-8");
    let dir = tempfile::tempdir().unwrap();
    let train = |metrics: &std::path::Path| -> Vec<String> {
        [
            "train",
            "--device",
            "cpu",
            "--num-layers",
            "2",
            "--hidden-size",
            "64",
            "--num-attention-heads",
            "2",
            "--seq-length",
            "16",
            "--micro-batch-size",
            "2",
            "--global-batch-size",
            "8",
            "--train-iters",
            "2",
            "--metrics-file",
            metrics.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // 2 steps x (2 layer blocks + the stage block) per rank.
    let buckets = 2 * 3;
    let threads = dir.path().join("threads.jsonl");
    let out = Command::new(exe).args(train(&threads)).args(["--world-size", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(bucket_paths(&out.stderr), vec![(0, 0, buckets), (1, 0, buckets)]);
    let procs = dir.path().join("procs.jsonl");
    let out = Command::new(exe)
        .args(["launch", "--nproc-per-node", "2", "--", exe])
        .args(train(&procs))
        .env("TRIDENT_TRANSPORT", "shm")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(bucket_paths(&out.stderr), vec![(0, buckets, 0), (1, buckets, 0)]);
    let (a, b) = (losses(&threads), losses(&procs));
    assert_eq!(a.len(), 2);
    assert_eq!(a.len(), b.len());
    for (step, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= 1e-5 * y.abs(), "step {step}: threads {x} vs processes {y}");
    }
}
