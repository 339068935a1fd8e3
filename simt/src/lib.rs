//! SIMT emulator core.
mod arg;
pub use arg::KernelArg;

/// A kernel compiled for the host: its PTX entry name, parameter types, and the function that
/// runs its body for the current emulated thread.
pub struct HostKernel {
    pub name: &'static str,
    pub params: &'static [&'static str],
    pub entry: fn(&[u64]),
}

// Interim interface until the emulator lands.
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem_bytes: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EmuError(pub String);

pub fn launch(kernel: &HostKernel, _cfg: &LaunchConfig, _args: &[u64]) -> Result<(), EmuError> {
    Err(EmuError(format!("the emulator cannot run `{}` yet", kernel.name)))
}
