//! A crate of one's own kernels on Trident's runtime: the kernels live in `kernels/` (written
//! against `trident_kernels::simt`, declared with `trident_kernels::kernels!`), `build.rs`
//! compiles them to PTX with `trident-ptx-builder`, and this library pairs that PTX with the
//! kernels' host entries in a [`ModuleSource`] and wraps each launch in a safe function that
//! checks lengths and devices first.
//!
//! ```
//! use custom_kernel::{load, saxpy};
//! use trident_runtime::{Buffer, Device};
//!
//! let device = Device::Emu; // or Device::cuda(0)? on a machine with a GPU
//! let module = load(&device).unwrap();
//! let x = Buffer::from_slice(&device, &[1f32, 2.0, 3.0]).unwrap();
//! let mut y = Buffer::from_slice(&device, &[10f32, 20.0, 30.0]).unwrap();
//! saxpy(&module, 2.0, &x.view(..).unwrap(), &mut y.view_mut(..).unwrap()).unwrap();
//! assert_eq!(y.to_vec().unwrap(), [12.0, 24.0, 36.0]);
//! ```

use std::fmt;

use trident_runtime::{Arg, Device, LaunchConfig, Module, ModuleSource, RuntimeError, View, ViewMut};

/// The kernels' PTX, built for sm_90 by `build.rs`.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/custom_kernels.ptx"));

/// The module: [`PTX`] for `Cuda`, the host entries for `Emu`.
pub const SOURCE: ModuleSource<'static> = ModuleSource::from_static("custom_kernels", PTX, HOST_KERNELS);

/// The kernels' host entries, in the one group the module has.
const HOST_KERNELS: &[&[trident_runtime::HostKernel]] = &[custom_kernel_kernels::HOST_KERNELS];

/// Threads per block of both launches (a power of two, as `block_sum_f32` needs).
pub const THREADS: u32 = 256;

/// Most blocks of a launch; the kernels' grid-stride loops cover the rest.
pub const MAX_BLOCKS: u32 = 1024;

/// Why a launch was refused or failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Two arguments that must have equal lengths do not (or, for [`reverse_tiles`], the
    /// length and the next multiple of [`TILE`]).
    Length {
        /// The operation.
        op: &'static str,
        /// The two lengths.
        lengths: (usize, usize),
    },
    /// A buffer is on another device than the module.
    Device {
        /// The operation.
        op: &'static str,
    },
    /// More elements than the kernels' `u32` index covers.
    TooLong {
        /// The operation.
        op: &'static str,
        /// The length.
        len: usize,
    },
    /// The runtime refused the module or the launch, or the kernel faulted.
    Runtime(RuntimeError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Length { op, lengths: (a, b) } => {
                write!(f, "{op}: the inputs have {a} and {b} elements; pass views of equal length")
            }
            Error::Device { op } => {
                write!(f, "{op}: a buffer is on another device than the module; copy it there first")
            }
            Error::TooLong { op, len } => {
                write!(f, "{op}: {len} elements exceed the kernel's u32 index; split the input")
            }
            Error::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        Error::Runtime(e)
    }
}

/// Loads the module on `device` (`Emu` or `Cuda`; `Cpu` runs no kernels).
pub fn load(device: &Device) -> Result<Module, Error> {
    Ok(device.load_module(&SOURCE)?)
}

fn check_device(op: &'static str, module: &Module, device: &Device) -> Result<(), Error> {
    module.device().expect_same(device).map_err(|_| Error::Device { op })
}

fn index_len(op: &'static str, len: usize) -> Result<u32, Error> {
    u32::try_from(len).map_err(|_| Error::TooLong { op, len })
}

/// `y = a * x + y`, elementwise, on the module's device.
pub fn saxpy(module: &Module, a: f32, x: &View<'_, f32>, y: &mut ViewMut<'_, f32>) -> Result<(), Error> {
    const OP: &str = "saxpy";
    if x.len() != y.len() {
        return Err(Error::Length { op: OP, lengths: (x.len(), y.len()) });
    }
    check_device(OP, module, x.device())?;
    check_device(OP, module, y.device())?;
    let n = index_len(OP, x.len())?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::for_items(x.len(), THREADS, MAX_BLOCKS);
    let args = [y.arg_mut(), x.arg(), Arg::from(a), Arg::from(n)];
    // SAFETY: `saxpy_f32(y, x, a, n)` reads and writes elements 0..n of `y` and reads 0..n
    // of `x`; both views have `n` elements and live on the module's device (checked above).
    unsafe { module.function("saxpy_f32")?.launch(&cfg, &args)? };
    Ok(())
}

/// The sum of `x`: one partial sum per block on the device (`block_sum_f32`), added on the
/// host in block order. The result depends only on `x.len()` (not on the device): each
/// block's order of additions is fixed by the kernel.
pub fn sum(module: &Module, x: &View<'_, f32>) -> Result<f32, Error> {
    const OP: &str = "sum";
    check_device(OP, module, x.device())?;
    let n = index_len(OP, x.len())?;
    let mut cfg = LaunchConfig::for_items(x.len(), THREADS, MAX_BLOCKS);
    cfg.dynamic_smem_bytes = THREADS * 4;
    let blocks = cfg.grid[0] as usize;
    let mut partial = trident_runtime::Buffer::<f32>::zeros(module.device(), blocks)?;
    let args = [partial.view_mut(..)?.arg_mut(), x.arg(), Arg::from(n)];
    // SAFETY: `block_sum_f32(partial, x, n)` reads elements 0..n of `x` (`n` is its length)
    // and writes element b of `partial` for each of the `blocks` blocks, which it has; the
    // block has THREADS (a power of two) threads and 4 * THREADS bytes of dynamic shared
    // memory, as the kernel requires.
    unsafe { module.function("block_sum_f32")?.launch(&cfg, &args)? };
    Ok(partial.to_vec()?.iter().sum())
}

pub use custom_kernel_kernels::TILE;

/// Reverses each tile of [`TILE`] consecutive elements of `x` in place; `x.len()` must be a
/// multiple of [`TILE`].
pub fn reverse_tiles(module: &Module, x: &mut ViewMut<'_, f32>) -> Result<(), Error> {
    const OP: &str = "reverse_tiles";
    if x.len() % TILE != 0 {
        return Err(Error::Length { op: OP, lengths: (x.len(), x.len().next_multiple_of(TILE)) });
    }
    check_device(OP, module, x.device())?;
    let tiles = index_len(OP, x.len() / TILE)?;
    if tiles == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig { grid: [tiles, 1, 1], block: [TILE as u32, 1, 1], dynamic_smem_bytes: 0 };
    let args = [x.arg_mut()];
    // SAFETY: block b of `tiles` reads and writes elements b*TILE..(b+1)*TILE of `x`, which
    // has tiles * TILE elements on the module's device; the block has TILE threads.
    unsafe { module.function("reverse_tiles_f32")?.launch(&cfg, &args)? };
    Ok(())
}
