//! What a launch runs and how it is shaped.

use crate::error::EmuError;

/// A kernel compiled for the host: its PTX entry name, parameter types, and the function that
/// runs its body for the current emulated thread.
#[derive(Clone, Copy, Debug)]
pub struct HostKernel {
    /// The kernel's name, as in the PTX module.
    pub name: &'static str,
    /// The parameter types, as written in the kernel's signature.
    pub params: &'static [&'static str],
    /// The parameter names, in the same order (may be empty where unknown).
    pub param_names: &'static [&'static str],
    /// Decodes the launch's argument words (one per parameter, see [`crate::KernelArg`]) and
    /// runs the kernel body for the current thread.
    ///
    /// # Safety
    /// Callable only inside an emulated launch ([`crate::launch`]), with one word per entry of
    /// `params`, each a valid value of that parameter type, and every address among them valid
    /// for every access the kernel makes with the other arguments. The body runs on raw pointer
    /// words, so nothing here can check this; safe code cannot call it:
    ///
    /// ```compile_fail,E0133
    /// fn body(_words: &[u64]) {}
    /// let kernel =
    ///     trident_simt::HostKernel { name: "nothing", params: &[], param_names: &[], entry: body };
    /// (kernel.entry)(&[]);
    /// ```
    pub entry: unsafe fn(&[u64]),
}

/// Grid and block shape plus dynamic shared memory, as for `cuLaunchKernel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks along x, y and z.
    pub grid: [u32; 3],
    /// Threads per block along x, y and z.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block.
    pub dynamic_smem_bytes: u32,
}

/// Per-kernel attributes the host has set (or that the kernel's build reports), which the
/// launch is checked against besides its [`LaunchConfig`]. The default is a kernel whose host
/// never called `cuFuncSetAttribute` and whose register count is unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelAttributes {
    /// The kernel's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` as the host set it with
    /// `cuFuncSetAttribute`; `None` when never set, which leaves the driver's default of
    /// [`DEFAULT_SHARED_BYTES`] minus the kernel's static shared memory.
    pub max_dynamic_smem_bytes: Option<u32>,
    /// Registers per thread, as `ptxas -v` reports them; `None` when unknown (no register
    /// check is made then).
    pub registers_per_thread: Option<u32>,
}

/// Most shared memory (static plus dynamic) a block may use without opting in: 48 KiB.
pub const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;
/// 32-bit registers of an SM's register file, which is also the most one block may use
/// (sm_80 to sm_90).
pub const REGISTERS_PER_BLOCK: u32 = 64 * 1024;
/// Registers are allocated to a warp in units of this many (sm_80 to sm_90).
pub const REGISTER_ALLOCATION_UNIT: u32 = 256;
/// Most registers a thread may use.
pub const MAX_REGISTERS_PER_THREAD: u32 = 255;
/// Most threads a block may have.
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// Most shared memory (static plus dynamic) a block may use on sm_90 once the kernel has opted
/// in (`cudaDevAttrMaxSharedMemoryPerBlockOptin`): 227 KiB. sm_80 allows 163 KiB and sm_86 and
/// sm_89 99 KiB; the emulator checks against sm_90's.
pub const MAX_SHARED_BYTES: u32 = 227 * 1024;
/// Largest block extent per dimension.
pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
/// Largest grid extent per dimension.
pub const MAX_GRID_DIM: [u32; 3] = [(1 << 31) - 1, 65535, 65535];

impl LaunchConfig {
    /// A one-dimensional launch without dynamic shared memory.
    pub fn linear(blocks: u32, threads: u32) -> Self {
        LaunchConfig { grid: [blocks, 1, 1], block: [threads, 1, 1], dynamic_smem_bytes: 0 }
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u32 {
        self.block.iter().product()
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.iter().map(|&d| u64::from(d)).product()
    }

    /// Checks the configuration against the hardware limits.
    pub fn validate(&self, kernel: &'static str) -> Result<(), EmuError> {
        let invalid = |problem: String| Err(EmuError::InvalidLaunch { kernel, problem });
        for (axis, name) in ["x", "y", "z"].iter().enumerate() {
            if self.grid[axis] == 0 || self.block[axis] == 0 {
                return invalid(format!(
                    "grid {:?} and block {:?} must have every dimension >= 1 ({name} is 0)",
                    self.grid, self.block
                ));
            }
            if self.grid[axis] > MAX_GRID_DIM[axis] {
                return invalid(format!(
                    "grid {name} = {} exceeds the limit {}",
                    self.grid[axis], MAX_GRID_DIM[axis]
                ));
            }
            if self.block[axis] > MAX_BLOCK_DIM[axis] {
                return invalid(format!(
                    "block {name} = {} exceeds the limit {}",
                    self.block[axis], MAX_BLOCK_DIM[axis]
                ));
            }
        }
        let threads: u64 = self.block.iter().map(|&d| u64::from(d)).product();
        if threads > u64::from(MAX_BLOCK_THREADS) {
            return invalid(format!(
                "block {:?} has {threads} threads, more than {MAX_BLOCK_THREADS}",
                self.block
            ));
        }
        if self.dynamic_smem_bytes > MAX_SHARED_BYTES {
            return invalid(format!(
                "{} bytes of dynamic shared memory requested, more than the {MAX_SHARED_BYTES} \
                 a block can have",
                self.dynamic_smem_bytes
            ));
        }
        Ok(())
    }
}

impl KernelAttributes {
    /// Checks what a launch of `cfg` can be checked for before any block runs: the dynamic
    /// shared memory against the opt-in (or the 48 KiB default) and the registers the block
    /// needs against the register file. The static shared memory is checked as the block
    /// declares it ([`KernelAttributes::check_shared`]).
    pub fn validate(&self, kernel: &'static str, cfg: &LaunchConfig) -> Result<(), EmuError> {
        let invalid = |problem: String| Err(EmuError::InvalidLaunch { kernel, problem });
        let dynamic = cfg.dynamic_smem_bytes;
        // CUDA Driver API, cuFuncSetAttribute, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        // the most dynamic shared memory a launch of the function may ask for; the static
        // shared memory plus this value must not exceed the device's opt-in maximum
        // (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN). CUDA C++ Programming Guide,
        // "Shared Memory" of compute capabilities 8.x and 9.0: allocations above 48 KiB per
        // block require this explicit opt-in.
        match self.max_dynamic_smem_bytes {
            Some(limit) if limit > MAX_SHARED_BYTES => {
                return invalid(format!(
                    "the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES was set to {limit}, more than the \
                     {MAX_SHARED_BYTES} bytes of shared memory a block may opt in to \
                     (cuFuncSetAttribute refuses it)"
                ))
            }
            Some(limit) if dynamic > limit => {
                return invalid(format!(
                    "{dynamic} bytes of dynamic shared memory requested, more than the {limit} the \
                     kernel opted in to (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES)"
                ))
            }
            None if dynamic > DEFAULT_SHARED_BYTES => {
                return invalid(format!(
                    "{dynamic} bytes of dynamic shared memory exceed the {DEFAULT_SHARED_BYTES} a \
                     block may use without opting in (cuFuncSetAttribute \
                     MAX_DYNAMIC_SHARED_SIZE_BYTES)"
                ))
            }
            _ => {}
        }
        if let Some(registers) = self.registers_per_thread {
            if let Some(problem) = register_problem(registers, cfg.block_threads()) {
                return invalid(problem);
            }
        }
        Ok(())
    }

    /// Checks a block's `static_bytes` of static shared memory (every array it has declared
    /// so far) beside its `dynamic_bytes`: together at most [`DEFAULT_SHARED_BYTES`] without
    /// the opt-in; with it, the static bytes plus the opted-in dynamic size at most
    /// [`MAX_SHARED_BYTES`]. Returns the problem, naming the rule.
    pub fn check_shared(&self, static_bytes: u32, dynamic_bytes: u32) -> Result<(), String> {
        let total = u64::from(static_bytes) + u64::from(dynamic_bytes);
        match self.max_dynamic_smem_bytes {
            // Without the attribute set, the driver's default is 48 KiB minus the static size,
            // so static plus dynamic must fit in 48 KiB (cuFuncSetAttribute, CUDA Driver API).
            None if total > u64::from(DEFAULT_SHARED_BYTES) => Err(format!(
                "{total} bytes of shared memory per block ({static_bytes} static + {dynamic_bytes} \
                 dynamic) exceed the {DEFAULT_SHARED_BYTES} a block may use without opting in \
                 (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES)"
            )),
            Some(limit) if u64::from(static_bytes) + u64::from(limit) > u64::from(MAX_SHARED_BYTES) => {
                Err(format!(
                    "{static_bytes} bytes of static shared memory plus the {limit} of dynamic \
                     shared memory the kernel opted in to (cuFuncSetAttribute \
                     MAX_DYNAMIC_SHARED_SIZE_BYTES) exceed the {MAX_SHARED_BYTES} a block may \
                     have"
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Registers a block of `threads` threads needs at `registers` per thread: whole warps, each
/// allocated in units of [`REGISTER_ALLOCATION_UNIT`].
pub fn block_registers(registers: u32, threads: u32) -> u64 {
    let per_warp = (u64::from(registers) * 32).next_multiple_of(u64::from(REGISTER_ALLOCATION_UNIT));
    per_warp * u64::from(threads.div_ceil(32))
}

/// Why a block of `threads` threads at `registers` per thread cannot launch, if it cannot.
fn register_problem(registers: u32, threads: u32) -> Option<String> {
    // CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": 64K
    // 32-bit registers per SM and per block, at most 255 per thread; registers are allocated
    // per warp in units of 256 (the Occupancy Calculator's "register allocation unit size").
    if registers > MAX_REGISTERS_PER_THREAD {
        return Some(format!(
            "{registers} registers per thread exceed the {MAX_REGISTERS_PER_THREAD} a thread may have"
        ));
    }
    let needed = block_registers(registers, threads);
    (needed > u64::from(REGISTERS_PER_BLOCK)).then(|| {
        format!(
            "{threads} threads at {registers} registers per thread need {needed} registers per \
             block ({} warps of {} after rounding to the allocation unit of \
             {REGISTER_ALLOCATION_UNIT}), more than the {REGISTERS_PER_BLOCK} registers per \
             block (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)",
            threads.div_ceil(32),
            needed / u64::from(threads.div_ceil(32))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_up_per_warp() {
        assert_eq!(block_registers(128, 1024), 131_072);
        assert_eq!(block_registers(64, 1024), 65_536);
        assert_eq!(block_registers(65, 1024), 32 * 2304);
        assert_eq!(block_registers(255, 256), 8 * 8192);
        assert_eq!(block_registers(232, 256), 8 * 7424);
        assert!(register_problem(64, 1024).is_none());
        assert!(register_problem(65, 1024).is_some());
        assert!(register_problem(256, 32).is_some());
    }

    #[test]
    fn shared_memory_needs_the_opt_in_above_48_kib() {
        let none = KernelAttributes::default();
        assert!(none.check_shared(0, 49_152).is_ok());
        let error = none.check_shared(16, 49_152).unwrap_err();
        assert!(
            error.contains("49168 bytes of shared memory per block (16 static + 49152 dynamic)"),
            "{error}"
        );
        let opted = KernelAttributes { max_dynamic_smem_bytes: Some(49_152), ..none };
        assert!(opted.check_shared(16, 49_152).is_ok());
        let too_much = KernelAttributes { max_dynamic_smem_bytes: Some(MAX_SHARED_BYTES), ..none };
        assert!(too_much.check_shared(16, 0).is_err());
        let cfg = LaunchConfig { dynamic_smem_bytes: 49_153, ..LaunchConfig::linear(1, 1) };
        assert!(none.validate("k", &cfg).is_err());
        assert!(opted.validate("k", &cfg).is_err());
        let opted_more = KernelAttributes { max_dynamic_smem_bytes: Some(60_000), ..none };
        assert!(opted_more.validate("k", &cfg).is_ok());
    }
}
