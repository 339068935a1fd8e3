//! The tensor-core GEMM (`trident_kernels::gemm_tc`): `C = epilogue(op(A) op(B))` with bf16 or
//! f16 inputs held as `u16`, f32 accumulation, and f32 or 16-bit output.
//!
//! [`plan_gemm_tc`] picks the block tile and the split-K factor per shape: the 128 x 256 tile
//! when it gives a full wave of blocks, else the (tile, splits) pair of least estimated time
//! on a 132-SM GPU (a placement heuristic; results never depend on it). With splits it is still
//! one launch: each block writes its f32 partial tile to a workspace (the caller's,
//! [`GemmTcWorkspace`], or one allocated for the launch), and the last block of each output
//! tile sums them in split order and applies the epilogue (deterministic for any block order).

use trident_kernels::gemm_tc::{self, Config, BIAS, BK, GELU, GELU_GRAD, RESIDUAL};
use trident_runtime::{Arg, Buffer, LaunchConfig, View, ViewMut};

use super::{to_u32, HalfFormat, Kernels, LaunchError, Result, Transpose};

const KERNEL: &str = "gemm_tc";

/// An output element type of the tensor-core GEMM: `f32`, or `u16` holding the inputs' type.
pub trait GemmTcOutput: bytemuck::Pod + sealed::Sealed {
    /// The kernels' name for it.
    #[doc(hidden)]
    const NAME: &'static str;
}

impl GemmTcOutput for f32 {
    const NAME: &'static str = "f32";
}

impl GemmTcOutput for u16 {
    const NAME: &'static str = "b16";
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u16 {}
}

/// Block tile and split-K factor of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmTcPlan {
    /// The block tile (`trident_kernels::gemm_tc::LARGE` or `SMALL`).
    pub config: Config,
    /// Number of K ranges (grid z); 1 for no split.
    pub splits: usize,
    /// K elements per range, a multiple of `BK`.
    pub k_split: usize,
}

/// One GEMM on tensor cores: `op(A)` is `m x k`, `op(B)` is `k x n`, both of `input` type,
/// row-major. `trans_a`: A stored `k x m`; `trans_b`: B stored `n x k` (the linear layer's
/// forward is `trans_b`, its input gradient neither, its weight gradient `trans_a`; both at
/// once is not built). Leading dimensions default to dense and must be multiples of 8 for A and
/// B; a residual has C's layout.
#[derive(Clone, Copy, Debug)]
pub struct GemmTc {
    /// Rows of `op(A)` and C.
    pub m: usize,
    /// Columns of `op(B)` and C.
    pub n: usize,
    /// The reduction dimension.
    pub k: usize,
    /// The type of A and B (and of a 16-bit C and residual).
    pub input: HalfFormat,
    /// A stored `k x m`.
    pub trans_a: Transpose,
    /// B stored `n x k`.
    pub trans_b: Transpose,
    /// `(lda, ldb, ldc)`; `None` for dense.
    pub ld: Option<(usize, usize, usize)>,
    /// GeLU (tanh form) after the bias.
    pub gelu: bool,
    /// `C += ...`: the epilogue adds C's own values last, in place of a residual (a weight
    /// gradient accumulated into the f32 gradient buffer).
    pub accumulate: bool,
    /// `C = op(A) op(B) x gelu'(residual)`: the residual operand is GeLU's input, and the
    /// product is multiplied by GeLU's derivative at it instead of added to (the input
    /// gradient of the MLP's projection, through GeLU's backward, in one pass).
    pub gelu_grad: bool,
    /// A fixed plan instead of [`plan_gemm_tc`]'s (tests use it to reach every tile).
    pub plan: Option<GemmTcPlan>,
}

impl GemmTc {
    /// A dense `m x n x k` GEMM with neither operand transposed and no GeLU.
    pub fn new(m: usize, n: usize, k: usize, input: HalfFormat) -> Self {
        Self {
            m,
            n,
            k,
            input,
            trans_a: Transpose::No,
            trans_b: Transpose::No,
            ld: None,
            gelu: false,
            accumulate: false,
            gelu_grad: false,
            plan: None,
        }
    }

    /// A stored transposed (`k x m`).
    pub fn trans_a(mut self) -> Self {
        self.trans_a = Transpose::Yes;
        self
    }

    /// B stored transposed (`n x k`).
    pub fn trans_b(mut self) -> Self {
        self.trans_b = Transpose::Yes;
        self
    }

    /// Leading dimensions of A, B and C (and of the residual), in elements.
    pub fn leading_dims(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        self.ld = Some((lda, ldb, ldc));
        self
    }

    /// GeLU after the bias.
    pub fn gelu(mut self) -> Self {
        self.gelu = true;
        self
    }

    /// `C += op(A) op(B)` (after the bias and GeLU): C is read as the residual; no other
    /// residual may be given.
    pub fn accumulate(mut self) -> Self {
        self.accumulate = true;
        self
    }

    /// `C = op(A) op(B) x gelu'(x)`, `x` the residual operand (GeLU's input, C's layout).
    pub fn gelu_grad(mut self) -> Self {
        self.gelu_grad = true;
        self
    }

    /// Launches with `plan` instead of [`plan_gemm_tc`]'s.
    pub fn with_plan(mut self, plan: GemmTcPlan) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Rows and columns of `A`, `B` and `C` as stored.
    fn stored(&self) -> [(usize, usize); 3] {
        let a = if self.trans_a == Transpose::Yes { (self.k, self.m) } else { (self.m, self.k) };
        let b = if self.trans_b == Transpose::Yes { (self.n, self.k) } else { (self.k, self.n) };
        [a, b, (self.m, self.n)]
    }

    fn resolved_ld(&self) -> (usize, usize, usize) {
        let [a, b, c] = self.stored();
        self.ld.unwrap_or((a.1, b.1, c.1))
    }

    fn layout(&self) -> Result<&'static str> {
        match (self.trans_a, self.trans_b) {
            (Transpose::No, Transpose::No) => Ok("nn"),
            (Transpose::No, Transpose::Yes) => Ok("nt"),
            (Transpose::Yes, Transpose::No) => Ok("tn"),
            (Transpose::Yes, Transpose::Yes) => Err(LaunchError::Shape {
                kernel: KERNEL,
                what: "A and B both transposed is not built (a linear layer never needs it)".into(),
            }),
        }
    }
}

/// Elements a `rows x cols` matrix with leading dimension `ld` spans.
fn extent(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// SMs of the GPU the plan is shaped for (H100 SXM).
const PLAN_SMS: usize = 132;
/// Resident blocks per SM the plan assumes: registers hold one 256-thread block of the large
/// tile; shared memory four of the small one.
fn resident(config: &Config) -> usize {
    if config.threads() >= 256 {
        1
    } else {
        4
    }
}

/// The block tile and split-K factor for an `m x n x k` GEMM: the large tile whenever it fills
/// one wave of SMs, else the pair of least estimated time (waves of blocks times a block's
/// work at the tensor rate, plus, with splits, the partial tiles' traffic at the memory rate:
/// every block writes one, each tile's last block reads the others back).
pub fn plan_gemm_tc(m: usize, n: usize, k: usize) -> GemmTcPlan {
    let k_tiles = k.div_ceil(BK).max(1);
    let tiles = |c: &Config| m.div_ceil(c.bm() as usize) * n.div_ceil(c.bn() as usize);
    let whole = |config| GemmTcPlan { config, splits: 1, k_split: k_tiles * BK };
    if tiles(&gemm_tc::LARGE) >= PLAN_SMS {
        return whole(gemm_tc::LARGE);
    }
    // Tensor rate per SM and memory rate of an H100 SXM, for the estimate only: 0.66 x 989
    // TFLOP/s over 132 SMs, in multiply-adds per second, and 3.35 TB/s.
    const MACS_PER_SM_S: f64 = 0.66 * 989e12 / 2.0 / PLAN_SMS as f64;
    const BYTES_PER_S: f64 = 3.35e12;
    let mut best = (f64::INFINITY, whole(gemm_tc::LARGE));
    for config in gemm_tc::CONFIGS {
        for splits in 1..=8usize {
            let k_split = k_tiles.div_ceil(splits) * BK;
            // Splits shorter than 8 slices spend more on the pipeline's fill than they save.
            if splits > 1 && k_split < 8 * BK {
                break;
            }
            let splits = k.div_ceil(k_split).max(1);
            let blocks = tiles(&config) * splits;
            let slots = PLAN_SMS * resident(&config);
            let block_macs = (config.bm() * config.bn()) as f64 * k_split as f64;
            let compute =
                blocks.div_ceil(slots) as f64 * resident(&config) as f64 * block_macs / MACS_PER_SM_S;
            let tile_bytes = 4.0 * (config.bm() * config.bn()) as f64;
            let workspace = if splits > 1 {
                tiles(&config) as f64 * (2 * splits - 1) as f64 * tile_bytes / BYTES_PER_S
            } else {
                0.0
            };
            let time = compute + workspace;
            if time < best.0 {
                best = (time, GemmTcPlan { config, splits, k_split });
            }
        }
    }
    best.1
}

/// Runs `spec` on tensor cores: `c = epilogue(op(a) op(b))`, where the epilogue adds `bias`
/// (`n` values) when given, applies GeLU when `spec.gelu`, then adds `residual` (C's shape and
/// leading dimension) when given. Checks every view's device, length and alignment (A, B and
/// C 16-byte aligned) and the leading dimensions before launching. On a compute capability
/// 9.0 GPU a bf16 `A B^T` without a fixed plan runs on the Hopper GEMM instead
/// ([`dispatches_to_gemm_hopper`](super::dispatches_to_gemm_hopper)).
pub fn gemm_tc<O: GemmTcOutput>(
    k: &Kernels,
    c: &mut ViewMut<O>,
    a: &View<u16>,
    b: &View<u16>,
    bias: Option<&View<f32>>,
    residual: Option<&View<O>>,
    spec: &GemmTc,
) -> Result<()> {
    launch_gemm_tc(k, c, a, b, bias, residual, spec, None)
}

/// [`gemm_tc()`] with a split-K workspace the caller keeps ([`GemmTcWorkspace::new`], for the
/// plan the launch uses): nothing is allocated, and the counters need no zeroing between
/// launches. Unsplit plans ignore it.
#[allow(clippy::too_many_arguments)]
pub fn gemm_tc_with_workspace<O: GemmTcOutput>(
    k: &Kernels,
    c: &mut ViewMut<O>,
    a: &View<u16>,
    b: &View<u16>,
    bias: Option<&View<f32>>,
    residual: Option<&View<O>>,
    spec: &GemmTc,
    workspace: &mut GemmTcWorkspace,
) -> Result<()> {
    launch_gemm_tc(k, c, a, b, bias, residual, spec, Some(workspace))
}

/// What [`check_gemm`] found: the leading dimensions and the epilogue flags.
#[derive(Clone, Copy)]
pub(super) struct Checked {
    pub(super) lda: usize,
    pub(super) ldb: usize,
    pub(super) ldc: usize,
    pub(super) flags: u32,
}

/// Checks a tensor-core GEMM's views against `spec` (devices, lengths, 16-byte alignment of A,
/// B and C, leading dimensions) and derives the epilogue flags: what every kernel that runs
/// [`GemmTc`] relies on.
pub(super) fn check_gemm<O: GemmTcOutput>(
    k: &Kernels,
    c: &mut ViewMut<O>,
    a: &View<u16>,
    b: &View<u16>,
    bias: Option<&View<f32>>,
    residual: Option<&View<O>>,
    spec: &GemmTc,
) -> Result<Checked> {
    let shape = |what: String| LaunchError::Shape { kernel: KERNEL, what };
    k.check_device(c.device())?;
    k.check_device(a.device())?;
    k.check_device(b.device())?;
    spec.layout()?;
    let [sa, sb, sc] = spec.stored();
    let (lda, ldb, ldc) = spec.resolved_ld();
    for (what, (rows, cols), ld, got, addr) in [
        ("A", sa, lda, a.len(), a.addr()),
        ("B", sb, ldb, b.len(), b.addr()),
        ("C", sc, ldc, c.len(), c.addr_mut()),
    ] {
        if ld < cols {
            return Err(shape(format!(
                "leading dimension of {what} is {ld}, less than its {cols} stored columns"
            )));
        }
        if what != "C" && ld % 8 != 0 {
            return Err(shape(format!("leading dimension of {what} is {ld}, not a multiple of 8")));
        }
        if addr % 16 != 0 {
            return Err(shape(format!("{what} starts at address {addr:#x}, not 16-byte aligned")));
        }
        let needed = extent(rows, cols, ld);
        if needed > got {
            return Err(LaunchError::TooShort { kernel: KERNEL, what, needed, got });
        }
    }
    let mut flags = if spec.gelu { GELU } else { 0 };
    if let Some(bias) = bias {
        k.check_device(bias.device())?;
        if bias.len() != spec.n {
            return Err(LaunchError::Length {
                kernel: KERNEL,
                what: "bias",
                got: bias.len(),
                expected: spec.n,
            });
        }
        flags |= BIAS;
    }
    if let Some(residual) = residual {
        k.check_device(residual.device())?;
        let needed = extent(spec.m, spec.n, ldc);
        if residual.len() < needed {
            return Err(LaunchError::TooShort {
                kernel: KERNEL,
                what: "residual",
                needed,
                got: residual.len(),
            });
        }
        flags |= RESIDUAL;
    }
    if spec.gelu_grad {
        if residual.is_none() || spec.accumulate || spec.gelu {
            return Err(shape(
                "a GeLU-gradient GEMM needs GeLU's input as its residual, and neither GeLU nor accumulation"
                    .into(),
            ));
        }
        flags = (flags & !RESIDUAL) | GELU_GRAD;
    }
    if spec.accumulate {
        if residual.is_some() {
            return Err(shape("an accumulating GEMM adds C itself: no residual can be given too".into()));
        }
        flags |= RESIDUAL;
    }
    Ok(Checked { lda, ldb, ldc, flags })
}

#[allow(clippy::too_many_arguments)]
fn launch_gemm_tc<O: GemmTcOutput>(
    k: &Kernels,
    c: &mut ViewMut<O>,
    a: &View<u16>,
    b: &View<u16>,
    bias: Option<&View<f32>>,
    residual: Option<&View<O>>,
    spec: &GemmTc,
    workspace: Option<&mut GemmTcWorkspace>,
) -> Result<()> {
    let shape = |what: String| LaunchError::Shape { kernel: KERNEL, what };
    let Checked { lda, ldb, ldc, flags } = check_gemm(k, c, a, b, bias, residual, spec)?;
    let layout = spec.layout()?;
    if spec.m == 0 || spec.n == 0 {
        return Ok(());
    }
    if super::gemm_hopper::dispatches_to_gemm_hopper(k.device(), spec) {
        let checked = Checked { lda, ldb, ldc, flags };
        return super::gemm_hopper::launch(k, c, a, b, bias, residual, spec, &checked);
    }
    let plan = spec.plan.unwrap_or_else(|| plan_gemm_tc(spec.m, spec.n, spec.k));
    if plan.k_split == 0 || plan.k_split % BK != 0 || plan.splits == 0 || plan.splits * plan.k_split < spec.k
    {
        return Err(shape(format!(
            "plan of {} splits of {} does not cover k = {} in multiples of {BK}",
            plan.splits, plan.k_split, spec.k
        )));
    }
    let grid_y = spec.m.div_ceil(plan.config.bm() as usize);
    if grid_y > 65_535 || plan.splits > 65_535 {
        return Err(shape(format!("m = {} or {} splits exceed the grid's 65535 limit", spec.m, plan.splits)));
    }
    let grid =
        [to_u32("n blocks", spec.n.div_ceil(plan.config.bn() as usize))?, grid_y as u32, plan.splits as u32];
    let cfg = LaunchConfig {
        grid,
        block: [plan.config.threads(), 1, 1],
        dynamic_smem_bytes: plan.config.smem_bytes(),
    };
    let name = main_kernel(spec.input, layout, O::NAME, &plan.config)?;
    // Split-K partials and counters: the caller's workspace, or one made (counters zeroed) for
    // this launch and freed in stream order after it. Unsplit launches never touch it.
    let mut own = None;
    let ws = match workspace {
        _ if plan.splits == 1 => None,
        Some(ws) => {
            ws.check(k, spec.m, spec.n, &plan)?;
            Some(ws)
        }
        None => Some(own.insert(GemmTcWorkspace::new(k, spec.m, spec.n, &plan)?)),
    };
    let (partial_arg, counters_arg) = match ws {
        Some(ws) => (ws.partial.view_mut(..)?.arg_mut(), ws.counters.view_mut(..)?.arg_mut()),
        None => (Arg::null_mut::<f32>(), Arg::null_mut::<u32>()),
    };
    let args = [
        c.arg_mut(),
        a.arg(),
        b.arg(),
        bias.map_or(Arg::null::<f32>(), |v| v.arg()),
        match residual {
            Some(v) => v.arg(),
            // C as the residual: each element is read by the thread that writes it, before it
            // writes it.
            None if spec.accumulate => c.as_view().arg(),
            None => Arg::null::<O>(),
        },
        partial_arg,
        counters_arg,
        to_u32("m", spec.m)?.into(),
        to_u32("n", spec.n)?.into(),
        to_u32("k", spec.k)?.into(),
        to_u32("lda", lda)?.into(),
        to_u32("ldb", ldb)?.into(),
        to_u32("ldc", ldc)?.into(),
        to_u32("ldr", ldc)?.into(),
        to_u32("k_split", plan.k_split)?.into(),
        flags.into(),
    ];
    // SAFETY: every element the kernel reads or writes lies inside the views checked above
    // (A, B, C, the bias and the residual), all on the kernels' device, 16-byte aligned with
    // leading dimensions that keep every copied row so; with splits, the workspace holds the
    // grid's partial tiles and counters, the counters 0 (zeroed when it was made, and reset
    // by every launch's last blocks).
    unsafe { k.launch(name, &cfg, &args)? };
    if own.is_some() {
        // The workspace made here is freed on the default stream when `own` drops: that free
        // must wait for the launch, which may be on another stream.
        k.before_default_stream()?;
    }
    Ok(())
}

/// The split-K workspace of the tensor-core GEMM: f32 partial tiles and one arrival counter
/// per output tile (see `trident_kernels::gemm_tc::splitk`). Its counters are zeroed once,
/// when it is made; every launch leaves them 0 again, so one workspace serves any number of
/// launches (in stream order) whose plans it fits ([`GemmTcWorkspace::fits`]).
pub struct GemmTcWorkspace {
    partial: Buffer<f32>,
    counters: Buffer<u32>,
}

impl GemmTcWorkspace {
    /// f32 elements and counters a split `plan` of an `m x n` output needs.
    pub fn sizes(m: usize, n: usize, plan: &GemmTcPlan) -> (usize, usize) {
        let tiles = m.div_ceil(plan.config.bm() as usize) * n.div_ceil(plan.config.bn() as usize);
        (tiles * plan.splits * (plan.config.bm() * plan.config.bn()) as usize, tiles)
    }

    /// A workspace for `plan` on an `m x n` output, on the kernels' device, its counters zero
    /// (ordered before the kernels' later work on their stream).
    pub fn new(k: &Kernels, m: usize, n: usize, plan: &GemmTcPlan) -> Result<Self> {
        let (partial, tiles) = Self::sizes(m, n, plan);
        let ws = GemmTcWorkspace {
            // Written by every block before any block reads it.
            partial: Buffer::uninit(k.device(), partial)?,
            counters: Buffer::zeros(k.device(), tiles)?,
        };
        k.after_default_stream()?;
        Ok(ws)
    }

    /// Whether the workspace is large enough for `plan` on an `m x n` output.
    pub fn fits(&self, m: usize, n: usize, plan: &GemmTcPlan) -> bool {
        let (partial, tiles) = Self::sizes(m, n, plan);
        self.partial.len() >= partial && self.counters.len() >= tiles
    }

    fn check(&self, k: &Kernels, m: usize, n: usize, plan: &GemmTcPlan) -> Result<()> {
        k.check_device(self.partial.device())?;
        if !self.fits(m, n, plan) {
            let (partial, tiles) = Self::sizes(m, n, plan);
            return Err(LaunchError::Shape {
                kernel: KERNEL,
                what: format!(
                    "the split-K workspace holds {} partial elements and {} counters, the plan needs \
                     {partial} and {tiles}",
                    self.partial.len(),
                    self.counters.len()
                ),
            });
        }
        Ok(())
    }
}

/// The main-loop kernel for the input type, layout (`nn`, `nt`, `tn`), output (`f32`, `b16`)
/// and block tile.
fn main_kernel(input: HalfFormat, layout: &str, out: &str, config: &Config) -> Result<&'static str> {
    let name = format!("gemm_tc_{}_{layout}_{out}_{}", input.name(), config.suffix);
    gemm_tc::KERNEL_NAMES
        .iter()
        .copied()
        .find(|k| *k == name)
        .ok_or_else(|| LaunchError::Shape { kernel: KERNEL, what: format!("no kernel {name} is built") })
}
