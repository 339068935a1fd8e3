//! Trident trains like llm.c: on the files `trident::llmc::write_workdir` writes, with llm.c's
//! settings and batch order, every step's training loss and every validation loss equals the
//! one llm.c's reference CPU trainer printed (recorded in `tests/data/llmc_losses.json`, which
//! says how) within float32 summation-order noise.

mod common;

use std::collections::BTreeMap;

use serde::Deserialize;
use trident::llmc::{train_like_llmc, write_workdir, WorkdirSpec};
use trident::runtime::Device;

/// Largest relative difference allowed per loss. Measured on the development machine: 1.0e-6
/// (llm.c prints 6 decimals, a rounding of up to 1.2e-7 relative at these losses).
const TOLERANCE: f64 = 1e-5;

#[derive(Deserialize)]
struct Fixture {
    files_fnv1a64: BTreeMap<String, String>,
    train_loss: Vec<f32>,
    val_loss: Vec<(u64, f32)>,
}

fn fnv1a64(bytes: &[u8]) -> String {
    let hash =
        bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{hash:016x}")
}

fn rel(ours: f32, theirs: f32) -> f64 {
    ((ours as f64 - theirs as f64) / theirs as f64).abs()
}

#[test]
fn losses_match_llmc_reference_trainer() {
    let fixture_path = common::test_data("llmc_losses.json");
    let text = std::fs::read_to_string(&fixture_path)
        .unwrap_or_else(|e| panic!("{}: {e} (the fixture is in the repository)", fixture_path.display()));
    let fixture: Fixture = serde_json::from_str(&text).expect("the fixture parses");
    let spec = WorkdirSpec::default();
    let dir = tempfile::tempdir().unwrap();
    let files = write_workdir(dir.path(), &spec).unwrap();

    // The fixture's losses belong to these exact bytes.
    for (name, expected) in &fixture.files_fnv1a64 {
        let bytes = std::fs::read(dir.path().join(name)).unwrap();
        assert_eq!(
            &fnv1a64(&bytes),
            expected,
            "{name} differs from the file llm.c trained on (seed {}); if the generator changed on \
             purpose, rerun llm.c on the new files and record its losses",
            spec.seed
        );
    }

    let ours = train_like_llmc(&files, &Device::Cpu).unwrap();
    assert_eq!(ours.train.len(), fixture.train_loss.len());
    assert_eq!(ours.val.len(), fixture.val_loss.len());
    let mut worst = 0.0f64;
    for (step, (&mine, &theirs)) in ours.train.iter().zip(&fixture.train_loss).enumerate() {
        let e = rel(mine, theirs);
        worst = worst.max(e);
        assert!(
            e < TOLERANCE,
            "seed {} step {step}: train loss {mine} vs llm.c's {theirs} (rel {e:e})",
            spec.seed
        );
    }
    for (&(step, mine), &(at, theirs)) in ours.val.iter().zip(&fixture.val_loss) {
        assert_eq!(step, at, "validation points");
        let e = rel(mine, theirs);
        worst = worst.max(e);
        assert!(
            e < TOLERANCE,
            "seed {} before step {step}: val loss {mine} vs llm.c's {theirs} (rel {e:e})",
            spec.seed
        );
    }
    // The comparison means something only if training moved the loss.
    assert!(ours.train[40] < ours.train[0] - 1.0, "losses {:?}", ours.train);
    println!("largest relative difference from llm.c: {worst:.2e}");
}
