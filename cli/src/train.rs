//! `trident train`: the flags ([`TrainArgs`]) checked and turned into the model, the data and
//! the run's settings, then trained ([`crate::train_run`]) or planned ([`crate::dry_run`]).

use anyhow::{bail, Context};
use clap::ValueEnum;

use crate::common::{data_spec, open_device, Preset, Start};
use crate::train_args::TrainArgs;
use trident::checkpoint::check_writable_dir;
use trident::model::{GptConfig, Precision};
use trident::optim::AdamWConfig;
use trident::train::exit;
use trident::train::{LossScaleConfig, LrSchedule, TrainSettings};
use trident_data::{AdditionTask, DataOrder, DataSpec, TokenizerKind, DEFAULT_VAL_FRACTION};

/// Sequences per micro-batch on text and shards, when --micro-batch-size is not given.
const DEFAULT_MICRO_BATCH: usize = 8;
/// Tokens per micro-batch on the built-in task, when --micro-batch-size is not given: about
/// what 8 sequences of 256 tokens hold, in one-problem sequences.
const BUILTIN_BATCH_TOKENS: usize = 2048;

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
        lr_schedule: LrSchedule {
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
        return crate::dry_run::run(&args, &config, seq_len, micro_batch, global_batch, settings.precision);
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
        Some(dir) if crate::train_run::is_rank_zero() => Some(trident::checkpoint::lock_save_dir(dir)?),
        _ => None,
    };
    crate::train_run::run(&args, device, config, &dataset, settings, train_iters, start)
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
    args.check_overlap().map_err(anyhow::Error::msg)?;
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
