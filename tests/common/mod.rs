//! What the integration tests that run the `trident` binary or read the tests' data share:
//! where the binary and the data are, and the losses of a metrics file. The devices to run on,
//! seeded data and the comparisons against f64 references are in `trident-testkit`.
#![allow(dead_code)]

use std::path::PathBuf;

/// The `loss` of every line of a metrics file (`--metrics-file`), which must exist and be whole.
pub fn metric_losses(metrics: &std::path::Path) -> Vec<f64> {
    let text = std::fs::read_to_string(metrics).unwrap_or_else(|e| panic!("{}: {e}", metrics.display()));
    text.lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {l:?}: {e}", metrics.display()));
            v["loss"].as_f64().unwrap_or_else(|| panic!("{}: no loss in {l:?}", metrics.display()))
        })
        .collect()
}

/// A directory a variable names, when it is set: a set but empty value, or one that is not a
/// directory, fails the test naming the variable.
fn dir_from_env(var: &str) -> Option<PathBuf> {
    let value = std::env::var_os(var)?;
    assert!(!value.is_empty(), "{var} is set but empty: unset it or name a directory");
    let dir = PathBuf::from(value);
    assert!(dir.is_dir(), "{var}={}: not a directory", dir.display());
    Some(dir)
}

/// The `trident` binary the tests start: `$TRIDENT_BIN_DIR/trident` when `TRIDENT_BIN_DIR` is
/// set (a test binary run away from its build tree, as in the bundle `scripts/gpu-check.sh`
/// builds), else the one cargo built beside this test.
pub fn trident_exe() -> PathBuf {
    if let Some(dir) = dir_from_env("TRIDENT_BIN_DIR") {
        let exe = dir.join("trident");
        assert!(exe.is_file(), "TRIDENT_BIN_DIR={}: no `trident` binary there", dir.display());
        return exe;
    }
    match option_env!("CARGO_BIN_EXE_trident") {
        Some(exe) => PathBuf::from(exe),
        None => {
            panic!("this test was built without the `trident` binary (feature `cli`): set TRIDENT_BIN_DIR")
        }
    }
}

/// A file of the tests' data (`tests/data/`): under `TRIDENT_TEST_DATA` when that variable is
/// set (the bundle carries a copy), else in this checkout.
pub fn test_data(name: &str) -> PathBuf {
    dir_from_env("TRIDENT_TEST_DATA")
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("data"))
        .join(name)
}
