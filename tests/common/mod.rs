//! Where the root package's integration tests find the tests' data. The devices to run on,
//! seeded data and the comparisons against f64 references are in `trident-testkit`; what the
//! tests that run the `trident` binary share is in `cli/tests/common`.
#![allow(dead_code)]

use std::path::PathBuf;

/// A directory a variable names, when it is set: a set but empty value, or one that is not a
/// directory, fails the test naming the variable.
fn dir_from_env(var: &str) -> Option<PathBuf> {
    let value = std::env::var_os(var)?;
    assert!(!value.is_empty(), "{var} is set but empty: unset it or name a directory");
    let dir = PathBuf::from(value);
    assert!(dir.is_dir(), "{var}={}: not a directory", dir.display());
    Some(dir)
}

/// A file of the tests' data (`tests/data/`): under `TRIDENT_TEST_DATA` when that variable is
/// set (the bundle carries a copy), else in this checkout.
pub fn test_data(name: &str) -> PathBuf {
    dir_from_env("TRIDENT_TEST_DATA")
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("data"))
        .join(name)
}
