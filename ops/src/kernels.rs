//! The kernels of `kernels/`, as the runtime loads them: the PTX module `build.rs` compiled for
//! `Cuda` (with the `cuda` feature) and the machine code `ptxas` assembled from it for sm_80,
//! sm_86, sm_89 and sm_90 ([`CUBINS`]), and the host entries the emulator runs for `Emu`. On a
//! GPU of one of those architectures (or a later minor version of one) the module loads without
//! JIT compilation; on a newer one the driver compiles the PTX.
//!
//! Beside it `build.rs` compiles the sm_90a module ([`PTX_SM90A`], [`CUBINS_SM90A`]): the same
//! kernels and the Hopper-only ones (`wgmma`, TMA, `setmaxnreg`), which runs only on compute
//! capability 9.0. [`load`] picks it there ([`module_source_for`]) and the sm_80 one
//! everywhere else; the emulator runs every kernel, Hopper-only ones included, from
//! [`trident_kernels::HOST_KERNELS`].
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
//! assert!(module.function("gelu_forward_v4_f32").is_ok());
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

/// The sm_90a PTX module (PTX ISA 8.0): every kernel of [`PTX`] and the Hopper-only ones;
/// `None` where the crate was built without its `cuda` feature.
#[cfg(feature = "cuda")]
pub const PTX_SM90A: Option<&str> = Some(include_str!(concat!(env!("OUT_DIR"), "/trident_sm90a.ptx")));

/// The sm_90a PTX module (PTX ISA 8.0): every kernel of [`PTX`] and the Hopper-only ones;
/// `None` where the crate was built without its `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub const PTX_SM90A: Option<&str> = None;

#[cfg(feature = "cuda")]
mod machine {
    include!(concat!(env!("OUT_DIR"), "/trident.machine.rs"));
}

#[cfg(feature = "cuda")]
mod machine_sm90a {
    include!(concat!(env!("OUT_DIR"), "/trident_sm90a.machine.rs"));
}

#[cfg(not(feature = "cuda"))]
mod machine {
    pub const CUBINS: &[(&str, &[u8])] = &[];
    pub const PTXAS_REPORTS: &[(&str, &str)] = &[];
    pub const RESOURCES: &str = "";
    pub const NO_CUBINS: Option<&str> = Some("the crate was built without its `cuda` feature");
}

#[cfg(not(feature = "cuda"))]
use machine as machine_sm90a;

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

/// `("sm_90a", zlib-compressed cubin)` of [`PTX_SM90A`]; empty where `ptxas` was missing
/// ([`NO_CUBINS`] says why).
pub const CUBINS_SM90A: &[(&str, &[u8])] = machine_sm90a::CUBINS;

/// `("sm_90a", ptxas -v report)` of [`CUBINS_SM90A`].
pub const PTXAS_REPORTS_SM90A: &[(&str, &str)] = machine_sm90a::PTXAS_REPORTS;

/// [`RESOURCES`]' table for [`CUBINS_SM90A`].
pub const RESOURCES_SM90A: &str = machine_sm90a::RESOURCES;

/// Why the crate carries no sm_90a machine code, where it carries none.
pub const NO_CUBINS_SM90A: Option<&str> = machine_sm90a::NO_CUBINS;

/// The cubin for `arch` (`sm_90`, or `sm_90a` for the sm_90a module), inflated; `None` where
/// [`CUBINS`] and [`CUBINS_SM90A`] have none for it.
pub fn cubin(arch: &str) -> Option<Vec<u8>> {
    let (_, z) = CUBINS.iter().chain(CUBINS_SM90A).find(|(a, _)| *a == arch)?;
    miniz_oxide::inflate::decompress_to_vec_zlib(z).ok()
}

/// Whether a device of compute capability `cc` loads the sm_90a module: exactly 9.0, the only
/// capability an `sm_90a` target runs on (PTX ISA, "Architecture-specific features").
pub fn uses_sm90a(cc: (i32, i32)) -> bool {
    cc == (9, 0)
}

/// Every kernel, for [`trident_runtime::Device::load_module`]: [`PTX`] (empty where it is
/// absent), [`CUBINS`], the host entries and [`RESOURCES`] (with which `Emu` refuses a block
/// that needs more registers than an SM has, as a GPU does). [`load`] checks for the PTX first.
pub fn module_source() -> ModuleSource<'static> {
    ModuleSource::new("trident", PTX.unwrap_or_default(), trident_kernels::HOST_KERNELS)
        .with_cubins(CUBINS)
        .with_resources(RESOURCES)
}

/// The module `device` loads: on a `Cuda` device of compute capability 9.0 ([`uses_sm90a`])
/// the sm_90a one ([`PTX_SM90A`], [`CUBINS_SM90A`], [`RESOURCES_SM90A`]), elsewhere
/// [`module_source`]. The host entries are the same for both.
///
/// ```
/// use trident_ops::kernels;
/// use trident_runtime::Device;
///
/// assert_eq!(kernels::module_source_for(&Device::Emu).name, "trident");
/// assert!(kernels::uses_sm90a((9, 0)) && !kernels::uses_sm90a((8, 9)) && !kernels::uses_sm90a((10, 0)));
/// ```
pub fn module_source_for(device: &Device) -> ModuleSource<'static> {
    match device {
        Device::Cuda(gpu) if uses_sm90a(gpu.compute_capability()) => {
            ModuleSource::new("trident_sm90a", PTX_SM90A.unwrap_or_default(), trident_kernels::HOST_KERNELS)
                .with_cubins(CUBINS_SM90A)
                .with_resources(RESOURCES_SM90A)
        }
        _ => module_source(),
    }
}

/// Loads every kernel on `device`: the host entries on `Emu`, the PTX on `Cuda` (the sm_90a
/// module on compute capability 9.0, see [`module_source_for`]).
///
/// # Errors
/// [`LaunchError::NoPtx`] on `Cuda` without the `cuda` feature; the runtime's
/// [`NoKernels`](trident_runtime::RuntimeError::NoKernels) on `Cpu`; on `Cuda` the driver's
/// error where it refuses the PTX.
pub fn load(device: &Device) -> Result<Module> {
    if matches!(device, Device::Cuda(_)) && PTX.is_none() {
        return Err(LaunchError::NoPtx);
    }
    Ok(device.load_module(&module_source_for(device))?)
}
