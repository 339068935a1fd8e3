//! `trident plan`: memory per GPU, time per iteration and throughput of a GPT training layout
//! (TP x PP x DP, micro-batch, recomputation, sequence parallelism, interleaving) on a cluster
//! described by the hardware table (`trident_hardware`), and a search over the layouts.
//!
//! The formulas, with their sources, are in docs/PLAN.md. In short:
//! - memory: parameters, gradients and optimizer state at Megatron-LM's bytes per parameter
//!   (ZeRO-1 divides the optimizer state by DP); activations per layer from Korthikanti et al.
//!   2022 (section 4), times the micro-batches the pipeline schedule holds on the stage
//!   ([`schedule`]'s `in_flight`); communication buffers; a reserve.
//! - time: GEMM and attention FLOPs at the GPU's achievable rates, elementwise traffic at its
//!   achievable bandwidth, ring collectives with alpha-beta costs on the link each group
//!   crosses, the pipeline from the schedule simulation the trainer's schedule code provides,
//!   and the DP gradient reduction with what the last backward hides of it.
//!
//! Modules: [`inputs`] (the checks of a problem's sizes and figures), [`flops`] (model and
//! hardware FLOPs), [`presets`] (model shapes by name), [`search`] (the layouts ranked, and why the
//! winner wins), [`report`] (tables and JSON), [`picture`] (the memory and timeline pictures,
//! as pixels), [`schedule`] (the pipeline schedules as data and their simulation: the trainer
//! runs the same schedules, importing them from here). The crate knows no trainer; planning
//! for one machine by running the real trainer is `trident::calibrate`.

pub mod compute;
pub mod flops;
pub mod inputs;
pub mod launch_blocking;
pub mod network;
pub mod overlap;
pub mod picture;
pub mod presets;
mod recompute;
pub mod report;
pub mod schedule;
pub mod search;
pub mod validation;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde::Serialize;
use trident_hardware::{Gpu, Link};

pub use inputs::{check_problem, MAX_SIZE};
pub use presets::{preset, preset_names, ModelShape, PRESETS};
pub use recompute::Recompute;
use schedule::{simulate, simulate_interleaved, Interleaved, Schedule};

/// Training precision: what the weights and activations are stored in and which units the
/// matrix products run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// fp32 everywhere, matrix products on the FP32 FMA units.
    Fp32,
    /// fp32 storage, matrix products on TF32 tensor cores.
    Tf32,
    /// bf16 weights and activations, fp32 master weights, gradients and Adam moments.
    Bf16,
    /// fp16 weights, activations and gradients, fp32 master weights and Adam moments.
    Fp16,
}

impl Precision {
    /// The GPU units this precision runs its matrix products on.
    pub fn units(self) -> trident_hardware::Precision {
        match self {
            Precision::Fp32 => trident_hardware::Precision::Fp32,
            Precision::Tf32 => trident_hardware::Precision::Tf32,
            Precision::Bf16 => trident_hardware::Precision::Bf16,
            Precision::Fp16 => trident_hardware::Precision::Fp16,
        }
    }

    /// Bytes per activation element.
    pub fn activation_bytes(self) -> f64 {
        match self {
            Precision::Fp32 | Precision::Tf32 => 4.0,
            Precision::Bf16 | Precision::Fp16 => 2.0,
        }
    }

    /// Bytes per parameter of (weights, gradients, optimizer state), from Megatron-LM's
    /// distributed-optimizer notes: fp16 2 + 2 + 16 (fp32 master, fp32 gradient copy, Adam m
    /// and v) = 20; bf16 2 + 4 (fp32 main gradients) + 12 (master, m, v) = 18; fp32
    /// 4 + 4 + 8 (m, v) = 16. ZeRO-1 shards the third over DP.
    pub fn state_bytes(self) -> (f64, f64, f64) {
        match self {
            Precision::Fp32 | Precision::Tf32 => (4.0, 4.0, 8.0),
            Precision::Bf16 => (2.0, 4.0, 12.0),
            Precision::Fp16 => (2.0, 2.0, 16.0),
        }
    }
}

/// Where the GPUs are and what connects them.
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The GPU type of every rank.
    pub gpu: Gpu,
    /// GPUs per node (sharing the intra-node link).
    pub gpus_per_node: usize,
    /// Nodes (joined by the inter-node link, one NIC per GPU).
    pub nodes: usize,
    /// GPU to GPU inside a node.
    pub intra: Link,
    /// One NIC: node to node.
    pub inter: Link,
    /// NICs per node for the compute fabric (8 on DGX and HGX nodes: one per GPU).
    pub nics_per_node: usize,
}

impl Cluster {
    /// The link between nodes a cluster of `gpu` has unless told otherwise: InfiniBand HDR
    /// for the V100, A100 and MI250X generation, NDR for newer parts, and the in-process link
    /// for this machine measured as `local-cpu`.
    pub fn default_inter_link(gpu: &str) -> &'static str {
        match gpu {
            "v100" | "a100-40gb" | "a100-80gb" | "mi250x" => "ib-hdr",
            "local-cpu" => "local-inproc",
            _ => "ib-ndr",
        }
    }

    /// GPUs in all: `gpus_per_node x nodes`.
    pub fn world(&self) -> usize {
        self.gpus_per_node.saturating_mul(self.nodes)
    }
}

/// Planning options that are not part of the layout.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Options {
    /// What the weights and activations are stored in and the products run on.
    pub precision: Precision,
    /// Attention as one fused kernel (FlashAttention): no `s x s` scores in memory. Off:
    /// Megatron-LM's 2021-2022 path that stores and streams them.
    pub fused_attention: bool,
    /// Start each gradient bucket's reduction while the backward runs (`--overlap-grad-reduce`).
    pub overlap_grad_reduce: bool,
    /// All-gather the distributed optimizer's updated weights during the next forward
    /// (`--overlap-param-gather`; with `--use-distributed-optimizer`).
    pub overlap_param_gather: bool,
    /// Pipeline the TP collectives with the GEMMs (`--tp-comm-overlap`; with sequence
    /// parallelism).
    pub tp_comm_overlap: bool,
    /// The interleaved schedule's sends on their own stream (`--overlap-p2p-communication`).
    pub overlap_p2p_communication: bool,
    /// The weight-gradient GEMMs accumulate straight into the fp32 main gradients (Megatron-LM's
    /// default; `--no-gradient-accumulation-fusion` and DeepSpeed's engine add an elementwise
    /// pass over the stage's gradients per micro-batch).
    pub gradient_accumulation_fusion: bool,
    /// Pipeline sends carry `1 / t` of the activation from each TP rank (Megatron-LM's default;
    /// `--no-scatter-gather-tensors-in-pipeline` and DeepSpeed's pipeline engine send the whole
    /// activation from every TP rank).
    pub scatter_gather_tensors_in_pipeline: bool,
    /// Every kernel launch waits for the kernel (`CUDA_LAUNCH_BLOCKING=1`, as BigScience's
    /// BLOOM runs set it): the GPU idles while the host prepares each next kernel
    /// ([`launch_blocking`]).
    pub launch_blocking: bool,
    /// GiB per GPU kept for the CUDA context, library workspaces and allocator slack.
    pub reserve_gib: f64,
}

/// One parallel layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Tensor-parallel size.
    pub tp: usize,
    /// Pipeline stages.
    pub pp: usize,
    /// Data-parallel replicas: the GPUs over `tp x pp`.
    pub dp: usize,
    /// Sequences per micro-batch.
    pub micro_batch: usize,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// Sequence parallelism (with `tp > 1`).
    pub sequence_parallel: bool,
    /// Model chunks per stage (1: plain 1F1B).
    pub virtual_stages: usize,
    /// ZeRO-1: the optimizer state sharded over DP.
    pub distributed_optimizer: bool,
}

/// The name `--recompute-granularity` takes for `r`.
pub fn recompute_name(r: Recompute) -> &'static str {
    match r {
        Recompute::None => "none",
        Recompute::Selective => "selective",
        Recompute::Full => "full",
    }
}

impl Layout {
    /// `tp2 pp4 dp8 mb1 sel sp v2 zero1`
    pub fn label(&self) -> String {
        let mut s = format!("tp{} pp{} dp{} mb{}", self.tp, self.pp, self.dp, self.micro_batch);
        match self.recompute {
            Recompute::None => {}
            Recompute::Selective => s.push_str(" sel"),
            Recompute::Full => s.push_str(" full"),
        }
        if self.sequence_parallel && self.tp > 1 {
            s.push_str(" sp");
        }
        if self.virtual_stages > 1 {
            s.push_str(&format!(" v{}", self.virtual_stages));
        }
        if self.distributed_optimizer {
            s.push_str(" zero1");
        }
        s
    }
}

/// Bytes per GPU by component, on the stage that needs the most.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Memory {
    /// The stage these bytes are of.
    pub stage: usize,
    /// Weights, at the precision's bytes per parameter.
    pub params: f64,
    /// Gradients (fp32 main gradients under bf16).
    pub grads: f64,
    /// Optimizer state (fp32 master and Adam moments; ZeRO-1: a 1/DP share).
    pub optimizer: f64,
    /// Activations of the micro-batches in flight, and working memory.
    pub activations: f64,
    /// Pipeline, sequence-parallel and NCCL buffers (the DP buckets for local CPU runs).
    pub comm_buffers: f64,
    /// `--reserve-gib`: context, workspaces, allocator slack.
    pub reserved: f64,
}

impl Memory {
    /// Sum of the components.
    pub fn total(&self) -> f64 {
        self.params + self.grads + self.optimizer + self.activations + self.comm_buffers + self.reserved
    }

    /// `(name, bytes)` of each component, in drawing order.
    pub fn components(&self) -> [(&'static str, f64); 6] {
        [
            ("parameters", self.params),
            ("gradients", self.grads),
            ("optimizer", self.optimizer),
            ("activations", self.activations),
            ("comm buffers", self.comm_buffers),
            ("reserved", self.reserved),
        ]
    }
}

/// Seconds of one iteration by component, on the busiest stage; they add up to `total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IterTime {
    /// Forward and backward FLOPs and elementwise traffic of every micro-batch.
    pub compute: f64,
    /// The forwards rerun by activation recomputation.
    pub recompute: f64,
    /// Tensor-parallel all-reduces (or all-gathers and reduce-scatters) of every layer.
    pub tp_comm: f64,
    /// Pipeline sends and receives between stages.
    pub pp_comm: f64,
    /// Time the stage waits on the others: the pipeline bubble.
    pub bubble: f64,
    /// The GPU idle between kernels when every launch waits for the last
    /// ([`Options::launch_blocking`]).
    pub launch_idle: f64,
    /// The data-parallel gradient reduction, whole.
    pub dp_comm: f64,
    /// What of `dp_comm` the backward does not hide, and the tied-embedding gradient sync.
    pub dp_exposed: f64,
    /// The optimizer step (and the gradient norm).
    pub optimizer: f64,
    /// The iteration: every component above but `dp_comm` (of which only `dp_exposed` counts).
    pub total: f64,
}

impl IterTime {
    /// `(name, seconds)` of each component that adds up to `total`, in the order of a step.
    pub fn components(&self) -> [(&'static str, f64); 8] {
        [
            ("compute", self.compute),
            ("recomputation", self.recompute),
            ("TP communication", self.tp_comm),
            ("PP communication", self.pp_comm),
            ("launch idle", self.launch_idle),
            ("pipeline bubble", self.bubble),
            ("exposed DP communication", self.dp_exposed),
            ("optimizer step", self.optimizer),
        ]
    }
}

/// One layout's prediction.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    #[serde(serialize_with = "report::ser_layout")]
    /// The layout predicted.
    pub layout: Layout,
    /// Micro-batches per pipeline per iteration.
    pub micro_batches: usize,
    /// The largest stage's bytes by component.
    pub memory: Memory,
    /// The GPU's memory.
    pub memory_limit: f64,
    /// Whether the largest stage fits the GPU's memory.
    pub fits: bool,
    /// One iteration's time by component.
    pub time: IterTime,
    /// One forward and one backward of a micro-batch through the busiest stage (a chunk of
    /// it when interleaved), communication included: what the schedule was simulated with.
    pub stage_forward: f64,
    /// See [`Plan::stage_forward`].
    pub stage_backward: f64,
    /// FLOPs of one iteration without recomputation, as Megatron-LM counts them
    /// ([`flops::model_flops`]).
    pub model_flops: f64,
    /// FLOPs executed, recomputation included.
    pub hardware_flops: f64,
    /// Model FLOP/s per GPU, in TFLOP/s.
    pub model_tflops_per_gpu: f64,
    /// Executed FLOP/s per GPU (recomputation included), in TFLOP/s.
    pub hardware_tflops_per_gpu: f64,
    /// Model FLOPs utilisation: model FLOP/s over the GPU's dense peak at the precision.
    pub mfu: f64,
    /// Hardware FLOPs utilisation: executed FLOP/s over the same peak.
    pub hfu: f64,
    /// Tokens per second of the whole cluster.
    pub tokens_per_s: f64,
}

impl Plan {
    /// Days to train `tokens` tokens.
    pub fn days_for(&self, tokens: f64) -> f64 {
        tokens / self.tokens_per_s / 86400.0
    }
}

/// The problem: model, batch, cluster, options.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The model's shape.
    pub model: ModelShape,
    /// Sequences per optimizer step.
    pub global_batch: usize,
    /// The GPUs and links.
    pub cluster: Cluster,
    /// Precision, attention kernel, overlap and reserve.
    pub options: Options,
}

/// Ring all-reduce of `bytes` over `n` ranks: `2 (n - 1)` steps of `bytes / n` each, so
/// `2 (n - 1) / n * bytes / busbw + 2 (n - 1) alpha` (nccl-tests: busbw = algbw x 2(n-1)/n).
pub fn ring_all_reduce(bytes: f64, n: usize, link: &Link) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    2.0 * k / n as f64 * bytes / link.busbw_bytes_per_s() + 2.0 * k * link.latency_s()
}

/// Ring all-gather (or reduce-scatter) whose full buffer is `bytes`: `n - 1` steps,
/// `(n - 1) / n * bytes / busbw + (n - 1) alpha` (nccl-tests: busbw = algbw x (n-1)/n).
pub fn ring_all_gather(bytes: f64, n: usize, link: &Link) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    k / n as f64 * bytes / link.busbw_bytes_per_s() + k * link.latency_s()
}

/// Checks that `layout` can run `problem`'s model and batch (and the problem itself,
/// [`check_problem`]); the error names the flags. Returns the micro-batches per pipeline.
pub fn check_layout(problem: &Problem, l: &Layout) -> Result<usize, String> {
    check_problem(problem)?;
    let m = &problem.model;
    let world = problem.cluster.world();
    for (flag, v) in [
        ("--tensor-model-parallel-size", l.tp),
        ("--pipeline-model-parallel-size", l.pp),
        ("the data-parallel size", l.dp),
        ("--micro-batch-size", l.micro_batch),
        ("--num-layers-per-virtual-pipeline-stage", l.virtual_stages),
    ] {
        inputs::check_size(flag, v)?;
    }
    let model_parallel = inputs::checked_product(
        ("--tensor-model-parallel-size", l.tp),
        ("--pipeline-model-parallel-size", l.pp),
    )?;
    if model_parallel.checked_mul(l.dp) != Some(world) {
        return Err(format!(
            "--tensor-model-parallel-size {} x --pipeline-model-parallel-size {} does not divide the {world} GPUs \
             (--nodes {} x --gpus-per-node {}); pick sizes whose product divides it",
            l.tp, l.pp, problem.cluster.nodes, problem.cluster.gpus_per_node
        ));
    }
    if m.heads % l.tp != 0 || m.hidden % l.tp != 0 {
        return Err(format!(
            "--tensor-model-parallel-size {} must divide --num-attention-heads {} and --hidden-size {}",
            l.tp, m.heads, m.hidden
        ));
    }
    let chunks = inputs::checked_product(
        ("--pipeline-model-parallel-size", l.pp),
        ("chunks per stage (--num-layers-per-virtual-pipeline-stage)", l.virtual_stages),
    )?;
    if m.layers % chunks != 0 {
        return Err(format!(
            "--num-layers {} does not split into --pipeline-model-parallel-size {} stages{}; each stage needs the same \
             number of layers",
            m.layers,
            l.pp,
            if l.virtual_stages > 1 { format!(" of {} chunks each", l.virtual_stages) } else { String::new() }
        ));
    }
    let per_step =
        inputs::checked_product(("--micro-batch-size", l.micro_batch), ("the data-parallel size", l.dp))?;
    if problem.global_batch % per_step != 0 {
        return Err(format!(
            "--global-batch-size {} is not a multiple of --micro-batch-size {} x the {} data-parallel ranks",
            problem.global_batch, l.micro_batch, l.dp
        ));
    }
    let micro_batches = problem.global_batch / per_step;
    // The pipeline is simulated step by step: bound its size (real runs are far below).
    if micro_batches.saturating_mul(chunks) > MAX_SCHEDULE_STEPS {
        return Err(format!(
            "--global-batch-size {} makes {micro_batches} micro-batches per pipeline over {chunks} stages and chunks, \
             more than the planner simulates ({MAX_SCHEDULE_STEPS} forward steps); raise --micro-batch-size or give \
             a smaller batch",
            problem.global_batch
        ));
    }
    if l.virtual_stages > 1 {
        if l.pp < 2 {
            return Err("an interleaved schedule needs --pipeline-model-parallel-size 2 or more".into());
        }
        if micro_batches % l.pp != 0 {
            return Err(format!(
                "the interleaved schedule needs the {micro_batches} micro-batches per pipeline to be a multiple of \
                 --pipeline-model-parallel-size {}",
                l.pp
            ));
        }
    }
    Ok(micro_batches)
}

/// The most forward steps (micro-batches x stages x chunks per stage) of one pipeline the
/// planner simulates: 4M, some hundred times the largest published runs'.
pub const MAX_SCHEDULE_STEPS: usize = 1 << 22;

/// Makespans of simulated pipelines, memoised: a uniform-stage pipeline's makespan scales
/// with its stage times, so one simulation per `(p, m, v, backward / forward)` serves every
/// layout with those (the ratio rounded to 1e-4).
#[derive(Default)]
pub struct PipelineCache {
    makespans: HashMap<(usize, usize, usize, u64, u64), f64>,
    in_flight: HashMap<(usize, usize, usize), Vec<usize>>,
}

impl PipelineCache {
    fn makespan(
        &mut self,
        p: usize,
        m: usize,
        v: usize,
        forward: f64,
        backward: f64,
        transfer: f64,
    ) -> Result<f64, String> {
        if forward <= 0.0 {
            return Ok(0.0);
        }
        let ratio = (backward / forward * 1e4).round() / 1e4;
        let transfer_ratio = (transfer / forward * 1e4).round() / 1e4;
        let key = (p, m, v, ratio.to_bits(), transfer_ratio.to_bits());
        if let Some(&unit) = self.makespans.get(&key) {
            return Ok(unit * forward);
        }
        let unit = if transfer_ratio > 0.0 {
            overlap::pipeline_makespan(&Interleaved::new(p, m, v)?, 1.0, ratio, transfer_ratio)?
        } else if v > 1 {
            simulate_interleaved(&Interleaved::new(p, m, v)?, 1.0, ratio)?.makespan
        } else {
            simulate(&Schedule::one_f_one_b(p, m), 1.0, ratio)?.makespan
        };
        self.makespans.insert(key, unit);
        Ok(unit * forward)
    }

    fn in_flight(&mut self, p: usize, m: usize, v: usize) -> Result<Vec<usize>, String> {
        if let Some(held) = self.in_flight.get(&(p, m, v)) {
            return Ok(held.clone());
        }
        let held = in_flight(p, m, v)?;
        self.in_flight.insert((p, m, v), held.clone());
        Ok(held)
    }
}

/// Micro-batches (chunks, when interleaved) whose activations each stage holds at once, from
/// the schedule the trainer runs.
fn in_flight(p: usize, m: usize, v: usize) -> Result<Vec<usize>, String> {
    if v > 1 {
        let s = Interleaved::new(p, m, v)?;
        Ok((0..p).map(|r| s.in_flight(r)).collect())
    } else {
        // The 1F1B schedule holds min(p - r, m) on stage r; build it only when small.
        if m <= 4096 {
            let s = Schedule::one_f_one_b(p, m);
            Ok((0..p).map(|r| s.in_flight(r)).collect())
        } else {
            Ok((0..p).map(|r| (p - r).min(m)).collect())
        }
    }
}

/// Activation bytes one transformer layer keeps for one micro-batch of `b` sequences, per GPU
/// (Korthikanti et al. 2022, section 4, Table 2; their counts are for 16-bit activations and
/// 1-byte dropout masks, scaled here by `activation_bytes / 2`): with `sbh = s b h`,
/// no recomputation `sbh (10 + 24/t + 5 a s / (h t))`, with sequence parallelism
/// `sbh (34 + 5 a s / h) / t`; selective recomputation drops the `5 a s / h` term (as does a
/// fused attention kernel); full recomputation keeps the layer input, `2 sbh` (`/ t` with
/// sequence parallelism).
pub fn layer_activation_bytes(
    model: &ModelShape,
    b: usize,
    tp: usize,
    sp: bool,
    recompute: Recompute,
    fused_attention: bool,
    precision: Precision,
) -> f64 {
    let (s, h, a, t) = (model.seq_len as f64, model.hidden as f64, model.heads as f64, tp as f64);
    let sbh = s * b as f64 * h;
    let scale = precision.activation_bytes() / 2.0;
    let sp_div = if sp { t } else { 1.0 };
    let base = if sp { sbh * 34.0 / t } else { sbh * (10.0 + 24.0 / t) };
    let scores = 5.0 * a * s * s * b as f64 / t;
    let bytes = match recompute {
        Recompute::Full => 2.0 * sbh / sp_div,
        Recompute::Selective => base,
        Recompute::None if fused_attention => base,
        Recompute::None => base + scores,
    };
    bytes * scale
}

/// Memory of every stage, and the index of the largest.
pub fn memory(
    problem: &Problem,
    l: &Layout,
    micro_batches: usize,
    cache: &mut PipelineCache,
) -> Result<Vec<Memory>, String> {
    check_layout(problem, l)?;
    let (model, opts) = (&problem.model, &problem.options);
    let (p, t, d) = (l.pp, l.tp, l.dp);
    let (h, s, b) = (model.hidden as f64, model.seq_len as f64, l.micro_batch as f64);
    let vpad = model.padded_vocab(t) as f64;
    let (pbytes, gbytes, obytes) = opts.precision.state_bytes();
    let act = opts.precision.activation_bytes();
    let layers_per_stage = (model.layers / p) as f64;
    let layers_per_chunk = layers_per_stage / l.virtual_stages as f64;
    let held = cache.in_flight(p, micro_batches, l.virtual_stages)?;
    let sp = l.sequence_parallel && t > 1;
    let sp_div = if sp { t as f64 } else { 1.0 };
    let per_layer = layer_activation_bytes(
        model,
        l.micro_batch,
        t,
        sp,
        l.recompute,
        opts.fused_attention,
        opts.precision,
    );
    // Full recomputation rebuilds one layer's activations at a time for the backward.
    let working = match l.recompute {
        Recompute::Full => layer_activation_bytes(
            model,
            l.micro_batch,
            t,
            sp,
            Recompute::None,
            opts.fused_attention,
            opts.precision,
        ),
        _ => 0.0,
    };
    // NCCL's buffers on GPUs; Trident's CPU ranks (`local-cpu`) have none.
    let nccl =
        if problem.cluster.gpu.vendor == trident_hardware::Vendor::Other { 0.0 } else { NCCL_BUFFER_BYTES };
    let groups = [t, p, d].iter().filter(|&&n| n > 1).count() as f64;
    let stages = (0..p)
        .map(|r| {
            // Per layer: the weight matrices and QKV/fc1 biases split over TP (12 h^2 + 7 h),
            // the projection and fc2 biases and both layer norms replicated (6 h).
            let mut params = layers_per_stage * ((12.0 * h * h + 7.0 * h) / t as f64 + 6.0 * h);
            let mut acts = held[r] as f64 * layers_per_chunk * per_layer + working;
            if r == 0 {
                params += vpad * h / t as f64 + s * h;
                // The embedding output's dropout mask (1 byte) for every micro-batch held.
                acts += held[r] as f64 * s * b * h / sp_div;
            }
            if r + 1 == p {
                params += 2.0 * h;
                if p > 1 {
                    params += vpad * h / t as f64; // the tied output embedding's copy
                }
                // The final layer norm's output and the fp32 logits: 4 s b h (1 + V / h) / t.
                acts += 4.0 * s * b * h * (1.0 + vpad / h) / t as f64 * (act / 2.0);
            }
            let mut comm = groups * nccl;
            if p > 1 {
                comm += 2.0 * s * b * h * act / sp_div;
            }
            if sp {
                comm += s * b * h * act;
            }
            Memory {
                stage: r,
                params: params * pbytes,
                grads: params * gbytes,
                optimizer: params * obytes / if l.distributed_optimizer { d as f64 } else { 1.0 },
                activations: acts,
                comm_buffers: comm,
                reserved: opts.reserve_gib * trident_hardware::GIB,
            }
        })
        .collect();
    Ok(stages)
}

/// NCCL's buffers per communicator: 4 MiB (`NCCL_BUFFSIZE`'s default) per channel and
/// direction, 16 channels assumed.
pub const NCCL_BUFFER_BYTES: f64 = 4.0 * 1024.0 * 1024.0 * 2.0 * 16.0;

/// Predicts `layout` on `problem`.
pub fn evaluate(problem: &Problem, l: &Layout, cache: &mut PipelineCache) -> Result<Plan, String> {
    let micro_batches = check_layout(problem, l)?;
    let (model, opts, cluster) = (&problem.model, &problem.options, &problem.cluster);
    let gpu = &cluster.gpu;
    let peak = gpu.peak_flops(opts.precision.units()).ok_or_else(|| {
        format!(
            "the {} has no {} units; pick another precision (--bf16, --fp16, or neither for fp32)",
            gpu.name,
            opts.precision.units().name()
        )
    })?;
    let (t, p, d, v, m) = (l.tp, l.pp, l.dp, l.virtual_stages, micro_batches);
    let (tf, b, s, h, a) =
        (t as f64, l.micro_batch as f64, model.seq_len as f64, model.hidden as f64, model.heads as f64);
    let vpad = model.padded_vocab(t) as f64;
    let act = opts.precision.activation_bytes();
    let (pbytes, gbytes, obytes) = opts.precision.state_bytes();
    let bw = gpu.memory_bytes_per_s() * gpu.memory_efficiency;
    let sp = l.sequence_parallel && t > 1;

    // One layer, one micro-batch, forward: each GEMM at its shape's rate (`compute`), the
    // attention core (4 b s^2 h / t FLOPs) at its grid's; elementwise work streams the
    // activations it stores (written once, read once).
    let rates = compute::layer_rates(
        gpu,
        peak,
        l.micro_batch,
        model.seq_len,
        model.hidden,
        model.heads,
        t,
        vpad as usize,
    );
    let attn = rates.attention.seconds;
    let stored =
        layer_activation_bytes(model, l.micro_batch, t, sp, Recompute::Selective, true, opts.precision);
    let scores = if opts.fused_attention { 0.0 } else { 5.0 * a * s * s * b / tf * act / 2.0 };
    let traffic = 2.0 * (stored + scores) / bw;
    let work_layer = overlap::LayerWork {
        qkv: rates.qkv.seconds,
        proj: rates.proj.seconds,
        fc: rates.fc.seconds,
        fc_proj: rates.fc_proj.seconds,
        other: attn + traffic,
    };
    let layer_f = work_layer.forward();
    // Tensor parallelism: two all-reduces of the b s h activations per layer forward and two
    // backward (sequence parallelism: an all-gather and a reduce-scatter in place of each, the
    // same bytes on the wire), on the group of t consecutive ranks; `--tp-comm-overlap` hides
    // what the GEMMs beside them cover (`overlap::tp_layer`).
    let collective = if sp {
        cluster.all_gather(b * s * h * act, 1, t)
    } else {
        cluster.all_reduce(b * s * h * act, 1, t).0
    };
    let (with_tp_f, with_tp_b) = overlap::tp_layer(&work_layer, collective, sp, opts.tp_comm_overlap, t);
    let tp_f = with_tp_f - layer_f;
    let tp_b = with_tp_b - 2.0 * layer_f;
    let recompute_layer = match l.recompute {
        Recompute::Full => layer_f + tp_f,
        Recompute::Selective => attn + 2.0 * scores / bw,
        Recompute::None => 0.0,
    };
    let layers = (model.layers / p) as f64;
    // The last stage's logits (2 b s h V / t forward) and cross entropy over fp32 logits.
    let logits_f = rates.logits.seconds + 2.0 * 4.0 * b * s * vpad / tf / bw;
    // Pipeline: one send per forward and per backward of each chunk, of b s h activations
    // split over TP (Megatron-LM's scatter/gather), to the rank t d ahead; blocking unless
    // `--overlap-p2p-communication` (interleaved schedule) puts it on its own stream.
    let pp_split = if opts.scatter_gather_tensors_in_pipeline || sp { tf } else { 1.0 };
    let pp_send = if p > 1 { cluster.send(b * s * h * act / pp_split, t * d) } else { 0.0 };
    let p2p_overlap = opts.overlap_p2p_communication && v > 1;
    let blocking_send = if p2p_overlap { 0.0 } else { pp_send };
    let vf = v as f64;
    // Without gradient-accumulation fusion each micro-batch's gradients are added to the main
    // gradients by an elementwise pass: read the new gradient, read and write the accumulator.
    let stages = memory(problem, l, m, cache)?;
    let params = stages.iter().map(|x| x.params).fold(0.0, f64::max) / pbytes;
    let accumulate = if opts.gradient_accumulation_fusion { 0.0 } else { params * (act + 2.0 * gbytes) / bw };
    let fwd_compute = (layers * layer_f + logits_f) / vf;
    let bwd_compute = (layers * 2.0 * layer_f + 2.0 * logits_f + accumulate) / vf;
    let rec = layers * recompute_layer / vf;
    let tp_fwd = layers * tp_f / vf;
    let tp_bwd = layers * tp_b / vf;
    // Blocking launches: the host's time per kernel, a fixed time per layer and pass.
    let idle = if opts.launch_blocking { launch_blocking::forward_idle_per_layer() } else { 0.0 };
    let idle_fwd = layers * idle / vf;
    let idle_bwd = layers * idle * (2.0 + launch_blocking::recomputed_passes(l.recompute)) / vf;
    let stage_forward = fwd_compute + tp_fwd + blocking_send + idle_fwd;
    let stage_backward = bwd_compute + rec + tp_bwd + blocking_send + idle_bwd;
    let free_makespan = cache.makespan(p, m, v, stage_forward, stage_backward, 0.0)?;
    let makespan = if p2p_overlap {
        cache.makespan(p, m, v, stage_forward, stage_backward, pp_send)?
    } else {
        free_makespan
    };
    let work = m as f64 * vf;

    // Data parallelism: the gradients of the largest stage, all-reduced over d ranks t apart
    // (ZeRO-1: reduce-scattered, then the updated weights all-gathered).
    let (reduce, gather) = if l.distributed_optimizer {
        (cluster.all_gather(params * gbytes, t, d), cluster.all_gather(params * pbytes, t, d))
    } else {
        (cluster.all_reduce(params * gbytes, t, d).0, 0.0)
    };
    // Buckets of 40M parameters (Megatron-LM's default): overlapped, each bucket's reduction
    // starts when the last micro-batch's backward has produced it, and each bucket of the
    // weights' all-gather is waited for where the next forward needs it.
    let buckets = (params / 40e6).ceil().max(1.0) as usize;
    let exposed_reduce =
        overlap::grad_reduce_exposed(reduce, stage_backward * vf, buckets, opts.overlap_grad_reduce);
    let exposed_gather = overlap::param_gather_exposed(
        gather,
        stage_forward * vf,
        buckets,
        opts.overlap_param_gather && l.distributed_optimizer,
    );
    // The tied embedding's gradient, all-reduced between the first and last stage.
    let embedding =
        if p > 1 { cluster.all_reduce(vpad * h / tf * gbytes, t * d * (p - 1), 2).0 } else { 0.0 };
    // AdamW streams weights, gradients and state in and the new ones out.
    let shard = if l.distributed_optimizer { d as f64 } else { 1.0 };
    let optimizer = params * (pbytes + gbytes + 2.0 * obytes / shard + pbytes) / bw;

    let compute = work * (fwd_compute + bwd_compute);
    let time = IterTime {
        compute,
        recompute: work * rec,
        tp_comm: work * (tp_fwd + tp_bwd),
        pp_comm: if p2p_overlap { makespan - free_makespan } else { work * 2.0 * pp_send },
        launch_idle: work * (idle_fwd + idle_bwd),
        bubble: free_makespan - work * (stage_forward + stage_backward),
        dp_comm: reduce + gather,
        dp_exposed: exposed_reduce + exposed_gather + embedding,
        optimizer,
        total: makespan + exposed_reduce + exposed_gather + embedding + optimizer,
    };

    // Model FLOPs as Megatron-LM counts them, and what recomputation adds ([`flops`]).
    let bg = problem.global_batch as f64;
    let model_flops = flops::model_flops(model, model.padded_vocab(t), problem.global_batch);
    let hardware_flops =
        flops::hardware_flops(model, model.padded_vocab(t), problem.global_batch, l.recompute);
    let world = cluster.world() as f64;
    let mem =
        stages.iter().copied().max_by(|x, y| x.total().total_cmp(&y.total())).expect("at least one stage");
    let limit = gpu.memory_bytes();
    Ok(Plan {
        layout: *l,
        micro_batches: m,
        memory: mem,
        memory_limit: limit,
        fits: mem.total() <= limit,
        time,
        stage_forward,
        stage_backward,
        model_flops,
        hardware_flops,
        model_tflops_per_gpu: model_flops / time.total / world / 1e12,
        hardware_tflops_per_gpu: hardware_flops / time.total / world / 1e12,
        mfu: model_flops / time.total / world / peak,
        hfu: hardware_flops / time.total / world / peak,
        tokens_per_s: bg * s / time.total,
    })
}

/// Training FLOPs of `tokens` tokens of a model of `params` parameters, `6 N D` (Kaplan et
/// al. 2020: forward 2 N, backward 4 N per token).
pub fn training_flops(params: f64, tokens: f64) -> f64 {
    6.0 * params * tokens
}

/// The fraction of `peak` one GPU would have to sustain to train in `years`.
pub fn implied_efficiency(params: f64, tokens: f64, peak_flops: f64, years: f64) -> f64 {
    training_flops(params, tokens) / (years * 365.25 * 86400.0) / peak_flops
}
