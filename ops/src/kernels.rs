//! The kernels of `kernels/`, as the runtime loads them: the PTX module `build.rs` compiled for
//! `Cuda` (with the `cuda` feature), and the host entries the emulator runs for `Emu`.
//!
//! Without the `cuda` feature nothing is built for the GPU (no nightly toolchain, no PTX):
//! `Emu` runs every kernel as before, and loading them on `Cuda` fails with
//! [`LaunchError::NoPtx`].
//!
//! ```
//! use trident_ops::kernels;
//! use trident_runtime::Device;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let module = kernels::load(&Device::Emu)?;
//! assert!(module.function("gelu_forward_f32").is_ok());
//! assert_eq!(kernels::PTX.is_some(), cfg!(feature = "cuda"));
//! # Ok(())
//! # }
//! ```

use trident_runtime::{Device, Module, ModuleSource};

use crate::launch::{LaunchError, Result};

/// The PTX module holding every kernel, built for sm_90 by `build.rs`; `None` where the crate
/// was built without its `cuda` feature.
#[cfg(feature = "cuda")]
pub const PTX: Option<&str> = Some(include_str!(concat!(env!("OUT_DIR"), "/trident.ptx")));

/// The PTX module holding every kernel, built for sm_90 by `build.rs`; `None` where the crate
/// was built without its `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub const PTX: Option<&str> = None;

/// Every kernel, for [`trident_runtime::Device::load_module`]: [`PTX`] (empty where it is
/// absent) and the host entries. [`load`] checks for the PTX first.
pub fn module_source() -> ModuleSource<'static> {
    ModuleSource::new("trident", PTX.unwrap_or_default(), trident_kernels::HOST_KERNELS)
}

/// Loads every kernel on `device`: the host entries on `Emu`, the PTX on `Cuda`.
///
/// # Errors
/// [`LaunchError::NoPtx`] on `Cuda` without the `cuda` feature; the runtime's
/// [`NoKernels`](trident_runtime::RuntimeError::NoKernels) on `Cpu`; on `Cuda` the driver's
/// error where it refuses the PTX.
pub fn load(device: &Device) -> Result<Module> {
    if matches!(device, Device::Cuda(_)) && PTX.is_none() {
        return Err(LaunchError::NoPtx);
    }
    Ok(device.load_module(&module_source())?)
}
