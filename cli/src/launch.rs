//! `trident launch`: start local ranks of a command the way torchrun does.

use anyhow::Context;
use clap::Args;
use std::time::Duration;
use trident_collectives::launcher::{self, LauncherOptions};

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
    /// On SIGTERM or SIGINT the launcher forwards the signal to every rank and waits this
    /// many seconds for them to exit (save a checkpoint under `--exit-signal-handler`) before
    /// it sends SIGKILL; a second signal sends SIGKILL at once.
    #[arg(long, default_value_t = 30.0)]
    pub signal_grace_s: f64,
    /// The command each rank runs, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Runs the ranks and returns the exit code of the first that failed (0 when all succeed).
pub fn run(args: LaunchArgs) -> anyhow::Result<i32> {
    let signal_grace = Duration::try_from_secs_f64(args.signal_grace_s).map_err(|_| {
        anyhow::anyhow!("--signal-grace-s {} is not a number of seconds >= 0", args.signal_grace_s)
    })?;
    let opts = LauncherOptions {
        nnodes: args.nnodes,
        node_rank: args.node_rank,
        master_addr: args.master_addr,
        master_port: args.master_port,
        signal_grace,
        ..LauncherOptions::default()
    };
    launcher::run(args.nproc_per_node, &args.command, &opts)
        .with_context(|| format!("launching {} ranks of {:?}", args.nproc_per_node, args.command))
}
