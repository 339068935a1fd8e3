//! The SIMT emulator running kernels written against `trident_kernels::simt`: correct kernels
//! give the right results, broken ones fail with an error that names the fault and thread.

mod collectives;
mod conversions;
mod faults;
mod gemm_hopper;
mod global;
mod launch_rules;
mod mbarrier;
mod memory;
mod peer_collectives;
mod peer_p2p;
mod peer_races;
mod peers;
mod rng;
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
