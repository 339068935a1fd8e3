//! What `trident` says before long silent work: `trident sample` and `trident train
//! --dry-run` name what they are doing before they load, time or generate anything.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const SMALL: [&str; 12] = [
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
];

#[test]
fn sample_and_dry_run_say_what_they_do_first() {
    let exe = common::trident_exe();
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let ck = ck.to_str().unwrap();
    let status = Command::new(&exe)
        .args(["train", "--train-iters", "1", "--save", ck])
        .args(SMALL)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let out = Command::new(&exe)
        .args(["sample", "--load", ck, "--device", "cpu", "--max-new-tokens", "2", "--num-problems", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(first.starts_with("trident sample: loading "), "{stderr}");
    assert!(stderr.contains("trident sample: scoring 1 held-out addition problems"), "{stderr}");

    // The dry run announces itself before timing the kernels; it is stopped once it has.
    let mut child = Command::new(&exe)
        .args(["train", "--dry-run"])
        .args(SMALL)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok);
    let mut seen = Vec::new();
    let mut found = false;
    for line in lines {
        found = line.contains("trident train --dry-run: nothing is trained");
        seen.push(line);
        if found || seen.len() > 20 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(found, "{seen:?}");
}
