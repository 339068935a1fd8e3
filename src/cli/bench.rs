//! `trident bench`: benchmarks that run from the command line.

use clap::{Args, Subcommand};
use trident_collectives::bench::{self, BenchOp, BenchOptions};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Collective bandwidth (algbw and busbw as nccl-tests reports them).
    Collectives(CollectivesArgs),
}

#[derive(Args, Debug)]
pub struct CollectivesArgs {
    /// inproc (threads), shm (processes on this host) or tcp.
    #[arg(long, default_value = "shm")]
    pub transport: String,
    #[arg(long, default_value_t = 2)]
    pub world_size: usize,
    /// all_reduce, all_gather, reduce_scatter or broadcast.
    #[arg(long, default_value = "all_reduce")]
    pub op: String,
    #[arg(long, default_value_t = 1 << 20)]
    pub min_bytes: usize,
    #[arg(long, default_value_t = 256 << 20)]
    pub max_bytes: usize,
    /// Most timed iterations per size.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// AllReduce on buffers from `Communicator::shared_buffer` (registered buffers: mapped by
    /// every rank where the transport shares memory) instead of ordinary memory.
    #[arg(long)]
    pub registered: bool,
}

/// Runs the benchmark; returns the process exit code.
pub fn run(args: BenchArgs) -> anyhow::Result<i32> {
    match args.what {
        BenchCommand::Collectives(a) => {
            let opts = BenchOptions {
                op: BenchOp::parse(&a.op)?,
                min_bytes: a.min_bytes,
                max_bytes: a.max_bytes,
                iters: a.iters,
                registered: a.registered,
                ..BenchOptions::default()
            };
            // For shm and tcp outside a launched job, bench::main starts the ranks by
            // running this same command line again under the launcher.
            let self_command: Vec<String> = std::env::args().collect();
            Ok(bench::main(&a.transport, a.world_size, &opts, &self_command)?)
        }
    }
}
