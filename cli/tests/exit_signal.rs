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

/// Waits for `child` up to `within`; kills it and fails the test naming `what` past that.
fn wait_within(child: &mut std::process::Child, within: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("{what}: still running after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A SIGTERM to `trident launch` (a scheduler's stop) reaches its ranks, which agree on it,
/// save a checkpoint and exit 0; the launcher exits 0, and the checkpoint resumes exactly.
#[test]
fn sigterm_to_the_launcher_saves_and_the_launched_run_resumes_exactly() {
    let exe_path = common::trident_exe();
    let exe = exe_path.to_str().expect("the `trident` path is UTF-8");
    let grid = ["--tensor-model-parallel-size", "2"];
    let dir = tempfile::tempdir().unwrap();
    let (save, metrics) = (dir.path().join("ck"), dir.path().join("m.jsonl"));
    let launch = |train: Vec<String>| {
        let mut cmd = Command::new(exe);
        cmd.args(["launch", "--nproc-per-node", "2", "--", exe])
            .args(train)
            .env("TRIDENT_TRANSPORT", "shm")
            .env("TRIDENT_TIMEOUT_S", "60");
        cmd
    };
    let mut run = args(&grid, "1000000", &metrics);
    run.extend(["--exit-signal-handler".into(), "--save".into(), save.display().to_string()]);
    let (out_path, err_path) = (dir.path().join("out.txt"), dir.path().join("err.txt"));
    let mut launcher = launch(run)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while lines_written(&metrics) < 3 {
        assert!(started.elapsed() < Duration::from_secs(120), "the launched run made no progress");
        assert!(launcher.try_wait().unwrap().is_none(), "the launched run ended by itself");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: `kill` with a child's pid that we have not waited for yet.
    assert_eq!(unsafe { libc::kill(launcher.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = wait_within(&mut launcher, Duration::from_secs(60), "the launcher after SIGTERM");
    let out = std::fs::read_to_string(&out_path).unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(status.success(), "{status}: {out}\n{err}");
    assert!(err.contains("got SIGTERM; forwarded it to the ranks"), "{err}");
    assert!(out.contains("SIGTERM"), "{out}");
    let stopped_at = losses(&metrics).len() as u64;
    let ck = save.join(format!("step_{stopped_at:08}"));
    assert!(ck.join("trainer.json").is_file(), "no checkpoint at step {stopped_at}: {out}\n{err}");

    // Resume to two steps past the stop; compare with one uninterrupted launched run.
    let end = (stopped_at + 2).to_string();
    let mut resume = args(&grid, &end, &metrics);
    resume.extend(["--load".into(), save.display().to_string()]);
    let mut resumed = launch(resume).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    assert!(wait_within(&mut resumed, Duration::from_secs(120), "the resumed run").success());
    let whole = dir.path().join("whole.jsonl");
    let mut uninterrupted =
        launch(args(&grid, &end, &whole)).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    assert!(wait_within(&mut uninterrupted, Duration::from_secs(120), "the uninterrupted run").success());
    assert_eq!(losses(&metrics), losses(&whole), "the resumed losses differ");
}

/// Two runs with one `--save` directory: the second is refused at start, naming the first's
/// pid and the directory; once the first is killed (SIGKILL: it cleans nothing up), its lock
/// is gone and a new run saves there.
#[test]
fn a_save_directory_takes_one_run_at_a_time() {
    let exe_path = common::trident_exe();
    let exe = exe_path.to_str().expect("the `trident` path is UTF-8");
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ck");
    let with_save = |iters: &str, metrics: &Path| {
        let mut a = args(&[], iters, metrics);
        a.extend(["--save".into(), save.display().to_string()]);
        a
    };
    let first_metrics = dir.path().join("first.jsonl");
    let mut first = Command::new(exe)
        .args(with_save("1000000", &first_metrics))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while lines_written(&first_metrics) < 1 {
        assert!(started.elapsed() < Duration::from_secs(120), "the first run made no progress");
        assert!(first.try_wait().unwrap().is_none(), "the first run ended by itself");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = Command::new(exe).args(with_save("2", &dir.path().join("second.jsonl"))).output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(!second.status.success(), "{err}");
    let holder = format!("pid {} on ", first.id());
    assert!(err.contains(&holder) && err.contains(&save.display().to_string()), "{err}");
    assert!(!dir.path().join("second.jsonl").exists(), "the refused run trained");

    let third = Command::new(exe).args(with_save("2", &dir.path().join("third.jsonl"))).output().unwrap();
    assert!(third.status.success(), "{}", String::from_utf8_lossy(&third.stderr));
    assert!(save.join("step_00000002").join("trainer.json").is_file());
}
