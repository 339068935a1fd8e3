//! The memory-bound kernels with 128-bit accesses and one read of each input (the `_v4`, bf16,
//! row-in-registers LayerNorm and multi-tensor kernels), beside the scalar kernels of
//! [`super::suite`] they replace, at the same sizes.

use trident_perfmodel::Workload;
use trident_runtime::{Buffer, Device};

use super::{filled, filled_bf16, Bench, Op, BENCH_ADAMW, GPT2_C, GPT2_TC_ROWS, GPT2_V, GPT2_VP};
use trident::launch::{self, HalfFormat, Kernels, LaunchError};

/// GPT-2 small's parameters, as the AdamW case counts them.
const GPT2_PARAMS: usize = 124_475_904;

/// One memory-bound case of the new kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VecOp {
    /// `out = a + b`: f32 (`bf16: false`) or bf16.
    Add {
        /// Elements.
        n: usize,
        /// bf16 tensors.
        bf16: bool,
    },
    /// GeLU forward.
    GeluForward {
        /// Elements.
        n: usize,
        /// bf16 tensors.
        bf16: bool,
    },
    /// GeLU backward (`dinp` not aliasing `dout`).
    GeluBackward {
        /// Elements.
        n: usize,
        /// bf16 tensors.
        bf16: bool,
    },
    /// LayerNorm forward, a row per warp in registers.
    LayerNorm {
        /// Rows.
        rows: usize,
        /// Channels.
        c: usize,
        /// With the residual add fused in.
        residual: bool,
        /// bf16 activations.
        bf16: bool,
    },
    /// Fused softmax cross-entropy with its gradient in place: f32 logits (4 per access) or
    /// bf16 ones (8 per access, the loss in f32).
    CrossEntropy {
        /// Rows.
        rows: usize,
        /// Vocabulary.
        v: usize,
        /// Padded vocabulary.
        vp: usize,
        /// bf16 logits.
        bf16: bool,
    },
    /// The bias gradient from a bf16 `dout`: f32 column sums added onto `dbias`.
    BiasBackward {
        /// Rows of `dout`.
        rows: usize,
        /// Columns (the bias's length).
        oc: usize,
    },
    /// AdamW over every parameter in one launch (GPT-2's tensors: alternating decaying and
    /// non-decaying pieces).
    AdamWChunks {
        /// Parameters.
        n: usize,
    },
    /// The sum of squares of `n` gradients by the scalar kernel (partials finished on the
    /// host).
    SumSquares {
        /// Elements.
        n: usize,
    },
    /// The sum of squares in two launches (grid-filling partials, one block).
    GradNorm {
        /// Elements.
        n: usize,
    },
}

/// The cases, named as the suite names its rows: at micro-batch 16 x T 1024 rows (the
/// tensor-core GEMM cases' shape), the scalar kernels first ("before"), then the new ones.
pub fn cases() -> Vec<(String, Op)> {
    let (r, c) = (GPT2_TC_ROWS, GPT2_C);
    let mut out: Vec<(String, Op)> = vec![
        (format!("add {r}x{c} (scalar)"), Op::Add { n: r * c }),
        (format!("gelu fwd {r}x{} (scalar)", 4 * c), Op::GeluForward { n: r * 4 * c }),
        (format!("gelu bwd {r}x{} (scalar)", 4 * c), Op::GeluBackward { n: r * 4 * c }),
        (format!("layernorm fwd {r}x{c} (scalar)"), Op::LayerNormForward { rows: r, c }),
        (
            format!("crossentropy {r}x{GPT2_VP} (scalar)"),
            Op::CrossEntropy { rows: r, v: GPT2_V, vp: GPT2_VP },
        ),
    ];
    let mut new = Vec::new();
    for bf16 in [false, true] {
        let t = if bf16 { "bf16" } else { "v4 f32" };
        new.push((format!("add {r}x{c} ({t})"), VecOp::Add { n: r * c, bf16 }));
        new.push((format!("gelu fwd {r}x{} ({t})", 4 * c), VecOp::GeluForward { n: r * 4 * c, bf16 }));
        new.push((format!("gelu bwd {r}x{} ({t})", 4 * c), VecOp::GeluBackward { n: r * 4 * c, bf16 }));
        for residual in [false, true] {
            let what = if residual { "residual+layernorm" } else { "layernorm" };
            let t = if bf16 { "bf16" } else { "f32" };
            new.push((
                format!("{what} fwd {r}x{c} (row in registers, {t})"),
                VecOp::LayerNorm { rows: r, c, residual, bf16 },
            ));
        }
    }
    for bf16 in [false, true] {
        let t = if bf16 { "bf16" } else { "v4" };
        new.push((
            format!("crossentropy {r}x{GPT2_VP} ({t})"),
            VecOp::CrossEntropy { rows: r, v: GPT2_V, vp: GPT2_VP, bf16 },
        ));
    }
    new.push((format!("bias grad {r}x{} (bf16)", 4 * c), VecOp::BiasBackward { rows: r, oc: 4 * c }));
    new.push(("adamw 124M params (one launch, v4)".into(), VecOp::AdamWChunks { n: GPT2_PARAMS }));
    new.push(("sum of squares 124M (128 blocks, host sum)".into(), VecOp::SumSquares { n: GPT2_PARAMS }));
    new.push(("grad norm 124M (two-stage, v4)".into(), VecOp::GradNorm { n: GPT2_PARAMS }));
    out.extend(new.into_iter().map(|(name, op)| (name, Op::Vector(op))));
    out
}

/// The pieces of the AdamW case: GPT-2-like tensors of 768 x 768 (decaying) and 768 (not),
/// alternating, over `n` elements.
fn pieces(n: usize) -> Vec<(std::ops::Range<usize>, bool)> {
    let mut out = Vec::new();
    let (mut s, mut decays) = (0, true);
    while s < n {
        let e = (s + if decays { GPT2_C * GPT2_C } else { GPT2_C }).min(n);
        out.push((s..e, decays));
        (s, decays) = (e, !decays);
    }
    out
}

/// The case's buffers: f32 and bf16 (`u16`) tensors, and the targets.
pub(super) struct VecBuffers {
    f: Vec<Buffer<f32>>,
    h: Vec<Buffer<u16>>,
    u: Vec<Buffer<u32>>,
}

impl VecOp {
    /// The kernel counted (the first of two launches for the grad norm).
    pub fn kernel(&self) -> &'static str {
        match *self {
            VecOp::Add { bf16: false, .. } => "add_v4_f32",
            VecOp::Add { bf16: true, .. } => "add_bf16",
            VecOp::GeluForward { bf16: false, .. } => "gelu_forward_v4_f32",
            VecOp::GeluForward { bf16: true, .. } => "gelu_forward_bf16",
            VecOp::GeluBackward { bf16: false, .. } => "gelu_backward_v4_f32",
            VecOp::GeluBackward { bf16: true, .. } => "gelu_backward_bf16",
            VecOp::LayerNorm { residual: false, bf16: false, .. } => "layernorm_forward_row_f32",
            VecOp::LayerNorm { residual: true, bf16: false, .. } => "layernorm_residual_forward_f32",
            VecOp::LayerNorm { residual: false, bf16: true, c, .. } => {
                launch::layernorm_forward_row_bf16_kernel(c)
            }
            VecOp::LayerNorm { residual: true, bf16: true, .. } => "layernorm_residual_forward_bf16",
            VecOp::CrossEntropy { bf16: false, .. } => "crossentropy_v4_f32",
            VecOp::CrossEntropy { bf16: true, .. } => "crossentropy_v4_bf16",
            VecOp::BiasBackward { .. } => "bias_backward_bf16",
            VecOp::AdamWChunks { .. } => "adamw_chunks_f32",
            VecOp::SumSquares { .. } => "sum_squares_f32",
            VecOp::GradNorm { .. } => "sum_squares_chunks_f32",
        }
    }

    /// Bytes it must move at least (each input read once, each output written once).
    pub fn bytes(&self) -> u64 {
        let e = |bf16: bool| if bf16 { 2u64 } else { 4 };
        match *self {
            VecOp::Add { n, bf16 } | VecOp::GeluBackward { n, bf16 } => 3 * n as u64 * e(bf16),
            VecOp::GeluForward { n, bf16 } => 2 * n as u64 * e(bf16),
            VecOp::LayerNorm { rows, c, residual, bf16 } => {
                let tensors = if residual { 4 } else { 2 };
                (tensors * rows * c) as u64 * e(bf16) + 4 * (2 * c + 2 * rows) as u64
            }
            // The logits read and their gradient written; losses and targets.
            VecOp::CrossEntropy { rows, vp, bf16, .. } => (2 * rows * vp) as u64 * e(bf16) + 8 * rows as u64,
            // `dout` read, `dbias` read and written once.
            VecOp::BiasBackward { rows, oc } => 2 * (rows * oc) as u64 + 8 * oc as u64,
            VecOp::AdamWChunks { n } => 4 * 7 * n as u64,
            VecOp::SumSquares { n } | VecOp::GradNorm { n } => 4 * n as u64,
        }
    }

    /// Allocates the case's buffers (initialised: the emulator refuses reads of unwritten
    /// memory).
    pub(super) fn buffers(&self, device: &Device) -> Result<VecBuffers, LaunchError> {
        let (f, h): (Vec<usize>, Vec<usize>) = match *self {
            VecOp::Add { n, bf16 } | VecOp::GeluBackward { n, bf16 } => {
                if bf16 {
                    (vec![], vec![n; 3])
                } else {
                    (vec![n; 3], vec![])
                }
            }
            VecOp::GeluForward { n, bf16 } => {
                if bf16 {
                    (vec![], vec![n; 2])
                } else {
                    (vec![n; 2], vec![])
                }
            }
            VecOp::LayerNorm { rows, c, residual, bf16 } => {
                // f32: mean, rstd, weight, bias; activations: out, inp (+ res, r).
                let acts = vec![rows * c; if residual { 4 } else { 2 }];
                let stats = vec![rows, rows, c, c];
                if bf16 {
                    (stats, acts)
                } else {
                    ([stats, acts].concat(), vec![])
                }
            }
            VecOp::CrossEntropy { rows, vp, bf16: false, .. } => (vec![rows * vp, rows], vec![]),
            VecOp::CrossEntropy { rows, vp, bf16: true, .. } => (vec![rows], vec![rows * vp]),
            VecOp::BiasBackward { rows, oc } => (vec![oc], vec![rows * oc]),
            VecOp::AdamWChunks { n } => (vec![n; 4], vec![]),
            VecOp::SumSquares { n } | VecOp::GradNorm { n } => (vec![n], vec![]),
        };
        let f = f.iter().enumerate().map(|(i, &n)| filled(device, n, i as u32)).collect::<Result<_, _>>()?;
        let h = h
            .iter()
            .enumerate()
            .map(|(i, &n)| filled_bf16(device, n, 20 + i as u32))
            .collect::<Result<_, _>>()?;
        let u = match *self {
            VecOp::CrossEntropy { rows, v, .. } => {
                vec![Buffer::from_slice(device, &(0..rows as u32).map(|i| i % v as u32).collect::<Vec<_>>())?]
            }
            _ => Vec::new(),
        };
        Ok(VecBuffers { f, h, u })
    }

    /// Launches the case once; `on_launch` is called after each launch with its kernel.
    pub(super) fn launch(
        &self,
        k: &Kernels,
        b: &mut VecBuffers,
        on_launch: impl FnMut(&'static str),
    ) -> Result<(), LaunchError> {
        let (f, h) = (&mut b.f, &mut b.h);
        match *self {
            VecOp::Add { bf16: false, .. } => {
                let (o, i) = f.split_at_mut(1);
                launch::add_v4(k, &mut o[0].view_mut(..)?, &i[0].view(..)?, &i[1].view(..)?)
            }
            VecOp::Add { bf16: true, .. } => {
                let (o, i) = h.split_at_mut(1);
                launch::add_bf16(k, &mut o[0].view_mut(..)?, &i[0].view(..)?, &i[1].view(..)?)
            }
            VecOp::GeluForward { bf16: false, .. } => {
                let (o, i) = f.split_at_mut(1);
                launch::gelu_forward_v4(k, &mut o[0].view_mut(..)?, &i[0].view(..)?)
            }
            VecOp::GeluForward { bf16: true, .. } => {
                let (o, i) = h.split_at_mut(1);
                launch::gelu_forward_bf16(k, &mut o[0].view_mut(..)?, &i[0].view(..)?)
            }
            VecOp::GeluBackward { bf16: false, .. } => {
                let (o, i) = f.split_at_mut(1);
                launch::gelu_backward_v4(k, &mut o[0].view_mut(..)?, &i[0].view(..)?, &i[1].view(..)?)
            }
            VecOp::GeluBackward { bf16: true, .. } => {
                let (o, i) = h.split_at_mut(1);
                launch::gelu_backward_bf16(k, &mut o[0].view_mut(..)?, &i[0].view(..)?, &i[1].view(..)?)
            }
            VecOp::LayerNorm { rows, c, residual, bf16 } => {
                // f32: mean, rstd, weight, bias, then (f32 activations) out, inp, res, r; bf16
                // activations in `h` in the same order.
                let (stats, acts) = f.split_at_mut(4);
                let [mean, rstd, w, bias] = stats else { unreachable!("four f32 buffers") };
                let (mean, rstd) = (&mut mean.view_mut(..)?, &mut rstd.view_mut(..)?);
                let (w, bias) = (&w.view(..)?, &bias.view(..)?);
                match (bf16, residual, acts, &mut h[..]) {
                    (false, false, [out, inp], _) => launch::layernorm_forward_row(
                        k,
                        &mut out.view_mut(..)?,
                        mean,
                        rstd,
                        &inp.view(..)?,
                        w,
                        bias,
                        rows,
                        c,
                    ),
                    (false, true, [out, inp, res, r], _) => launch::layernorm_residual_forward(
                        k,
                        &mut res.view_mut(..)?,
                        &mut out.view_mut(..)?,
                        mean,
                        rstd,
                        &inp.view(..)?,
                        &r.view(..)?,
                        w,
                        bias,
                        rows,
                        c,
                    ),
                    (true, false, _, [out, inp]) => launch::layernorm_forward_row_bf16(
                        k,
                        &mut out.view_mut(..)?,
                        mean,
                        rstd,
                        &inp.view(..)?,
                        w,
                        bias,
                        rows,
                        c,
                    ),
                    (true, true, _, [out, inp, res, r]) => launch::layernorm_residual_forward_bf16(
                        k,
                        &mut res.view_mut(..)?,
                        &mut out.view_mut(..)?,
                        mean,
                        rstd,
                        &inp.view(..)?,
                        &r.view(..)?,
                        w,
                        bias,
                        rows,
                        c,
                    ),
                    _ => unreachable!("buffers allocated for the variant"),
                }
            }
            VecOp::CrossEntropy { rows, v, vp, bf16: true } => launch::crossentropy_v4_half(
                k,
                &mut h[0].view_mut(..)?,
                HalfFormat::Bf16,
                &mut f[0].view_mut(..)?,
                &b.u[0].view(..)?,
                rows,
                v,
                vp,
                Some(1.0 / rows as f32),
            ),
            VecOp::BiasBackward { rows, oc } => launch::bias_backward_half(
                k,
                &mut f[0].view_mut(..)?,
                &h[0].view(..)?,
                HalfFormat::Bf16,
                rows,
                oc,
            ),
            VecOp::CrossEntropy { rows, v, vp, bf16: false } => {
                let (logits, losses) = f.split_at_mut(1);
                launch::crossentropy_v4(
                    k,
                    &mut logits[0].view_mut(..)?,
                    &mut losses[0].view_mut(..)?,
                    &b.u[0].view(..)?,
                    rows,
                    v,
                    vp,
                    Some(1.0 / rows as f32),
                )
            }
            VecOp::AdamWChunks { n } => {
                let (outs, g) = f.split_at_mut(3);
                let [p, m, v] = outs else { unreachable!("three outputs") };
                let h = BENCH_ADAMW;
                launch::adamw_chunks(
                    k,
                    &mut p.view_mut(..)?,
                    &mut m.view_mut(..)?,
                    &mut v.view_mut(..)?,
                    &g[0].view(..)?,
                    &pieces(n),
                    &h,
                )
            }
            VecOp::SumSquares { .. } => launch::sum_squares(k, &f[0].view(..)?).map(drop),
            VecOp::GradNorm { n } => {
                let all = 0..n;
                launch::sum_squares_ranges_with(k, &f[0].view(..)?, &[all], on_launch).map(drop)
            }
        }
    }

    /// Every launch of the case counted on `Emu` (grid sampled at its edges), in launch order.
    pub(super) fn count_launches(&self, bench: &Bench) -> anyhow::Result<Vec<Workload>> {
        let mut bufs = self.buffers(bench.kernels.device())?;
        let mut works = Vec::new();
        let previous = trident_runtime::set_block_sample(trident_runtime::BlockSample::Edges);
        let result = self.launch(&bench.kernels, &mut bufs, |_| {
            if let Some(stats) = trident_runtime::last_launch_stats() {
                works.push(Workload::from_stats(&stats));
            }
        });
        trident_runtime::set_block_sample(previous);
        result?;
        if works.is_empty() {
            let stats = trident_runtime::last_launch_stats()
                .ok_or_else(|| anyhow::anyhow!("the emulator recorded no counters for {}", self.kernel()))?;
            works.push(Workload::from_stats(&stats));
        }
        anyhow::ensure!(
            works[0].kernel == self.kernel(),
            "expected a launch of {}, the emulator counted {}",
            self.kernel(),
            works[0].kernel
        );
        let bytes = self.bytes();
        if let Some(first) = works.first_mut() {
            *first = first.clone().with_dram_bytes(bytes);
        }
        Ok(works)
    }
}
