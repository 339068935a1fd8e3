//! Trident's device runtime: devices, typed buffers, streams, modules and kernel launches.
//!
//! Three devices stand behind one API:
//! - [`Device::Cpu`] holds buffers in host memory and runs no kernels: the ops of the `trident`
//!   crate have CPU implementations for it.
//! - [`Device::Emu`] holds buffers in host memory and runs the kernels of `kernels/` compiled for
//!   the host, through the SIMT emulator (`trident-simt`).
//! - [`Device::Cuda`] holds buffers on a GPU and runs the same kernels as PTX through the CUDA
//!   driver, which is loaded at run time: this crate builds and runs where no CUDA is installed.
//!
//! The runtime knows no kernel by name: a [`ModuleSource`] hands it the PTX and the host table.

mod buffer;
mod cuda;
mod device;
mod error;
mod host_alloc;
mod module;
mod stream;

pub use buffer::{Buffer, View, ViewMut};
pub use cuda::CudaDevice;
pub use device::{Device, DeviceKind};
pub use error::RuntimeError;
pub use host_alloc::HOST_ALIGN;
pub use module::{Function, LaunchConfig, Module, ModuleSource};
pub use stream::Stream;
/// The emulator's work counters: [`last_launch_stats`] reads those of the last `Emu` launch
/// the calling thread made; [`set_block_sample`] makes its later launches run a sample of
/// their grids (for counting large launches quickly).
pub use trident_simt::{
    last_launch_stats, set_block_sample, BlockSample, GlobalTraffic, InstructionCounts, LaunchStats,
    SharedTraffic,
};
pub use trident_simt::{HostKernel, KernelArg};

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
