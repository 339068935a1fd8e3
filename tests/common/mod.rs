//! What every integration test shares: the devices to run on, seeded random data, and
//! comparisons against higher-precision references.
#![allow(dead_code)]

use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use trident::runtime::Device;

/// Expands test functions of a device into one `#[test]` per device: `cpu`, `emu`, and `cuda`
/// (skipped with a message where no GPU exists, failed instead under `TRIDENT_REQUIRE_CUDA=1`).
/// `kernel_tests!` leaves out `cpu`, which runs no kernels.
#[macro_export]
macro_rules! device_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn cpu() {
                super::$name(&trident::runtime::Device::Cpu);
            }
            $crate::kernel_tests!(@gpu $name);
        }
    )*};
}

/// [`device_tests!`] for the kernel devices only: per function `name(&Device)`, a module
/// `name` with an `emu` and a `cuda` test.
#[macro_export]
macro_rules! kernel_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::kernel_tests!(@gpu $name);
        }
    )*};
    (@gpu $name:ident) => {
        #[test]
        fn emu() {
            super::$name(&trident::runtime::Device::Emu);
        }
        #[test]
        fn cuda() {
            if let Some(device) = $crate::common::cuda() {
                super::$name(&device);
            }
        }
    };
}

/// The first GPU, or `None` (after saying so) where there is none. With
/// `TRIDENT_REQUIRE_CUDA=1` a missing GPU fails the test instead.
pub fn cuda() -> Option<Device> {
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) if std::env::var("TRIDENT_REQUIRE_CUDA").is_ok_and(|v| v == "1") => {
            panic!("TRIDENT_REQUIRE_CUDA=1 but no GPU is usable: {e}")
        }
        Err(e) => {
            eprintln!("skipped on cuda: {e}");
            None
        }
    }
}

/// A seeded generator: `TRIDENT_SEED` when set, else fresh from the clock. The seed is printed
/// so that a failing run can be repeated.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("TRIDENT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    eprintln!("{test}: TRIDENT_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// `n` values uniform in `[-scale, scale)`.
pub fn uniform(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-scale..scale)).collect()
}

/// What outputs hold before a kernel runs, so that an element it fails to write shows.
pub const POISON: f32 = f32::NAN;

/// `max |got - want| / max |want|`, the norm-wise relative error.
pub fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())).max(f64::MIN_POSITIVE);
    let err = got.iter().zip(want).fold(0.0f64, |m, (&g, &w)| {
        let d = (g as f64 - w).abs();
        // NaN (a poisoned element the kernel never wrote) must fail the comparison.
        if d.is_nan() {
            f64::INFINITY
        } else {
            m.max(d)
        }
    });
    err / scale
}

/// Asserts `rel_err(got, want) <= tol`, naming `what` and the worst element.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    let e = rel_err(got, want);
    if e > tol || e.is_nan() {
        let (i, g, w) = got
            .iter()
            .zip(want)
            .enumerate()
            .map(|(i, (&g, &w))| (i, g, w))
            .max_by(|a, b| {
                let da = (a.1 as f64 - a.2).abs();
                let db = (b.1 as f64 - b.2).abs();
                da.partial_cmp(&db).unwrap_or(std::cmp::Ordering::Greater)
            })
            .expect("non-empty");
        panic!("{what}: relative error {e:.3e} > {tol:.1e}; worst element {i}: got {g}, want {w}");
    }
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

/// A file of the tests' data (`tests/data/`): under `TRIDENT_TEST_DATA` when that variable is
/// set (the bundle carries a copy), else in this checkout.
pub fn test_data(name: &str) -> PathBuf {
    dir_from_env("TRIDENT_TEST_DATA")
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("data"))
        .join(name)
}
