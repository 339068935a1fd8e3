//! `trident train`'s run, on every grid: one rank, ranks as threads of this process
//! (`--world-size N`), or one process per rank under a launcher (`trident launch`, torchrun,
//! srun, mpirun). Every rank runs [`train_rank`]; rank 0 reports.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context};
use trident_collectives::Communicator;
use trident_runtime::{Device, DeviceKind};

use serde_json::json;

use crate::common::{data_spec, Start};
use crate::progress::Progress;
use crate::train_args::TrainArgs;
use trident::checkpoint::step_dir;
use trident::metrics::{IterMetrics, MetricsWriter};
use trident::model::{
    generate, gpt2_init, init::NormalRng, Gpt, GptConfig, ModelError, ParamLayout, SamplingParams,
};
use trident::ops::OpsContext;
use trident::parallel::{run_ranks, Interleaved, ParallelConfig, Recompute, SplitDims};
use trident::plot::plot_metrics;
use trident::train::checkpoint::{self, SavePlan};
use trident::train::run::{assemble, train_rank, RankData, RankResult, RunSpec};
use trident::train::{peak_flops, TrainError, TrainSettings, Trainer};
use trident_data::Dataset;

/// Whether a launcher started this process as one rank of a job.
pub fn launched() -> bool {
    ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"].iter().any(|v| std::env::var(v).is_ok())
}

/// Whether this process runs rank 0: it is not launched, or its launcher says rank 0.
pub fn is_rank_zero() -> bool {
    ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"]
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .is_none_or(|r| r.trim() == "0")
}

/// Trains `config` on `dataset` for `iters` iterations with the flags' parallel layout:
/// derives DP from `--world-size` (or the launcher's world), checks the layout and the
/// memory the run needs, resumes or starts from `start`, then trains every rank and reports
/// the metrics, checkpoints and loss curve.
pub fn run(
    args: &TrainArgs,
    device: Device,
    config: GptConfig,
    dataset: &Dataset,
    settings: TrainSettings,
    iters: u64,
    start: Option<Start>,
) -> anyhow::Result<()> {
    let world_size = if launched() {
        let world: usize = std::env::var("WORLD_SIZE")
            .or_else(|_| std::env::var("OMPI_COMM_WORLD_SIZE"))
            .or_else(|_| std::env::var("SLURM_NTASKS"))
            .context("a launched rank needs WORLD_SIZE (or OMPI_COMM_WORLD_SIZE, SLURM_NTASKS)")?
            .parse()
            .context("the launcher's world size is not a number")?;
        if args.world_size > 1 && args.world_size != world {
            bail!("--world-size {} disagrees with the launcher's {world} ranks", args.world_size);
        }
        world
    } else {
        args.world_size
    };
    let mut par = ParallelConfig::from_world(
        world_size,
        args.tensor_model_parallel_size,
        args.pipeline_model_parallel_size,
    )?;
    par.distributed_optimizer = args.use_distributed_optimizer;
    par.recompute = args.recompute_granularity.unwrap_or_default();
    par.sequence_parallel = args.sequence_parallel;
    if let Some(per) = args.num_layers_per_virtual_pipeline_stage {
        let per_stage = config.num_layers / par.pp;
        if par.pp < 2 || config.num_layers % par.pp != 0 || per_stage % per != 0 {
            bail!(
                "--num-layers-per-virtual-pipeline-stage {per} needs --pipeline-model-parallel-size 2 or more \
                 and must divide each stage's layers (--num-layers {} / --pipeline-model-parallel-size {} = {})",
                config.num_layers,
                par.pp,
                config.num_layers as f64 / par.pp as f64
            );
        }
        par.virtual_stages = per_stage / per;
    }
    if par.sequence_parallel && par.tp == 1 {
        eprintln!("note: --sequence-parallel has no effect with --tensor-model-parallel-size 1");
    }
    let global_batch = args.global_batch_size.unwrap_or(settings.micro_batch * par.dp);
    // A checkpoint or model file of any grid resumes here: its vocabulary is padded again for
    // this tensor-parallel size before any check of the shape (its padded rows are zero).
    let padded = checkpoint::padded_vocab_for(&config, par.tp);
    let run_config = GptConfig { padded_vocab_size: padded, ..config };
    let shape = SplitDims {
        heads: config.num_heads,
        layers: config.num_layers,
        padded_vocab: run_config.padded_vocab_size,
    };
    let micro_batches = par.validate(shape, settings.micro_batch, global_batch)?;
    let settings = TrainSettings { global_batch, ..settings };
    if device.is_host() {
        let storage = trident::train::Storage::of(&device, settings.precision);
        let mut need = if world_size == 1 {
            // One rank on the Cpu splits each micro-batch into one share of rows per core.
            let lanes = if device.kind() == trident_runtime::DeviceKind::Cpu {
                rayon::current_num_threads()
            } else {
                1
            };
            let saves = args.save.is_some();
            let (b, t) = (settings.micro_batch, settings.seq_len);
            trident::train::MemoryNeed::single(&run_config, b, t, lanes, saves, storage)?
        } else {
            let need = trident::train::MemoryNeed::parallel_rank(
                &run_config,
                par.tp,
                par.pp,
                par.dp,
                par.distributed_optimizer,
                settings.micro_batch,
                settings.seq_len,
                micro_batches,
                storage,
            )?;
            match args.save {
                Some(_) => {
                    let grid = (par.tp, par.pp, par.dp);
                    let chunks = par.virtual_stages.max(1);
                    need.with_save(&run_config, grid, par.distributed_optimizer, chunks, is_rank_zero())?
                }
                None => need,
            }
        };
        need.data = dataset.train.resident_shard_bytes().saturating_add(dataset.val.resident_shard_bytes());
        // Rank threads of this process, or this node's launched processes, share the memory.
        let local_ranks = if launched() {
            std::env::var("LOCAL_WORLD_SIZE").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
        } else {
            world_size as u64
        };
        // The initial weights (and a resumed checkpoint's moments) stay for the run's length,
        // once per process; what --load has read is already in memory, so it counts as
        // available to the run.
        let processes = if launched() { local_ranks } else { 1 };
        let resumed = matches!(&start, Some(Start::Checkpoint(ck)) if ck.optimizer.is_some());
        let whole = ParamLayout::new(run_config).len() as u64;
        need = need.with_start(whole, resumed, processes)?;
        let loaded = match &start {
            Some(Start::Checkpoint(ck)) => {
                4 * (ck.params.len() + ck.optimizer.as_ref().map_or(0, |o| 2 * o.m.len()))
            }
            Some(Start::LlmcModel { params, .. }) => 4 * params.len(),
            None => 0,
        };
        if let Some((available, source)) = trident::train::available_memory() {
            need.check(local_ranks, available.saturating_add(loaded as u64), source, world_size > 1)?;
        }
    }
    let (config, init, resume) = match start {
        // Taken, not copied: the checkpoint's buffers become the run's.
        Some(Start::Checkpoint(ck)) => {
            let mut ck = *ck;
            checkpoint::repad_vocab(&mut ck, padded)?;
            let init = std::mem::take(&mut ck.params);
            (ck.config, init, Some(Arc::new(ck)))
        }
        Some(start) => {
            let init = checkpoint::repad_params(&config, start.params(), padded, "parameters")?;
            drop(start);
            (GptConfig { padded_vocab_size: padded, ..config }, init, None)
        }
        None => (config, gpt2_init(&ParamLayout::new(config), args.seed), None),
    };
    let save = args.save.as_ref().map(|dir| SavePlan {
        dir: dir.clone(),
        interval: args.save_interval,
        state: json!({ "data": data_spec(&args.data), "tokenizer": dataset.tokenizer.name() }),
    });
    let start_iter = resume.as_ref().map_or(0, |ck| ck.step);
    let spec = RunSpec {
        config,
        par,
        settings,
        data_seed: args.seed,
        data_order: args.data_order,
        iters,
        eval_interval: args.eval_interval,
        eval_iters: args.eval_iters,
        save,
        resume,
        exit: args.exit_policy(),
    };
    let agreed = training_flags(args, &spec, dataset, &init);
    let schedule =
        Interleaved::new(par.pp, micro_batches, par.virtual_stages).map_err(|e| anyhow::anyhow!(e))?;
    let tokens_per_step = (global_batch * settings.seq_len) as f64;
    // Under a launcher every process reads the flags; only rank 0 describes the run.
    let describes = !launched() || std::env::var("RANK").map_or(true, |r| r == "0");
    if describes {
        let ranks = if world_size == 1 {
            "on one rank".to_string()
        } else {
            format!("on {world_size} ranks (tensor {} x pipeline {} x data {})", par.tp, par.pp, par.dp)
        };
        eprintln!(
        "trident train: {} parameters ({} layers, hidden {}, {} heads, vocab {} padded to {}) {ranks}, {} on {} in {}; \
         micro-batch {} x {} tokens, {micro_batches} micro-batches per step, global batch {global_batch}{}{}{}{}",
        ParamLayout::new(config).len(),
        config.num_layers,
        config.channels,
        config.num_heads,
        config.vocab_size,
        config.padded_vocab_size,
        dataset.train.name(),
        device.kind(),
        settings.precision,
        settings.micro_batch,
        settings.seq_len,
        if par.distributed_optimizer { ", distributed optimizer" } else { "" },
        if par.sequence_parallel && par.tp > 1 { ", sequence parallel" } else { "" },
        if par.virtual_stages > 1 { format!(", interleaved over {} chunks per stage", par.virtual_stages) } else { String::new() },
        match par.recompute {
            trident::parallel::Recompute::None => "",
            trident::parallel::Recompute::Full => ", full recomputation",
            trident::parallel::Recompute::Selective => ", selective recomputation",
        },
        );
        if settings.precision.format().is_some() && !matches!(device, Device::Cpu) {
            let hs = config.channels / config.num_heads;
            let path = trident::ops::mixed::flash_attention_refusal(&device, settings.precision.format(), hs)
                .map_or("flash attention".to_string(), |why| format!("the f32 kernel ({why})"));
            eprintln!("trident train: linear layers on the tensor-core GEMM, attention on {path}");
        }
    }
    // Every iteration's metrics so far (a resumed run's metrics file included), for the loss
    // curve drawn beside the checkpoints.
    // Only rank 0 writes them: under a launcher the other processes leave the file alone (a
    // resumed rank rewriting it would race with rank 0's new lines).
    let (metrics, history) = match &args.metrics_file {
        Some(_) if !is_rank_zero() => (None, Vec::new()),
        Some(path) if start_iter > 0 => {
            let (writer, kept) = MetricsWriter::resume(path, start_iter)?;
            (Some(Mutex::new(writer)), kept)
        }
        Some(path) => (Some(Mutex::new(MetricsWriter::create(path)?)), Vec::new()),
        None => (None, Vec::new()),
    };
    let started = Instant::now();
    if start_iter >= iters && describes {
        let at =
            if start_iter == 0 { "the initial weights".to_string() } else { format!("step {start_iter}") };
        match &args.save {
            Some(dir) => eprintln!(
                "--train-iters {iters}: no step to take from {at}; saving it to {}",
                step_dir(dir, start_iter).display()
            ),
            None => eprintln!(
                "--train-iters {iters}: no step to take from {at} and no --save: nothing is written; \
                 raise --train-iters to train"
            ),
        }
    }
    let rank_main = |mut world: Communicator| -> Result<RankResult, TrainError> {
        // Launched ranks each parse their own flags: before any work, every rank checks that
        // the others train the same thing, so that a different --lr or --seed on one rank is
        // refused naming the flag instead of silently diverging.
        world.agree("training flags", &agreed)?;
        let is_reporter = world.rank() == 0;
        let mut progress = is_reporter.then(|| Progress::new(start_iter, spec.iters));
        let mut history = if is_reporter { history.clone() } else { Vec::new() };
        let last = std::cell::Cell::new(Instant::now());
        let one_rank = world.size() == 1;
        let mut on_start = |t: &Trainer| {
            let g = &t.groups;
            if one_rank {
                last.set(Instant::now());
                return;
            }
            eprintln!(
                "rank {} (tensor {}, data {}, stage {}): {}",
                g.rank,
                g.place.tp_rank,
                g.dp_rank,
                g.place.stage,
                t.memory()
            );
            last.set(Instant::now());
        };
        let mut on_step = |t: &Trainer, s: &trident::train::StepStats, val_loss: Option<f32>| {
            let Some(p) = progress.as_mut() else { return };
            let now = Instant::now();
            let tokens_per_s = tokens_per_step / now.duration_since(last.get()).as_secs_f64().max(1e-9);
            last.set(now);
            let iter = t.iter;
            if let Some(v) = val_loss {
                p.println(&format!("iter {iter}: val loss {v:.4}"));
            }
            let extra = match s.loss_scale {
                Some(scale) => format!(" | scale {scale} | skipped {}", t.skipped),
                None => String::new(),
            };
            p.update_with(iter, s.loss, tokens_per_s, &extra);
            let line = IterMetrics {
                iter,
                loss: s.loss,
                lr: s.lr,
                grad_norm: s.grad_norm,
                tokens_per_s,
                val_loss,
                loss_scale: s.loss_scale,
                skipped: s.skipped,
            };
            if let Some(m) = &metrics {
                let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = m.write(&line) {
                    p.println(&format!("warning: writing metrics: {e}"));
                }
            }
            history.push(line);
            if let Some(plan) = spec.save.as_ref().filter(|plan| plan.due(iter, spec.iters)) {
                if let Err(e) = plot_metrics(&plan.dir.join("loss.png"), &history) {
                    p.println(&format!("warning: drawing the loss curve: {e}"));
                }
            }
        };
        let r = train_rank(
            &mut world,
            &device,
            &spec,
            &init,
            RankData { train: dataset.train.clone(), val: Some(dataset.val.clone()) },
            &mut on_start,
            &mut on_step,
        );
        if let Some(p) = progress.as_mut() {
            p.finish();
        }
        if let Ok(res) = &r {
            if spec.par.dp > 1 && !spec.par.distributed_optimizer {
                eprintln!("rank {}: data-parallel gradient buckets reduced: {}", res.rank, res.dp_buckets);
            }
        }
        r
    };
    let results = if launched() {
        vec![rank_main(Communicator::from_env()?)?]
    } else {
        run_ranks(world_size, rank_main)?
    };
    let elapsed = started.elapsed().as_secs_f64();
    let step_flops = step_flops(&run_config, spec.settings.seq_len, global_batch, spec.par.recompute);
    report(&results, &schedule, tokens_per_step, elapsed, step_flops, &device);
    trident::calibrate::compare::print_summary(device.kind(), &spec, &results, elapsed);
    let steps = results.first().map_or(0, |r| r.steps.len());
    if device.kind() != DeviceKind::Cpu
        && settings.precision == trident::model::Precision::Bf16
        && world_size == 1
        && steps > 0
    {
        let shape = trident_bench::step::StepShape {
            config,
            micro_batch: settings.micro_batch,
            seq_len: settings.seq_len,
            micro_batches: settings.accumulation_steps()?,
        };
        for line in trident_bench::step::run_summary(&device, &shape, Some(elapsed / steps as f64)) {
            println!("{line}");
        }
    }
    if let (Some(task), true) = (&dataset.addition, results.len() == world_size) {
        // The whole model is here (every rank was a thread of this process).
        let model = Gpt::from_params(&device, config, &assemble(config, &results))?;
        let ctx = OpsContext::new(&device)?;
        let mut rng = NormalRng::new(args.seed);
        let greedy = SamplingParams { temperature: 0.0, top_k: 0 };
        let mut failure: Option<ModelError> = None;
        let window = settings.seq_len;
        let acc = task.score(100, args.seed, |prompt| {
            generate(&model, &ctx, window, prompt, task.answer_len() + 1, greedy, &mut rng, None)
                .unwrap_or_else(|e| {
                    failure.get_or_insert(e);
                    Vec::new()
                })
        });
        if let Some(e) = failure {
            return Err(e.into());
        }
        println!("addition accuracy on 100 held-out problems: {:.1}%", 100.0 * acc.fraction());
    }
    Ok(())
}

/// `(model, hardware)` FLOPs of one step of `config`: model FLOPs as Megatron-LM's
/// `num_floating_point_operations` counts them (the padded vocabulary, no recomputation), and
/// what the ranks execute with `recompute` (`trident_plan::flops`, the planner's count).
fn step_flops(config: &GptConfig, seq_len: usize, global_batch: usize, recompute: Recompute) -> (f64, f64) {
    let shape = trident_plan::ModelShape {
        name: String::new(),
        layers: config.num_layers,
        hidden: config.channels,
        heads: config.num_heads,
        vocab: config.vocab_size,
        seq_len,
        global_batch,
    };
    let vocab = config.padded_vocab_size;
    (
        trident_plan::flops::model_flops(&shape, vocab, global_batch),
        trident_plan::flops::hardware_flops(&shape, vocab, global_batch, recompute),
    )
}

fn report(
    results: &[RankResult],
    schedule: &Interleaved,
    tokens_per_step: f64,
    elapsed: f64,
    (model_flops, hardware_flops): (f64, f64),
    device: &Device,
) {
    let Some(first) = results.iter().find(|r| r.rank == 0).or(results.first()) else { return };
    if let Some(reason) = first.stopped {
        println!(
            "stopped after {} iterations ({reason}); --load resumes the run from its last checkpoint",
            first.steps.len()
        );
    }
    // A resumed run trains only the steps after its checkpoint.
    let iters = first.steps.len();
    if let Some(last) = first.steps.last() {
        if results.iter().any(|r| r.rank == 0) {
            let tokens_per_s = iters as f64 * tokens_per_step / elapsed.max(1e-9);
            let steps_per_s = iters as f64 / elapsed.max(1e-9);
            let (flops, executed) = (model_flops * steps_per_s, hardware_flops * steps_per_s);
            // The ranks of this process share its device: the peak is the device's, once.
            let mfu = peak_flops(device).map_or("n/a (no peak known for this device)".to_string(), |peak| {
                format!(
                    "{:.1}% (HFU {:.1}%) of an estimated {:.0} GFLOP/s peak",
                    100.0 * flops / peak,
                    100.0 * executed / peak,
                    peak / 1e9
                )
            });
            println!(
                "trained {iters} iterations in {elapsed:.1} s: final loss {:.4}{}, {tokens_per_s:.0} tokens/s, \
                 {:.1} GFLOP/s model FLOPs (Megatron-LM's count), {:.1} GFLOP/s hardware FLOPs (recomputation \
                 included), MFU {mfu}",
                last.loss,
                first.val_losses.last().map_or(String::new(), |(_, v)| format!(", val loss {v:.4}")),
                flops / 1e9,
                executed / 1e9
            );
        }
    }
    if schedule.stages > 1 {
        for r in results.iter().filter(|r| r.place.tp_rank == 0 && r.dp_rank == 0) {
            let formula =
                if schedule.chunks > 1 { "interleaved (p-1)/(v m+p-1)" } else { "1F1B (p-1)/(m+p-1)" };
            println!(
                "pipeline stage {}: idle {:.1}% of the schedule's time; {formula} bubble = {:.1}% \
                 (p = {}, v = {}, m = {})",
                r.place.stage,
                100.0 * r.timing.idle_fraction(),
                100.0 * schedule.bubble_fraction(),
                schedule.stages,
                schedule.chunks,
                schedule.micro_batches
            );
        }
    }
}

/// The settings every rank must share, as (flag, value) pairs for [`Communicator::agree`]:
/// each resolved value (defaults applied), the data by its token counts (paths may differ
/// between hosts), and the initial weights by their CRC-32.
fn training_flags(
    args: &TrainArgs,
    spec: &RunSpec,
    dataset: &Dataset,
    init: &[f32],
) -> Vec<(String, String)> {
    let s = &spec.settings;
    let c = &spec.config;
    let sched = &s.lr_schedule;
    // The grid first: a rank started with another --tensor-model-parallel-size pads the
    // vocabulary differently, and the size, not the vocabulary, is what to report.
    let pairs: Vec<(&str, String)> = vec![
        ("--tensor-model-parallel-size", spec.par.tp.to_string()),
        ("--pipeline-model-parallel-size", spec.par.pp.to_string()),
        ("--num-layers", c.num_layers.to_string()),
        ("--hidden-size", c.channels.to_string()),
        ("--num-attention-heads", c.num_heads.to_string()),
        ("--max-position-embeddings", c.max_seq_len.to_string()),
        ("the vocabulary (--tokenizer)", format!("{} padded to {}", c.vocab_size, c.padded_vocab_size)),
        ("--seq-length", s.seq_len.to_string()),
        ("--micro-batch-size", s.micro_batch.to_string()),
        ("--global-batch-size", s.global_batch.to_string()),
        ("--use-distributed-optimizer", spec.par.distributed_optimizer.to_string()),
        ("--recompute-granularity", format!("{:?}", spec.par.recompute)),
        ("--sequence-parallel", spec.par.sequence_parallel.to_string()),
        ("--num-layers-per-virtual-pipeline-stage (chunks per stage)", spec.par.virtual_stages.to_string()),
        ("--save", format!("{:?}", spec.save.as_ref().map(|p| (&p.dir, p.interval)))),
        ("--load (checkpoint step)", format!("{:?}", spec.resume.as_ref().map(|ck| ck.step))),
        ("--exit-interval", format!("{:?}", spec.exit.interval)),
        ("--exit-signal-handler", spec.exit.on_signal.to_string()),
        ("--lr", sched.max_lr.to_string()),
        ("--min-lr", sched.min_lr.to_string()),
        ("--lr-warmup-iters", sched.warmup_iters.to_string()),
        ("--lr-decay-style", format!("{:?}", sched.style)),
        ("--train-iters", spec.iters.to_string()),
        ("--weight-decay", s.adamw.weight_decay.to_string()),
        ("--adam-beta1", s.adamw.beta1.to_string()),
        ("--adam-beta2", s.adamw.beta2.to_string()),
        ("--adam-eps", s.adamw.eps.to_string()),
        ("--clip-grad", s.clip_grad.to_string()),
        ("--bf16 / --fp16", s.precision.to_string()),
        ("the loss-scale flags", format!("{:?}", s.loss_scale)),
        ("--seed", args.seed.to_string()),
        ("--data-order", format!("{:?}", spec.data_order)),
        ("--eval-interval", spec.eval_interval.to_string()),
        ("--eval-iters", spec.eval_iters.to_string()),
        (
            "--data (tokens)",
            format!("{} training, {} validation", dataset.train.total_tokens(), dataset.val.total_tokens()),
        ),
        (
            "the initial weights (--load, --seed)",
            format!("CRC-32 {:08x}", trident::checkpoint::checksum(init)),
        ),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}
