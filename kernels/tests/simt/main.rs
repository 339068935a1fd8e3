//! The SIMT emulator running kernels written against `trident_kernels::simt`: correct kernels
//! give the right results, broken ones fail with an error that names the fault and thread.

mod collectives;
mod faults;
mod global;
mod launch_rules;
mod mbarrier;
mod memory;
mod rng;
mod selftest;
mod tensor_core;
mod tma;
mod wgmma;

use trident_simt::{launch, register, EmuError, HostKernel, LaunchConfig, LaunchStats, Registration};

/// Runs `entry` on the emulator.
///
/// Test-only shortcut: every caller passes the words of buffers it lent (with [`lend`]) or
/// scalars, matching what its kernel reads.
pub fn run(entry: fn(&[u64]), cfg: LaunchConfig, args: &[u64]) -> Result<LaunchStats, EmuError> {
    // SAFETY: see above; the emulator also checks every access through `Global`/`GlobalMut`
    // against the lent buffers, and the test kernels make no other.
    unsafe { launch(&HostKernel { name: "test_kernel", params: &[], param_names: &[], entry }, &cfg, args) }
}

/// Runs the selftest kernel `name` from `trident_kernels::selftest::HOST_KERNELS`.
pub fn run_selftest(name: &str, cfg: LaunchConfig, args: &[u64]) -> Result<LaunchStats, EmuError> {
    let kernel = trident_kernels::selftest::HOST_KERNELS
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no selftest kernel `{name}`"));
    // SAFETY: as in `run`: the callers pass words of lent buffers sized for the selftest.
    unsafe { launch(kernel, &cfg, args) }
}

/// Lends a test's buffer to the emulator's global-memory checks (as a device allocation
/// whose bytes hold data) while the returned value lives: kernels reach global memory only
/// inside registered allocations.
pub fn lend<T>(buffer: &[T]) -> Registration {
    register(buffer.as_ptr().cast(), size_of_val(buffer), true, "test buffer")
}

/// Argument word for a buffer.
pub fn ptr<T>(buffer: &mut [T]) -> u64 {
    buffer.as_mut_ptr() as u64
}

/// Largest error an f32 sum of `terms` may have in any order: `n` eps times the sum of the
/// magnitudes (relative to the sum itself the error is unbounded when the terms cancel).
pub fn sum_tolerance(terms: &[f32]) -> f64 {
    terms.len() as f64 * f64::from(f32::EPSILON) * terms.iter().map(|&x| f64::from(x).abs()).sum::<f64>()
}
