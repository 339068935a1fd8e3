//! `trident train`'s flags ([`TrainArgs`]), apart from the code that runs them, so that the
//! training run and its dry run (the planner) both read them without importing each other.

use std::path::PathBuf;

use clap::Args;

use crate::common::{flag, DeviceArg, Preset};
use trident::model::Precision;
use trident::optim::AdamWConfig;
use trident::train::exit::ExitPolicy;
use trident::train::{DecayStyle, LossScaleConfig};
use trident_data::DataOrder;

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
    pub recompute_granularity: Option<trident::parallel::Recompute>,
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
    // Communication overlap, with Megatron-LM's flag names: what the trainer does is accepted,
    // what it does not is refused naming the flag ([`TrainArgs::check_overlap`]).
    /// Start each layer's gradient reduction over the data-parallel ranks while the backward
    /// of the last micro-batch goes on: the trainer always does (with DP > 1); accepted, and
    /// refused with --use-distributed-optimizer, whose reduce-scatter waits for the backward.
    #[arg(long)]
    pub overlap_grad_reduce: bool,
    /// Refused: the trainer all-gathers the distributed optimizer's parameters after the step,
    /// not overlapped with the next forward.
    #[arg(long)]
    pub overlap_param_gather: bool,
    /// Refused: the trainer's tensor-parallel collectives run between the GEMMs, not
    /// overlapped with them.
    #[arg(long)]
    pub tp_comm_overlap: bool,
    /// Refused: the trainer's pipeline sends always go out on their link's thread while the
    /// stage computes; it has no blocking mode.
    #[arg(long)]
    pub no_overlap_p2p_communication: bool,
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

    /// Refuses the overlap flags the trainer does not do, naming the flag and what it does
    /// instead.
    pub fn check_overlap(&self) -> Result<(), String> {
        if self.overlap_grad_reduce && self.use_distributed_optimizer {
            return Err(
                "--overlap-grad-reduce with --use-distributed-optimizer: the trainer reduce-scatters the \
                        gradients after the backward, not during it; drop --overlap-grad-reduce (without the \
                        distributed optimizer the trainer overlaps the reduction with the backward)"
                    .into(),
            );
        }
        if self.overlap_param_gather {
            return Err(
                "--overlap-param-gather: the trainer all-gathers the distributed optimizer's parameters \
                        after the optimizer step, not during the next forward; drop the flag"
                    .into(),
            );
        }
        if self.tp_comm_overlap {
            return Err("--tp-comm-overlap: the trainer runs its tensor-parallel all-reduces (all-gathers and \
                        reduce-scatters with --sequence-parallel) between the GEMMs, not overlapped with them; drop \
                        the flag"
                .into());
        }
        if self.no_overlap_p2p_communication {
            return Err(
                "--no-overlap-p2p-communication: the trainer always sends between pipeline stages on a \
                        thread per link while the stage computes; it has no blocking mode; drop the flag"
                    .into(),
            );
        }
        Ok(())
    }

    /// `--exit-interval` and `--exit-signal-handler`.
    pub fn exit_policy(&self) -> ExitPolicy {
        ExitPolicy { interval: self.exit_interval, on_signal: self.exit_signal_handler }
    }
}
