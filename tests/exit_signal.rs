//! `--exit-signal-handler`: a SIGTERM in the middle of a run saves a checkpoint at the next step
//! boundary and exits with status 0, on one rank and on ranks as threads, and the resumed run
//! gives the uninterrupted run's losses bit for bit.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::metric_losses as losses;

/// Lines a running job has written to its metrics file so far (the last may be torn).
fn lines_written(metrics: &Path) -> usize {
    std::fs::read_to_string(metrics).map_or(0, |t| t.lines().count())
}

fn args(grid: &[&str], iters: &str, metrics: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "train",
        "--device",
        "cpu",
        "--num-layers",
        "1",
        "--hidden-size",
        "32",
        "--num-attention-heads",
        "2",
        "--seq-length",
        "16",
        "--micro-batch-size",
        "2",
        "--global-batch-size",
        "4",
        "--lr-decay-style",
        "constant",
        "--train-iters",
        iters,
        "--metrics-file",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(metrics.display().to_string());
    a.extend(grid.iter().map(|s| s.to_string()));
    a
}

#[test]
fn sigterm_saves_at_a_step_boundary_and_the_run_resumes_exactly() {
    let exe_path = common::trident_exe();
    let exe = exe_path.to_str().expect("the `trident` path is UTF-8");
    for grid in [&[][..], &["--world-size", "2", "--tensor-model-parallel-size", "2"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let (save, metrics) = (dir.path().join("ck"), dir.path().join("m.jsonl"));
        let mut run = args(grid, "1000000", &metrics);
        run.extend(["--exit-signal-handler".into(), "--save".into(), save.display().to_string()]);
        let mut child =
            Command::new(exe).args(&run).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        // Wait for a few steps, then ask the run to stop.
        let started = Instant::now();
        while lines_written(&metrics) < 3 {
            assert!(started.elapsed() < Duration::from_secs(120), "{grid:?}: the run made no progress");
            assert!(child.try_wait().unwrap().is_none(), "{grid:?}: the run ended by itself");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: `kill` with a child's pid that we have not waited for yet.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                child.kill().ok();
                panic!("{grid:?}: the run did not stop within 60 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
        assert!(status.success(), "{grid:?}: {status}: {out}");
        assert!(out.contains("SIGTERM"), "{grid:?}: {out}");
        let stopped_at = losses(&metrics).len() as u64;
        let ck = save.join(format!("step_{stopped_at:08}"));
        assert!(ck.join("trainer.json").is_file(), "{grid:?}: no checkpoint at step {stopped_at}: {out}");

        // Resume to two steps past the stop; compare with one uninterrupted run of that length.
        let end = (stopped_at + 2).to_string();
        let mut resume = args(grid, &end, &metrics);
        resume.extend(["--load".into(), save.display().to_string()]);
        assert!(Command::new(exe).args(&resume).stderr(Stdio::null()).status().unwrap().success());
        let whole = dir.path().join("whole.jsonl");
        assert!(Command::new(exe)
            .args(args(grid, &end, &whole))
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success());
        assert_eq!(losses(&metrics), losses(&whole), "{grid:?}: the resumed losses differ");
    }
}
