//! The kernels of `kernels/`, as the runtime loads them: the PTX module `build.rs` compiled for
//! `Cuda`, and the host entries the emulator runs for `Emu`.

use trident_runtime::ModuleSource;

/// The PTX module holding every kernel, built for sm_90 by `build.rs`.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/trident.ptx"));

/// Every kernel, for [`trident_runtime::Device::load_module`].
pub fn module_source() -> ModuleSource<'static> {
    ModuleSource::new("trident", PTX, trident_kernels::HOST_KERNELS)
}
