use trident_kernels::gemm::{TILE_M, TILE_N};
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::{to_u32, Kernels, LaunchError, Result};

/// Whether an operand is stored transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Transpose {
    /// Stored as used.
    #[default]
    No,
    /// Stored transposed: `A` as `k x m`, `B` as `n x k`.
    Yes,
}

/// One (batched) GEMM, `C = alpha * op(A) * op(B) + beta * C`, row-major: `op(A)` is `m x k`,
/// `op(B)` is `k x n`. Leading dimensions and batch strides default to dense storage.
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// Whether `A` is stored transposed.
    pub trans_a: Transpose,
    /// Whether `B` is stored transposed.
    pub trans_b: Transpose,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the old `C` (0 overwrites it; 1 accumulates).
    pub beta: f32,
    /// Matrices in the batch (grid z).
    pub batch: usize,
    /// `(lda, ldb, ldc)`; `None` for dense.
    pub ld: Option<(usize, usize, usize)>,
    /// Element strides between consecutive matrices of a batch; `None` for dense.
    pub strides: Option<(usize, usize, usize)>,
}

impl Gemm {
    /// `C[m, n] = A[m, k] B[k, n]`: dense, untransposed, `alpha = 1`, `beta = 0`, one matrix.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            trans_a: Transpose::No,
            trans_b: Transpose::No,
            alpha: 1.0,
            beta: 0.0,
            batch: 1,
            ld: None,
            strides: None,
        }
    }

    /// `A` stored transposed (`k x m`).
    pub fn trans_a(mut self) -> Self {
        self.trans_a = Transpose::Yes;
        self
    }

    /// `B` stored transposed (`n x k`, as a linear layer's weight is).
    pub fn trans_b(mut self) -> Self {
        self.trans_b = Transpose::Yes;
        self
    }

    /// Scales the product by `alpha`.
    pub fn alpha(mut self, alpha: f32) -> Self {
        self.alpha = alpha;
        self
    }

    /// Adds `beta` times the old `C`.
    pub fn beta(mut self, beta: f32) -> Self {
        self.beta = beta;
        self
    }

    /// `batch` independent products, strided as [`Gemm::batch_strides`] says.
    pub fn batched(mut self, batch: usize) -> Self {
        self.batch = batch;
        self
    }

    /// Row strides, in elements, of `A`, `B` and `C` as stored (at least their stored columns).
    pub fn leading_dims(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        self.ld = Some((lda, ldb, ldc));
        self
    }

    /// Elements between consecutive matrices of `A`, `B` and `C` in a batch.
    pub fn batch_strides(mut self, a: usize, b: usize, c: usize) -> Self {
        self.strides = Some((a, b, c));
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

    fn resolved_strides(&self) -> (usize, usize, usize) {
        let [a, b, c] = self.stored();
        let (lda, ldb, ldc) = self.resolved_ld();
        self.strides.unwrap_or((a.0.saturating_mul(lda), b.0.saturating_mul(ldb), c.0.saturating_mul(ldc)))
    }

    /// Elements an operand's view must hold: the last matrix's last row's end (`None` where
    /// that overflows `usize`, which no view holds).
    fn extent(&self, rows: usize, cols: usize, ld: usize, stride: usize) -> Option<usize> {
        if rows == 0 || cols == 0 || self.batch == 0 {
            return Some(0);
        }
        (self.batch - 1).checked_mul(stride)?.checked_add((rows - 1).checked_mul(ld)?)?.checked_add(cols)
    }
}

const KERNEL: &str = "gemm";

/// Runs `spec` on `c`, `a` and `b`, after checking that every element the kernel touches lies
/// inside its view.
pub fn gemm(k: &Kernels, c: &mut ViewMut<f32>, a: &View<f32>, b: &View<f32>, spec: &Gemm) -> Result<()> {
    k.check_device(c.device())?;
    k.check_device(a.device())?;
    k.check_device(b.device())?;
    let [sa, sb, sc] = spec.stored();
    let (lda, ldb, ldc) = spec.resolved_ld();
    let (stride_a, stride_b, stride_c) = spec.resolved_strides();
    for (what, (rows, cols), ld, stride, got) in [
        ("A", sa, lda, stride_a, a.len()),
        ("B", sb, ldb, stride_b, b.len()),
        ("C", sc, ldc, stride_c, c.len()),
    ] {
        if ld < cols {
            return Err(LaunchError::Shape {
                kernel: KERNEL,
                what: format!("leading dimension of {what} is {ld}, less than its {cols} stored columns"),
            });
        }
        let needed = spec.extent(rows, cols, ld, stride).unwrap_or(usize::MAX);
        if needed > got {
            return Err(LaunchError::TooShort { kernel: KERNEL, what, needed, got });
        }
    }
    if spec.m == 0 || spec.n == 0 || spec.batch == 0 {
        return Ok(());
    }
    let grid_y = spec.m.div_ceil(TILE_M as usize);
    if grid_y > 65_535 || spec.batch > 65_535 {
        return Err(LaunchError::Shape {
            kernel: KERNEL,
            what: format!("m = {} or batch = {} exceeds the grid's 65535 limit", spec.m, spec.batch),
        });
    }
    let name = match (spec.trans_a, spec.trans_b) {
        (Transpose::No, Transpose::No) => "gemm_nn_f32",
        (Transpose::No, Transpose::Yes) => "gemm_nt_f32",
        (Transpose::Yes, Transpose::No) => "gemm_tn_f32",
        (Transpose::Yes, Transpose::Yes) => "gemm_tt_f32",
    };
    let cfg = LaunchConfig {
        grid: [to_u32("n blocks", spec.n.div_ceil(TILE_N as usize))?, grid_y as u32, spec.batch as u32],
        block: [16, 16, 1],
        dynamic_smem_bytes: 0,
    };
    let args = [
        c.arg_mut(),
        a.arg(),
        b.arg(),
        to_u32("m", spec.m)?.into(),
        to_u32("n", spec.n)?.into(),
        to_u32("k", spec.k)?.into(),
        to_u32("lda", lda)?.into(),
        to_u32("ldb", ldb)?.into(),
        to_u32("ldc", ldc)?.into(),
        (stride_a as u64).into(),
        (stride_b as u64).into(),
        (stride_c as u64).into(),
        spec.alpha.into(),
        spec.beta.into(),
    ];
    // SAFETY: every element the kernel reads or writes lies inside the views checked above,
    // all on the kernels' device.
    unsafe { k.launch(name, &cfg, &args)? };
    Ok(())
}
