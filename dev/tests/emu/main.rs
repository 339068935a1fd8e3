//! The instruction self-test kernels (`trident_dev_kernels::selftest`) on the emulator alone,
//! launched directly on lent host buffers, against host references: every `simt` operation,
//! the `cp.async` pipeline, every global access form, and `mma.sync` with its fragment layouts.

mod selftest;
mod tensor_core;

use trident_simt::{launch, register, EmuError, LaunchConfig, LaunchStats, Registration};

/// Runs the selftest kernel `name` from `trident_dev_kernels::selftest::HOST_KERNELS`.
///
/// Test-only shortcut: every caller passes the words of buffers it lent (with [`lend`]) or
/// scalars, sized as the kernel documents.
pub fn run_selftest(name: &str, cfg: LaunchConfig, args: &[u64]) -> Result<LaunchStats, EmuError> {
    let kernel = trident_dev_kernels::selftest::HOST_KERNELS
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no selftest kernel `{name}`"));
    // SAFETY: see above; the emulator also checks every access through `Global`/`GlobalMut`
    // against the lent buffers.
    unsafe { launch(kernel, &cfg, args) }
}

/// Lends a test's buffer to the emulator's global-memory checks while the returned value lives.
pub fn lend<T>(buffer: &[T]) -> Registration {
    register(buffer.as_ptr().cast(), size_of_val(buffer), true, "test buffer")
}

/// Argument word for a buffer.
pub fn ptr<T>(buffer: &mut [T]) -> u64 {
    buffer.as_mut_ptr() as u64
}
