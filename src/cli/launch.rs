//! `trident launch`: start local ranks of a command the way torchrun does.

use anyhow::Context;
use clap::Args;
use trident_collectives::launch::{self, LaunchOptions};

/// `trident launch`: the ranks of this node and the rendezvous, as torchrun's flags name
/// them; each rank gets `RANK`, `LOCAL_RANK`, `WORLD_SIZE` and the master's address in its
/// environment.
#[derive(Args, Debug)]
pub struct LaunchArgs {
    /// Ranks to start on this node.
    #[arg(long, default_value_t = 1)]
    pub nproc_per_node: usize,
    /// Nodes of the job.
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    /// This node's index among them (0 on the master).
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Address of the rendezvous (node 0).
    #[arg(long, default_value = "127.0.0.1")]
    pub master_addr: String,
    /// Rendezvous port (default: a free one; a multi-node launch must give it).
    #[arg(long)]
    pub master_port: Option<u16>,
    /// The command each rank runs, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Runs the ranks and returns the exit code of the first that failed (0 when all succeed).
pub fn run(args: LaunchArgs) -> anyhow::Result<i32> {
    let opts = LaunchOptions {
        nnodes: args.nnodes,
        node_rank: args.node_rank,
        master_addr: args.master_addr,
        master_port: args.master_port,
        ..LaunchOptions::default()
    };
    launch::run(args.nproc_per_node, &args.command, &opts)
        .with_context(|| format!("launching {} ranks of {:?}", args.nproc_per_node, args.command))
}
