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
