//! The SIMT emulator running kernels written against `trident_kernels::simt`: correct kernels
//! give the right results, broken ones fail with an error that names the fault and thread.

mod collectives;
mod faults;
mod memory;
mod rng;
mod selftest;
mod tensor_core;

use trident_simt::{launch, EmuError, HostKernel, LaunchConfig};

/// Runs `entry` on the emulator.
pub fn run(entry: fn(&[u64]), cfg: LaunchConfig, args: &[u64]) -> Result<(), EmuError> {
    launch(&HostKernel { name: "test_kernel", params: &[], entry }, &cfg, args)
}

/// Argument word for a buffer.
pub fn ptr<T>(buffer: &mut [T]) -> u64 {
    buffer.as_mut_ptr() as u64
}

/// Relative error of `got` against `want`, with an absolute floor for values near zero.
pub fn rel_err(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs().max(1e-6)
}
