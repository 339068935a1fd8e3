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
//!
//! # A tour
//!
//! Buffers hold `len` elements of a [`bytemuck::Pod`] type on one device; views are ranges of
//! them, checked against the buffer's length:
//!
//! ```
//! use trident_runtime::{Buffer, Device};
//!
//! # fn main() -> trident_runtime::Result<()> {
//! let device = Device::Emu; // or Device::Cpu, Device::cuda(0)?, Device::auto()
//! let mut x = Buffer::from_slice(&device, &[1.0f32, 2.0, 3.0, 4.0])?;
//! x.view_mut(2..)?.copy_from_slice(&[30.0, 40.0])?; // host to device
//! let mut head = [0.0f32; 2];
//! x.view(..2)?.copy_to_slice(&mut head)?; // device to host
//! assert_eq!(head, [1.0, 2.0]);
//! assert_eq!(x.to_vec()?, [1.0, 2.0, 30.0, 40.0]);
//! assert!(x.view(3..5).is_err(), "a range past the end is an error, not a panic");
//! # Ok(())
//! # }
//! ```
//!
//! Two mutable views of one buffer must not overlap, and a copy between views is on one
//! device:
//!
//! ```
//! # use trident_runtime::{Buffer, Device};
//! # fn main() -> trident_runtime::Result<()> {
//! let mut grads = Buffer::<f32>::zeros(&Device::Emu, 6)?;
//! let [mut w, mut b] = grads.views_mut([0..4, 4..6])?;
//! w.copy_from_slice(&[1.0; 4])?;
//! b.copy_from(&w.as_view().sub(..2)?)?; // device to device
//! assert_eq!(grads.to_vec()?, [1.0; 6]);
//! assert!(grads.views_mut([0..4, 3..6]).is_err());
//! # Ok(())
//! # }
//! ```
//!
//! Kernels come in modules ([`ModuleSource`]: the PTX and the host entries the `kernels!` macro
//! of `trident-kernels` generates). A launch passes one typed [`Arg`] per parameter; their
//! types and number are checked against the kernel's signature before it runs. This kernel is
//! written by hand against the emulator's host interface, as the macro would write it:
//!
//! ```
//! use trident_runtime::{Arg, Buffer, Device, HostKernel, KernelArg, LaunchConfig, ModuleSource, RuntimeError};
//! use trident_simt::device;
//!
//! /// `x[i] *= 2` for the calling thread's `i < n`.
//! unsafe fn double(words: &[u64]) {
//!     let (x, n) = (<*mut f32>::from_word(words[0]), u32::from_word(words[1]));
//!     let i = device::block_idx()[0] * device::block_dim()[0] + device::thread_idx()[0];
//!     if i < n {
//!         // SAFETY: the launch passes `n` elements of `x`.
//!         unsafe { *x.add(i as usize) *= 2.0 };
//!     }
//! }
//! static KERNELS: &[&[HostKernel]] =
//!     &[&[HostKernel { name: "double", params: &["*mut f32", "u32"], param_names: &["x", "n"], entry: double }]];
//!
//! # fn main() -> trident_runtime::Result<()> {
//! let device = Device::Emu;
//! let module = device.load_module(&ModuleSource::new("example", "", KERNELS))?;
//! let double = module.function("double")?;
//! let mut x = Buffer::from_slice(&device, &[1.0f32, 2.0, 3.0])?;
//! let mut v = x.view_mut(..)?;
//! let cfg = LaunchConfig::for_items(v.len(), 32, 1);
//! // SAFETY: the kernel touches `n` = 3 elements of `x`, which the view holds.
//! unsafe { double.launch(&cfg, &[v.arg_mut(), Arg::from(3u32)])? };
//! assert_eq!(x.to_vec()?, [2.0, 4.0, 6.0]);
//!
//! // A float where the kernel takes a u32 is refused before the kernel runs.
//! let mut v = x.view_mut(..)?;
//! // SAFETY: refused before it runs.
//! let err = unsafe { double.launch(&cfg, &[v.arg_mut(), Arg::from(3.0f32)]) }.unwrap_err();
//! assert!(matches!(err, RuntimeError::ArgType { index: 1, .. }), "{err}");
//! # Ok(())
//! # }
//! ```
//!
//! Work is queued on streams ([`Stream`]); see the [`stream`] module.

mod arg;
mod buffer;
mod cuda;
mod device;
mod error;
mod host_alloc;
mod module;
pub mod stream;
mod transfers;

pub use arg::{Arg, ArgType};
pub use buffer::{Buffer, View, ViewMut};
pub use cuda::CudaDevice;
pub use device::{Device, DeviceKind};
pub use error::RuntimeError;
pub use host_alloc::HOST_ALIGN;
pub use module::{pick_cubin, Function, LaunchConfig, Module, ModuleSource};
pub use stream::Stream;
pub use transfers::host_transfers;
/// The emulator's work counters: [`last_launch_stats`] reads those of the last `Emu` launch
/// the calling thread made, [`record_launches`] those of every launch a closure makes;
/// [`set_block_sample`] makes its later launches run a sample of their grids (for counting
/// large launches quickly), [`set_block_order`] hand out their blocks in another order (for
/// showing that results do not depend on it).
pub use trident_simt::{
    last_launch_stats, record_launches, set_block_order, set_block_sample, BlockOrder, BlockSample,
    GlobalTraffic, InstructionCounts, LaunchStats, SharedTraffic,
};
/// What a kernel is to the emulator ([`HostKernel`]), the words of its arguments
/// ([`KernelArg`]) and its parameter types as a launch checks them ([`ParamType`]).
pub use trident_simt::{HostKernel, KernelArg, ParamType};

/// The runtime's result type.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
