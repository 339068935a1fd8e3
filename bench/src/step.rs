//! One optimizer step of a GPT on a GPU, predicted as the sum of its launches.
//!
//! [`step_launches`] lists the launches the trainer makes for one step of a single rank
//! under `--bf16` on `Emu` or `Cuda` — the calls of `model::gpt`, `model::layer` (once per
//! layer) and the trainer's tail, in their order — each with the shapes the trainer gives it.
//! [`predict_step`] counts every distinct launch once on the emulator at those shapes (the
//! suite's counting: sampled grids, GEMMs at two short K extrapolated, one attention head
//! scaled), predicts it for a GPU with the time model and sums, times how often the step
//! makes it. The model FLOPs over that time is the step's predicted MFU.
//!
//! The list is written out by hand, so a test (`bench/tests/step_prediction.rs`) holds it to the
//! trainer: for small models it must name the same kernels with the same grids, blocks and
//! shared memory, launch for launch, as the emulator records for a real step of
//! [`trident::train::Trainer`]. A change of the trainer's launches fails that test until the
//! list follows.
//!
//! On a Hopper target (an architecture with the sm_90a module) the GEMMs the trainer hands to
//! the Hopper kernel there (`launch::dispatches_to_gemm_hopper`: bf16 `A B^T`, the linear
//! layers' forward and the LM head) are predicted as `gemm_hopper` ([`StepOp::on_hopper`]);
//! the rest (the backward's transposed products) stay on the tensor-core GEMM.
//!
//! The tensor-core GEMM cases run without their bias and residual operands (the suite's
//! buffers), so the epilogue's loads of them are not in the instruction counts; the
//! residual's bytes are added to the launch's DRAM traffic, the bias's (a row) are not. The
//! GeLU-gradient and accumulating epilogues run as the trainer's do (their extra operand is
//! the case's own buffer).

use trident_perfmodel::{Target, Workload};
use trident_runtime::{record_launches, set_block_sample, BlockSample, Buffer, Device};

use super::memory::VecOp;
use super::{filled, filled_bf16, predict_launches, Bench, Case, FlashStep, Op, TcOut};
use trident::launch::{self, EncoderShape, FlashAttentionShape, GemmTc, HalfFormat};
use trident::model::{GptConfig, ShardLayout, ShardPlace};
use trident::ops::OpsContext;
use trident::optim::{AdamW, AdamWConfig};

/// The step a prediction is for: a model, its micro-batch and how many micro-batches a step
/// accumulates (one rank: no tensor, pipeline or data parallelism).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepShape {
    /// The model.
    pub config: GptConfig,
    /// Sequences per micro-batch.
    pub micro_batch: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Micro-batches per optimizer step (gradient accumulation).
    pub micro_batches: usize,
}

impl StepShape {
    /// GPT-2 124M (12 layers, 768 wide, 12 heads, vocabulary 50257 padded to 50304) at
    /// micro-batch 16 x T 1024, one micro-batch a step: the suite's GEMM shapes.
    pub fn gpt2_124m() -> StepShape {
        let config = GptConfig::new(1024, super::GPT2_V, 12, 12, super::GPT2_C, 128).expect("GPT-2's shape");
        StepShape { config, micro_batch: super::GPT2_TC_ROWS / 1024, seq_len: 1024, micro_batches: 1 }
    }

    /// Whether the trainer runs this shape the way [`step_launches`] lists it: every linear
    /// layer on the tensor cores (widths multiples of 8), flash attention (head size 64 or
    /// 128) and the row LayerNorm's bf16 output (at most 2048 channels). Other shapes take
    /// conversions and f32 kernels the list does not have.
    pub fn check(&self) -> Result<(), String> {
        let c = &self.config;
        let hs = c.channels / c.num_heads;
        if c.channels % 8 != 0 || c.padded_vocab_size % 8 != 0 {
            return Err(format!(
                "the hidden size ({}) and the padded vocabulary ({}) must be multiples of 8 for the tensor cores",
                c.channels, c.padded_vocab_size
            ));
        }
        if !launch::FLASH_HEAD_SIZES.contains(&hs) {
            return Err(format!("head size {hs}: flash attention is built for head sizes 64 and 128"));
        }
        if c.channels > 2048 {
            return Err(format!("hidden size {}: the bf16 LayerNorm kernel takes at most 2048", c.channels));
        }
        Ok(())
    }

    /// Tokens per step.
    pub fn tokens(&self) -> usize {
        self.micro_batch * self.seq_len * self.micro_batches
    }

    /// Model FLOPs of the step: the trainer's count (`6 N` per token plus attention's
    /// `12 L C T`, see `train::flops`).
    pub fn model_flops(&self) -> f64 {
        let params = trident::model::ParamLayout::new(self.config).len();
        trident::train::train_flops_per_token(&self.config, params, self.seq_len) * self.tokens() as f64
    }
}

/// A launch of the step that the suite has no case for.
#[derive(Clone, Debug)]
pub enum Extra {
    /// LayerNorm of f32 rows into a bf16 output (`layernorm_forward_row_f32_bf16`).
    LayerNormToBf16 {
        /// Rows.
        rows: usize,
        /// Channels.
        c: usize,
    },
    /// f32 to bf16 (`convert_f32_to_bf16`).
    Narrow {
        /// Elements.
        n: usize,
    },
    /// The bias gradient, column sums of an f32 `[rows, oc]` (`bias_backward_f32`).
    BiasBackward {
        /// Rows.
        rows: usize,
        /// Columns (the bias's length).
        oc: usize,
    },
    /// The embedding's backward: token rows, then positions (two launches).
    EncoderBackward(EncoderShape),
    /// The global gradient norm over the tensors that count in it (two launches).
    GradNorm {
        /// The parameter layout.
        layout: ShardLayout,
    },
    /// AdamW over every parameter (one launch).
    AdamW {
        /// The parameter layout.
        layout: ShardLayout,
    },
}

/// What one entry of the step launches.
#[derive(Clone, Debug)]
pub enum StepOp {
    /// A case of the suite's kinds ([`Op`]); `residual_bytes` more DRAM bytes for a GEMM whose
    /// epilogue adds a residual.
    Case(Op, u64),
    /// A launch the suite has no case for.
    Extra(Extra),
}

/// One entry of the step: what it launches and how often the step makes it.
#[derive(Clone, Debug)]
pub struct StepLaunch {
    /// What it is in the model (`layer: fc fwd`, `head: cross-entropy`, ...).
    pub name: String,
    /// The launch.
    pub op: StepOp,
    /// Times per step.
    pub count: u64,
}

/// The launches of one bf16 step of `s` on one rank, in the trainer's order, each once with
/// its count (a layer's launches once, times the layers; a micro-batch's times the
/// micro-batches).
pub fn step_launches(s: &StepShape) -> Vec<StepLaunch> {
    let cfg = s.config;
    let (b, t, c, nh) = (s.micro_batch, s.seq_len, cfg.channels, cfg.num_heads);
    let (v, vp, l) = (cfg.vocab_size, cfg.padded_vocab_size, cfg.num_layers as u64);
    let n = b * t;
    let mb = s.micro_batches as u64;
    let bf16 = HalfFormat::Bf16;
    let mut out = Vec::new();
    let mut add = |name: &str, op: StepOp, count: u64| out.push(StepLaunch { name: name.into(), op, count });
    let case = |op: Op| StepOp::Case(op, 0);
    // y[n, oc] = x[n, ic] W[oc, ic]^T, dx[n, ic] = dy W, dW[oc, ic] = dy^T x.
    let fwd = |oc: usize, ic: usize, o: TcOut| Op::GemmTc(GemmTc::new(n, oc, ic, bf16).trans_b(), o);
    let dx = |oc: usize, ic: usize, o: TcOut| Op::GemmTc(GemmTc::new(n, ic, oc, bf16), o);
    let dw =
        |oc: usize, ic: usize| Op::GemmTc(GemmTc::new(oc, ic, n, bf16).trans_a().accumulate(), TcOut::F32);
    let residual = 4 * (n * c) as u64;
    let attn = FlashAttentionShape { b, t, nh, hs: c / nh };
    let ln = || StepOp::Extra(Extra::LayerNormToBf16 { rows: n, c });
    let encoder = EncoderShape { b, t, c, vp, max_t: cfg.max_seq_len };

    add("embedding fwd", case(Op::EncoderForward(encoder)), mb);
    // Per layer, forward (model::layer::layer_forward).
    let lm = l * mb;
    add("layer: ln1", ln(), lm);
    add("layer: qkv fwd", case(fwd(3 * c, c, TcOut::B16)), lm);
    add("layer: attention fwd", case(Op::FlashForward(attn)), lm);
    add("layer: attn proj fwd (+ residual)", StepOp::Case(fwd(c, c, TcOut::F32), residual), lm);
    add("layer: ln2", ln(), lm);
    add("layer: fc fwd", case(fwd(4 * c, c, TcOut::B16)), lm);
    add("layer: gelu fwd", case(Op::Vector(VecOp::GeluForward { n: n * 4 * c, bf16: true })), lm);
    add("layer: fc proj fwd (+ residual)", StepOp::Case(fwd(c, 4 * c, TcOut::F32), residual), lm);
    // The head (model::gpt::Gpt::forward): final LayerNorm, LM head, loss and its gradient.
    add("head: ln_f", ln(), mb);
    add("head: lm head fwd", case(fwd(vp, c, TcOut::B16)), mb);
    add("head: cross-entropy", case(Op::Vector(VecOp::CrossEntropy { rows: n, v, vp, bf16: true })), mb);
    // Backward of the head, from the bf16 logits' gradient the loss wrote over them.
    add("head: lm head bwd dx", case(dx(vp, c, TcOut::F32)), mb);
    add("head: lm head bwd dw", case(dw(vp, c)), mb);
    add("head: ln_f bwd", case(Op::LayerNormBackward { rows: n, c }), mb);
    // Per layer, backward (model::layer::layer_backward).
    let narrow = || StepOp::Extra(Extra::Narrow { n: n * c });
    // The bias gradients: from the f32 residual gradient (the projections), or the bf16
    // gradient the product's backward reads (QKV, FC).
    let bias = |oc: usize| StepOp::Extra(Extra::BiasBackward { rows: n, oc });
    let bias16 = |oc: usize| case(Op::Vector(VecOp::BiasBackward { rows: n, oc }));
    add("layer: dres narrowed", narrow(), 2 * lm);
    // Through GeLU's backward in the epilogue (GeLU's input read as the residual).
    let fcproj_dx = match dx(c, 4 * c, TcOut::B16) {
        Op::GemmTc(g, o) => Op::GemmTc(g.gelu_grad(), o),
        _ => unreachable!("a tensor-core GEMM"),
    };
    add("layer: fc proj bwd dx (x gelu')", case(fcproj_dx), lm);
    add("layer: fc proj bwd dw", case(dw(c, 4 * c)), lm);
    add("layer: fc proj bias bwd", bias(c), lm);
    add("layer: fc bwd dx", case(dx(4 * c, c, TcOut::F32)), lm);
    add("layer: fc bwd dw", case(dw(4 * c, c)), lm);
    add("layer: fc bias bwd", bias16(4 * c), lm);
    add("layer: ln2 bwd", case(Op::LayerNormBackward { rows: n, c }), lm);
    add("layer: attn proj bwd dx", case(dx(c, c, TcOut::B16)), lm);
    add("layer: attn proj bwd dw", case(dw(c, c)), lm);
    add("layer: attn proj bias bwd", bias(c), lm);
    for (what, step) in [("prep", FlashStep::Prep), ("main", FlashStep::Main), ("dq", FlashStep::Dq)] {
        add(&format!("layer: attention bwd {what}"), case(Op::FlashBackward(attn, step)), lm);
    }
    add("layer: qkv bwd dx", case(dx(3 * c, c, TcOut::F32)), lm);
    add("layer: qkv bwd dw", case(dw(3 * c, c)), lm);
    add("layer: qkv bias bwd", bias16(3 * c), lm);
    add("layer: ln1 bwd", case(Op::LayerNormBackward { rows: n, c }), lm);
    add("embedding bwd", StepOp::Extra(Extra::EncoderBackward(encoder)), mb);
    // The step's tail (train::Trainer::step): the gradient norm, AdamW, the bf16 weights.
    let layout = ShardLayout::new(cfg, ShardPlace::SINGLE);
    add("grad norm", StepOp::Extra(Extra::GradNorm { layout: layout.clone() }), 1);
    add("adamw", StepOp::Extra(Extra::AdamW { layout: layout.clone() }), 1);
    add("bf16 weights refreshed", StepOp::Extra(Extra::Narrow { n: layout.len() }), 1);
    out
}

/// The counters of every launch `f` makes, with the grid sampled at its edges.
fn counted<E>(f: impl FnOnce() -> Result<(), E>) -> anyhow::Result<Vec<Workload>>
where
    anyhow::Error: From<E>,
{
    let previous = set_block_sample(BlockSample::Edges);
    let (result, stats) = record_launches(f);
    set_block_sample(previous);
    result?;
    Ok(stats.iter().map(Workload::from_stats).collect())
}

impl Extra {
    /// Bytes each launch must move at least, in launch order (`None`: the counted sectors, for
    /// a launch too small to matter).
    fn bytes(&self) -> Vec<Option<u64>> {
        let f = |n: usize| Some(4 * n as u64);
        match self {
            Extra::LayerNormToBf16 { rows, c } => {
                vec![Some(4 * (rows * c + 2 * c + 2 * rows) as u64 + 2 * (rows * c) as u64)]
            }
            Extra::Narrow { n } => vec![Some(6 * *n as u64)],
            Extra::BiasBackward { rows, oc } => vec![f(rows * oc + 2 * oc)],
            Extra::EncoderBackward(s) => {
                let bt = s.b * s.t;
                // Token rows: dout read, the touched rows of dwte read and written, the ids;
                // positions: dout read again, dwpe's T rows read and written.
                vec![Some(4 * (3 * bt * s.c + bt) as u64), f(bt * s.c + 2 * s.t * s.c)]
            }
            // The finishing block's few partials are left to its counted sectors.
            Extra::GradNorm { layout } => vec![f(layout.len()), None],
            // p, m, v read and written, g read.
            Extra::AdamW { layout } => vec![f(7 * layout.len())],
        }
    }

    /// Every launch, counted on `Emu`.
    fn count(&self, bench: &Bench) -> anyhow::Result<Vec<Workload>> {
        let dev = bench.device();
        let k = &bench.kernels;
        let works = match self {
            Extra::LayerNormToBf16 { rows, c } => {
                let (rows, c) = (*rows, *c);
                let mut out = filled_bf16(dev, rows * c, 1)?;
                let (mut mean, mut rstd) = (filled(dev, rows, 2)?, filled(dev, rows, 3)?);
                let (x, w, b) = (filled(dev, rows * c, 4)?, filled(dev, c, 5)?, filled(dev, c, 6)?);
                counted(|| {
                    launch::layernorm_forward_row_f32_bf16(
                        k,
                        &mut out.view_mut(..)?,
                        &mut mean.view_mut(..)?,
                        &mut rstd.view_mut(..)?,
                        &x.view(..)?,
                        &w.view(..)?,
                        &b.view(..)?,
                        rows,
                        c,
                    )
                })?
            }
            Extra::Narrow { n } => {
                let (mut out, x) = (filled_bf16(dev, *n, 1)?, filled(dev, *n, 2)?);
                counted(|| launch::narrow(k, &mut out.view_mut(..)?, &x.view(..)?, HalfFormat::Bf16))?
            }
            Extra::BiasBackward { rows, oc } => {
                let (mut db, dy) = (filled(dev, *oc, 1)?, filled(dev, rows * oc, 2)?);
                counted(|| launch::bias_backward(k, &mut db.view_mut(..)?, &dy.view(..)?, *rows, *oc))?
            }
            Extra::EncoderBackward(s) => {
                let (mut dwte, mut dwpe) = (filled(dev, s.vp * s.c, 1)?, filled(dev, s.max_t * s.c, 2)?);
                let dout = filled(dev, s.b * s.t * s.c, 3)?;
                let ids: Vec<u32> = (0..(s.b * s.t) as u32).map(|i| i % s.vp as u32).collect();
                let tokens = Buffer::from_slice(dev, &ids)?;
                counted(|| {
                    launch::encoder_backward(
                        k,
                        &mut dwte.view_mut(..)?,
                        &mut dwpe.view_mut(..)?,
                        &dout.view(..)?,
                        &tokens.view(..)?,
                        s,
                    )
                })?
            }
            Extra::GradNorm { layout } => {
                let grads = filled(dev, layout.len(), 1)?;
                let ranges = trident::train::norm_ranges(layout, 0..layout.len());
                counted(|| launch::sum_squares_ranges(k, &grads.view(..)?, &ranges).map(drop))?
            }
            Extra::AdamW { layout } => {
                // The trainer's optimizer itself, over the whole model.
                let mut opt = AdamW::new(dev, layout, 0..layout.len(), AdamWConfig::default())?;
                let (mut params, grads) = (filled(dev, layout.len(), 1)?, filled(dev, layout.len(), 2)?);
                let ctx = OpsContext::new(dev)?;
                counted(|| opt.step(&ctx, &mut params, &grads, 0, 1e-4, 1.0))?
            }
        };
        let bytes = self.bytes();
        anyhow::ensure!(
            works.len() == bytes.len(),
            "{self:?}: {} launches counted, {} expected",
            works.len(),
            bytes.len()
        );
        Ok(works
            .into_iter()
            .zip(bytes)
            .map(|(w, b)| match b {
                Some(b) => w.with_dram_bytes(b),
                None => w,
            })
            .collect())
    }
}

impl StepOp {
    /// The entry as a compute capability 9.0 device runs it: a tensor-core GEMM the Hopper
    /// kernel supports, with no fixed plan, becomes the Hopper GEMM (as `launch::gemm_tc`
    /// dispatches there); everything else is unchanged.
    pub fn on_hopper(&self) -> StepOp {
        match self {
            StepOp::Case(Op::GemmTc(g, out), residual)
                if g.plan.is_none() && launch::gemm_hopper_supports(g) =>
            {
                StepOp::Case(Op::GemmHopper(*g, *out), *residual)
            }
            other => other.clone(),
        }
    }

    /// Every launch of the entry, counted on `Emu` at its shapes, in launch order.
    pub fn count(&self, bench: &Bench) -> anyhow::Result<Vec<Workload>> {
        match self {
            StepOp::Case(op, residual_bytes) => {
                let mut works = bench.count_launches(&Case { name: String::new(), op: *op })?;
                if *residual_bytes > 0 {
                    let last = works.last_mut().expect("a case launches");
                    let bytes = last.dram_bytes.unwrap_or(last.global_sectors * 32) + residual_bytes;
                    *last = last.clone().with_dram_bytes(bytes);
                }
                Ok(works)
            }
            StepOp::Extra(e) => e.count(bench),
        }
    }
}

/// One entry of a step's prediction.
#[derive(Clone, Debug)]
pub struct StepRow {
    /// The entry's name.
    pub name: String,
    /// Its kernels, in launch order.
    pub kernels: Vec<String>,
    /// Times per step.
    pub count: u64,
    /// Predicted seconds of one occurrence (all its launches).
    pub seconds: f64,
}

/// A step's prediction on one GPU.
#[derive(Clone, Debug)]
pub struct StepPrediction {
    /// The hardware-table GPU.
    pub gpu: String,
    /// Every entry, in the step's order.
    pub rows: Vec<StepRow>,
    /// Launches per step.
    pub launches: u64,
    /// Predicted seconds per step: the entries' seconds times their counts, summed.
    pub seconds: f64,
    /// Model FLOPs per step ([`StepShape::model_flops`]).
    pub model_flops: f64,
    /// Model FLOPs over the predicted time and the GPU's dense bf16 peak.
    pub mfu: f64,
}

/// Counts every launch of `step` on `Emu` and predicts the step on `target`.
pub fn predict_step(bench: &Bench, target: &Target, step: &StepShape) -> anyhow::Result<StepPrediction> {
    use anyhow::Context;
    step.check().map_err(|why| anyhow::anyhow!("the step list does not cover this shape: {why}"))?;
    let mut rows = Vec::new();
    let (mut seconds, mut launches) = (0.0, 0);
    let hopper = target.arch.specific_ptx_arch == Some("sm_90a");
    for entry in step_launches(step) {
        let op = if hopper { entry.op.on_hopper() } else { entry.op };
        let works = op.count(bench).with_context(|| format!("counting `{}`", entry.name))?;
        let pred =
            predict_launches(target, &works).with_context(|| format!("predicting `{}`", entry.name))?;
        seconds += pred.seconds * entry.count as f64;
        launches += works.len() as u64 * entry.count;
        rows.push(StepRow {
            name: entry.name,
            kernels: works.iter().map(|w| w.kernel.clone()).collect(),
            count: entry.count,
            seconds: pred.seconds,
        });
    }
    let model_flops = step.model_flops();
    let peak = target.gpu.bf16_tflops.unwrap_or(target.gpu.fp32_tflops) * 1e12;
    Ok(StepPrediction {
        gpu: target.gpu.name.clone(),
        rows,
        launches,
        seconds,
        model_flops,
        mfu: model_flops / seconds / peak,
    })
}

/// `gpt2-124m bf16 step`, the name `--filter` matches the step by.
pub const STEP_NAME: &str = "gpt2-124m bf16 step (16 x 1024 tokens, one rank)";

/// The classes of a step's breakdown, in print order.
const CLASSES: [&str; 4] = [
    "Hopper GEMMs (wgmma, TMA)",
    "tensor-core GEMMs (mma.sync)",
    "flash attention (main loops)",
    "memory-bound kernels",
];

/// The class of a kernel in a step's breakdown (one of [`CLASSES`]).
fn class(kernel: &str) -> &'static str {
    if kernel.starts_with("gemm_tc_") {
        CLASSES[1]
    } else if kernel.starts_with("gemm_hopper_") {
        CLASSES[0]
    } else if kernel.starts_with("flash_attention_forward_hs")
        || kernel.starts_with("flash_attention_backward_hs")
    {
        CLASSES[2]
    } else {
        CLASSES[3]
    }
}

impl StepPrediction {
    /// Lines that print the prediction: the total, its split by class, and the entries that
    /// take the most time.
    pub fn report(&self, what: &str) -> Vec<String> {
        let total = |r: &StepRow| r.seconds * r.count as f64;
        let mut lines = vec![format!(
            "PREDICTED {what} on {}: {:.2} ms ({} launches), model FLOPs {:.3e}, MFU {:.1}% of the dense bf16 peak \
             (time model on exact emulator counters; not measured)",
            self.gpu,
            self.seconds * 1e3,
            self.launches,
            self.model_flops,
            100.0 * self.mfu
        )];
        lines.push("| share | predicted ms | what |".into());
        lines.push("|---|---|---|".into());
        for c in CLASSES {
            let s: f64 =
                self.rows.iter().filter(|r| class(r.kernels.first().map_or("", |k| k)) == c).map(total).sum();
            if s == 0.0 {
                continue;
            }
            lines.push(format!("| {:.1}% | {:.3} | {c} |", 100.0 * s / self.seconds, s * 1e3));
        }
        lines.push(String::new());
        lines.push("| entry | kernels | per step | predicted ms each | ms per step | share |".into());
        lines.push("|---|---|---|---|---|---|".into());
        let mut rows: Vec<&StepRow> = self.rows.iter().collect();
        rows.sort_by(|a, b| total(b).total_cmp(&total(a)));
        for r in rows {
            lines.push(format!(
                "| {} | {} | {} | {:.4} | {:.3} | {:.1}% |",
                r.name,
                r.kernels.join(", "),
                r.count,
                r.seconds * 1e3,
                total(r) * 1e3,
                100.0 * total(r) / self.seconds
            ));
        }
        lines
    }
}

/// The lines a finished single-rank bf16 run on `Emu` or `Cuda` prints: its step predicted
/// as the sum of its launches for the GPU it ran on (`Cuda`, when the hardware table has it)
/// or an H100 SXM (`Emu`), beside the measured seconds per step on `Cuda`.
pub fn run_summary(device: &Device, shape: &StepShape, measured_step_s: Option<f64>) -> Vec<String> {
    let gpu = match device {
        Device::Cuda(d) => super::gpu_for_device_name(d.name()),
        _ => Some("h100-sxm"),
    };
    let Some(gpu) = gpu else {
        return vec!["step prediction: this GPU is not in the hardware table".into()];
    };
    let prediction = Target::named(gpu)
        .map_err(anyhow::Error::from)
        .and_then(|target| Ok((target, Bench::load(&Device::Emu)?)))
        .and_then(|(target, bench)| predict_step(&bench, &target, shape));
    match prediction {
        Err(e) => vec![format!("step prediction: not available ({e:#})")],
        Ok(p) => {
            let mut line = format!(
                "step PREDICTED for {} as the sum of its {} launches (time model on the emulator's counters): \
                 {:.3} ms, MFU {:.1}%",
                p.gpu,
                p.launches,
                p.seconds * 1e3,
                100.0 * p.mfu
            );
            if let (Device::Cuda(_), Some(m)) = (device, measured_step_s) {
                line += &format!(
                    "; MEASURED {:.3} ms per step (wall time over the steps, start-up included; predicted / measured {:.2})",
                    m * 1e3,
                    p.seconds / m
                );
            }
            vec![line]
        }
    }
}
