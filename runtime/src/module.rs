//! Modules of kernels and their launch.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use trident_simt::HostKernel;

use crate::{Device, Result, RuntimeError, Stream};

/// What a module is built from: the PTX for `Cuda` and the host entries for `Emu`, both
/// produced from the same kernel source.
#[derive(Clone, Copy)]
pub struct ModuleSource {
    pub name: &'static str,
    pub ptx: &'static str,
    /// The host entries, grouped as the kernel source files group them.
    pub host_kernels: &'static [&'static [HostKernel]],
}

/// A module loaded on a device.
#[derive(Clone)]
pub struct Module {
    source: ModuleSource,
    device: Device,
    cuda: Option<Arc<CudaModule>>,
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `threads` threads per block over enough blocks to cover `n` items,
    /// capped at `max_blocks` (kernels loop over the rest with a grid stride).
    pub fn for_items(n: usize, threads: u32, max_blocks: u32) -> Self {
        let blocks = n.div_ceil(threads as usize).clamp(1, max_blocks as usize) as u32;
        Self { grid: [blocks, 1, 1], block: [threads, 1, 1], dynamic_smem_bytes: 0 }
    }
}

/// One kernel of a loaded module.
#[derive(Clone)]
pub struct Function {
    device: Device,
    host: &'static HostKernel,
    cuda: Option<CudaFunction>,
}

impl Device {
    /// Loads a module: its PTX on `Cuda`, its host table on `Emu`. `Cpu` runs no kernels.
    pub fn load_module(&self, source: &ModuleSource) -> Result<Module> {
        let cuda = match self {
            Device::Cpu => return Err(RuntimeError::NoKernels(self.kind())),
            Device::Emu => None,
            Device::Cuda(d) => Some(d.load_module(source.ptx)?),
        };
        Ok(Module { source: *source, device: self.clone(), cuda })
    }
}

impl Module {
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The kernel named `name`.
    pub fn function(&self, name: &str) -> Result<Function> {
        let host = self
            .source
            .host_kernels
            .iter()
            .flat_map(|group| group.iter())
            .find(|k| k.name == name)
            .ok_or_else(|| RuntimeError::NoSuchKernel { module: self.source.name, name: name.to_string() })?;
        let cuda = match &self.cuda {
            Some(m) => Some(m.load_function(name)?),
            None => None,
        };
        Ok(Function { device: self.device.clone(), host, cuda })
    }
}

impl Function {
    pub fn name(&self) -> &'static str {
        self.host.name
    }

    /// Launches the kernel with one argument word per parameter (see
    /// [`trident_simt::KernelArg`]). On `Emu` it has finished when this returns, and its work
    /// counters are [`crate::last_launch_stats`]; on `Cuda` it is queued on the device's stream.
    ///
    /// # Safety
    /// The words must match the kernel's parameter types, and every address among them must be
    /// valid on this device for every access the kernel makes with the other arguments.
    pub unsafe fn launch(&self, cfg: &LaunchConfig, args: &[u64]) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_on(&self.device.default_stream(), cfg, args) }
    }

    /// [`Function::launch`] on `stream`, which must belong to the function's device.
    ///
    /// # Safety
    /// As for [`Function::launch`]; in addition, the buffers must not be in use by work on
    /// other streams that this stream has not been made to wait for.
    pub unsafe fn launch_on(&self, stream: &Stream, cfg: &LaunchConfig, args: &[u64]) -> Result<()> {
        self.device.expect_same(stream.device())?;
        if args.len() != self.host.params.len() {
            return Err(RuntimeError::ArgCount {
                kernel: self.host.name,
                expected: self.host.params.len(),
                got: args.len(),
                params: self.host.params.join(", "),
            });
        }
        match (&self.device, &self.cuda, stream.cuda()) {
            (Device::Cuda(d), Some(f), Some(s)) => {
                if cfg.dynamic_smem_bytes > 48 * 1024 {
                    d.set_max_dynamic_smem(f, cfg.dynamic_smem_bytes)?;
                }
                // SAFETY: the caller vouches for the arguments.
                unsafe { d.launch(self.host.name, s, f, cfg.grid, cfg.block, cfg.dynamic_smem_bytes, args) }
            }
            _ => {
                let emu = trident_simt::LaunchConfig {
                    grid: cfg.grid,
                    block: cfg.block,
                    dynamic_smem_bytes: cfg.dynamic_smem_bytes,
                };
                // Pointer arguments are bounded by the views they came from.
                let extents: Vec<Option<trident_simt::ArgExtent>> = self
                    .host
                    .params
                    .iter()
                    .zip(args)
                    .map(|(ty, &word)| {
                        let pointer = ty.contains("Global") || ty.starts_with('*');
                        let bytes = if pointer { crate::buffer::arg_extent(word) } else { None };
                        bytes.map(|bytes| trident_simt::ArgExtent { start: word, bytes })
                    })
                    .collect();
                // SAFETY: the caller vouches that the words match the kernel's parameters and
                // that every address among them is valid for the kernel's accesses.
                let result = unsafe {
                    trident_simt::launch_with(self.host, &emu, args, &extents, trident_simt::current_sample())
                };
                crate::buffer::launched();
                result?;
                Ok(())
            }
        }
    }
}
