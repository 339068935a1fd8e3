//! `trident sample`

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::common::{checkpoint_dir, open_device, DeviceArg};
use trident::checkpoint::Checkpoint;
use trident::model::{generate, init::NormalRng, Gpt, SamplingParams};
use trident::ops::OpsContext;
use trident_data::{DataSpec, Tokenizer, TokenizerKind};

/// `trident sample`: the checkpoint to load and how to sample from it.
#[derive(Args, Debug)]
#[command(allow_negative_numbers = true)]
pub struct SampleArgs {
    /// Checkpoint directory (or a --save directory: its latest checkpoint).
    #[arg(long)]
    pub load: PathBuf,
    /// Text to continue (default: the task's first prompt for the built-in data, else a newline).
    #[arg(long)]
    pub prompt: Option<String>,
    /// Tokens to generate after the prompt.
    #[arg(long, default_value_t = 64)]
    pub max_new_tokens: usize,
    /// 0 samples greedily.
    #[arg(long, default_value_t = 1.0, value_parser = super::common::flag::non_negative)]
    pub temperature: f32,
    /// Sample among the k most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Seeds the sampling.
    #[arg(long, default_value_t = 1234)]
    pub seed: u64,
    /// cpu, emu, cuda (this local rank's GPU: LOCAL_RANK modulo the GPUs), cuda:N, or auto
    /// (a GPU when one is present, else cpu).
    #[arg(long, default_value = "auto")]
    pub device: DeviceArg,
    /// Held-out problems scored on the built-in addition task.
    #[arg(long, default_value_t = 200)]
    pub num_problems: usize,
}

/// Loads the checkpoint, continues the prompt and prints the text; on the built-in addition
/// task also scores `--num-problems` held-out problems.
pub fn run(args: SampleArgs) -> anyhow::Result<()> {
    let dir = checkpoint_dir(&args.load)?;
    eprintln!("trident sample: loading {}", dir.display());
    let ck = Checkpoint::<serde_json::Value>::load(&dir)
        .with_context(|| format!("loading {}{}", dir.display(), crate::common::earlier_intact(&dir)))?;
    let kind = ck.state.get("tokenizer").and_then(|v| v.as_str()).map(TokenizerKind::parse).transpose()?;
    let kind = kind.unwrap_or(TokenizerKind::Bytes);
    let tokenizer = Tokenizer::new(kind)?;
    let device = open_device(args.device)?;
    let ctx = OpsContext::new(&device)?;
    let model = Gpt::from_params(&device, ck.config, &ck.params)?;
    let window = ck.config.max_seq_len;
    let mut rng = NormalRng::new(args.seed);
    let params = SamplingParams { temperature: args.temperature, top_k: args.top_k };

    let task = match ck.state.get("data").and_then(|v| v.as_str()).map(|s| DataSpec::parse(s, None)) {
        Some(Ok(DataSpec::Addition { digits })) => Some(trident_data::AdditionTask::new(digits)?),
        _ => None,
    };
    let prompt = match (&args.prompt, &task) {
        (Some(p), _) => tokenizer.encode(p)?,
        (None, Some(task)) => task.prompt(123, 456),
        (None, None) => tokenizer.encode("\n")?,
    };
    eprintln!("trident sample: generating {} tokens on {}", args.max_new_tokens, device.kind());
    let out = generate(&model, &ctx, window, &prompt, args.max_new_tokens, params, &mut rng, None)?;
    println!("{}{}", tokenizer.decode(&prompt), tokenizer.decode(&out));

    if let Some(task) = task {
        eprintln!("trident sample: scoring {} held-out addition problems", args.num_problems);
        let mut failure = None;
        let acc = task.score(args.num_problems, args.seed, |p| {
            generate(&model, &ctx, window, p, task.answer_len() + 1, params, &mut rng, None).unwrap_or_else(
                |e| {
                    failure.get_or_insert(e);
                    Vec::new()
                },
            )
        });
        if let Some(e) = failure {
            return Err(e.into());
        }
        println!(
            "addition accuracy: {:.1}% of {} held-out problems (temperature {}, top-k {})",
            100.0 * acc.fraction(),
            args.num_problems,
            args.temperature,
            args.top_k
        );
    }
    Ok(())
}
