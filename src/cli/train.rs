//! `trident train`

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use super::common::{data_spec, flag, open_device, DeviceArg, Preset, Start};
use crate::checkpoint::check_writable_dir;
use crate::data::{AdditionTask, DataOrder, DataSpec, TokenizerKind, DEFAULT_VAL_FRACTION};
use crate::model::{GptConfig, Precision};
use crate::optim::AdamWConfig;
use crate::train::exit::{self, ExitPolicy};
use crate::train::{DecayStyle, LossScaleConfig, LrSchedule, TrainSettings};

/// Sequences per micro-batch on text and shards, when --micro-batch-size is not given.
const DEFAULT_MICRO_BATCH: usize = 8;
/// Tokens per micro-batch on the built-in task, when --micro-batch-size is not given: about
/// what 8 sequences of 256 tokens hold, in one-problem sequences.
const BUILTIN_BATCH_TOKENS: usize = 2048;

/// `trident train`: the model, data, optimisation, parallel layout, precision and
/// checkpointing of a run, with Megatron-LM's flag names.
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct TrainArgs {
    /// Model shape preset; the shape flags below override its fields (default: tiny; with
    /// --data builtin, nano).
    #[arg(long, value_enum)]
    pub model: Option<Preset>,
    /// Transformer blocks (default: the preset's).
    #[arg(long, value_parser = flag::at_least_one)]
    pub num_layers: Option<usize>,
    /// Hidden size (default: the preset's).
    #[arg(long, value_parser = flag::at_least_one)]
    pub hidden_size: Option<usize>,
    /// Attention heads; must divide --hidden-size (default: the preset's).
    #[arg(long, value_parser = flag::at_least_one)]
    pub num_attention_heads: Option<usize>,
    /// Positions the model has (default: the preset's).
    #[arg(long, value_parser = flag::at_least_one)]
    pub max_position_embeddings: Option<usize>,
    /// Tokens per training sequence (default: the model's positions; with --data builtin, one
    /// problem line, 13 tokens for 3 digits, so that every sequence is one problem at the
    /// positions it is scored at).
    #[arg(long, value_parser = flag::at_least_one)]
    pub seq_length: Option<usize>,
    /// Sequences per forward/backward pass (default: 8; with --data builtin, as many
    /// one-problem sequences as fill 2,048 tokens: 158 for 3 digits).
    #[arg(long, value_parser = flag::at_least_one)]
    pub micro_batch_size: Option<usize>,
    /// Sequences per optimizer step; a multiple of --micro-batch-size (default: equal to it).
    #[arg(long, value_parser = flag::at_least_one)]
    pub global_batch_size: Option<usize>,
    /// Peak learning rate (default: 1e-3; with --data builtin, 3e-3).
    #[arg(long, value_parser = flag::positive)]
    pub lr: Option<f32>,
    /// Learning rate at the end of the decay.
    #[arg(long, default_value_t = 0.0, value_parser = flag::non_negative)]
    pub min_lr: f32,
    /// Iterations of linear warmup from 0 to --lr.
    #[arg(long, default_value_t = 0)]
    pub lr_warmup_iters: u64,
    /// constant, linear or cosine
    #[arg(long, default_value = "cosine")]
    pub lr_decay_style: DecayStyle,
    /// AdamW weight decay, on weight matrices and embeddings only.
    #[arg(long, default_value_t = 0.1, value_parser = flag::non_negative)]
    pub weight_decay: f32,
    /// AdamW's first-moment decay.
    #[arg(long, default_value_t = AdamWConfig::default().beta1, value_parser = flag::decay)]
    pub adam_beta1: f32,
    /// AdamW's second-moment decay.
    #[arg(long, default_value_t = AdamWConfig::default().beta2, value_parser = flag::decay)]
    pub adam_beta2: f32,
    /// AdamW's denominator term.
    #[arg(long, default_value_t = AdamWConfig::default().eps, value_parser = flag::positive)]
    pub adam_eps: f32,
    /// Global gradient-norm limit (0: no clipping).
    #[arg(long, default_value_t = 1.0, value_parser = flag::non_negative)]
    pub clip_grad: f32,
    /// Optimizer steps to train for; the schedule decays over them (default: 200; with --data
    /// builtin, 2000).
    #[arg(long)]
    pub train_iters: Option<u64>,
    /// Validation every N iterations (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub eval_interval: u64,
    /// Validation micro-batches per evaluation (0: no evaluation).
    #[arg(long, default_value_t = 10)]
    pub eval_iters: usize,
    /// Directory for checkpoints (step_XXXXXXXX/ inside it).
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// Checkpoint every N iterations (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub save_interval: u64,
    /// Resume from a checkpoint directory (or the latest one inside it), or start from the
    /// weights of an llm.c model file (`gpt2_124M.bin`; shape from its header, fresh optimizer).
    #[arg(long)]
    pub load: Option<PathBuf>,
    /// Seeds the initialisation, the data order and the built-in data set.
    #[arg(long, default_value_t = 1234)]
    pub seed: u64,
    /// cpu, emu, cuda (this local rank's GPU: LOCAL_RANK modulo the GPUs), cuda:N, or auto
    /// (a GPU when one is present, else cpu).
    #[arg(long, default_value = "auto")]
    pub device: DeviceArg,
    /// `builtin` (the addition task, `builtin:DIGITS`), a UTF-8 text file, or llm.c token
    /// shards (a directory or comma-separated .bin files).
    #[arg(long, default_value = "builtin")]
    pub data: String,
    /// bytes or gpt2 (text defaults to bytes, shards to gpt2)
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// trident (windows drawn with --seed) or llmc (llm.c's batch order, to compare runs with it)
    #[arg(long, default_value = "trident")]
    pub data_order: DataOrder,
    /// Append one JSON line of metrics per iteration here.
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,
    /// Ranks to run as threads of this process (under a launcher: the launcher's ranks).
    #[arg(long, default_value_t = 1, value_parser = flag::at_least_one)]
    pub world_size: usize,
    /// Tensor-parallel ranks: attention heads and MLP columns split over them.
    #[arg(long, default_value_t = 1, value_parser = flag::at_least_one)]
    pub tensor_model_parallel_size: usize,
    /// Pipeline stages: layers split over them, 1F1B schedule over micro-batches.
    #[arg(long, default_value_t = 1, value_parser = flag::at_least_one)]
    pub pipeline_model_parallel_size: usize,
    /// Interleaved 1F1B (Megatron-LM's virtual pipeline): each stage holds (layers / PP) / N
    /// non-contiguous chunks of N layers, which shrinks the bubble to (p - 1) / (v m); needs
    /// --pipeline-model-parallel-size 2 or more and micro-batches per step a multiple of it.
    #[arg(long, value_parser = flag::at_least_one)]
    pub num_layers_per_virtual_pipeline_stage: Option<usize>,
    /// ZeRO-1: shard the optimizer state over data-parallel ranks.
    #[arg(long)]
    pub use_distributed_optimizer: bool,
    /// Activation recomputation: full (whole layers) or selective (attention).
    #[arg(long)]
    pub recompute_granularity: Option<crate::parallel::Recompute>,
    /// Sequence parallelism: LayerNorms and the residual stream split over the
    /// tensor-parallel ranks (all-gather and reduce-scatter in place of the all-reduces);
    /// --seq-length must divide by --tensor-model-parallel-size.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// Stop after every iteration divisible by N, saving a checkpoint first with --save;
    /// --load resumes the run exactly.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub exit_interval: Option<u64>,
    /// On SIGTERM or SIGINT, finish the current iteration, save a checkpoint (with --save) and
    /// exit with status 0; a second signal ends the process at once.
    #[arg(long)]
    pub exit_signal_handler: bool,
    /// Mixed precision in bf16: activations, activation gradients and the weights the products
    /// read in bf16, fp32 master weights, AdamW state, gradients and loss (the default on cuda).
    #[arg(long, conflicts_with_all = ["fp16", "fp32"])]
    pub bf16: bool,
    /// Mixed precision in fp16, with loss scaling (dynamic unless --loss-scale).
    #[arg(long, conflicts_with = "fp32")]
    pub fp16: bool,
    /// Everything in fp32 (the default on cpu and emu).
    #[arg(long)]
    pub fp32: bool,
    /// --fp16: a fixed loss scale instead of the dynamic one.
    #[arg(long, value_parser = flag::positive)]
    pub loss_scale: Option<f32>,
    /// --fp16: the dynamic scale to start from.
    #[arg(long, default_value_t = LossScaleConfig::default().initial, value_parser = flag::positive)]
    pub initial_loss_scale: f32,
    /// --fp16: the dynamic scale never backs off below this.
    #[arg(long, default_value_t = LossScaleConfig::default().min, value_parser = flag::positive)]
    pub min_loss_scale: f32,
    /// --fp16: clean steps in a row after which the dynamic scale doubles.
    #[arg(long, default_value_t = LossScaleConfig::default().window, value_parser = clap::value_parser!(u64).range(1..))]
    pub loss_scale_window: u64,
    /// --fp16: overflows allowed before the dynamic scale halves.
    #[arg(long, default_value_t = LossScaleConfig::default().hysteresis, value_parser = clap::value_parser!(u32).range(1..))]
    pub hysteresis: u32,
    /// Print the plan of this run (memory per rank, iteration time, bubble; this machine
    /// measured) and exit without training.
    #[arg(long)]
    pub dry_run: bool,
}

impl TrainArgs {
    /// `--bf16`, `--fp16`, `--fp32`, or the device's default: bf16 on cuda, fp32 elsewhere.
    pub fn precision(&self, device: &trident_runtime::Device) -> Precision {
        match (self.bf16, self.fp16, self.fp32) {
            (true, _, _) => Precision::Bf16,
            (_, true, _) => Precision::Fp16,
            (_, _, true) => Precision::Fp32,
            _ if device.kind() == trident_runtime::DeviceKind::Cuda => Precision::Bf16,
            _ => Precision::Fp32,
        }
    }

    /// `--exit-interval` and `--exit-signal-handler`.
    pub fn exit_policy(&self) -> ExitPolicy {
        ExitPolicy { interval: self.exit_interval, on_signal: self.exit_signal_handler }
    }
}

/// Runs `trident train`: checks the flags, opens the device, the data and `--load`, builds
/// the model's shape, and plans (`--dry-run`) or trains.
pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    if args.exit_signal_handler {
        exit::install_signal_handler().context("installing the --exit-signal-handler")?;
    }
    let device = open_device(args.device)?;
    let tokenizer = args.tokenizer.as_deref().map(TokenizerKind::parse).transpose()?;
    let spec_text = data_spec(&args.data);
    let spec = DataSpec::parse(&spec_text, tokenizer)?;
    let vocab_size = spec.tokenizer().vocab_size();
    let defaults = DataDefaults::of(spec.addition());
    let train_iters = args.train_iters.unwrap_or(defaults.train_iters);
    check_flags(&args, args.lr.unwrap_or(defaults.lr))?;

    let start = args.load.as_deref().map(Start::open).transpose()?;
    let config = match &start {
        Some(start) => {
            let config = start.config();
            check_shape_flags(&args, &config, &start.describe())?;
            config
        }
        None => model_config(&args, args.model.unwrap_or(defaults.model), vocab_size)?,
    };
    if config.vocab_size != vocab_size {
        bail!(
            "the model's vocabulary ({}) does not match the data's tokenizer ({vocab_size} tokens); \
             pick the tokenizer the model was made for with --tokenizer",
            config.vocab_size,
        );
    }
    if spec.addition().is_some() && args.data_order == DataOrder::Llmc {
        bail!(
            "--data-order llmc serves llm.c token shards and text files as contiguous runs of \
             tokens; the built-in data set is one problem per sequence: drop --data-order"
        );
    }
    let (seq_len, micro_batch) = batch_shape(&args, spec.addition(), config.max_seq_len)?;
    let dataset = spec.open(args.seed, seq_len).with_context(|| format!("opening --data {}", args.data))?;
    for shard in dataset.val.shared_shards(&dataset.train) {
        eprintln!(
            "note: no validation shard (a name with `_val_` or ending `_val.bin`) among --data; the \
             validation set is the last {:.0}% of {}, which training does not read",
            100.0 * DEFAULT_VAL_FRACTION,
            shard.display()
        );
    }
    let global_batch = args.global_batch_size.unwrap_or(micro_batch);
    let settings = TrainSettings {
        micro_batch,
        global_batch,
        seq_len,
        schedule: LrSchedule {
            max_lr: args.lr.unwrap_or(defaults.lr),
            min_lr: args.min_lr,
            warmup_iters: args.lr_warmup_iters,
            decay_iters: train_iters,
            style: args.lr_decay_style,
        },
        adamw: AdamWConfig {
            beta1: args.adam_beta1,
            beta2: args.adam_beta2,
            eps: args.adam_eps,
            weight_decay: args.weight_decay,
        },
        clip_grad: args.clip_grad,
        precision: args.precision(&device),
        loss_scale: LossScaleConfig {
            fixed: args.loss_scale,
            initial: args.initial_loss_scale,
            min: args.min_loss_scale,
            window: args.loss_scale_window,
            hysteresis: args.hysteresis,
        },
    };
    if settings.precision != Precision::Fp16
        && (args.loss_scale.is_some() || args.initial_loss_scale != LossScaleConfig::default().initial)
    {
        eprintln!("note: the loss-scale flags apply to --fp16 only; this run is {}", settings.precision);
    }
    if args.dry_run {
        return super::plan::dry_run(&args, &config, seq_len, micro_batch, global_batch, settings.precision);
    }
    // Before anything (on every grid) is allocated or trained: a --save that cannot take checkpoints would
    // otherwise fail only when the first one is due (with the default --save-interval 0, after
    // the last iteration).
    if let Some(dir) = &args.save {
        check_writable_dir(dir).with_context(|| {
            format!(
                "--save {}: checkpoints cannot be written there; pass a writable directory",
                dir.display()
            )
        })?;
    }
    // One directory, one run: the process of rank 0 (the writer) holds the directory's lock
    // until it exits, so a second run there is refused here instead of overwriting this one.
    let _save_lock = match &args.save {
        Some(dir) if super::train_run::is_rank_zero() => Some(crate::checkpoint::lock_save_dir(dir)?),
        _ => None,
    };
    super::train_run::run(&args, device, config, &dataset, settings, train_iters, start)
}

/// The defaults of the flags that differ between the built-in task and text or shards.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct DataDefaults {
    pub model: Preset,
    pub lr: f32,
    pub train_iters: u64,
}

impl DataDefaults {
    /// The built-in task (`builtin`) trains `nano` on one problem per sequence
    /// ([`batch_shape`]): at a 3e-3 peak that model leaves the task's plateau (the format
    /// learnt, no sum digit yet) after about 450 steps of 2,048 tokens and is exact on held-out
    /// problems by about step 1,000, each step a fraction of what one of `tiny` costs. At 1e-3
    /// it was still on the plateau after 800 steps.
    pub fn of(builtin: Option<AdditionTask>) -> Self {
        match builtin {
            Some(_) => Self { model: Preset::Nano, lr: 3e-3, train_iters: 2000 },
            None => Self { model: Preset::Tiny, lr: 1e-3, train_iters: 200 },
        }
    }
}

/// Tokens per sequence and sequences per micro-batch: the flags', else the defaults for the
/// data (`builtin`: the task's problems, one per sequence) and a model of `positions`.
pub(super) fn batch_shape(
    args: &TrainArgs,
    builtin: Option<AdditionTask>,
    positions: usize,
) -> anyhow::Result<(usize, usize)> {
    let seq_len = match (args.seq_length, builtin) {
        (Some(seq_len), _) => seq_len,
        (None, Some(task)) => task.line_len().min(positions),
        (None, None) => positions,
    };
    if seq_len > positions {
        bail!(
            "--seq-length {seq_len} is longer than the model's {positions} positions; lower it or raise --max-position-embeddings"
        );
    }
    let micro_batch = match (args.micro_batch_size, builtin) {
        (Some(micro_batch), _) => micro_batch,
        (None, Some(_)) => BUILTIN_BATCH_TOKENS.div_ceil(seq_len.max(1)),
        (None, None) => DEFAULT_MICRO_BATCH,
    };
    Ok((seq_len, micro_batch))
}

/// The checks that involve several flags (each flag's own range is checked as it is parsed);
/// `lr` is the peak learning rate in effect.
fn check_flags(args: &TrainArgs, lr: f32) -> anyhow::Result<()> {
    if args.min_lr > lr {
        bail!(
            "--min-lr {} is above the peak learning rate {lr}{}; the schedule would rise while it \
             decays: lower --min-lr or raise --lr",
            args.min_lr,
            if args.lr.is_some() { " (--lr)" } else { " (the default --lr)" },
        );
    }
    if let (Some(model), Some(load)) = (args.model, &args.load) {
        bail!(
            "--model {} and --load {} both set the model's shape, and --load wins: drop --model",
            model.to_possible_value().map_or_else(|| format!("{model:?}"), |v| v.get_name().to_owned()),
            load.display(),
        );
    }
    Ok(())
}

/// Refuses shape flags that disagree with a loaded model (`source` names it).
fn check_shape_flags(args: &TrainArgs, config: &GptConfig, source: &str) -> anyhow::Result<()> {
    let flags = [
        ("--num-layers", args.num_layers, config.num_layers),
        ("--hidden-size", args.hidden_size, config.channels),
        ("--num-attention-heads", args.num_attention_heads, config.num_heads),
        ("--max-position-embeddings", args.max_position_embeddings, config.max_seq_len),
    ];
    for (flag, given, loaded) in flags {
        if let Some(given) = given.filter(|&g| g != loaded) {
            bail!("{flag} {given} disagrees with {source}, which has {loaded}; drop the flag (--load sets the shape)");
        }
    }
    Ok(())
}

fn model_config(args: &TrainArgs, preset: Preset, vocab_size: usize) -> anyhow::Result<GptConfig> {
    let (layers, hidden, heads, positions) = preset.shape();
    // Megatron-LM pads the vocabulary to a multiple of 128 per tensor-parallel rank.
    let multiple = 128 * args.tensor_model_parallel_size.max(1);
    let positions = args.max_position_embeddings.unwrap_or(positions);
    Ok(GptConfig::new(
        positions,
        vocab_size,
        args.num_layers.unwrap_or(layers),
        args.num_attention_heads.unwrap_or(heads),
        args.hidden_size.unwrap_or(hidden),
        multiple,
    )?)
}
