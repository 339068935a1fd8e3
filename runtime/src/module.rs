//! Modules of kernels and their launch.
//!
//! A [`ModuleSource`] is what a kernels crate builds: the PTX of its kernels and their host
//! entries for the emulator. [`Device::load_module`] loads it (the PTX through the driver on
//! `Cuda`; nothing to load on `Emu`), [`Module::function`] finds a kernel, and
//! [`Function::launch`] runs it with typed arguments ([`Arg`]) that are checked against the
//! kernel's parameter types.

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use trident_simt::{HostKernel, ParamType};

use crate::{Arg, Device, Result, RuntimeError, Stream};

/// What a module is built from: the PTX (and, where `ptxas` assembled it at build time, a
/// cubin per architecture) for `Cuda`, and the host entries for `Emu`, all produced from the
/// same kernel source.
///
/// On `Cuda` [`Device::load_module`] loads the cubin that runs on the device's compute
/// capability ([`pick_cubin`]); only where there is none does the driver JIT-compile the PTX,
/// and the runtime says so on standard error, once per module and device.
///
/// The PTX may be borrowed (a `&'static str` that `include_str!` embeds) or owned (PTX read
/// or generated at run time); loading copies what it needs, so the source may be dropped
/// after [`Device::load_module`].
///
/// ```
/// use trident_runtime::{Device, HostKernel, ModuleSource};
///
/// # fn main() -> trident_runtime::Result<()> {
/// fn body(_words: &[u64]) {}
/// static KERNELS: &[&[HostKernel]] = &[&[HostKernel { name: "nothing", params: &[], param_names: &[], entry: body }]];
///
/// // PTX built at run time: an owned string.
/// let ptx = format!(".version 8.0\n.target sm_90\n.address_size 64\n// {} kernel\n", KERNELS[0].len());
/// let source = ModuleSource::new("mine", ptx, KERNELS);
/// let module = Device::Emu.load_module(&source)?;
/// drop(source);
/// assert_eq!(module.function("nothing")?.name(), "nothing");
/// assert!(module.function("missing").is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ModuleSource<'a> {
    /// The module's name, for errors.
    pub name: Cow<'a, str>,
    /// The PTX text of every kernel in the module.
    pub ptx: Cow<'a, str>,
    /// The host entries, grouped as the kernel source files group them.
    pub host_kernels: &'static [&'static [HostKernel]],
    /// `(architecture, cubin)` pairs, `("sm_80", image)`: each image an ELF cubin as `ptxas`
    /// writes it, or that cubin zlib-compressed (as `trident-ptx-builder` embeds them).
    pub cubins: &'static [(&'static str, &'static [u8])],
}

impl<'a> ModuleSource<'a> {
    /// A source named `name` from PTX text (borrowed or owned) and the host entries of the same
    /// kernels.
    pub fn new(
        name: impl Into<Cow<'a, str>>,
        ptx: impl Into<Cow<'a, str>>,
        host_kernels: &'static [&'static [HostKernel]],
    ) -> Self {
        ModuleSource { name: name.into(), ptx: ptx.into(), host_kernels, cubins: &[] }
    }

    /// The same source with machine code: `(architecture, cubin)` pairs (see
    /// [`ModuleSource::cubins`]).
    ///
    /// ```
    /// use trident_runtime::ModuleSource;
    ///
    /// static CUBINS: &[(&str, &[u8])] = &[("sm_80", b"\x7fELF...")];
    /// let source = ModuleSource::from_static("mine", "", &[]).with_cubins(CUBINS);
    /// assert_eq!(source.cubins[0].0, "sm_80");
    /// ```
    pub fn with_cubins(mut self, cubins: &'static [(&'static str, &'static [u8])]) -> Self {
        self.cubins = cubins;
        self
    }
}

/// The cubin among `cubins` that runs on a device of compute capability `cc`, by NVIDIA's
/// binary compatibility rule (CUDA C++ Programming Guide, "Binary Compatibility"): a cubin for
/// X.y runs on X.z for z >= y, never across major versions; of those, the highest y. An
/// architecture-specific cubin (`sm_90a`) runs only on its own capability and is preferred
/// there. `None` where no cubin fits, or `cubins` names no architecture this can read.
///
/// ```
/// use trident_runtime::pick_cubin;
///
/// let cubins: &[(&str, &[u8])] = &[("sm_80", b"a"), ("sm_86", b"b"), ("sm_89", b"c"), ("sm_90", b"d")];
/// assert_eq!(pick_cubin((8, 0), cubins).map(|c| c.0), Some("sm_80")); // A100
/// assert_eq!(pick_cubin((8, 7), cubins).map(|c| c.0), Some("sm_86")); // Jetson Orin
/// assert_eq!(pick_cubin((8, 9), cubins).map(|c| c.0), Some("sm_89")); // L40S
/// assert_eq!(pick_cubin((9, 0), cubins).map(|c| c.0), Some("sm_90")); // H100
/// assert_eq!(pick_cubin((10, 0), cubins), None); // B200: the PTX is JIT-compiled
/// assert_eq!(pick_cubin((7, 5), cubins), None); // T4: nothing runs there
/// ```
pub fn pick_cubin<'c>(cc: (i32, i32), cubins: &'c [(&'c str, &'c [u8])]) -> Option<(&'c str, &'c [u8])> {
    let parse = |arch: &str| -> Option<(i32, i32, bool)> {
        let digits = arch.strip_prefix("sm_")?;
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        let n: i32 = digits.parse().ok()?;
        Some((n / 10, n % 10, specific))
    };
    cubins
        .iter()
        .filter_map(|&(arch, image)| {
            let (major, minor, specific) = parse(arch)?;
            let fits = major == cc.0 && if specific { minor == cc.1 } else { minor <= cc.1 };
            fits.then_some(((minor, specific), (arch, image)))
        })
        .max_by_key(|(rank, _)| *rank)
        .map(|(_, c)| c)
}

impl ModuleSource<'static> {
    /// [`ModuleSource::new`] for PTX embedded in the program, usable in a `const`:
    ///
    /// ```
    /// use trident_runtime::ModuleSource;
    ///
    /// const SOURCE: ModuleSource<'static> = ModuleSource::from_static("none", "", &[]);
    /// assert_eq!(SOURCE.name, "none");
    /// ```
    pub const fn from_static(
        name: &'static str,
        ptx: &'static str,
        host_kernels: &'static [&'static [HostKernel]],
    ) -> Self {
        ModuleSource { name: Cow::Borrowed(name), ptx: Cow::Borrowed(ptx), host_kernels, cubins: &[] }
    }
}

/// A module loaded on a device.
#[derive(Clone)]
pub struct Module {
    name: Arc<str>,
    host_kernels: &'static [&'static [HostKernel]],
    device: Device,
    cuda: Option<Arc<CudaModule>>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kernels: usize = self.host_kernels.iter().map(|g| g.len()).sum();
        f.debug_struct("Module")
            .field("name", &self.name)
            .field("device", &self.device.kind())
            .field("kernels", &kernels)
            .finish()
    }
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks along x, y and z (each at least 1).
    pub grid: [u32; 3],
    /// Threads per block along x, y and z (each at least 1, at most 1024 in all).
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block (`simt::dynamic_shared` hands them out); above
    /// 48 KiB the launch raises the kernel's limit first on `Cuda`.
    pub dynamic_smem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `threads` threads per block over enough blocks to cover `n` items,
    /// capped at `max_blocks` (kernels loop over the rest with a grid stride).
    ///
    /// ```
    /// let cfg = trident_runtime::LaunchConfig::for_items(1000, 256, 2);
    /// assert_eq!((cfg.grid, cfg.block), ([2, 1, 1], [256, 1, 1]));
    /// ```
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

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.host.name)
            .field("params", &self.host.params)
            .field("device", &self.device.kind())
            .finish()
    }
}

impl Device {
    /// Loads a module: on `Cuda` the cubin of the device's compute capability, or else its PTX
    /// through the driver's JIT compiler; its host table on `Emu`.
    ///
    /// # Errors
    /// [`RuntimeError::NoKernels`] on `Cpu`, which runs no kernels; on `Cuda`
    /// [`RuntimeError::ModuleLoad`], naming the device, its compute capability, what was tried
    /// and the JIT compiler's log.
    pub fn load_module(&self, source: &ModuleSource<'_>) -> Result<Module> {
        let cuda = match self {
            Device::Cpu => return Err(RuntimeError::NoKernels(self.kind())),
            Device::Emu => None,
            Device::Cuda(d) => Some(d.load_module(source)?),
        };
        Ok(Module {
            name: source.name.as_ref().into(),
            host_kernels: source.host_kernels,
            device: self.clone(),
            cuda,
        })
    }
}

impl Module {
    /// The device the module is loaded on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The module's name, as its [`ModuleSource`] gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel named `name`.
    ///
    /// # Errors
    /// [`RuntimeError::NoSuchKernel`] where the host table has no such kernel; on `Cuda` the
    /// driver's error where the PTX lacks it.
    pub fn function(&self, name: &str) -> Result<Function> {
        let host =
            self.host_kernels.iter().flat_map(|group| group.iter()).find(|k| k.name == name).ok_or_else(
                || RuntimeError::NoSuchKernel { module: self.name.to_string(), name: name.to_string() },
            )?;
        let cuda = match &self.cuda {
            Some(m) => Some(m.load_function(name)?),
            None => None,
        };
        Ok(Function { device: self.device.clone(), host, cuda })
    }
}

impl Function {
    /// The kernel's name, as in the PTX.
    pub fn name(&self) -> &'static str {
        self.host.name
    }

    /// The kernel's parameter types, as its signature writes them.
    pub fn params(&self) -> &'static [&'static str] {
        self.host.params
    }

    /// Launches the kernel on the device's default stream with one argument per parameter. On
    /// `Emu` it has finished when this returns, and its work counters are
    /// [`crate::last_launch_stats`]; on `Cuda` it is queued on the stream.
    ///
    /// # Errors
    /// [`RuntimeError::ArgCount`] and [`RuntimeError::ArgType`] where the arguments do not
    /// match the kernel's parameters in number or type (checked on every device, before
    /// anything runs); [`RuntimeError::Emulator`] for a launch the emulator refuses or a fault
    /// it finds; [`RuntimeError::Kernel`] where the driver refuses the launch.
    ///
    /// # Safety
    /// Every pointer argument's view must hold every element the kernel accesses through it for
    /// the given scalar arguments and launch shape, and the kernel's writes must not race with
    /// each other (for instance where one view is passed for two writable parameters). The
    /// checks above cover types, not what the kernel does with them.
    pub unsafe fn launch(&self, cfg: &LaunchConfig, args: &[Arg]) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_on(&self.device.default_stream(), cfg, args) }
    }

    /// [`Function::launch`] on `stream`, which must belong to the function's device
    /// ([`RuntimeError::WrongDevice`] otherwise).
    ///
    /// # Safety
    /// As for [`Function::launch`]; in addition, no view among the arguments may be in use by
    /// work on another stream that `stream` has not been made to wait for
    /// ([`Stream::wait_for`]), nor be used, copied or freed by other streams before they wait
    /// for this one.
    pub unsafe fn launch_on(&self, stream: &Stream, cfg: &LaunchConfig, args: &[Arg]) -> Result<()> {
        self.device.expect_same(stream.device())?;
        self.check_args(args)?;
        let words: Vec<u64> = args.iter().map(Arg::word).collect();
        match (&self.device, &self.cuda, stream.cuda()) {
            (Device::Cuda(d), Some(f), Some(s)) => {
                if cfg.dynamic_smem_bytes > 48 * 1024 {
                    d.set_max_dynamic_smem(f, cfg.dynamic_smem_bytes)?;
                }
                // SAFETY: the words match the parameters in number and type (checked above);
                // the caller vouches for the extents the kernel accesses.
                unsafe { d.launch(self.host.name, s, f, cfg.grid, cfg.block, cfg.dynamic_smem_bytes, &words) }
            }
            _ => {
                let emu = trident_simt::LaunchConfig {
                    grid: cfg.grid,
                    block: cfg.block,
                    dynamic_smem_bytes: cfg.dynamic_smem_bytes,
                };
                // Pointer arguments are bounded by the views they came from.
                let extents: Vec<_> = args.iter().map(Arg::extent).collect();
                // SAFETY: one word of the right type per parameter (checked above), and the
                // caller vouches that every address is valid for the kernel's accesses.
                let result = unsafe {
                    trident_simt::launch_with(
                        self.host,
                        &emu,
                        &words,
                        &extents,
                        trident_simt::current_sample(),
                    )
                };
                result?;
                Ok(())
            }
        }
    }

    /// Checks `args` against the kernel's parameters, in number and then one by one.
    fn check_args(&self, args: &[Arg]) -> Result<()> {
        let params = self.host.params;
        if args.len() != params.len() {
            return Err(RuntimeError::ArgCount {
                kernel: self.host.name,
                expected: params.len(),
                got: args.len(),
                params: params.iter().map(|p| p.replace(' ', "")).collect::<Vec<_>>().join(", "),
            });
        }
        for (index, (param, arg)) in params.iter().zip(args).enumerate() {
            let ty = ParamType::parse(param);
            if !arg.fits(ty) {
                return Err(RuntimeError::ArgType {
                    kernel: self.host.name,
                    index,
                    name: self.host.param_names.get(index).copied().unwrap_or(""),
                    expected: ty.to_string(),
                    got: arg.ty().to_string(),
                });
            }
        }
        Ok(())
    }
}
