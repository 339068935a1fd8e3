//! The `trident` command line: `train`, `sample`, `launch`, `bench` and `plan`, each a module
//! of its flags and the code that runs them (the binary is `src/main.rs`).
//!
//! The commands import the library (`trident`) and [`common`], never each other; `train`'s
//! flags ([`train_args`]) are shared by the run ([`train_run`]) and the dry run ([`dry_run`]).
//!
//! Features, all on by default and forwarded to `trident`: `cuda` (the kernels' PTX),
//! `tokenizer` (GPT-2's BPE), `plots` (PNG pictures).

mod advice;
pub mod bench;
pub mod common;
pub mod dry_run;
pub mod launch;
pub mod plan;
pub mod plan_model;
pub mod progress;
pub mod sample;
pub mod train;
pub mod train_args;
pub mod train_run;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "trident",
    version,
    about = "GPU kernel and collectives runtime, and a GPT trainer on top of it"
)]
/// The parsed command line: one subcommand and its flags.
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands; each variant's flags are its arguments struct.
#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Train a GPT-2 model (Megatron-LM flag names).
    Train(train_args::TrainArgs),
    /// Generate text from a checkpoint; on the built-in data set, also score the task.
    Sample(sample::SampleArgs),
    /// Start local ranks of a command, as torchrun does: `trident launch --nproc-per-node N -- CMD...`.
    Launch(launch::LaunchArgs),
    /// Benchmarks: `trident bench collectives --transport shm --world-size 2`.
    Bench(bench::BenchArgs),
    /// Plan a training run: memory, time and cost per layout; `--search` ranks the layouts.
    // Negative numbers parse, so that `--nodes -1` is refused naming its flag.
    #[command(allow_negative_numbers = true)]
    Plan(plan::PlanArgs),
}

/// Runs a command; returns the process exit code (launched ranks' codes pass through).
///
/// A library error that a flag can fix carries that advice ("use --device cpu"); the
/// libraries' own messages name no flags.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    let result = match cli.command {
        Command::Train(args) => train::run(args).map(|()| 0),
        Command::Sample(args) => sample::run(args).map(|()| 0),
        Command::Launch(args) => launch::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Plan(args) => plan::run(args).map(|()| 0),
    };
    result.map_err(advice::advise)
}

#[cfg(test)]
mod tests;
