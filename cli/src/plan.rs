//! `trident plan`: memory, time and throughput of a training layout on a cluster, and a search
//! over the layouts (the model is the `trident-plan` crate and docs/PLAN.md; `--calibrate` is
//! `trident::calibrate`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use serde_json::json;
use trident_hardware::{Hardware, GIB};

use trident::calibrate::local;
use trident::calibrate::local_search::{local_run, time_layouts, trainer_bytes, SEARCH_BUDGET};
use trident::calibrate::machine as calibrate;
use trident_plan::inputs::{check_float, check_size, checked_product};
use trident_plan::report::{detail, plan_json, problem_json, table, Costing};
use trident_plan::search::{explain, recommendations, search, Space};
use trident_plan::Recompute;
use trident_plan::{
    evaluate, implied_efficiency, picture, preset, training_flops, Cluster, Layout, ModelShape, Options,
    PipelineCache, Plan, Precision, Problem,
};

/// `trident plan`: the model, batch, layout and cluster to cost (every layout flag left
/// out is searched with `--search`), and how to report it.
#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// Model preset: Trident's (nano, tiny, small, gpt2-124m), gpt3-125m ... gpt3-175b,
    /// megatron-1.7b ... megatron-1t; the shape flags override its fields.
    #[arg(long)]
    pub model: Option<String>,
    /// Transformer blocks (default: the preset's).
    #[arg(long)]
    pub num_layers: Option<usize>,
    /// Hidden size (default: the preset's).
    #[arg(long)]
    pub hidden_size: Option<usize>,
    /// Attention heads (default: the preset's).
    #[arg(long)]
    pub num_attention_heads: Option<usize>,
    /// Vocabulary before padding (default: the preset's).
    #[arg(long)]
    pub vocab_size: Option<usize>,
    /// Tokens per sequence (default: the preset's).
    #[arg(long)]
    pub seq_length: Option<usize>,
    /// Sequences per optimizer step (default: the preset's published batch).
    #[arg(long)]
    pub global_batch_size: Option<usize>,
    /// Sequences per micro-batch (default 1; --search tries 1, 2, 4, 8, 16).
    #[arg(long)]
    pub micro_batch_size: Option<usize>,
    /// Tensor-parallel size (default 1; --search tries every divisor).
    #[arg(long)]
    pub tensor_model_parallel_size: Option<usize>,
    /// Pipeline stages (default 1; --search tries every divisor of the layers).
    #[arg(long)]
    pub pipeline_model_parallel_size: Option<usize>,
    /// Layers per virtual pipeline stage: interleaved 1F1B with (layers / PP) / N chunks per stage.
    #[arg(long)]
    pub num_layers_per_virtual_pipeline_stage: Option<usize>,
    /// ZeRO-1: shard the optimizer state over the data-parallel ranks.
    #[arg(long)]
    pub use_distributed_optimizer: bool,
    /// Activation recomputation: none, selective or full.
    #[arg(long)]
    pub recompute_granularity: Option<Recompute>,
    /// Sequence parallelism (with TP > 1).
    #[arg(long)]
    pub sequence_parallel: bool,
    /// Start gradient reductions during the backward.
    #[arg(long)]
    pub overlap_grad_reduce: bool,
    /// bf16 mixed precision (fp32 master weights).
    #[arg(long, conflicts_with_all = ["fp16", "tf32"])]
    pub bf16: bool,
    /// fp16 mixed precision.
    #[arg(long, conflicts_with = "tf32")]
    pub fp16: bool,
    /// fp32 storage, matrix products on TF32 tensor cores (fp32 on FP32 units when no
    /// precision flag is given).
    #[arg(long)]
    pub tf32: bool,
    /// Attention as Megatron-LM's 2021-22 unfused kernels: the s x s scores are stored and
    /// streamed (default: a fused, FlashAttention-style kernel).
    #[arg(long)]
    pub unfused_attention: bool,
    /// GPU type from the hardware table (see --hardware).
    #[arg(long, default_value = "a100-80gb")]
    pub gpu: String,
    /// GPUs in each node.
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: usize,
    /// Nodes of the cluster.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Link between the GPUs of a node (default: the GPU's own, e.g. nvlink3 for the A100).
    #[arg(long)]
    pub intra_node_link: Option<String>,
    /// Link between nodes, per GPU (default: ib-hdr for V100/A100, ib-ndr for newer parts).
    #[arg(long)]
    pub inter_node_link: Option<String>,
    /// TOML file whose `[[gpu]]` and `[[link]]` entries add to or override the built-in table.
    #[arg(long)]
    pub hardware: Option<PathBuf>,
    /// GiB per GPU kept for the CUDA context, workspaces and allocator slack.
    #[arg(long, default_value_t = 1.0)]
    pub reserve_gib: f64,
    /// Rank every valid layout (the layout flags given stay fixed) and explain the best.
    #[arg(long)]
    pub search: bool,
    /// Rows of the ranked table.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    // What --search may not vary, to search a stack as it was (a 2021 Megatron-LM: no
    // sequence parallelism, no distributed optimizer; or any subset): each pins a setting off.
    // On: --sequence-parallel, --use-distributed-optimizer, and
    // --num-layers-per-virtual-pipeline-stage; --recompute-granularity none pins recomputation.
    /// --search: no sequence parallelism (the default of one layout).
    #[arg(long, conflicts_with = "sequence_parallel")]
    pub no_sequence_parallel: bool,
    /// --search: no distributed optimizer (the default of one layout).
    #[arg(long, conflicts_with = "use_distributed_optimizer")]
    pub no_distributed_optimizer: bool,
    /// --search: no interleaving, one model chunk per stage (the default of one layout).
    #[arg(long, conflicts_with = "num_layers_per_virtual_pipeline_stage")]
    pub no_interleaving: bool,
    /// Tokens to train, for days and cost.
    #[arg(long, default_value_t = 300e9)]
    pub train_tokens: f64,
    /// Price of one GPU-hour, US dollars.
    #[arg(long)]
    pub price_per_gpu_hour: Option<f64>,
    /// NAME=USD: the price of one node (repeat to compare, e.g. dgx=200000 self-built=120000).
    #[arg(long, num_args = 1..)]
    pub node_price: Vec<String>,
    /// Years a node's price is spread over.
    #[arg(long, default_value_t = 3.0)]
    pub amortize_years: f64,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Directory for the pictures (memory.png, timeline.png).
    #[arg(long, default_value = "plan-plots")]
    pub plots: PathBuf,
    /// Draw no pictures.
    #[arg(long)]
    pub no_plots: bool,
    /// Measure this machine (CPU GEMM, attention and GeLU at the run's shapes, in-process
    /// all-reduce) and plan for it as the GPU type `local-cpu` (one node of --gpus-per-node
    /// ranks sharing its cores).
    #[arg(long)]
    pub calibrate: bool,
    /// Overlap, fusion and network flags, and --validate.
    #[command(flatten)]
    pub model_flags: crate::plan_model::ModelFlags,
}

impl PlanArgs {
    fn precision(&self) -> Precision {
        match (self.bf16, self.fp16, self.tf32) {
            (true, _, _) => Precision::Bf16,
            (_, true, _) => Precision::Fp16,
            (_, _, true) => Precision::Tf32,
            _ => Precision::Fp32,
        }
    }

    fn model(&self) -> anyhow::Result<ModelShape> {
        let mut m = match &self.model {
            Some(name) => preset(name)?,
            None => {
                let (Some(layers), Some(hidden), Some(heads)) =
                    (self.num_layers, self.hidden_size, self.num_attention_heads)
                else {
                    bail!(
                        "give --model (one of: {}) or all of --num-layers, --hidden-size and --num-attention-heads",
                        trident_plan::preset_names().join(", ")
                    );
                };
                ModelShape {
                    name: format!("custom-{layers}x{hidden}"),
                    layers,
                    hidden,
                    heads,
                    vocab: 50257,
                    seq_len: 2048,
                    global_batch: 512,
                }
            }
        };
        m.layers = self.num_layers.unwrap_or(m.layers);
        m.hidden = self.hidden_size.unwrap_or(m.hidden);
        m.heads = self.num_attention_heads.unwrap_or(m.heads);
        m.vocab = self.vocab_size.unwrap_or(m.vocab);
        m.seq_len = self.seq_length.unwrap_or(m.seq_len);
        for (flag, v) in [
            ("--num-layers", m.layers),
            ("--hidden-size", m.hidden),
            ("--num-attention-heads", m.heads),
            ("--vocab-size", m.vocab),
            ("--seq-length", m.seq_len),
        ] {
            if v == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        if m.hidden % m.heads != 0 {
            bail!("--num-attention-heads {} must divide --hidden-size {}", m.heads, m.hidden);
        }
        Ok(m)
    }
}

/// Refuses flags no run can have, naming the flag: sizes of 0 or past [`trident_plan::MAX_SIZE`], a cluster
/// whose GPU count overflows, and floats that are negative, zero where they divide, NaN or
/// infinite (the planner checks the problem again, [`trident_plan::check_problem`]).
fn validate(args: &PlanArgs) -> anyhow::Result<()> {
    let sizes = [
        ("--num-layers", args.num_layers),
        ("--hidden-size", args.hidden_size),
        ("--num-attention-heads", args.num_attention_heads),
        ("--vocab-size", args.vocab_size),
        ("--seq-length", args.seq_length),
        ("--global-batch-size", args.global_batch_size),
        ("--micro-batch-size", args.micro_batch_size),
        ("--tensor-model-parallel-size", args.tensor_model_parallel_size),
        ("--pipeline-model-parallel-size", args.pipeline_model_parallel_size),
        ("--num-layers-per-virtual-pipeline-stage", args.num_layers_per_virtual_pipeline_stage),
        ("--gpus-per-node", Some(args.gpus_per_node)),
        ("--nodes", Some(args.nodes)),
    ];
    for (flag, value) in sizes {
        if let Some(v) = value {
            check_size(flag, v).map_err(anyhow::Error::msg)?;
        }
    }
    checked_product(("--nodes", args.nodes), ("--gpus-per-node", args.gpus_per_node))
        .map_err(anyhow::Error::msg)?;
    if let (Some(tp), Some(pp)) = (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) {
        checked_product(("--tensor-model-parallel-size", tp), ("--pipeline-model-parallel-size", pp))
            .map_err(anyhow::Error::msg)?;
    }
    let floats = [
        ("--reserve-gib", Some(args.reserve_gib), true),
        ("--train-tokens", Some(args.train_tokens), true),
        ("--price-per-gpu-hour", args.price_per_gpu_hour, true),
        ("--amortize-years", Some(args.amortize_years), false),
    ];
    for (flag, value, zero_ok) in floats {
        if let Some(v) = value {
            check_float(flag, v, zero_ok).map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}

/// The most rank threads `--calibrate` starts on this machine (`--gpus-per-node`; under
/// `trident train --dry-run`, `--world-size`).
pub(crate) const CALIBRATE_MAX_RANKS: usize = 256;

/// Builds the problem from the flags (and the measured machine with --calibrate).
pub fn problem(args: &PlanArgs) -> anyhow::Result<(Problem, Option<calibrate::Measured>)> {
    let mut hw = match &args.hardware {
        Some(path) => Hardware::with_user_file(path)?,
        None => Hardware::builtin(),
    };
    validate(args)?;
    let model = args.model()?;
    let mut measured = None;
    let gpu_name = if args.calibrate {
        if args.gpus_per_node > CALIBRATE_MAX_RANKS {
            bail!(
                "--calibrate runs --gpus-per-node {} rank threads on this machine; it takes at most \
                 {CALIBRATE_MAX_RANKS}",
                args.gpus_per_node
            );
        }
        // The fp32 parameters, gradients and AdamW's two moments, 16 bytes a parameter, split
        // at best over every rank: a model above that is refused before anything is timed.
        let state = 16.0 * model.params(1) / GIB;
        let have = calibrate::machine_memory_gib();
        if state > have {
            bail!(
                "--calibrate runs {} on this machine: its fp32 parameters, gradients and optimizer state alone take \
                 {state:.1} GiB however the ranks split them, and this machine has {have:.1} GiB; pick a smaller \
                 model",
                model.name
            );
        }
        let shape = calibrate::RunShape {
            batch: args.micro_batch_size.unwrap_or(1),
            seq: model.seq_len,
            hidden: model.hidden,
            heads: model.heads,
            tp: args.tensor_model_parallel_size.unwrap_or(1),
        };
        let m = calibrate::measure(args.gpus_per_node.max(2), Duration::from_millis(100), shape)?;
        // Ranks on this machine share its cores, bandwidth and memory.
        let (gpu, link) = calibrate::as_hardware(&m, args.gpus_per_node);
        hw.gpus.insert(gpu.name.clone(), gpu);
        hw.links.insert(link.name.clone(), link);
        measured = Some(m);
        "local-cpu".to_string()
    } else {
        args.gpu.clone()
    };
    let gpu = hw.gpu(&gpu_name).with_context(|| "--gpu".to_string())?.clone();
    let intra = hw
        .link(args.intra_node_link.as_deref().unwrap_or(&gpu.gpu_link))
        .context("--intra-node-link")?
        .clone();
    let default_inter = Cluster::default_inter_link(&gpu.name);
    let inter = hw
        .link(args.inter_node_link.as_deref().unwrap_or(default_inter))
        .context("--inter-node-link")?
        .clone();
    let global_batch = args.global_batch_size.unwrap_or(model.global_batch);
    let f = &args.model_flags;
    let built = f.build(&hw, gpu, intra, inter, args.gpus_per_node)?;
    let problem = Problem {
        global_batch,
        cluster: Cluster {
            gpu: built.gpu,
            gpus_per_node: built.gpus_per_node,
            nodes: args.nodes,
            intra: built.intra,
            inter: built.inter,
            nics_per_node: built.nics_per_node,
        },
        options: Options {
            precision: args.precision(),
            fused_attention: !args.unfused_attention,
            overlap_grad_reduce: args.overlap_grad_reduce,
            overlap_param_gather: f.overlap_param_gather,
            tp_comm_overlap: f.tp_comm_overlap,
            overlap_p2p_communication: f.overlap_p2p_communication,
            gradient_accumulation_fusion: !f.no_gradient_accumulation_fusion,
            scatter_gather_tensors_in_pipeline: !f.no_scatter_gather_tensors_in_pipeline,
            launch_blocking: f.launch_blocking,
            reserve_gib: args.reserve_gib,
        },
        model,
    };
    Ok((problem, measured))
}

fn costing(args: &PlanArgs) -> anyhow::Result<Costing> {
    let node_prices = args
        .node_price
        .iter()
        .map(|s| {
            let (name, usd) = s.split_once('=').unwrap_or(("node", s.as_str()));
            let usd: f64 = usd
                .parse()
                .with_context(|| format!("--node-price {s:?}: expected NAME=USD, e.g. dgx=200000"))?;
            check_float("--node-price", usd, true).map_err(anyhow::Error::msg)?;
            Ok((name.to_string(), usd))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Costing {
        tokens: args.train_tokens,
        price_per_gpu_hour: args.price_per_gpu_hour,
        node_prices,
        amortize_years: args.amortize_years,
    })
}

/// How the trainer reduces the data-parallel gradients, as the calibrated plan simulates it
/// (`trident::calibrate::shared`): overlapped with the backward, as Megatron-LM's
/// `--overlap-grad-reduce`, unless the distributed optimizer reduce-scatters them after it.
fn dp_overlap_line(distributed_optimizer: bool) -> &'static str {
    if distributed_optimizer {
        "  data-parallel gradients: reduce-scattered after the backward and the parameters all-gathered after the \
         step (--use-distributed-optimizer; not overlapped)"
    } else {
        "  data-parallel gradients: each layer's bucket all-reduced on the DP thread as soon as the last \
         micro-batch's backward is past the layer, overlapping the rest of the backward (as Megatron-LM's \
         --overlap-grad-reduce)"
    }
}

/// A feature `--search` varies unless a flag pins it: `Some(true)` with the flag that turns
/// it on, `Some(false)` with the one that turns it off, `None` (searched) with neither.
fn pinned(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// Virtual stages from Megatron-LM's `--num-layers-per-virtual-pipeline-stage`.
fn virtual_stages(args: &PlanArgs, model: &ModelShape, pp: usize) -> anyhow::Result<Option<usize>> {
    let Some(per) = args.num_layers_per_virtual_pipeline_stage else { return Ok(None) };
    let per_stage = model.layers / pp.max(1);
    if per == 0 || per_stage % per != 0 {
        bail!(
            "--num-layers-per-virtual-pipeline-stage {per} must divide the {per_stage} layers of each of the \
             {pp} pipeline stages"
        );
    }
    Ok(Some(per_stage / per))
}

/// Prints the plan of one layout (memory per GPU, step time, throughput; PREDICTED by the
/// planner's model), or with `--search` the layouts ranked.
pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    run_with(args, None)
}

/// `run`, with the trainer's model configuration when the caller has it.
pub(crate) fn run_with(args: PlanArgs, config: Option<trident::model::GptConfig>) -> anyhow::Result<()> {
    if args.model_flags.validate {
        return crate::plan_model::validate();
    }
    let (problem, measured) = problem(&args)?;
    let costing = costing(&args)?;
    let world = problem.cluster.world();
    let tp = args.tensor_model_parallel_size;
    let pp = args.pipeline_model_parallel_size;
    let space = Space {
        tp,
        pp,
        micro_batch: args.micro_batch_size,
        recompute: args.recompute_granularity,
        sequence_parallel: pinned(args.sequence_parallel, args.no_sequence_parallel),
        virtual_stages: match pp {
            Some(pp) => virtual_stages(&args, &problem.model, pp)?,
            None if args.num_layers_per_virtual_pipeline_stage.is_some() => {
                bail!("--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size")
            }
            None => None,
        }
        .or(args.no_interleaving.then_some(1)),
        distributed_optimizer: pinned(args.use_distributed_optimizer, args.no_distributed_optimizer),
    };
    let single = !args.search;
    let mut calibrated = None;
    // `--calibrate --search`: how many layouts had their real ops timed.
    let mut calibrated_search = None;
    let (shown, ranked) = if single {
        let (tp, pp) = (tp.unwrap_or(1), pp.unwrap_or(1));
        if tp * pp == 0 || world % (tp * pp) != 0 {
            bail!(
                "--tensor-model-parallel-size {tp} x --pipeline-model-parallel-size {pp} does not divide the {world} \
                 GPUs (--nodes {} x --gpus-per-node {}); pick sizes whose product divides it",
                args.nodes,
                args.gpus_per_node
            );
        }
        let layout = Layout {
            tp,
            pp,
            dp: world / (tp * pp),
            micro_batch: args.micro_batch_size.unwrap_or(1),
            recompute: args.recompute_granularity.unwrap_or(Recompute::None),
            sequence_parallel: args.sequence_parallel,
            virtual_stages: space.virtual_stages.unwrap_or(1),
            distributed_optimizer: args.use_distributed_optimizer,
        };
        let mut plan =
            evaluate(&problem, &layout, &mut PipelineCache::default()).map_err(anyhow::Error::msg)?;
        if args.calibrate {
            let run = local_run(&problem, &layout, config)?;
            let need = trainer_bytes(&run)?;
            if need > plan.memory_limit {
                bail!(
                    "--calibrate runs {} here, and the trainer needs {:.2} GiB on its largest rank where this \
                     machine gives each of its --gpus-per-node {} ranks {:.2} GiB; pick a smaller model or more \
                     ranks",
                    layout.label(),
                    need / GIB,
                    args.gpus_per_node,
                    plan.memory_limit / GIB
                );
            }
            let costs = local::measure(&run, local::Budget::default())?;
            let prediction = local::predict(&run, &costs).map_err(anyhow::Error::msg)?;
            local::apply(&mut plan, &run, &prediction);
            calibrated = Some((run, costs, prediction));
        }
        (vec![plan], None)
    } else {
        let mut ranked = search(&problem, &space).map_err(anyhow::Error::msg)?;
        if args.calibrate && ranked.considered > 0 {
            // Progress on a terminal only, so that a log keeps the plan alone.
            let terminal = std::io::stderr().is_terminal();
            let timed = time_layouts(&problem, &mut ranked, config, |k, n, layout| {
                if terminal {
                    eprint!("\rtiming layout {k} of {n}: {:<40}", layout.label());
                }
            })?;
            if terminal {
                eprintln!();
            }
            calibrated_search = Some(timed);
        }
        if ranked.considered == 0 {
            bail!(
                "no layout divides the model on {world} GPUs: TP must divide --num-attention-heads {} and the GPU \
                 count, PP the --num-layers {}, and DP x micro-batch the --global-batch-size {}",
                problem.model.heads,
                problem.model.layers,
                problem.global_batch
            );
        }
        if ranked.fitting.is_empty() {
            let least = &ranked.too_big[0];
            let m = &least.memory;
            let (name, biggest) =
                m.components().into_iter().max_by(|a, b| a.1.total_cmp(&b.1)).expect("memory has components");
            bail!(
                "{} fits no layout on {world} x {}: of {} layouts the smallest, {}, needs {:.1} GiB per GPU \
                 ({name} {:.1} GiB the largest part) against {:.1} GiB, {:.1} GiB short; add GPUs (parameters, \
                 gradients and optimizer state shrink with TP x PP, and with ZeRO-1 with DP), or pick a GPU with \
                 more memory",
                problem.model.name,
                problem.cluster.gpu.name,
                ranked.considered,
                least.layout.label(),
                m.total() / GIB,
                biggest / GIB,
                least.memory_limit / GIB,
                (m.total() - least.memory_limit) / GIB
            );
        }
        (ranked.fitting.iter().take(args.top.max(1)).cloned().collect::<Vec<_>>(), Some(ranked))
    };
    let best = &shown[0];
    let explanation = ranked.as_ref().map(explain).unwrap_or_default();
    let recs = ranked.as_ref().map(|r| recommendations(&problem, r)).unwrap_or_default();
    let params = problem.model.params(1);
    let tokens = args.train_tokens;
    let peak = problem.cluster.gpu.peak_flops(problem.options.precision.units()).unwrap_or(0.0);
    let one_gpu_rate = peak * problem.cluster.gpu.gemm_efficiency;
    let one_gpu_years = training_flops(params, tokens) / one_gpu_rate / (365.25 * 86400.0);
    let pictures = if args.no_plots { None } else { Some(draw(&args.plots, &problem, &shown)?) };

    if args.json {
        let out = json!({
            "problem": problem_json(&problem),
            "measured": measured,
            "calibrated": calibrated.as_ref().map(|(_, c, p)| json!({"costs": c, "prediction": p})),
            "considered": ranked.as_ref().map(|r| r.considered),
            "fitting": ranked.as_ref().map(|r| r.fitting.len()),
            "plans": shown.iter().map(|p| plan_json(&problem, p, &costing)).collect::<Vec<_>>(),
            "explanation": explanation,
            "recommendations": recs,
            "training_flops": training_flops(params, tokens),
            "one_gpu_years": one_gpu_years,
            "pictures": pictures.as_ref().map(|(a, b)| json!([a, b])),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let c = &problem.cluster;
    println!(
        "trident plan: {} ({:.2}B parameters: {} layers, hidden {}, {} heads, vocab {}, sequence {}), global batch {}, \
         {:?}",
        problem.model.name,
        params / 1e9,
        problem.model.layers,
        problem.model.hidden,
        problem.model.heads,
        problem.model.vocab,
        problem.model.seq_len,
        problem.global_batch,
        problem.options.precision,
    );
    println!(
        "cluster: {} nodes x {} {} ({}, {} dense at this precision), {} inside nodes, {} between",
        c.nodes,
        c.gpus_per_node,
        c.gpu.name,
        trident_plan::report::size(c.gpu.memory_bytes()),
        trident_plan::report::rate(peak),
        c.intra.name,
        c.inter.name
    );
    if measured.is_none() {
        for line in crate::plan_model::describe(&problem, best) {
            println!("{line}");
        }
    }
    if problem.options.precision == Precision::Fp32 {
        if let Some(bf16) = c.gpu.bf16_tflops.or(c.gpu.fp16_tflops) {
            println!(
                "fp32 (no --bf16 or --fp16): matrix products on the FP32 units; the {}'s tensor cores give {bf16:.0} \
                 TFLOP/s with --bf16 (or --fp16)",
                c.gpu.name
            );
        }
    }
    if let Some(m) = &measured {
        println!(
            "measured here ({} cores; all cores / one thread): GEMM {:.1} / {:.1} GFLOP/s, attention {:.1} / {:.1} \
             GFLOP/s, GeLU {:.1} / {:.1} GB/s; all-reduce over {} in-process ranks: busbw {:.2} GB/s, latency {:.1} us; \
             each of {} ranks gets {:.1} GFLOP/s",
            m.cores,
            m.gemm_gflops,
            m.gemm_gflops_one_thread,
            m.attention_gflops,
            m.attention_gflops_one_thread,
            m.memory_gb_s,
            m.memory_gb_s_one_thread,
            m.world,
            m.busbw_gb_s,
            m.latency_us,
            c.gpus_per_node,
            c.gpu.fp32_tflops * 1e3
        );
    }
    if let Some((run, costs, p)) = &calibrated {
        println!(
            "the layout's real ops timed here ({}; each TP group alone; mean of {} repetitions in {} rounds over \
             the stages; shown as on an idle machine, with {:.1} other {} competing for the cores meanwhile), then \
             the trainer's {} step simulated with its {world} rank threads sharing {} cores with that competition:",
            run.precision,
            local::Budget::default().reps * local::Budget::default().rounds,
            local::Budget::default().rounds,
            costs.competition.others,
            if costs.competition.autogroups { "sessions" } else { "threads" },
            if run.chunks() > 1 { "interleaved 1F1B" } else { "1F1B" },
            costs.cores
        );
        for (r, c) in costs.stages.iter().enumerate() {
            println!(
                "  stage {r}: forward {:.2} ms, backward {:.2} ms per micro-batch{} on {:.2} cores; step tail \
                 {:.2} ms; DP {:.2} ms; pipeline idle {:.1}%; {} per rank",
                1e3 * c.forward_seconds(),
                1e3 * c.backward_seconds(),
                match run.lanes {
                    1 => String::new(),
                    lanes => format!(" (both at once in {lanes} row lanes)"),
                },
                c.chunks.first().map_or(0.0, |k| k.forward.cores),
                1e3 * c.optimizer.seconds,
                1e3 * (c.dp_reduce.seconds + c.dp_gather.seconds),
                100.0 * p.times.idle_fraction(r),
                trident_plan::report::size(p.memory[r].total() as f64)
            );
        }
        if run.par.dp > 1 {
            println!("{}", dp_overlap_line(run.par.distributed_optimizer));
        }
    } else if let Some(timed) = calibrated_search {
        println!(
            "each of the {timed} layouts that fit timed here as one layout's --calibrate times it ({} repetitions \
             of each measurement; the trainer's step simulated with its rank threads sharing the cores), and \
             ranked by that",
            SEARCH_BUDGET.reps
        );
    }
    if let Some(r) = &ranked {
        println!(
            "{} valid layouts, {} fit in memory; the fastest {}:",
            r.considered,
            r.fitting.len(),
            shown.len()
        );
    }
    print!("{}", table(&shown.iter().collect::<Vec<_>>()));
    println!();
    print!("{}", detail(&problem, best, &costing));
    if !explanation.is_empty() {
        println!("why {} wins:", best.layout.label());
        for line in &explanation {
            println!("  {line}");
        }
    }
    if !recs.is_empty() {
        println!("the source guide's rules of thumb:");
        for line in &recs {
            println!("  {line}");
        }
    }
    if tokens > 0.0 && one_gpu_rate > 0.0 {
        println!(
        "one {} alone: {:.3e} training FLOPs (6 N D) at {:.0} TFLOP/s ({:.0}% of peak, the GEMM rate) = {:.0} years",
        c.gpu.name,
        training_flops(params, tokens),
        one_gpu_rate / 1e12,
        100.0 * c.gpu.gemm_efficiency,
        one_gpu_years,
    );
    }
    if c.gpu.name == "v100" && tokens > 0.0 {
        println!(
            "  the guide's 288 years on one V100 implies {:.1}% of its {:.0} fp16 TFLOP/s",
            100.0 * implied_efficiency(params, tokens, c.gpu.fp16_tflops.unwrap_or(125.0) * 1e12, 288.0),
            c.gpu.fp16_tflops.unwrap_or(125.0)
        );
    }
    if !best.fits {
        bail!(
            "{} does not fit: {:.1} GiB per GPU against {:.1} GiB, {:.1} GiB short (try --search)",
            best.layout.label(),
            best.memory.total() / GIB,
            best.memory_limit / GIB,
            (best.memory.total() - best.memory_limit) / GIB
        );
    }
    if let Some((a, b)) = &pictures {
        println!("pictures: {a} (memory), {b} (pipeline timeline of {})", best.layout.label());
    }
    Ok(())
}

/// Writes memory.png (the shown layouts, at most 8) and timeline.png (the first) to `dir`.
fn draw(dir: &Path, problem: &Problem, shown: &[Plan]) -> anyhow::Result<(String, String)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating --plots {}", dir.display()))?;
    let mem = dir.join("memory.png");
    let top: Vec<&Plan> = shown.iter().take(8).collect();
    write_canvas(&mem, &picture::memory_picture(&top))?;
    let tl = dir.join("timeline.png");
    write_canvas(&tl, &picture::timeline_picture(problem, &shown[0]).map_err(anyhow::Error::msg)?)?;
    Ok((mem.display().to_string(), tl.display().to_string()))
}

/// Writes a picture of the planner as an 8-bit RGB PNG at `path` (an error where Trident was
/// built without its `plots` feature).
fn write_canvas(path: &Path, canvas: &picture::Canvas) -> anyhow::Result<()> {
    Ok(trident::plot::write_png(path, canvas.width, canvas.height, &canvas.pixels)?)
}
