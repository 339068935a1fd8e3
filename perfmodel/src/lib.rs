//! A kernel time model for named GPUs.
//!
//! Input: one launch's exact counters from the SIMT emulator ([`Workload::from_stats`], scaled
//! to the whole grid when the emulator ran a sample of its blocks) and the kernel's registers
//! and shared memory ([`resources`], from `ptxas`). Output: the predicted time and the bound
//! that sets it — tensor or FMA pipe, issue, LSU, shared memory, L1, DRAM, or latency at the
//! occupancy the kernel gets ([`predict`]). GPU figures come from the shared hardware table
//! (`trident-hardware`) plus the per-SM data of [`arch`]. Everything it prints is a
//! *prediction*; `docs/TIME_MODEL.md` gives the equations and the validation against
//! published measurements.

pub mod arch;
pub mod collective;
pub mod model;
pub mod resources;
pub mod workload;

pub use arch::{Arch, ModelError};
pub use model::{occupancy, predict, Bound, Occupancy, OccupancyLimit, Prediction, Resources, Term};
pub use workload::{WarpCounts, Workload};

use trident_hardware::Gpu;

/// A GPU the model can predict for: its table entry and its micro-architecture.
#[derive(Clone, Debug)]
pub struct Target {
    /// The hardware table's entry (peaks, bandwidths).
    pub gpu: Gpu,
    /// The micro-architecture (pipes, latencies, occupancy limits).
    pub arch: Arch,
}

impl Target {
    /// The GPU `name` (a table name or an alias such as `h100`, `a100`, `a6000`).
    pub fn named(name: &str) -> Result<Target, ModelError> {
        let hw = arch::hardware();
        let gpu = hw.gpu(arch::resolve(name))?.clone();
        let arch = Arch::for_gpu(&gpu)?;
        Ok(Target { gpu, arch })
    }

    /// Predicts `work`, reading the kernel's resources from the checked-in table.
    pub fn predict(&self, work: &Workload) -> Result<Prediction, ModelError> {
        // A kernel only the architecture-specific module has (the Hopper GEMM) is listed
        // under that module's architecture.
        let res = resources::lookup(&work.kernel, self.arch.ptx_arch).or_else(|e| {
            self.arch.specific_ptx_arch.map_or(Err(e), |arch| resources::lookup(&work.kernel, arch))
        })?;
        predict(&self.gpu, &self.arch, work, res)
    }
}
