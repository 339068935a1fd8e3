//! The `trident` command line.

pub mod common;
pub mod sample;
pub mod train;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "trident",
    version,
    about = "GPU kernel and collectives runtime, and a GPT trainer on top of it"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train a GPT-2 model (Megatron-LM flag names).
    Train(Box<train::TrainArgs>),
    /// Generate text from a checkpoint; on the built-in data set, also score the task.
    Sample(sample::SampleArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Train(args) => train::run(*args),
        Command::Sample(args) => sample::run(args),
    }
}

#[cfg(test)]
mod tests;
