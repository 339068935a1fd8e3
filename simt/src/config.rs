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

/// Most threads a block may have.
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// Most shared memory (static plus dynamic) a block may use on sm_90: 227 KiB.
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
