//! Compute rates by shape: each GEMM of a layer at its real shape (micro-batch x sequence rows,
//! the TP shard's columns) and the attention core at its real grid, as a fraction of the GPU's
//! dense peak.
//!
//! Trident's kernel time model (`trident-perfmodel`) predicts Trident's own kernels from the
//! emulator's counters; it has no model of the vendor library's GEMMs that Megatron-LM and
//! DeepSpeed runs call, so the planner uses a curve derived from how a tiled GEMM fills the GPU
//! (NVIDIA's "Matrix Multiplication Background" guide names the two effects: tile quantization
//! and wave quantization), scaled to the table's large-GEMM fraction (`gemm_efficiency`):
//!
//! - a GEMM of `M x N` outputs runs as `ceil(M / tm) ceil(N / tn)` output tiles; the padding
//!   of the last row and column of tiles computes nothing (tile quantization);
//! - the tiles run in waves of one per SM; the last wave's idle SMs are lost (wave
//!   quantization);
//! - a larger tile reuses each operand element more (arithmetic intensity
//!   `tm tn / (tm + tn)` per element loaded), so it stalls less on loads: a tile's efficiency
//!   is `I / (I + 16)` relative to the 256 x 128 tile's (an assumption: it makes a 128 x 128
//!   tile 5% slower than a 256 x 128 one, 64 x 64 21% slower);
//! - each tile fills and drains its main loop: `K / (K + 64)` of its time does useful work;
//! - the library picks the best tile of 256 x 128, 128 x 256, 128 x 128, 128 x 64 and 64 x 64
//!   for the shape, as cuBLAS's heuristics choose among CUTLASS-style configurations.
//!
//! The product is divided by its value for a large square GEMM (16384 cubed), so a large GEMM
//! runs at the table's `gemm_efficiency` and a GEMM that fills the GPU badly runs below it.
//! This curve is derived, not fitted to published cuBLAS measurements by shape (none were at
//! hand in a usable form); docs/PLAN.md says so.

use trident_hardware::Gpu;

/// CTA tiles the library chooses among: rows, columns.
const TILES: [(usize, usize); 5] = [(256, 128), (128, 256), (128, 128), (128, 64), (64, 64)];

/// Operand elements per MAC at which a tile loses half its rate (see the module docs).
const INTENSITY_HALF: f64 = 16.0;

/// Main-loop K at which filling and draining a tile's pipeline costs half its time.
const K_HALF: f64 = 64.0;

/// One GEMM (or a batch of equal GEMMs): `batch` products of `m x k` by `k x n`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemm {
    /// What it computes: `qkv`, `proj`, `fc`, `fc-proj`, `logits`, `attention`.
    pub name: &'static str,
    /// Output rows (micro-batch x sequence for the layer GEMMs).
    pub m: usize,
    /// Output columns (the TP shard's width).
    pub n: usize,
    /// The reduction dimension.
    pub k: usize,
    /// Independent products of this shape run by one launch.
    pub batch: usize,
}

impl Gemm {
    /// FLOPs of the forward product: `2 m n k` per batch entry.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }
}

/// How well a shape fills `sms` SMs, relative to a large square GEMM (1 for large shapes).
pub fn shape_factor(sms: u32, m: usize, n: usize, k: usize, batch: usize) -> f64 {
    raw_factor(sms, m, n, k, batch) / raw_factor(sms, 16384, 16384, 16384, 1)
}

/// [`shape_factor`] against a large grid of the same `k`: the tile and wave effects alone, for
/// products whose table fraction was measured at their own reduction length (the attention
/// core's head dimension).
pub fn grid_factor(sms: u32, m: usize, n: usize, k: usize, batch: usize) -> f64 {
    raw_factor(sms, m, n, k, batch) / raw_factor(sms, 16384, 16384, k, 1)
}

fn raw_factor(sms: u32, m: usize, n: usize, k: usize, batch: usize) -> f64 {
    if m == 0 || n == 0 || k == 0 || batch == 0 || sms == 0 {
        return 1.0;
    }
    let best_intensity = tile_intensity(TILES[0]);
    let tile_rel = |t: (usize, usize)| {
        let i = tile_intensity(t);
        (i / (i + INTENSITY_HALF)) / (best_intensity / (best_intensity + INTENSITY_HALF))
    };
    let best = TILES
        .iter()
        .map(|&(tm, tn)| {
            let (rows, cols) = (m.div_ceil(tm), n.div_ceil(tn));
            let tiles = rows as f64 * cols as f64 * batch as f64;
            let padding = (m as f64 * n as f64) / ((rows * tm) as f64 * (cols * tn) as f64);
            let waves = (tiles / sms as f64).ceil();
            let wave = tiles / (waves * sms as f64);
            tile_rel((tm, tn)) * padding * wave
        })
        .fold(0.0, f64::max);
    best * k as f64 / (k as f64 + K_HALF)
}

fn tile_intensity((tm, tn): (usize, usize)) -> f64 {
    (tm * tn) as f64 / (tm + tn) as f64
}

/// A GEMM's rate on a GPU: its fraction of the dense peak and its time.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    /// The product.
    pub gemm: Gemm,
    /// Fraction of the dense peak it sustains.
    pub of_peak: f64,
    /// Seconds for its forward.
    pub seconds: f64,
    /// Where the rate comes from.
    pub source: &'static str,
}

impl Rate {
    /// `qkv GEMM 2048 x 5376 x 14336: 66% of peak, shape curve`
    pub fn describe(&self) -> String {
        let batch = if self.gemm.batch > 1 { format!(" (x{})", self.gemm.batch) } else { String::new() };
        format!(
            "{} GEMM {} x {} x {}{batch}: {:.0}% of peak, {}",
            self.gemm.name,
            self.gemm.m,
            self.gemm.n,
            self.gemm.k,
            100.0 * self.of_peak,
            self.source
        )
    }
}

/// The source every rate here names.
pub const SOURCE: &str = "shape curve (tile and wave quantization, derived)";

/// `gemm` on `gpu` at `peak` FLOP/s, with `efficiency` the fraction of peak a large product of
/// this kind sustains (`gemm_efficiency`, or `attention_efficiency` for the attention core,
/// whose table fraction already holds its head dimension: only its grid's fill counts).
pub fn rate(gpu: &Gpu, peak: f64, efficiency: f64, gemm: Gemm) -> Rate {
    let factor = if gemm.name == "attention" {
        grid_factor(gpu.sms, gemm.m, gemm.n, gemm.k, gemm.batch)
    } else {
        shape_factor(gpu.sms, gemm.m, gemm.n, gemm.k, gemm.batch)
    };
    let of_peak = efficiency * factor.min(1.0);
    let seconds = if of_peak > 0.0 && peak > 0.0 { gemm.flops() / (peak * of_peak) } else { 0.0 };
    Rate { gemm, of_peak, seconds, source: SOURCE }
}

/// The GEMMs of one transformer layer's forward for one micro-batch of `b` sequences of `s`
/// tokens, hidden `h`, `a` heads, split over `t` tensor-parallel ranks, and the last stage's
/// logits over a vocabulary of `v` (padded), each at its rate; the attention core (`QK^T` and
/// `AV`, batched over the micro-batch's heads on this rank) last.
#[allow(clippy::too_many_arguments)]
pub fn layer_rates(
    gpu: &Gpu,
    peak: f64,
    b: usize,
    s: usize,
    h: usize,
    a: usize,
    t: usize,
    v: usize,
) -> LayerRates {
    let t = t.max(1);
    let rows = b * s;
    let g = |name, n, k| rate(gpu, peak, gpu.gemm_efficiency, Gemm { name, m: rows, n, k, batch: 1 });
    let head_dim = h / a.max(1);
    // QK^T: s x s per head over head_dim; AV: s x head_dim over s. Same FLOPs (2 s^2 d each);
    // the rate is the first's grid (the second's is narrower, its K longer).
    let heads = b * (a / t).max(1);
    let attention = rate(
        gpu,
        peak,
        gpu.attention_efficiency,
        Gemm { name: "attention", m: s, n: s, k: head_dim.max(1), batch: 2 * heads },
    );
    LayerRates {
        qkv: g("qkv", 3 * h / t, h),
        proj: g("proj", h, h / t),
        fc: g("fc", 4 * h / t, h),
        fc_proj: g("fc-proj", h, 4 * h / t),
        attention,
        logits: g("logits", v / t, h),
    }
}

/// One layer's products at their rates (see [`layer_rates`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerRates {
    /// QKV projection, `bs x 3h/t x h`.
    pub qkv: Rate,
    /// Attention output projection, `bs x h x h/t`.
    pub proj: Rate,
    /// MLP up, `bs x 4h/t x h`.
    pub fc: Rate,
    /// MLP down, `bs x h x 4h/t`.
    pub fc_proj: Rate,
    /// The attention core, `QK^T` and `AV` batched over the heads.
    pub attention: Rate,
    /// The last stage's logits, `bs x V/t x h`.
    pub logits: Rate,
}

impl LayerRates {
    /// Every product, in the layer's order (the logits last).
    pub fn all(&self) -> [&Rate; 6] {
        [&self.qkv, &self.attention, &self.proj, &self.fc, &self.fc_proj, &self.logits]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wave_quantization_by_hand() {
        // 108 SMs. 2048 x 5376: 256 x 128 tiles give 8 x 42 = 336 tiles, 3.11 waves -> 4:
        // 336 / 432 = 0.778; 128 x 128 tiles give 672 tiles, 6.22 waves -> 7: 672 / 756 = 0.889,
        // times the tile's 0.95: 0.845, the best. K = 14336: 14336 / (14336 + 64).
        let raw = raw_factor(108, 2048, 5376, 14336, 1);
        let tile128 = {
            let i = |tm: f64, tn: f64| tm * tn / (tm + tn);
            (i(128.0, 128.0) / (i(128.0, 128.0) + 16.0)) / (i(256.0, 128.0) / (i(256.0, 128.0) + 16.0))
        };
        let expected = tile128 * 672.0 / 756.0 * 14336.0 / 14400.0;
        assert!((raw - expected).abs() < 1e-12, "{raw} vs {expected}");
        // A large square GEMM is the reference: factor 1.
        assert!((shape_factor(108, 16384, 16384, 16384, 1) - 1.0).abs() < 1e-12);
        // Four times the rows fill the waves better.
        assert!(shape_factor(108, 8192, 5376, 14336, 1) > shape_factor(108, 2048, 5376, 14336, 1) * 1.1);
    }

    #[test]
    fn small_shapes_run_below_the_large_gemm_rate() {
        let hw = trident_hardware::Hardware::builtin();
        let gpu = hw.gpu("a100-80gb").unwrap();
        let peak = 312e12;
        let big =
            rate(gpu, peak, gpu.gemm_efficiency, Gemm { name: "fc", m: 16384, n: 16384, k: 16384, batch: 1 });
        assert!((big.of_peak - gpu.gemm_efficiency).abs() < 1e-12);
        let small =
            rate(gpu, peak, gpu.gemm_efficiency, Gemm { name: "qkv", m: 2048, n: 768, k: 768, batch: 1 });
        assert!(small.of_peak < 0.8 * big.of_peak, "{}", small.describe());
        assert!(small.describe().starts_with("qkv GEMM 2048 x 768 x 768: "), "{}", small.describe());
    }
}
