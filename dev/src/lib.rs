//! The kernels the trainer no longer runs, kept beside it with everything that uses them, as
//! llm.c keeps `dev/cuda/`: the scalar first generations of GeLU and cross-entropy ([`scalar`],
//! the baselines the kernel benchmark compares the trainer's kernels against), published
//! SGEMM designs ([`designs`], the kernel time model's calibration), and the instruction
//! self-test (`trident_dev_kernels::selftest`, run on `Emu` and on a GPU against the same
//! references by `tests/simt_selftest.rs`).
//!
//! The kernels are `trident-dev-kernels` (`dev/kernels/`), written against
//! `trident_kernels::simt` like the production kernels; `build.rs` compiles them to their own
//! PTX module ([`PTX`]) and machine code ([`CUBINS`]), so the trainer's module carries none
//! of them.
//!
//! ```
//! use trident_dev::{load, scalar};
//! use trident_runtime::{Buffer, Device};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let kernels = load(&Device::Emu)?;
//! let x = Buffer::from_slice(&Device::Emu, &[-1f32, 0.0, 2.0])?;
//! let mut y = Buffer::from_slice(&Device::Emu, &[0f32; 3])?;
//! scalar::gelu_forward(&kernels, &mut y.view_mut(..)?, &x.view(..)?)?;
//! assert_eq!(y.to_vec()?[1], 0.0);
//! # Ok(())
//! # }
//! ```

pub mod designs;
pub mod scalar;

use trident_ops::launch::{Kernels, LaunchError};
use trident_runtime::{Device, ModuleSource};

/// The dev kernels' PTX, built for sm_80 (PTX ISA 7.8) by `build.rs`; `None` without the
/// `cuda` feature.
#[cfg(feature = "cuda")]
pub const PTX: Option<&str> = Some(include_str!(concat!(env!("OUT_DIR"), "/trident_dev.ptx")));

/// The dev kernels' PTX, built for sm_80 (PTX ISA 7.8) by `build.rs`; `None` without the
/// `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub const PTX: Option<&str> = None;

#[cfg(feature = "cuda")]
mod machine {
    include!(concat!(env!("OUT_DIR"), "/trident_dev.machine.rs"));
}

#[cfg(not(feature = "cuda"))]
mod machine {
    pub const CUBINS: &[(&str, &[u8])] = &[];
    pub const PTXAS_REPORTS: &[(&str, &str)] = &[];
    pub const RESOURCES: &str = "";
    pub const NO_CUBINS: Option<&str> = Some("the crate was built without its `cuda` feature");
}

/// `(architecture, zlib-compressed cubin)` for each architecture `ptxas` assembled [`PTX`]
/// for; empty where it could not ([`NO_CUBINS`] says why).
pub const CUBINS: &[(&str, &[u8])] = machine::CUBINS;

/// `(architecture, ptxas -v report)` for each of [`CUBINS`].
pub const PTXAS_REPORTS: &[(&str, &str)] = machine::PTXAS_REPORTS;

/// Registers per thread and static shared memory per block of every dev kernel on each of
/// [`CUBINS`]' architectures, in `trident-perfmodel`'s `resources.tsv` format.
pub const RESOURCES: &str = machine::RESOURCES;

/// Why the crate carries no machine code, where it carries none.
pub const NO_CUBINS: Option<&str> = machine::NO_CUBINS;

/// The module: [`PTX`] and [`CUBINS`] for `Cuda`, the host entries for `Emu`, [`RESOURCES`]
/// for the emulator's register rule.
pub fn module_source() -> ModuleSource<'static> {
    ModuleSource::new("trident_dev", PTX.unwrap_or_default(), trident_dev_kernels::HOST_KERNELS)
        .with_cubins(CUBINS)
        .with_resources(RESOURCES)
}

/// Loads the dev kernels on `device` (`Emu` or `Cuda`), ready for the launch wrappers of
/// [`scalar`] and [`designs`].
///
/// # Errors
/// [`LaunchError::NoPtx`] on `Cuda` without the `cuda` feature; the runtime's
/// [`NoKernels`](trident_runtime::RuntimeError::NoKernels) on `Cpu`; on `Cuda` the driver's
/// error where it refuses the PTX.
pub fn load(device: &Device) -> Result<Kernels, LaunchError> {
    if matches!(device, Device::Cuda(_)) && PTX.is_none() {
        return Err(LaunchError::NoPtx);
    }
    Ok(Kernels::from_module(device.load_module(&module_source())?))
}
