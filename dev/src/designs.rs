//! Launching the published kernel designs of `trident_dev_kernels::designs` (the time model's
//! calibration, not used by the trainer), and the measurements their authors published for
//! them.

use trident_dev_kernels::designs::sgemm::{SMEM_TILE, TILED_1D, TILED_2D};
use trident_ops::launch::{Kernels, LaunchError};
use trident_runtime::{Arg, Device, LaunchConfig, View, ViewMut};

/// One of the SGEMM worklog's designs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SgemmDesign {
    /// Kernel 1: one thread per element of `C`, uncoalesced.
    Naive,
    /// Kernel 2: consecutive lanes along a row of `C`, so loads coalesce.
    Coalesced,
    /// Kernel 3: `A` and `B` tiles staged in shared memory.
    SharedMemory,
    /// Kernel 4: each thread computes a column of results (1-D blocktiling).
    Tiled1d,
    /// Kernel 5: each thread computes a 2-D patch of results (2-D blocktiling).
    Tiled2d,
    /// Kernel 6: kernel 5 with 128-bit loads and a transposed `A` tile.
    Vectorized,
}

/// A measurement published with a design: what its author measured, on which GPU.
#[derive(Clone, Copy, Debug)]
pub struct Published {
    /// The worklog's kernel number.
    pub number: u32,
    /// The worklog's name for it.
    pub title: &'static str,
    /// GFLOP/s at `M = N = K = size`.
    pub gflops: f64,
    /// The matrix size of that measurement.
    pub size: usize,
    /// The hardware-table name of the GPU it was measured on.
    pub gpu: &'static str,
}

impl SgemmDesign {
    /// Every design, in the worklog's order.
    pub const ALL: [SgemmDesign; 6] = [
        SgemmDesign::Naive,
        SgemmDesign::Coalesced,
        SgemmDesign::SharedMemory,
        SgemmDesign::Tiled1d,
        SgemmDesign::Tiled2d,
        SgemmDesign::Vectorized,
    ];

    /// The PTX entry name.
    pub fn kernel(self) -> &'static str {
        match self {
            SgemmDesign::Naive => "design_sgemm_naive",
            SgemmDesign::Coalesced => "design_sgemm_coalesced",
            SgemmDesign::SharedMemory => "design_sgemm_smem",
            SgemmDesign::Tiled1d => "design_sgemm_tiled_1d",
            SgemmDesign::Tiled2d => "design_sgemm_tiled_2d",
            SgemmDesign::Vectorized => "design_sgemm_vectorized",
        }
    }

    /// The measurement Simon Boehm published for the design: the table "GFLOPs at matrix size
    /// 4096x4096" of his SGEMM_CUDA repository (RTX A6000, CUDA 12), as of 2023.
    pub fn published(self) -> Published {
        let (number, title, gflops) = match self {
            SgemmDesign::Naive => (1, "Naive", 309.0),
            SgemmDesign::Coalesced => (2, "GMEM Coalescing", 1986.5),
            SgemmDesign::SharedMemory => (3, "SMEM Caching", 2980.3),
            SgemmDesign::Tiled1d => (4, "1D Blocktiling", 8474.7),
            SgemmDesign::Tiled2d => (5, "2D Blocktiling", 15971.7),
            SgemmDesign::Vectorized => (6, "Vectorized Mem Access", 18237.3),
        };
        Published { number, title, gflops, size: 4096, gpu: "rtx-a6000" }
    }

    /// Grid and block of a launch for `m x n` (`k` only matters for the divisibility check).
    pub fn config(self, m: usize, n: usize, k: usize) -> Result<LaunchConfig, LaunchError> {
        let bad = |need: String| LaunchError::Shape {
            kernel: self.kernel(),
            what: format!("{m} x {n} x {k}: {need}"),
        };
        let blocks =
            |v: usize, t: u32| u32::try_from(v.div_ceil(t as usize)).map_err(|_| bad("too large".into()));
        let tiled = |bm: u32, bn: u32, bk: u32| {
            if m % bm as usize != 0 || n % bn as usize != 0 || k % bk as usize != 0 {
                return Err(bad(format!("this design needs M % {bm} = N % {bn} = K % {bk} = 0")));
            }
            Ok(())
        };
        Ok(match self {
            SgemmDesign::Naive => LaunchConfig {
                grid: [blocks(m, 32)?, blocks(n, 32)?, 1],
                block: [32, 32, 1],
                dynamic_smem_bytes: 0,
            },
            SgemmDesign::Coalesced => LaunchConfig {
                grid: [blocks(m, 32)?, blocks(n, 32)?, 1],
                block: [1024, 1, 1],
                dynamic_smem_bytes: 0,
            },
            SgemmDesign::SharedMemory => {
                tiled(SMEM_TILE, SMEM_TILE, SMEM_TILE)?;
                LaunchConfig {
                    grid: [blocks(m, SMEM_TILE)?, blocks(n, SMEM_TILE)?, 1],
                    block: [SMEM_TILE * SMEM_TILE, 1, 1],
                    dynamic_smem_bytes: 0,
                }
            }
            SgemmDesign::Tiled1d => {
                let (bm, bn, bk, tm) = TILED_1D;
                tiled(bm, bn, bk)?;
                LaunchConfig {
                    grid: [blocks(n, bn)?, blocks(m, bm)?, 1],
                    block: [bm * bn / tm, 1, 1],
                    dynamic_smem_bytes: 0,
                }
            }
            SgemmDesign::Tiled2d | SgemmDesign::Vectorized => {
                let (bm, bn, bk, tm, tn) = TILED_2D;
                tiled(bm, bn, bk)?;
                LaunchConfig {
                    grid: [blocks(n, bn)?, blocks(m, bm)?, 1],
                    block: [bm * bn / (tm * tn), 1, 1],
                    dynamic_smem_bytes: 0,
                }
            }
        })
    }

    /// `C = alpha A B + beta C` for row-major `A` (`m x k`), `B` (`k x n`), `C` (`m x n`) on
    /// the device of `kernels` (the dev module, [`crate::load`]).
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        self,
        kernels: &Kernels,
        c: &mut ViewMut<f32>,
        a: &View<f32>,
        b: &View<f32>,
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        beta: f32,
    ) -> Result<(), LaunchError> {
        let dev: &Device = kernels.device();
        for (what, len, need, same) in [
            ("A", a.len(), m * k, a.device().same_as(dev)),
            ("B", b.len(), k * n, b.device().same_as(dev)),
            ("C", c.len(), m * n, c.device().same_as(dev)),
        ] {
            if !same || len < need {
                return Err(LaunchError::Shape {
                    kernel: self.kernel(),
                    what: format!(
                        "{what} holds {len} elements on its device; {need} on the kernels' device needed"
                    ),
                });
            }
        }
        if self == SgemmDesign::Vectorized && (k % 4 != 0 || n % 4 != 0) {
            return Err(LaunchError::Shape {
                kernel: self.kernel(),
                what: "128-bit loads need K and N to be multiples of 4".into(),
            });
        }
        let cfg = self.config(m, n, k)?;
        let word = |v: usize, what: &'static str| {
            u32::try_from(v).map(Arg::from).map_err(|_| LaunchError::TooLarge { what, value: v })
        };
        let args = [
            c.arg_mut(),
            a.arg(),
            b.arg(),
            word(m, "M")?,
            word(n, "N")?,
            word(k, "K")?,
            alpha.into(),
            beta.into(),
        ];
        // SAFETY: the views hold the m x k, k x n and m x n elements the kernel touches, on the
        // kernels' device; the tiled designs were checked for the divisibility they assume.
        unsafe { kernels.launch(self.kernel(), &cfg, &args) }
    }
}
