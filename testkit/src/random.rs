//! Seeded random data for tests.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A seeded generator: `TRIDENT_SEED` when set, else fresh from the clock. The seed is printed
/// (with `test`, the test's name) so that a failing run can be repeated.
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

/// `n` values uniform in `[-scale, scale)` (`scale` must be positive).
pub fn uniform(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-scale..scale)).collect()
}
