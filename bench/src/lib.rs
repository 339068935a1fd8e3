//! `trident bench kernels`: Trident's kernels at the sizes that matter (square GEMMs, the
//! GPT-2 layer's GEMMs, causal attention, every memory-bound kernel) beside the scalar
//! generations they replaced and the published SGEMM designs (both `trident-dev`'s), timed
//! on `Cuda` or counted on `Emu` and predicted by the time model (`trident-perfmodel`) for a
//! named GPU.
//!
//! Counting on `Emu` runs a sample of each grid ([`BlockSample::Edges`]) and, where the work
//! repeats exactly, less of it: a GEMM at two short `K` (its counters are affine in the
//! number of K-steps) extrapolated to the real `K`; attention for one (sequence, head) pair,
//! scaled to all of them (every pair does the same work). The tensor-core flash attention is
//! counted the same way, with every block of the one pair run (its causal blocks differ in
//! work, so an edge sample would not be exact). A split-K tensor-core GEMM is one launch whose
//! last block per tile sums the partials; it is counted at two short K with the same split
//! count ([`Bench::count_launches`]). The Hopper GEMM (`gemm_hopper`, sm_90a only) is counted
//! for one output tile at two short K, extrapolated to the real K and multiplied by the tiles
//! its persistent grid runs ([`Bench::count_launches`]). Cases of several launches are
//! predicted one after the other ([`predict_launches`]).

pub mod collectives;
pub mod memory;
pub mod step;

use std::time::Instant;

use serde::{Deserialize, Serialize};
use trident_perfmodel::{Prediction, Target, Workload};
use trident_runtime::{set_block_sample, BlockSample, Buffer, Device};

use trident::launch::{
    self, AdamW, AttentionShape, EncoderShape, FlashAttentionShape, Gemm, GemmTc, GemmTcPlan, HalfFormat,
    Kernels, Transpose,
};
use trident_dev::designs::SgemmDesign;

/// The AdamW step every benchmarked update takes (GPT-2's settings; the values do not change
/// the work).
pub(crate) const BENCH_ADAMW: AdamW =
    AdamW { lr: 1e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, step: 1, grad_scale: 1.0 };
/// Kernel classes, each with its own ceiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    /// Trident's GEMM: FLOP/s against the GPU's dense bf16 tensor peak.
    Gemm,
    /// Causal attention: FLOP/s against the tensor peak.
    Attention,
    /// Bandwidth-bound kernels: bytes/s against the memory ceiling.
    Memory,
    /// A published design (test kernel): FLOP/s against the fp32 peak.
    Design,
}

/// Output element of a tensor-core GEMM case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcOut {
    /// f32.
    F32,
    /// The inputs' 16-bit type.
    B16,
}

/// What one case launches.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// [`trident::launch::gemm`] of that shape.
    Gemm(Gemm),
    /// The tensor-core GEMM, with the plan its wrapper picks (split-K in the same launch).
    GemmTc(GemmTc, TcOut),
    /// The Hopper GEMM (`wgmma`, TMA, warp-specialized, persistent; sm_90a only): what the
    /// tensor-core GEMM hands a bf16 `A B^T` to on compute capability 9.0.
    GemmHopper(GemmTc, TcOut),
    /// Causal attention forward of that shape.
    Attention(AttentionShape),
    /// The tensor-core flash attention forward (bf16).
    FlashForward(FlashAttentionShape),
    /// One launch of the flash attention backward; on `Cuda` the case times all three.
    FlashBackward(FlashAttentionShape, FlashStep),
    /// `out = a + b` over `n` elements.
    Add {
        /// Elements.
        n: usize,
    },
    /// GeLU forward over `n` elements.
    GeluForward {
        /// Elements.
        n: usize,
    },
    /// GeLU backward, in place, over `n` elements.
    GeluBackward {
        /// Elements.
        n: usize,
    },
    /// LayerNorm forward of `rows` rows of `c` channels.
    LayerNormForward {
        /// Rows.
        rows: usize,
        /// Channels.
        c: usize,
    },
    /// LayerNorm backward of `rows` rows of `c` channels.
    LayerNormBackward {
        /// Rows.
        rows: usize,
        /// Channels.
        c: usize,
    },
    /// One AdamW update of `n` parameters.
    AdamW {
        /// Parameters.
        n: usize,
    },
    /// Fused softmax cross-entropy (with its gradient) of `rows` rows.
    CrossEntropy {
        /// Rows.
        rows: usize,
        /// Vocabulary size.
        v: usize,
        /// Padded vocabulary (the logits' row length).
        vp: usize,
    },
    /// Token + position embedding of that shape.
    EncoderForward(EncoderShape),
    /// A memory-bound kernel with 128-bit accesses ([`memory`]).
    Vector(memory::VecOp),
    /// A published SGEMM design on `size x size x size`.
    Design {
        /// Which design.
        design: SgemmDesign,
        /// M = N = K.
        size: usize,
    },
}

/// The three launches of the flash attention backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashStep {
    /// `D = rowsum(dO o O)` and `dq_accum = 0` (memory-bound).
    Prep,
    /// dK, dV and the atomic dQ sum: the five products.
    Main,
    /// `dq_accum` scaled and converted into `dqkv` (memory-bound).
    Dq,
}

/// One benchmark case.
#[derive(Clone, Debug)]
pub struct Case {
    /// The name rows print (`gemm 4096x768x3072`, ...).
    pub name: String,
    /// What it launches.
    pub op: Op,
}

/// GPT-2 small as the benchmark shapes it: `B x T` = 4 x 1024 rows, 768 channels, 12 heads,
/// the vocabulary padded to 50304.
pub const GPT2_ROWS: usize = 4 * 1024;

/// Rows of the GPT-2 layer's tensor-core GEMM cases: micro-batch 16 x T 1024.
pub const GPT2_TC_ROWS: usize = 16 * 1024;
/// GPT-2 small's channels.
pub const GPT2_C: usize = 768;
/// GPT-2's vocabulary padded to a multiple of 128.
pub const GPT2_VP: usize = 50304;
/// GPT-2's vocabulary.
pub const GPT2_V: usize = 50257;

/// Every case, in print order.
pub fn suite() -> Vec<Case> {
    let case = |name: String, op| Case { name, op };
    let mut cases = Vec::new();
    for s in [1024, 2048, 4096, 8192] {
        cases.push(case(format!("gemm {s}^3 (nn)"), Op::Gemm(Gemm::new(s, s, s))));
    }
    for s in [4096, 8192] {
        let g = GemmTc::new(s, s, s, HalfFormat::Bf16).trans_b();
        cases.push(case(format!("tc gemm {s}^3 bf16 (nt)"), Op::GemmTc(g, TcOut::B16)));
        cases.push(case(format!("hopper gemm {s}^3 bf16 (nt)"), Op::GemmHopper(g, TcOut::B16)));
    }
    let (r, c) = (GPT2_TC_ROWS, GPT2_C);
    for (what, oc, ic) in [("qkv", 3 * c, c), ("attn proj", c, c), ("fc", 4 * c, c), ("fc proj", c, 4 * c)] {
        let bf16 = HalfFormat::Bf16;
        cases.push(case(
            format!("tc gpt2 {what} fwd {r}x{oc}x{ic} bf16 (nt)"),
            Op::GemmTc(GemmTc::new(r, oc, ic, bf16).trans_b(), TcOut::B16),
        ));
        cases.push(case(
            format!("hopper gpt2 {what} fwd {r}x{oc}x{ic} bf16 (nt)"),
            Op::GemmHopper(GemmTc::new(r, oc, ic, bf16).trans_b(), TcOut::B16),
        ));
        cases.push(case(
            format!("tc gpt2 {what} bwd dx {r}x{ic}x{oc} bf16 (nn)"),
            Op::GemmTc(GemmTc::new(r, ic, oc, bf16), TcOut::B16),
        ));
        cases.push(case(
            format!("tc gpt2 {what} bwd dw {oc}x{ic}x{r} f32 (tn)"),
            Op::GemmTc(GemmTc::new(oc, ic, r, bf16).trans_a(), TcOut::F32),
        ));
    }
    let (r, c) = (GPT2_ROWS, GPT2_C);
    for (what, oc, ic) in [("qkv", 3 * c, c), ("attn proj", c, c), ("fc", 4 * c, c), ("fc proj", c, 4 * c)] {
        cases.push(case(
            format!("gpt2 {what} fwd {r}x{oc}x{ic} (nt)"),
            Op::Gemm(Gemm::new(r, oc, ic).trans_b()),
        ));
    }
    cases.push(case(format!("gpt2 fc bwd dx {r}x{c}x{} (nn)", 4 * c), Op::Gemm(Gemm::new(r, c, 4 * c))));
    cases.push(case(
        format!("gpt2 fc bwd dw {}x{c}x{r} (tn)", 4 * c),
        Op::Gemm(Gemm::new(4 * c, c, r).trans_a().beta(1.0)),
    ));
    cases.push(case(
        format!("gpt2 lm head fwd {r}x{GPT2_VP}x{c} (nt)"),
        Op::Gemm(Gemm::new(r, GPT2_VP, c).trans_b()),
    ));
    for (nh, hs) in [(12, 64), (12, 128)] {
        cases.push(case(
            format!("attention fwd b4 t1024 h{nh} d{hs} causal"),
            Op::Attention(AttentionShape { b: 4, t: 1024, nh, hs }),
        ));
    }
    // Tensor-core flash attention: B x NH = 16 x 16 (hs 64) or 16 x 8 (hs 128) heads, 4096 or
    // 2048 blocks of 64 queries at T 1024, several waves on 132 SMs.
    for (b, nh, hs) in [(16, 16, 64), (16, 8, 128)] {
        let s = FlashAttentionShape { b, t: 1024, nh, hs };
        cases.push(case(format!("flash attn fwd b{b} t1024 h{nh} d{hs} causal (bf16)"), Op::FlashForward(s)));
        for (what, step) in [("prep", FlashStep::Prep), ("main", FlashStep::Main), ("dq", FlashStep::Dq)] {
            cases.push(case(
                format!("flash attn bwd {what} b{b} t1024 h{nh} d{hs} causal (bf16)"),
                Op::FlashBackward(s, step),
            ));
        }
    }
    cases.push(case(format!("add {r}x{c}"), Op::Add { n: r * c }));
    cases.push(case(format!("gelu fwd {r}x{}", 4 * c), Op::GeluForward { n: r * 4 * c }));
    cases.push(case(format!("gelu bwd {r}x{}", 4 * c), Op::GeluBackward { n: r * 4 * c }));
    cases.push(case(format!("layernorm fwd {r}x{c}"), Op::LayerNormForward { rows: r, c }));
    cases.push(case(format!("layernorm bwd {r}x{c}"), Op::LayerNormBackward { rows: r, c }));
    cases.push(case("adamw 124M params".into(), Op::AdamW { n: 124_475_904 }));
    cases.push(case(
        format!("crossentropy {r}x{GPT2_VP}"),
        Op::CrossEntropy { rows: r, v: GPT2_V, vp: GPT2_VP },
    ));
    cases.push(case(
        format!("encoder fwd {r}x{c}"),
        Op::EncoderForward(EncoderShape { b: 4, t: 1024, c, vp: GPT2_VP, max_t: 1024 }),
    ));
    cases.extend(memory::cases().into_iter().map(|(name, op)| case(name, op)));
    for design in SgemmDesign::ALL {
        let p = design.published();
        cases.push(case(
            format!("design {} {} {}^3", p.number, p.title, p.size),
            Op::Design { design, size: p.size },
        ));
    }
    cases
}

/// The plan the wrapper picks for a tensor-core case.
fn tc_plan(g: &GemmTc) -> GemmTcPlan {
    g.plan.unwrap_or_else(|| launch::plan_gemm_tc(g.m, g.n, g.k))
}

/// The kernel of a tensor-core case (split-K included: one launch).
fn gemm_tc_kernel(g: &GemmTc, out: TcOut) -> &'static str {
    let plan = tc_plan(g);
    let layout = match (g.trans_a, g.trans_b) {
        (Transpose::No, Transpose::No) => "nn",
        (Transpose::No, Transpose::Yes) => "nt",
        _ => "tn",
    };
    let input = if g.input == HalfFormat::Bf16 { "bf16" } else { "f16" };
    let out = if out == TcOut::F32 { "f32" } else { "b16" };
    let name = format!("gemm_tc_{input}_{layout}_{out}_{}", plan.config.suffix);
    trident_kernels::gemm_tc::KERNEL_NAMES
        .iter()
        .copied()
        .find(|k| *k == name)
        .expect("every variant is built")
}

fn gemm_kernel(g: &Gemm) -> &'static str {
    match (g.trans_a, g.trans_b) {
        (Transpose::No, Transpose::No) => "gemm_nn_f32",
        (Transpose::No, Transpose::Yes) => "gemm_nt_f32",
        (Transpose::Yes, Transpose::No) => "gemm_tn_f32",
        (Transpose::Yes, Transpose::Yes) => "gemm_tt_f32",
    }
}

/// FLOPs of causal attention forward: `QK^T` and `PV` over the lower triangle.
fn attention_flops(s: &AttentionShape) -> f64 {
    let (b, t, nh, hs) = (s.b as f64, s.t as f64, s.nh as f64, s.hs as f64);
    2.0 * 2.0 * b * nh * hs * t * (t + 1.0) / 2.0
}

impl Case {
    /// Whether `target` can run the case: the Hopper GEMM exists only in the sm_90a module.
    pub fn runs_on(&self, target: &Target) -> bool {
        !matches!(self.op, Op::GemmHopper(..)) || target.arch.specific_ptx_arch == Some("sm_90a")
    }

    /// The group the case is reported in.
    pub fn group(&self) -> Group {
        match self.op {
            Op::Gemm(_) | Op::GemmTc(..) | Op::GemmHopper(..) => Group::Gemm,
            Op::Attention(_) | Op::FlashForward(_) | Op::FlashBackward(_, FlashStep::Main) => {
                Group::Attention
            }
            Op::Design { .. } => Group::Design,
            _ => Group::Memory,
        }
    }

    /// The kernel the case launches (its only launch).
    pub fn kernel(&self) -> &'static str {
        match &self.op {
            Op::Gemm(g) => gemm_kernel(g),
            Op::GemmTc(g, out) => gemm_tc_kernel(g, *out),
            Op::GemmHopper(_, TcOut::F32) => "gemm_hopper_bf16_nt_f32",
            Op::GemmHopper(_, TcOut::B16) => "gemm_hopper_bf16_nt_b16",
            Op::Attention(_) => "attention_forward_f32",
            Op::FlashForward(s) if s.hs == 64 => "flash_attention_forward_hs64",
            Op::FlashForward(_) => "flash_attention_forward_hs128",
            Op::FlashBackward(_, FlashStep::Prep) => "flash_attention_backward_prep",
            Op::FlashBackward(s, FlashStep::Main) if s.hs == 64 => "flash_attention_backward_hs64",
            Op::FlashBackward(_, FlashStep::Main) => "flash_attention_backward_hs128",
            Op::FlashBackward(_, FlashStep::Dq) => "flash_attention_backward_dq",
            Op::Add { .. } => "add_f32",
            Op::GeluForward { .. } => "gelu_forward_f32",
            Op::GeluBackward { .. } => "gelu_backward_f32",
            Op::LayerNormForward { .. } => "layernorm_forward_f32",
            Op::LayerNormBackward { .. } => "layernorm_backward_f32",
            Op::AdamW { .. } => "adamw_f32",
            Op::CrossEntropy { .. } => "crossentropy_f32",
            Op::EncoderForward(_) => "encoder_forward_f32",
            Op::Vector(v) => v.kernel(),
            Op::Design { design, .. } => design.kernel(),
        }
    }

    /// Useful FLOPs (0 for the memory-bound kernels). Flash attention counts as
    /// FlashAttention-2 does: forward `4 B NH T^2 HS / 2` (two products, halved for the causal
    /// mask), backward 2.5 times that (five products).
    pub fn flops(&self) -> f64 {
        match &self.op {
            Op::Gemm(g) => 2.0 * (g.m * g.n * g.k) as f64,
            Op::GemmTc(g, _) | Op::GemmHopper(g, _) => 2.0 * (g.m * g.n * g.k) as f64,
            Op::Design { size, .. } => 2.0 * (*size as f64).powi(3),
            Op::Attention(s) => attention_flops(s),
            Op::FlashForward(s) => s.forward_flops(),
            Op::FlashBackward(s, FlashStep::Main) => s.backward_flops(),
            _ => 0.0,
        }
    }

    /// Bytes the kernel must move at least: each input read once, each output written once
    /// (read too where it is updated in place).
    pub fn bytes(&self) -> u64 {
        let f = |n: usize| 4 * n as u64;
        match &self.op {
            Op::Gemm(g) => f(g.m * g.k + g.k * g.n + g.m * g.n * if g.beta == 0.0 { 1 } else { 2 }),
            // An accumulating GEMM reads C too, a GeLU-gradient one GeLU's input.
            Op::GemmTc(g, out) | Op::GemmHopper(g, out) => {
                2 * (g.m * g.k + g.k * g.n) as u64
                    + (g.m * g.n) as u64
                        * if *out == TcOut::F32 { 4 } else { 2 }
                        * if g.accumulate || g.gelu_grad { 2 } else { 1 }
            }
            Op::Design { size, .. } => f(4 * size * size),
            Op::Attention(s) => f(s.b * s.t * 3 * s.nh * s.hs + s.b * s.t * s.nh * s.hs + s.b * s.nh * s.t),
            // bf16 tensors (2 bytes), f32 statistics and dQ sum (4 bytes).
            Op::FlashForward(s) => 2 * (s.qkv_len() + s.out_len()) as u64 + f(s.stat_len()),
            Op::FlashBackward(s, FlashStep::Prep) => 4 * s.out_len() as u64 + f(s.stat_len() + s.out_len()),
            Op::FlashBackward(s, FlashStep::Main) => {
                // qkv and dout read, dK and dV written, lse and D read, dq_accum read and written.
                2 * (s.qkv_len() + s.out_len() + 2 * s.out_len()) as u64
                    + f(2 * s.stat_len() + 2 * s.out_len())
            }
            Op::FlashBackward(s, FlashStep::Dq) => f(s.out_len()) + 2 * s.out_len() as u64,
            Op::Add { n } => f(3 * n),
            Op::GeluForward { n } => f(2 * n),
            Op::GeluBackward { n } => f(3 * n),
            Op::LayerNormForward { rows, c } => f(2 * rows * c + 2 * c + 2 * rows),
            Op::LayerNormBackward { rows, c } => f(3 * rows * c + 3 * c + 2 * rows),
            Op::AdamW { n } => f(7 * n),
            Op::CrossEntropy { rows, vp, .. } => f(2 * rows * vp + 2 * rows),
            Op::EncoderForward(s) => f(2 * s.b * s.t * s.c) + 4 * (s.b * s.t) as u64 + f(s.t * s.c),
            Op::Vector(v) => v.bytes(),
        }
    }
}

/// Buffers of one case, allocated on its device (initialised: the emulator refuses reads of
/// memory never written).
struct Buffers {
    f: Vec<Buffer<f32>>,
    u: Vec<Buffer<u32>>,
    /// bf16 tensors.
    h: Vec<Buffer<u16>>,
    /// The buffers of a [`Op::Vector`] case.
    v: Option<memory::VecBuffers>,
}

/// A cheap deterministic pattern in [-0.5, 0.5): no zeros, no denormals.
fn pattern(n: usize, seed: u32) -> impl Iterator<Item = f32> {
    (0..n as u32).map(move |i| {
        (((i.wrapping_mul(2_654_435_761).wrapping_add(seed)) >> 8) as f32 / (1u32 << 24) as f32) - 0.5
    })
}

fn filled(device: &Device, n: usize, seed: u32) -> trident_runtime::Result<Buffer<f32>> {
    Buffer::from_slice(device, &pattern(n, seed).collect::<Vec<_>>())
}

/// [`filled`] in bf16.
fn filled_bf16(device: &Device, n: usize, seed: u32) -> trident_runtime::Result<Buffer<u16>> {
    let data: Vec<u16> = pattern(n, seed).map(trident_kernels::simt::f32_to_bf16).collect();
    Buffer::from_slice(device, &data)
}

impl Op {
    fn buffers(&self, device: &Device) -> Result<Buffers, launch::LaunchError> {
        let sizes: Vec<usize> = match self {
            Op::Gemm(g) => vec![g.m * g.n, g.m * g.k, g.k * g.n],
            // f32 output, when there is one (and GeLU's input for a GeLU-gradient epilogue).
            Op::GemmTc(g, TcOut::F32) | Op::GemmHopper(g, TcOut::F32) => {
                vec![g.m * g.n; if g.gelu_grad { 2 } else { 1 }]
            }
            Op::GemmTc(..) | Op::GemmHopper(..) => Vec::new(),
            Op::Design { size, .. } => vec![size * size; 3],
            Op::Attention(s) => {
                let c = s.nh * s.hs;
                vec![s.b * s.t * c, s.b * s.nh * s.t, s.b * s.t * 3 * c]
            }
            // f32: lse, dsum, dq_accum.
            Op::FlashForward(s) | Op::FlashBackward(s, _) => vec![s.stat_len(), s.stat_len(), s.out_len()],
            Op::Add { n } => vec![*n; 3],
            Op::GeluForward { n } => vec![*n; 2],
            Op::GeluBackward { n } => vec![*n; 3],
            Op::LayerNormForward { rows, c } => vec![rows * c, *rows, *rows, rows * c, *c, *c],
            Op::LayerNormBackward { rows, c } => vec![rows * c, *c, *c, rows * c, rows * c, *c, *rows, *rows],
            Op::AdamW { n } => vec![*n; 4],
            Op::CrossEntropy { rows, vp, .. } => vec![rows * vp, *rows],
            Op::EncoderForward(s) => vec![s.b * s.t * s.c, s.vp * s.c, s.max_t * s.c],
            Op::Vector(v) => {
                return Ok(Buffers {
                    f: Vec::new(),
                    u: Vec::new(),
                    h: Vec::new(),
                    v: Some(v.buffers(device)?),
                })
            }
        };
        let f: Vec<Buffer<f32>> =
            sizes.iter().enumerate().map(|(i, &n)| filled(device, n, i as u32)).collect::<Result<_, _>>()?;
        let u = match self {
            Op::CrossEntropy { rows, v, .. } => {
                vec![Buffer::from_slice(
                    device,
                    &(0..*rows as u32).map(|i| i % *v as u32).collect::<Vec<_>>(),
                )?]
            }
            Op::EncoderForward(s) => {
                vec![Buffer::from_slice(
                    device,
                    &(0..(s.b * s.t) as u32).map(|i| i % s.vp as u32).collect::<Vec<_>>(),
                )?]
            }
            _ => Vec::new(),
        };
        let h = match self {
            // bf16: qkv, out, dout, dqkv.
            Op::FlashForward(s) | Op::FlashBackward(s, _) => {
                [s.qkv_len(), s.out_len(), s.out_len(), s.qkv_len()]
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| filled_bf16(device, n, 10 + i as u32))
                    .collect::<Result<_, _>>()?
            }
            // bf16: A, B, and the output when it is 16-bit (and GeLU's input for a
            // GeLU-gradient epilogue).
            Op::GemmTc(g, out) | Op::GemmHopper(g, out) => {
                let mut h = vec![filled_bf16(device, g.m * g.k, 1)?, filled_bf16(device, g.k * g.n, 2)?];
                if *out == TcOut::B16 {
                    h.push(filled_bf16(device, g.m * g.n, 0)?);
                    if g.gelu_grad {
                        h.push(filled_bf16(device, g.m * g.n, 3)?);
                    }
                }
                h
            }
            _ => Vec::new(),
        };
        Ok(Buffers { f, u, h, v: None })
    }

    /// Launches the case once on the buffers. A flash backward step runs the whole backward
    /// and returns, on `Emu`, the counters of its own launch.
    fn launch(
        &self,
        k: &Kernels,
        dev: &Kernels,
        bufs: &mut Buffers,
    ) -> Result<Option<trident_runtime::LaunchStats>, launch::LaunchError> {
        if let (Op::Vector(v), Some(b)) = (self, bufs.v.as_mut()) {
            v.launch(k, b, |_| {})?;
            return Ok(None);
        }
        let f = &mut bufs.f;
        let h = &mut bufs.h;
        match self {
            Op::FlashForward(s) => {
                let [lse, _, _] = three(f);
                let (qkv, rest) = h.split_first_mut().expect("bf16 buffers");
                launch::flash_attention_forward(
                    k,
                    &mut rest[0].view_mut(..)?,
                    &mut lse.view_mut(..)?,
                    &qkv.view(..)?,
                    s,
                )?;
                return Ok(None);
            }
            Op::FlashBackward(s, _) => {
                let [lse, dsum, dq_accum] = three(f);
                let (qkv, rest) = h.split_first_mut().expect("bf16 buffers");
                let (out, rest) = rest.split_first_mut().expect("bf16 buffers");
                let (dout, rest) = rest.split_first_mut().expect("bf16 buffers");
                let kernel = Case { name: String::new(), op: *self }.kernel();
                let mut stats = None;
                launch::flash_attention_backward_with(
                    k,
                    &mut rest[0].view_mut(..)?,
                    &mut dsum.view_mut(..)?,
                    &mut dq_accum.view_mut(..)?,
                    &dout.view(..)?,
                    &qkv.view(..)?,
                    &out.view(..)?,
                    &lse.view(..)?,
                    s,
                    |launched| {
                        if launched == kernel {
                            stats = trident_runtime::last_launch_stats();
                        }
                    },
                )?;
                return Ok(stats);
            }
            _ => {}
        }
        self.launch_one(k, dev, bufs).map(|()| None)
    }

    /// Launches a case of one launch on f32 buffers.
    fn launch_one(&self, k: &Kernels, dev: &Kernels, bufs: &mut Buffers) -> Result<(), launch::LaunchError> {
        let f = &mut bufs.f;
        match self {
            Op::FlashForward(_) | Op::FlashBackward(..) => unreachable!("launched on bf16 buffers"),
            Op::Vector(_) => unreachable!("launched on its own buffers"),
            Op::GemmTc(g, out) => {
                let (ab, c) = bufs.h.split_at_mut(2);
                let (a, b) = (ab[0].view(..)?, ab[1].view(..)?);
                match out {
                    TcOut::F32 => {
                        let (c, x) = f.split_at_mut(1);
                        let x = if g.gelu_grad { Some(x[0].view(..)?) } else { None };
                        launch::gemm_tc(k, &mut c[0].view_mut(..)?, &a, &b, None, x.as_ref(), g)
                    }
                    TcOut::B16 => {
                        let (c, x) = c.split_at_mut(1);
                        let x = if g.gelu_grad { Some(x[0].view(..)?) } else { None };
                        launch::gemm_tc(k, &mut c[0].view_mut(..)?, &a, &b, None, x.as_ref(), g)
                    }
                }
            }
            Op::GemmHopper(g, out) => {
                let (ab, c) = bufs.h.split_at_mut(2);
                let (a, b) = (ab[0].view(..)?, ab[1].view(..)?);
                match out {
                    TcOut::F32 => launch::gemm_hopper(k, &mut f[0].view_mut(..)?, &a, &b, None, None, g),
                    TcOut::B16 => launch::gemm_hopper(k, &mut c[0].view_mut(..)?, &a, &b, None, None, g),
                }
            }
            Op::Gemm(g) => {
                let [c, a, b] = three(f);
                launch::gemm(k, &mut c.view_mut(..)?, &a.view(..)?, &b.view(..)?, g)
            }
            Op::Design { design, size } => {
                let [c, a, b] = three(f);
                design.launch(
                    dev,
                    &mut c.view_mut(..)?,
                    &a.view(..)?,
                    &b.view(..)?,
                    (*size, *size, *size),
                    1.0,
                    0.5,
                )
            }
            Op::Attention(s) => {
                let [out, lse, qkv] = three(f);
                launch::attention_forward(
                    k,
                    &mut out.view_mut(..)?,
                    &mut lse.view_mut(..)?,
                    &qkv.view(..)?,
                    s,
                )
            }
            Op::Add { .. } => {
                let [out, a, b] = three(f);
                launch::add(k, &mut out.view_mut(..)?, &a.view(..)?, &b.view(..)?)
            }
            Op::GeluForward { .. } => {
                let (out, rest) = f.split_at_mut(1);
                trident_dev::scalar::gelu_forward(dev, &mut out[0].view_mut(..)?, &rest[0].view(..)?)
            }
            Op::GeluBackward { .. } => {
                let [d, inp, dout] = three(f);
                trident_dev::scalar::gelu_backward(dev, &mut d.view_mut(..)?, &inp.view(..)?, &dout.view(..)?)
            }
            Op::LayerNormForward { rows, c } => {
                let (outs, ins) = f.split_at_mut(3);
                let [out, mean, rstd] = outs else { unreachable!("three outputs") };
                launch::layernorm_forward(
                    k,
                    &mut out.view_mut(..)?,
                    &mut mean.view_mut(..)?,
                    &mut rstd.view_mut(..)?,
                    &ins[0].view(..)?,
                    &ins[1].view(..)?,
                    &ins[2].view(..)?,
                    *rows,
                    *c,
                )
            }
            Op::LayerNormBackward { rows, c } => {
                let (outs, ins) = f.split_at_mut(3);
                let [dinp, dw, db] = outs else { unreachable!("three outputs") };
                launch::layernorm_backward(
                    k,
                    &mut dinp.view_mut(..)?,
                    &mut dw.view_mut(..)?,
                    &mut db.view_mut(..)?,
                    &ins[0].view(..)?,
                    &ins[1].view(..)?,
                    &ins[2].view(..)?,
                    &ins[3].view(..)?,
                    &ins[4].view(..)?,
                    *rows,
                    *c,
                )
            }
            Op::AdamW { .. } => {
                let (outs, ins) = f.split_at_mut(3);
                let [p, m, v] = outs else { unreachable!("three outputs") };
                let h = BENCH_ADAMW;
                launch::adamw(
                    k,
                    &mut p.view_mut(..)?,
                    &mut m.view_mut(..)?,
                    &mut v.view_mut(..)?,
                    &ins[0].view(..)?,
                    &h,
                )
            }
            Op::CrossEntropy { rows, v, vp } => {
                let (logits, losses) = f.split_at_mut(1);
                trident_dev::scalar::crossentropy(
                    dev,
                    &mut logits[0].view_mut(..)?,
                    &mut losses[0].view_mut(..)?,
                    &bufs.u[0].view(..)?,
                    *rows,
                    *v,
                    *vp,
                    Some(1.0 / *rows as f32),
                )
            }
            Op::EncoderForward(s) => {
                let (out, tables) = f.split_at_mut(1);
                launch::encoder_forward(
                    k,
                    &mut out[0].view_mut(..)?,
                    &bufs.u[0].view(..)?,
                    &tables[0].view(..)?,
                    &tables[1].view(..)?,
                    s,
                )
            }
        }
    }
}

/// The first three buffers, mutably.
fn three(f: &mut [Buffer<f32>]) -> [&mut Buffer<f32>; 3] {
    let (a, rest) = f.split_first_mut().expect("three buffers");
    let (b, rest) = rest.split_first_mut().expect("three buffers");
    [a, b, &mut rest[0]]
}

/// Two short K at which GEMMs are counted, multiples of every design's and Trident's K-step
/// (<= 32).
const K1: usize = 64;
const K2: usize = 128;
/// The tensor-core GEMM's K-step.
const BK_TC: usize = trident_kernels::gemm_tc::BK;

/// The predicted time of a case's launches on `target`, one after another: their seconds
/// summed, the rest (bound, occupancy, terms) of the longest.
pub fn predict_launches(
    target: &Target,
    works: &[Workload],
) -> Result<Prediction, trident_perfmodel::ModelError> {
    let mut preds = works.iter().map(|w| target.predict(w)).collect::<Result<Vec<_>, _>>()?;
    let seconds = preds.iter().map(|p| p.seconds).sum();
    preds.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let mut longest = preds.swap_remove(0);
    longest.seconds = seconds;
    Ok(longest)
}

/// Trident's kernels and the dev kernels (`trident-dev`: the scalar generations and the
/// designs) on one device.
pub struct Bench {
    /// Trident's kernels, through the launch wrappers.
    pub kernels: Kernels,
    /// The dev kernels.
    pub dev: Kernels,
}

impl Bench {
    /// Loads the kernels on `device` (`Emu` or `Cuda`).
    pub fn load(device: &Device) -> anyhow::Result<Bench> {
        Ok(Bench { kernels: Kernels::load(device)?, dev: trident_dev::load(device)? })
    }

    fn device(&self) -> &Device {
        self.kernels.device()
    }

    /// Runs `op` once, whole, on `Emu` with the grid sampled, and returns its counters.
    pub fn count_exact(&self, op: &Op) -> anyhow::Result<Workload> {
        let kernel = Case { name: String::new(), op: *op }.kernel();
        self.count_once(op, kernel)
    }

    fn count_once(&self, op: &Op, kernel: &str) -> anyhow::Result<Workload> {
        // Causal flash attention's blocks differ in work: run them all (one head, see `count`).
        let sample = match op {
            Op::FlashForward(_) | Op::FlashBackward(..) => BlockSample::All,
            // A split-K tile is finished by whichever of its z blocks comes last.
            Op::GemmTc(..) => BlockSample::EdgesWholeZ,
            _ => BlockSample::Edges,
        };
        self.count_sampled(op, kernel, sample)
    }

    fn count_sampled(&self, op: &Op, kernel: &str, sample: BlockSample) -> anyhow::Result<Workload> {
        let mut bufs = op.buffers(self.device())?;
        let previous = set_block_sample(sample);
        let result = op.launch(&self.kernels, &self.dev, &mut bufs);
        set_block_sample(previous);
        let captured = result?;
        let stats = captured
            .or_else(trident_runtime::last_launch_stats)
            .ok_or_else(|| anyhow::anyhow!("the emulator recorded no counters for {kernel}"))?;
        anyhow::ensure!(
            stats.kernel == kernel,
            "expected a launch of {kernel}, the emulator counted {}",
            stats.kernel
        );
        Ok(Workload::from_stats(&stats))
    }

    /// The case's counters on `Emu` for its full size (see the module documentation for how
    /// little of it runs).
    pub fn count(&self, case: &Case) -> anyhow::Result<Workload> {
        anyhow::ensure!(
            matches!(self.device(), Device::Emu),
            "counting needs the Emu device, whose launches are counted"
        );
        let kernel = case.kernel();
        let work = match case.op {
            Op::GemmTc(..) | Op::GemmHopper(..) | Op::Vector(_) => {
                return Ok(self.count_launches(case)?.swap_remove(0))
            }
            Op::Gemm(g) if g.k > K2 => {
                let short = |k| Op::Gemm(Gemm { k, ..g });
                let (w1, w2) = (self.count_once(&short(K1), kernel)?, self.count_once(&short(K2), kernel)?);
                w1.extrapolate(&w2, (g.k - K1) as f64 / (K2 - K1) as f64)
            }
            Op::Design { design, size } if size > K2 => {
                // Square designs at K1 and K2 with M = N = size: the kernels take K apart
                // from M and N, so run them through a GEMM-shaped launch.
                let (w1, w2) = (self.count_design(design, size, K1)?, self.count_design(design, size, K2)?);
                w1.extrapolate(&w2, (size - K1) as f64 / (K2 - K1) as f64)
            }
            Op::Attention(s) => {
                let one = Op::Attention(AttentionShape { b: 1, nh: 1, ..s });
                self.count_once(&one, kernel)?.scaled((s.b * s.nh) as f64)
            }
            Op::FlashForward(s) => {
                let one = Op::FlashForward(FlashAttentionShape { b: 1, nh: 1, ..s });
                self.count_once(&one, kernel)?.scaled((s.b * s.nh) as f64)
            }
            Op::FlashBackward(s, step) => {
                let one = Op::FlashBackward(FlashAttentionShape { b: 1, nh: 1, ..s }, step);
                self.count_once(&one, kernel)?.scaled((s.b * s.nh) as f64)
            }
            op => self.count_once(&op, kernel)?,
        };
        Ok(work.with_dram_bytes(case.bytes()).with_flops(case.flops()))
    }

    /// Every launch of the case, counted on `Emu` for its full size, in launch order (one for
    /// every case but the vectorized memory ones with several passes). A tensor-core GEMM is
    /// one launch, split-K included (counted as the module documentation says).
    pub fn count_launches(&self, case: &Case) -> anyhow::Result<Vec<Workload>> {
        if let Op::Vector(v) = case.op {
            anyhow::ensure!(matches!(self.device(), Device::Emu), "counting needs --device emu");
            return v.count_launches(self);
        }
        match case.op {
            Op::GemmTc(g, out) => {
                anyhow::ensure!(matches!(self.device(), Device::Emu), "counting needs --device emu");
                Ok(vec![self.count_tc(case, g, out)?])
            }
            Op::GemmHopper(g, out) => {
                anyhow::ensure!(matches!(self.device(), Device::Emu), "counting needs --device emu");
                Ok(vec![self.count_hopper(case, g, out)?])
            }
            _ => Ok(vec![self.count(case)?]),
        }
    }

    /// The Hopper GEMM's counters at its full size, from one output tile.
    ///
    /// Every tile of the persistent grid does the same main loop: the producer's TMA loads of
    /// its K-slices and the consumers' `wgmma`s. An edge tile reads fewer sectors
    /// (out-of-bounds elements are filled, not read) and its epilogue stores fewer rows; it is
    /// counted as a whole one, an upper bound. A block's set-up (barrier init, register reallocation), once per block, is
    /// counted once per tile (a few instructions too many per tile). So
    /// one tile (`M = BM`, `N = BN`: a grid of one block) at two K at least `2 x STAGES` slices
    /// long with the real K's remainder, where the ring's fill and drain are constant,
    /// extrapolates exactly to any K
    /// (`bench/tests/kernel_bench.rs` checks it against a whole launch), and the
    /// launch is that tile times the tiles. The busiest SM runs `ceil(tiles / blocks)` of them,
    /// so the counters are scaled as if every block did (the wave's tail is the model's to
    /// charge, not to average away), with `blocks = min(tiles, EMU_SMS)` as the wrapper
    /// launches on `Emu` and on an H100 or H200 (132 SMs each).
    fn count_hopper(&self, case: &Case, g: GemmTc, out: TcOut) -> anyhow::Result<Workload> {
        use trident_kernels::gemm_hopper::{BK, BM, BN, STAGES};
        let kernel = case.kernel();
        let tile = |k: usize| Op::GemmHopper(GemmTc { m: g.m.min(BM), n: g.n.min(BN), k, ..g }, out);
        let count = |op: &Op| self.count_sampled(op, kernel, BlockSample::All);
        // Both short K keep the real K's partial slice (the same remainder mod BK), so the
        // counters, affine in the slices, are affine in K along them.
        let k1 = 2 * STAGES * BK + g.k % BK;
        let k2 = k1 + STAGES * BK;
        let one = if g.k > k2 {
            let (w1, w2) = (count(&tile(k1))?, count(&tile(k2))?);
            w1.extrapolate(&w2, (g.k - k1) as f64 / (k2 - k1) as f64)
        } else {
            count(&tile(g.k))?
        };
        anyhow::ensure!(one.blocks == 1, "one tile of {kernel} ran as {} blocks", one.blocks);
        let tiles = g.m.div_ceil(BM) * g.n.div_ceil(BN);
        let blocks = tiles.min(launch::EMU_SMS);
        let mut work = one.scaled((tiles.div_ceil(blocks) * blocks) as f64);
        work.blocks = blocks as u64;
        Ok(work.with_dram_bytes(case.bytes()).with_flops(case.flops()))
    }

    /// A tensor-core GEMM's counters at its full size, from two launches at short K with the
    /// plan's tile and split count.
    ///
    /// Per z block, the counters are affine in its K slices (the main loop repeats exactly;
    /// the pipeline's fill and drain and the epilogue are constant once a block has
    /// `stages - 2` slices), and the split-K tail — every block's partial store, its count
    /// at the tile's counter, the last block's reads of the other `S - 1` partials and the
    /// epilogue — is the same at every K: it moves partial tiles of a fixed size. So with `S`
    /// and the last range's shortfall `S k_split - K` held fixed, the whole launch is affine
    /// in `k_split`, and two short launches (`K - S (k_split - k_i)` at `k_i` 64 elements
    /// apart, with the shortfall's whole slices added so that the last range keeps `stages`
    /// slices or more), extrapolated to the plan's `k_split`, count it exactly (the tail is
    /// in both and cancels in the slope). `tests/gemm_tc.rs` checks the extrapolation against a whole launch.
    /// The sample runs every z block of each sampled tile ([`BlockSample::EdgesWholeZ`]), so
    /// each sampled tile is finished by one block and the counts do not depend on which.
    ///
    /// DRAM bytes: A and B once, C once, and, with splits, every partial tile written and
    /// `S - 1` of each tile's `S` read back. Those partials (2-20 MiB for GPT-2's weight
    /// gradients) are written and read within one wave and might stay in the 50 MiB L2 of an
    /// H100, but A and B stream through it meanwhile and the time model has no L2 term: they
    /// are counted as DRAM traffic, an upper bound.
    fn count_tc(&self, case: &Case, g: GemmTc, out: TcOut) -> anyhow::Result<Workload> {
        let plan = tc_plan(&g);
        let kernel = case.kernel();
        // Whole slices the last range lacks (its partial slice, if K is no multiple of BK,
        // stays in it at every k_split).
        let short = (plan.splits * plan.k_split).saturating_sub(g.k) / BK_TC;
        let at = |k_split: usize| {
            let k = g.k - plan.splits * (plan.k_split - k_split);
            Op::GemmTc(GemmTc { k, plan: Some(GemmTcPlan { k_split, ..plan }), ..g }, out)
        };
        let count = |op: &Op| self.count_sampled(op, kernel, BlockSample::EdgesWholeZ);
        // Every range keeps at least `stages` slices: shorter ones leave part of the
        // pipeline's prologue and drain empty, and the counters are not affine there.
        let k1 = K1.max(plan.config.stages as usize * BK_TC) + short * BK_TC;
        let k2 = k1 + (K2 - K1);
        let work = if plan.k_split > k2 {
            let (w1, w2) = (count(&at(k1))?, count(&at(k2))?);
            w1.extrapolate(&w2, (plan.k_split - k1) as f64 / (k2 - k1) as f64)
        } else {
            count(&case.op)?
        };
        let partials = if plan.splits > 1 {
            let tiles = g.m.div_ceil(plan.config.bm() as usize) * g.n.div_ceil(plan.config.bn() as usize);
            let tile_bytes = 4 * (plan.config.bm() * plan.config.bn()) as u64;
            tiles as u64 * (2 * plan.splits as u64 - 1) * tile_bytes
        } else {
            0
        };
        Ok(work.with_dram_bytes(case.bytes() + partials).with_flops(case.flops()))
    }

    /// A design's counters at `M = N = size`, `K = k`.
    pub fn count_design(&self, design: SgemmDesign, size: usize, k: usize) -> anyhow::Result<Workload> {
        let dev = self.device();
        let (mut c, a, b) =
            (filled(dev, size * size, 0)?, filled(dev, size * k, 1)?, filled(dev, k * size, 2)?);
        let previous = set_block_sample(BlockSample::Edges);
        let result = design.launch(
            &self.dev,
            &mut c.view_mut(..)?,
            &a.view(..)?,
            &b.view(..)?,
            (size, size, k),
            1.0,
            0.5,
        );
        set_block_sample(previous);
        result?;
        let stats = trident_runtime::last_launch_stats()
            .ok_or_else(|| anyhow::anyhow!("the emulator recorded no counters for {}", design.kernel()))?;
        Ok(Workload::from_stats(&stats))
    }

    /// Mean seconds per launch of the case on `Cuda`, over at least `min_seconds` of launches.
    pub fn time(&self, case: &Case, min_seconds: f64) -> anyhow::Result<f64> {
        let mut bufs = case.op.buffers(self.device())?;
        case.op.launch(&self.kernels, &self.dev, &mut bufs)?;
        self.device().synchronize()?;
        let (mut iters, start) = (0u32, Instant::now());
        let mut batch = 1;
        loop {
            for _ in 0..batch {
                case.op.launch(&self.kernels, &self.dev, &mut bufs)?;
            }
            self.device().synchronize()?;
            iters += batch;
            let elapsed = start.elapsed().as_secs_f64();
            if (elapsed >= min_seconds && iters >= 3) || iters >= 10_000 {
                return Ok(elapsed / f64::from(iters));
            }
            batch = (batch * 2).min(64);
        }
    }

    /// Device-to-device copy bandwidth, bytes/s (read plus write), over a 512 MiB copy.
    pub fn copy_bandwidth(&self) -> anyhow::Result<f64> {
        let n = 128 << 20;
        let src = Buffer::<f32>::zeros(self.device(), n)?;
        let mut dst = Buffer::<f32>::zeros(self.device(), n)?;
        dst.view_mut(..)?.copy_from(&src.view(..)?)?;
        self.device().synchronize()?;
        let start = Instant::now();
        let reps = 10;
        for _ in 0..reps {
            dst.view_mut(..)?.copy_from(&src.view(..)?)?;
        }
        self.device().synchronize()?;
        Ok(2.0 * 4.0 * n as f64 * f64::from(reps) / start.elapsed().as_secs_f64())
    }
}

/// The hardware-table GPU a CUDA device name stands for (`NVIDIA H100 80GB HBM3` -> `h100-sxm`).
pub fn gpu_for_device_name(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    Some(if n.contains("h200") {
        "h200"
    } else if n.contains("h100") {
        if n.contains("pcie") {
            "h100-pcie"
        } else {
            "h100-sxm"
        }
    } else if n.contains("a100") {
        if n.contains("40gb") {
            "a100-40gb"
        } else {
            "a100-80gb"
        }
    } else if n.contains("a6000") {
        "rtx-a6000"
    } else {
        return None;
    })
}

/// One printed row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// The case's name.
    pub case: String,
    /// The hardware-table GPU of the prediction (emulator rows).
    pub gpu: Option<String>,
    /// The case's group.
    pub group: Group,
    /// The kernel launched (the first, for multi-kernel cases).
    pub kernel: String,
    /// Useful floating-point operations per launch.
    pub flops: f64,
    /// Bytes the launch must move to and from DRAM at least.
    pub bytes: u64,
    /// Measured seconds per launch (`Cuda`).
    pub measured_s: Option<f64>,
    /// Predicted seconds per launch for `gpu`.
    pub predicted_s: Option<f64>,
    /// The time model's bound for the prediction.
    pub predicted_bound: Option<String>,
    /// Resident blocks per SM in the prediction.
    pub occupancy_blocks_per_sm: Option<u32>,
    /// TFLOP/s (compute groups) or GB/s (memory), of the measurement where there is one,
    /// else of the prediction.
    pub rate: f64,
    /// `TFLOP/s` or `GB/s`.
    pub rate_unit: String,
    /// `rate` over the ceiling: tensor peak (gemm, attention), fp32 peak (designs), memory
    /// ceiling (memory).
    pub fraction_of_ceiling: f64,
    /// Counters (emulator) the prediction used.
    pub counts: Option<Counts>,
}

/// The counters worth printing.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Counts {
    /// Blocks of the grid.
    pub blocks: u64,
    /// Warp-level `fma.rn.f32` instructions.
    pub fma: u64,
    /// Warp-level `mma.sync` instructions.
    pub mma: u64,
    /// Warp-level shared-memory requests.
    pub shared_requests: u64,
    /// Shared-memory wavefronts under the 32-bank model (conflicts add wavefronts).
    pub smem_wavefronts: u64,
    /// Warp-level global loads and stores.
    pub global_requests: u64,
    /// 32-byte global sectors those touch.
    pub global_sectors: u64,
    /// Warp-level barriers.
    pub barriers: u64,
}

impl Counts {
    /// The counters of workload `w`.
    pub fn of(w: &Workload) -> Counts {
        Counts {
            blocks: w.blocks,
            fma: w.warp.fma,
            mma: w.warp.mma,
            shared_requests: w.warp.shared,
            smem_wavefronts: w.smem_wavefronts,
            global_requests: w.warp.global_load + w.warp.global_store,
            global_sectors: w.global_sectors,
            barriers: w.warp.barrier,
        }
    }
}

/// The ceilings rates are set against.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Ceilings {
    /// The tensor peak (bf16, else fp32 where a GPU has none), FLOP/s.
    pub tensor_flops: f64,
    /// The fp32 peak, FLOP/s.
    pub fp32_flops: f64,
    /// Memory bandwidth, bytes/s.
    pub memory_bytes_per_s: f64,
    /// `measured copy` or `table`.
    pub memory_source: &'static str,
}

impl Ceilings {
    /// The hardware table's peaks for `t` (memory at the table's bandwidth times its
    /// efficiency).
    pub fn from_table(t: &Target) -> Ceilings {
        Ceilings {
            tensor_flops: t.gpu.bf16_tflops.unwrap_or(t.gpu.fp32_tflops) * 1e12,
            fp32_flops: t.gpu.fp32_tflops * 1e12,
            memory_bytes_per_s: t.gpu.memory_tb_s * 1e12 * t.gpu.memory_efficiency,
            memory_source: "table",
        }
    }
}

/// A row from a case, its measurement and/or its prediction.
pub fn row(
    case: &Case,
    ceil: &Ceilings,
    measured: Option<f64>,
    predicted: Option<(&Prediction, &Workload)>,
) -> Row {
    let seconds = measured.or(predicted.map(|p| p.0.seconds)).unwrap_or(f64::NAN);
    let (rate, unit, ceiling) = match case.group() {
        Group::Memory => (case.bytes() as f64 / seconds / 1e9, "GB/s", ceil.memory_bytes_per_s / 1e9),
        Group::Design => (case.flops() / seconds / 1e12, "TFLOP/s", ceil.fp32_flops / 1e12),
        Group::Gemm | Group::Attention => {
            (case.flops() / seconds / 1e12, "TFLOP/s", ceil.tensor_flops / 1e12)
        }
    };
    Row {
        case: case.name.clone(),
        gpu: None,
        group: case.group(),
        kernel: case.kernel().to_string(),
        flops: case.flops(),
        bytes: case.bytes(),
        measured_s: measured,
        predicted_s: predicted.map(|p| p.0.seconds),
        predicted_bound: predicted.map(|p| p.0.bound.to_string()),
        occupancy_blocks_per_sm: predicted.map(|p| p.0.occupancy.blocks_per_sm),
        rate,
        rate_unit: unit.to_string(),
        fraction_of_ceiling: rate / ceiling,
        counts: predicted.map(|p| Counts::of(p.1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_map_to_table_entries() {
        assert_eq!(gpu_for_device_name("NVIDIA H100 80GB HBM3"), Some("h100-sxm"));
        assert_eq!(gpu_for_device_name("NVIDIA H100 PCIe"), Some("h100-pcie"));
        assert_eq!(gpu_for_device_name("NVIDIA H200"), Some("h200"));
        assert_eq!(gpu_for_device_name("NVIDIA A100-SXM4-40GB"), Some("a100-40gb"));
        assert_eq!(gpu_for_device_name("NVIDIA A100 80GB PCIe"), Some("a100-80gb"));
        assert_eq!(gpu_for_device_name("NVIDIA RTX A6000"), Some("rtx-a6000"));
        assert_eq!(gpu_for_device_name("NVIDIA GeForce RTX 4090"), None);
    }

    #[test]
    fn rows_read_back_from_the_json_an_emu_run_writes() {
        let case = &suite()[0];
        let target = Target::named("h100").unwrap();
        let work = Workload {
            kernel: case.kernel().into(),
            blocks: 4,
            threads_per_block: 256,
            ..Workload::default()
        };
        let pred = Prediction {
            gpu: target.gpu.name.clone(),
            seconds: 1e-3,
            bound: trident_perfmodel::Bound::Lsu,
            occupancy: trident_perfmodel::Occupancy {
                blocks_per_sm: 2,
                limit: trident_perfmodel::OccupancyLimit::Registers,
                fraction: 0.25,
            },
            blocks_on_busiest_sm: 1,
            terms: Vec::new(),
            dram_bytes: 0,
        };
        let mut r = row(case, &Ceilings::from_table(&target), None, Some((&pred, &work)));
        r.gpu = Some(target.gpu.name.clone());
        let doc = serde_json::json!({ "rows": [r] });
        let back: Vec<Row> = serde_json::from_value(doc["rows"].clone()).unwrap();
        assert_eq!(back[0].case, case.name);
        assert_eq!(back[0].predicted_s, Some(1e-3));
        assert_eq!(back[0].predicted_bound.as_deref(), Some("LSU/MIO"));
        assert_eq!(back[0].gpu.as_deref(), Some("h100-sxm"));
        // 1 ms for 2 * 1024^3 FLOPs against the 989 TFLOP/s bf16 peak.
        assert!((back[0].fraction_of_ceiling - 2.0 * 1024f64.powi(3) / 1e-3 / 989.4e12).abs() < 1e-9);
    }

    #[test]
    fn every_case_names_its_kernel_and_work() {
        let cases = suite();
        assert!(cases.iter().any(|c| c.name.contains("8192^3")));
        for c in &cases {
            assert!(c.bytes() > 0, "{}", c.name);
            assert_eq!(c.flops() > 0.0, c.group() != Group::Memory, "{}", c.name);
            let in_module = |m: trident_runtime::ModuleSource<'static>| {
                m.host_kernels.iter().flat_map(|g| g.iter()).any(|k| k.name == c.kernel())
            };
            assert!(
                in_module(trident::kernels::module_source()) || in_module(trident_dev::module_source()),
                "{}: no kernel {}",
                c.name,
                c.kernel()
            );
        }
    }
}
