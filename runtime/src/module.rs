//! Modules of kernels and their launch.
//!
//! A [`ModuleSource`] is what a kernels crate builds: the PTX of its kernels and their host
//! entries for the emulator. [`Device::load_module`] loads it (the PTX through the driver on
//! `Cuda`; nothing to load on `Emu`), [`Module::function`] finds a kernel, and
//! [`Function::launch`] runs it with typed arguments ([`Arg`]) that are checked against the
//! kernel's parameter types.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaModule};
use trident_simt::{HostKernel, KernelAttributes, ParamType};

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
    /// The kernels' resources as `ptxas -v` reports them, one
    /// `kernel<TAB>arch<TAB>registers<TAB>static_smem_bytes` line per kernel and architecture
    /// (`#` starts a comment line), or `None`. With a table, `Emu` refuses a launch whose block
    /// needs more registers than an SM has, at the most registers the kernel uses on any
    /// architecture listed (the module must launch on each); without one, or for a kernel the
    /// table does not list, registers are not checked. See [`ModuleSource::with_resources`].
    pub resources: Option<Cow<'a, str>>,
}

impl<'a> ModuleSource<'a> {
    /// A source named `name` from PTX text (borrowed or owned) and the host entries of the same
    /// kernels.
    pub fn new(
        name: impl Into<Cow<'a, str>>,
        ptx: impl Into<Cow<'a, str>>,
        host_kernels: &'static [&'static [HostKernel]],
    ) -> Self {
        ModuleSource { name: name.into(), ptx: ptx.into(), host_kernels, resources: None, cubins: &[] }
    }

    /// The source with the kernels' resource table (the format of [`ModuleSource::resources`]),
    /// so that `Emu` checks the registers a launch's block needs:
    ///
    /// ```
    /// use trident_runtime::{Device, HostKernel, LaunchConfig, ModuleSource};
    ///
    /// # fn main() -> trident_runtime::Result<()> {
    /// fn body(_words: &[u64]) {}
    /// static KERNELS: &[&[HostKernel]] = &[&[HostKernel { name: "big", params: &[], param_names: &[], entry: body }]];
    ///
    /// let table = "# kernel\tarch\tregisters\tstatic smem\nbig\tsm_80\t96\t0\nbig\tsm_90\t128\t0\n";
    /// let module = Device::Emu.load_module(&ModuleSource::new("mine", "", KERNELS).with_resources(table))?;
    /// let big = module.function("big")?;
    /// // SAFETY: the kernel takes no arguments and touches no memory.
    /// unsafe { big.launch(&LaunchConfig::for_items(512, 512, 1), &[]) }?;
    /// // 1024 threads at 128 registers need 131072 registers: more than an SM has.
    /// let error = unsafe { big.launch(&LaunchConfig::for_items(1024, 1024, 1), &[]) }.unwrap_err();
    /// assert!(error.to_string().contains("registers per block"), "{error}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_resources(self, tsv: impl Into<Cow<'a, str>>) -> Self {
        ModuleSource { resources: Some(tsv.into()), ..self }
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
        ModuleSource {
            name: Cow::Borrowed(name),
            ptx: Cow::Borrowed(ptx),
            host_kernels,
            resources: None,
            cubins: &[],
        }
    }

    /// [`ModuleSource::from_static`] with the kernels' resource table
    /// ([`ModuleSource::with_resources`]), usable in a `const`:
    ///
    /// ```
    /// use trident_runtime::ModuleSource;
    ///
    /// const SOURCE: ModuleSource<'static> =
    ///     ModuleSource::from_static_with_resources("none", "", &[], "# no kernels\n");
    /// assert_eq!(SOURCE.resources.as_deref(), Some("# no kernels\n"));
    /// ```
    pub const fn from_static_with_resources(
        name: &'static str,
        ptx: &'static str,
        host_kernels: &'static [&'static [HostKernel]],
        resources: &'static str,
    ) -> Self {
        ModuleSource {
            name: Cow::Borrowed(name),
            ptx: Cow::Borrowed(ptx),
            host_kernels,
            resources: Some(Cow::Borrowed(resources)),
            cubins: &[],
        }
    }
}

/// Registers per thread of each kernel a resource table lists: the most over its
/// architectures. Errors name the line.
fn parse_registers(module: &str, tsv: &str) -> Result<HashMap<String, u32>> {
    let mut registers = HashMap::new();
    for (i, line) in tsv.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad =
            |problem: String| RuntimeError::Resources { module: module.to_string(), line: i + 1, problem };
        let fields: Vec<&str> = line.split('\t').collect();
        let [kernel, _arch, regs, smem] = fields[..] else {
            return Err(bad(format!(
                "expected 4 tab-separated fields (kernel, arch, registers, static smem), found {}: {line:?}",
                fields.len()
            )));
        };
        let regs: u32 =
            regs.trim().parse().map_err(|_| bad(format!("registers {regs:?} is not a number")))?;
        smem.trim().parse::<u32>().map_err(|_| bad(format!("static smem {smem:?} is not a number")))?;
        let entry = registers.entry(kernel.trim().to_string()).or_insert(0);
        *entry = (*entry).max(regs);
    }
    Ok(registers)
}

/// A kernel's `MAX_DYNAMIC_SHARED_SIZE_BYTES` as the runtime has set it (0: never set), shared
/// by every [`Function`] of the kernel loaded from one module.
type OptIn = Arc<Mutex<u32>>;

/// A module loaded on a device.
#[derive(Clone)]
pub struct Module {
    name: Arc<str>,
    host_kernels: &'static [&'static [HostKernel]],
    device: Device,
    cuda: Option<Arc<CudaModule>>,
    /// Registers per thread by kernel, where the source had a resource table.
    registers: Option<Arc<HashMap<String, u32>>>,
    /// The dynamic shared memory each kernel has opted in to, shared by every [`Function`]
    /// made for it from this module (they are one `CUfunction` to the driver).
    opt_ins: Arc<Mutex<HashMap<&'static str, OptIn>>>,
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
    /// Bytes of dynamic shared memory per block (`simt::dynamic_shared` hands them out). A
    /// launch with any opts the kernel in first (see [`Function::launch_on`]).
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
    /// Registers per thread, where the module's resource table lists the kernel.
    registers: Option<u32>,
    /// The kernel's `MAX_DYNAMIC_SHARED_SIZE_BYTES` as set so far (0: never set), shared with
    /// every other `Function` of the same kernel and module.
    opt_in: OptIn,
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
        if matches!(self, Device::Cpu) {
            return Err(RuntimeError::NoKernels(self.kind()));
        }
        let registers = match &source.resources {
            Some(tsv) => Some(Arc::new(parse_registers(&source.name, tsv)?)),
            None => None,
        };
        let cuda = match self {
            Device::Cuda(d) => Some(d.load_module(source)?),
            _ => None,
        };
        Ok(Module {
            name: source.name.as_ref().into(),
            host_kernels: source.host_kernels,
            device: self.clone(),
            cuda,
            registers,
            opt_ins: Arc::default(),
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
        let registers = self.registers.as_ref().and_then(|table| table.get(host.name).copied());
        let opt_in = {
            let mut opt_ins = self.opt_ins.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(opt_ins.entry(host.name).or_default())
        };
        Ok(Function { device: self.device.clone(), host, cuda, registers, opt_in })
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
    ///
    /// A launch with dynamic shared memory first opts the kernel in to it: it sets the kernel's
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` to the most dynamic shared memory any
    /// launch of it has asked for so far (a driver call only when that grows). Without the
    /// opt-in a block may use only 48 KiB of static plus dynamic shared memory, so a kernel
    /// with static arrays fails to launch with less than 48 KiB of dynamic shared memory
    /// already. `Emu` runs the launch under the same opt-in and refuses what the driver would.
    pub unsafe fn launch_on(&self, stream: &Stream, cfg: &LaunchConfig, args: &[Arg]) -> Result<()> {
        self.device.expect_same(stream.device())?;
        self.check_args(args)?;
        let words: Vec<u64> = args.iter().map(Arg::word).collect();
        let cuda = match (&self.device, &self.cuda, stream.cuda()) {
            (Device::Cuda(d), Some(f), Some(s)) => Some((d, f, s)),
            _ => None,
        };
        let max_dynamic_smem_bytes = self.opt_in(cfg.dynamic_smem_bytes, |bytes| match cuda {
            Some((d, f, _)) => d.set_max_dynamic_smem(f, bytes),
            None => Ok(()),
        })?;
        match cuda {
            Some((d, f, s)) => {
                // SAFETY: the words match the parameters in number and type (checked above);
                // the caller vouches for the extents the kernel accesses.
                unsafe { d.launch(self.host.name, s, f, cfg.grid, cfg.block, cfg.dynamic_smem_bytes, &words) }
            }
            None => {
                let emu = trident_simt::LaunchConfig {
                    grid: cfg.grid,
                    block: cfg.block,
                    dynamic_smem_bytes: cfg.dynamic_smem_bytes,
                };
                let attributes =
                    KernelAttributes { max_dynamic_smem_bytes, registers_per_thread: self.registers };
                // Pointer arguments are bounded by the views they came from.
                let extents: Vec<_> = args.iter().map(Arg::extent).collect();
                // SAFETY: one word of the right type per parameter (checked above), and the
                // caller vouches that every address is valid for the kernel's accesses.
                let result = unsafe {
                    trident_simt::launch_with_attributes(
                        self.host,
                        &emu,
                        &attributes,
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

    /// Opts the kernel in to `dynamic_bytes` of dynamic shared memory where it has not yet
    /// opted in to as much, calling `set` (the driver) with the new value, and returns the
    /// kernel's `MAX_DYNAMIC_SHARED_SIZE_BYTES` as the launch will run under it (`None`: never
    /// set, the driver's default).
    ///
    /// CUDA Driver API, `cuFuncSetAttribute`: `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`
    /// bounds the dynamic shared memory of a launch; by default it is 48 KiB minus the
    /// kernel's static shared memory. The CUDA C++ Programming Guide ("Shared Memory" for
    /// compute capabilities 8.x and 9.0) requires the explicit opt-in above 48 KiB per block,
    /// static included; opting in to exactly what launches ask for is always allowed where the
    /// launch fits the device, so the policy opts in for every launch with dynamic shared
    /// memory. The value only grows, and the lock is held over the driver call, so a launch
    /// never runs under a smaller value set by a concurrent one.
    fn opt_in(&self, dynamic_bytes: u32, set: impl FnOnce(u32) -> Result<()>) -> Result<Option<u32>> {
        let mut current = self.opt_in.lock().unwrap_or_else(|e| e.into_inner());
        if dynamic_bytes > *current {
            set(dynamic_bytes)?;
            *current = dynamic_bytes;
        }
        Ok((*current > 0).then_some(*current))
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
