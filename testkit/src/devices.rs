//! Tests written once as a function of the device, `fn name(device: &Device)`, run as one
//! `#[test]` per device: a module `name` with `cpu`, `emu` and `cuda` tests. Where no GPU is
//! usable the `cuda` test says it skipped; with `TRIDENT_REQUIRE_CUDA=1` it fails instead, so a
//! run on a GPU machine cannot pass by skipping.
//!
//! The macros take the `Device` type by path, `trident_runtime::Device` unless the list starts
//! with `PATH =>` (an absolute path: `crate::Device` in the runtime's own tests). The type
//! needs the variants `Cpu` and `Emu` and a `cuda(0)` constructor returning a `Result`.

use std::fmt::Display;

/// Whether the `cuda` cases must run: `TRIDENT_REQUIRE_CUDA=1`.
pub fn cuda_required() -> bool {
    std::env::var("TRIDENT_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

/// The GPU `found` (for example `Device::cuda(0)`), or `None` after saying on stderr why it is
/// skipped.
///
/// # Panics
/// When no GPU was found and [`cuda_required`]: the test fails, naming the reason.
#[track_caller]
pub fn cuda_or_skip<D, E: Display>(found: Result<D, E>) -> Option<D> {
    skip_or_fail(found, cuda_required())
}

#[track_caller]
fn skip_or_fail<D, E: Display>(found: Result<D, E>, required: bool) -> Option<D> {
    match found {
        Ok(d) => Some(d),
        Err(e) if required => panic!("TRIDENT_REQUIRE_CUDA=1 but no GPU is usable: {e}"),
        Err(e) => {
            eprintln!("skipped on cuda: {e}");
            None
        }
    }
}

/// Per function `name(&Device)`, a module `name` with the tests `cpu`, `emu` and `cuda`.
///
/// ```text
/// fn add(device: &Device) { /* ... */ }
/// trident_testkit::device_tests!(add);                    // trident_runtime::Device
/// trident_testkit::device_tests!(crate::Device => add);   // another path to the type
/// ```
#[macro_export]
macro_rules! device_tests {
    ($dev:path => $($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::__device_test!(cpu, $dev, $name);
            $crate::__device_test!(emu, $dev, $name);
            $crate::__device_test!(cuda, $dev, $name);
        }
    )*};
    ($($name:ident),* $(,)?) => {
        $crate::device_tests!(::trident_runtime::Device => $($name),*);
    };
}

/// [`device_tests!`] for the kernel devices only (`emu` and `cuda`): for tests of kernels,
/// which the `Cpu` does not run.
#[macro_export]
macro_rules! kernel_tests {
    ($dev:path => $($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::__device_test!(emu, $dev, $name);
            $crate::__device_test!(cuda, $dev, $name);
        }
    )*};
    ($($name:ident),* $(,)?) => {
        $crate::kernel_tests!(::trident_runtime::Device => $($name),*);
    };
}

/// [`device_tests!`] for the host devices only (`cpu` and `emu`): for what only host memory
/// does (allocations past the machine's memory, say).
#[macro_export]
macro_rules! host_tests {
    ($dev:path => $($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::__device_test!(cpu, $dev, $name);
            $crate::__device_test!(emu, $dev, $name);
        }
    )*};
    ($($name:ident),* $(,)?) => {
        $crate::host_tests!(::trident_runtime::Device => $($name),*);
    };
}

/// One device's `#[test]` of `super::$name`; used by the macros above.
#[doc(hidden)]
#[macro_export]
macro_rules! __device_test {
    (cpu, $dev:path, $name:ident) => {
        #[test]
        pub(super) fn cpu() {
            type Device = $dev;
            super::$name(&Device::Cpu);
        }
    };
    (emu, $dev:path, $name:ident) => {
        #[test]
        pub(super) fn emu() {
            type Device = $dev;
            super::$name(&Device::Emu);
        }
    };
    (cuda, $dev:path, $name:ident) => {
        #[test]
        pub(super) fn cuda() {
            type Device = $dev;
            if let Some(device) = $crate::cuda_or_skip(Device::cuda(0)) {
                super::$name(&device);
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::skip_or_fail;

    /// A stand-in for the runtime's `Device`, with a GPU exactly when one is required (so that
    /// these tests pass under `TRIDENT_REQUIRE_CUDA=1` too).
    #[derive(Debug, PartialEq)]
    pub enum Device {
        Cpu,
        Emu,
        Cuda,
    }

    impl Device {
        pub fn cuda(_ordinal: usize) -> Result<Device, String> {
            if super::cuda_required() {
                Ok(Device::Cuda)
            } else {
                Err("no GPU in this test".into())
            }
        }
    }

    /// Bits of the devices each function ran on: 1 Cpu, 2 Emu, 4 Cuda.
    static ALL: AtomicU32 = AtomicU32::new(0);
    static KERNELS: AtomicU32 = AtomicU32::new(0);
    static HOST: AtomicU32 = AtomicU32::new(0);

    fn bit(device: &Device) -> u32 {
        match device {
            Device::Cpu => 1,
            Device::Emu => 2,
            Device::Cuda => 4,
        }
    }

    fn on_all(device: &Device) {
        ALL.fetch_or(bit(device), Ordering::SeqCst);
    }

    fn on_kernels(device: &Device) {
        assert_ne!(*device, Device::Cpu, "kernel_tests! ran on the Cpu");
        KERNELS.fetch_or(bit(device), Ordering::SeqCst);
    }

    fn on_host(device: &Device) {
        assert_ne!(*device, Device::Cuda, "host_tests! ran on Cuda");
        HOST.fetch_or(bit(device), Ordering::SeqCst);
    }

    crate::device_tests!(crate::devices::tests::Device => on_all);
    crate::kernel_tests!(crate::devices::tests::Device => on_kernels);
    crate::host_tests!(crate::devices::tests::Device => on_host);

    #[test]
    fn the_macros_make_one_test_per_device() {
        // The generated tests are plain functions of this module: run them here as well, so that
        // this test sees every one of them whatever order the harness runs them in.
        on_all::cpu();
        on_all::emu();
        on_kernels::emu();
        on_host::cpu();
        on_host::emu();
        on_all::cuda();
        on_kernels::cuda();
        // The `cuda` cases run the function exactly when a GPU is found.
        let gpu = if super::cuda_required() { 4 } else { 0 };
        assert_eq!(ALL.load(Ordering::SeqCst), 3 | gpu);
        assert_eq!(KERNELS.load(Ordering::SeqCst), 2 | gpu);
        assert_eq!(HOST.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_missing_gpu_skips_unless_required() {
        assert_eq!(skip_or_fail(Ok::<_, String>(7), true), Some(7));
        assert_eq!(skip_or_fail(Err::<u32, _>("no driver"), false), None);
        let caught = std::panic::catch_unwind(|| skip_or_fail(Err::<u32, _>("no driver"), true));
        let msg = caught.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("TRIDENT_REQUIRE_CUDA=1") && msg.contains("no driver"), "{msg}");
    }
}
