//! The kernels of `kernels/`, as the runtime loads them: the PTX module `build.rs` compiled for
//! `Cuda` (with the `cuda` feature) and the machine code `ptxas` assembled from it for sm_80,
//! sm_86, sm_89 and sm_90 ([`CUBINS`]), and the host entries the emulator runs for `Emu`. On a
//! GPU of one of those architectures (or a later minor version of one) the module loads without
//! JIT compilation; on a newer one the driver compiles the PTX.
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

/// The PTX module holding every kernel, built for sm_80 (PTX ISA 7.8) by `build.rs`; `None`
/// where the crate was built without its `cuda` feature.
#[cfg(feature = "cuda")]
pub const PTX: Option<&str> = Some(include_str!(concat!(env!("OUT_DIR"), "/trident.ptx")));

/// The PTX module holding every kernel, built for sm_80 (PTX ISA 7.8) by `build.rs`; `None`
/// where the crate was built without its `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub const PTX: Option<&str> = None;

#[cfg(feature = "cuda")]
mod machine {
    include!(concat!(env!("OUT_DIR"), "/trident.machine.rs"));
}

#[cfg(not(feature = "cuda"))]
mod machine {
    pub const CUBINS: &[(&str, &[u8])] = &[];
    pub const PTXAS_REPORTS: &[(&str, &str)] = &[];
    pub const RESOURCES: &str = "";
    pub const NO_CUBINS: Option<&str> = Some("the crate was built without its `cuda` feature");
}

/// `(architecture, zlib-compressed cubin)` for each architecture `ptxas` assembled the PTX for
/// when the crate was built; empty where it could not ([`NO_CUBINS`] says why).
pub const CUBINS: &[(&str, &[u8])] = machine::CUBINS;

/// `(architecture, ptxas -v report)` for each of [`CUBINS`]: registers, spills, stack, shared
/// memory and barriers of every kernel.
pub const PTXAS_REPORTS: &[(&str, &str)] = machine::PTXAS_REPORTS;

/// Registers per thread and static shared memory per block of every kernel on each of
/// [`CUBINS`]' architectures (`kernel<TAB>arch<TAB>registers<TAB>static_smem_bytes` lines), from
/// the reports; the emulator's launch rules read it.
pub const RESOURCES: &str = machine::RESOURCES;

/// Why the crate carries no machine code, where it carries none.
pub const NO_CUBINS: Option<&str> = machine::NO_CUBINS;

/// The cubin for `arch` (`sm_90`), inflated; `None` where [`CUBINS`] has none for it.
pub fn cubin(arch: &str) -> Option<Vec<u8>> {
    let (_, z) = CUBINS.iter().find(|(a, _)| *a == arch)?;
    miniz_oxide::inflate::decompress_to_vec_zlib(z).ok()
}

/// Every kernel, for [`trident_runtime::Device::load_module`]: [`PTX`] (empty where it is
/// absent), [`CUBINS`], the host entries and [`RESOURCES`] (with which `Emu` refuses a block
/// that needs more registers than an SM has, as a GPU does). [`load`] checks for the PTX first.
pub fn module_source() -> ModuleSource<'static> {
    ModuleSource::new("trident", PTX.unwrap_or_default(), trident_kernels::HOST_KERNELS)
        .with_cubins(CUBINS)
        .with_resources(RESOURCES)
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
