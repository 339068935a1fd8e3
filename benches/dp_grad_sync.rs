//! Data-parallel gradient synchronisation as the trainer runs it (`DpWorker`: every bucket
//! handed to the DP thread, then all waited for and copied back), two processes over shared
//! memory: buckets staged in ordinary host copies and reduced with `all_reduce` (before) vs
//! staged in registered shared buffers and reduced with `all_reduce_shared` (after).
//!
//! `cargo bench -p trident --bench dp_grad_sync` (`TRIDENT_BENCH_STEPS` timed steps per
//! shape, default 20). The bench starts its own two ranks through the launcher; each rank is
//! this program again, with the launcher's environment set.

use std::time::Instant;

use trident::collectives::launcher::{self, LauncherOptions};
use trident::collectives::Communicator;
use trident::model::GptConfig;
use trident::model::{ShardLayout, ShardPlace};
use trident::parallel::DpWorker;
use trident::runtime::{Buffer, Device};

/// The buckets of one rank at TP = PP = 1: each layer's block, then the stage block.
fn buckets(config: GptConfig) -> Vec<std::ops::Range<usize>> {
    let layout = ShardLayout::new(config, ShardPlace::new(0, 1, 0, 1));
    let mut b: Vec<_> = layout.layers().map(|l| layout.layer_block(l)).collect();
    b.push(layout.stage_block());
    b
}

/// Mean seconds per step of reducing every bucket of `grads`, registered or not.
fn time_steps(
    dp: &mut DpWorker,
    grads: &mut Buffer<f32>,
    blocks: &[std::ops::Range<usize>],
    registered: bool,
    steps: usize,
) -> f64 {
    let lens: Vec<usize> = blocks.iter().map(|b| b.len()).collect();
    if registered {
        dp.register_buckets(&lens).expect("registering the buckets");
    }
    let step = |dp: &DpWorker, grads: &mut Buffer<f32>| {
        let mut pending = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            let view = grads.view(b.clone()).unwrap();
            pending.push(if registered {
                dp.all_reduce_registered(i, b.clone(), view).unwrap()
            } else {
                dp.all_reduce_bucket(b.clone(), view.to_vec().unwrap())
            });
        }
        for p in pending {
            p.wait(grads).unwrap();
        }
    };
    step(dp, grads); // warm-up: maps pages, exchanges addresses
    dp.run(|c| c.barrier()).unwrap();
    let t0 = Instant::now();
    for _ in 0..steps {
        step(dp, grads);
    }
    let secs = t0.elapsed().as_secs_f64() / steps as f64;
    // The slowest rank's time is the step's.
    let mut s = [secs];
    s = dp.run(move |c| c.all_reduce(&mut s, trident::collectives::ReduceOp::Max).map(|()| s)).unwrap();
    s[0]
}

fn rank_main() {
    let steps: usize = std::env::var("TRIDENT_BENCH_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let comm = Communicator::from_env().expect("joining the bench's ranks");
    let (rank, transport) = (comm.rank(), comm.transport_name());
    let mut dp = DpWorker::new(comm);
    let shapes = [
        (
            "4-layer bench shape: hidden 128, vocab 256, seq 64",
            GptConfig::new(64, 256, 4, 4, 128, 512).unwrap(),
        ),
        (
            "GPT-2 small layers: hidden 768, vocab 50304, seq 1024, 2 layers",
            GptConfig::new(1024, 50304, 2, 12, 768, 50304).unwrap(),
        ),
    ];
    if rank == 0 {
        println!("# DP gradient sync, 2 processes over {transport}; {steps} timed steps per shape");
        println!(
            "# {:<64} {:>16} {:>12} {:>12} {:>8}",
            "shape", "buckets (floats)", "ordinary ms", "registered ms", "speedup"
        );
    }
    for (name, config) in shapes {
        let blocks = buckets(config);
        let total: usize = blocks.iter().map(|b| b.len()).sum();
        let init: Vec<f32> = (0..total).map(|i| ((i * 7 + rank) % 13) as f32 * 0.25).collect();
        let mut grads = Buffer::from_slice(&Device::Cpu, &init).unwrap();
        let before = time_steps(&mut dp, &mut grads, &blocks, false, steps);
        let after = time_steps(&mut dp, &mut grads, &blocks, true, steps);
        if rank == 0 {
            let sizes: Vec<String> = blocks.iter().map(|b| b.len().to_string()).collect();
            let sizes = if sizes.len() > 3 {
                format!("{} x{} + {}", sizes[0], sizes.len() - 1, sizes[sizes.len() - 1])
            } else {
                sizes.join(" + ")
            };
            println!(
                "  {name:<64} {sizes:>16} {:>12.3} {:>12.3} {:>7.2}x",
                before * 1e3,
                after * 1e3,
                before / after
            );
        }
    }
    let paths = dp.bucket_paths();
    if rank == 0 {
        println!("# rank 0 bucket reductions by path: {paths}");
    }
}

fn main() {
    if std::env::var("RANK").is_ok() {
        return rank_main();
    }
    let exe = std::env::current_exe().expect("the bench's own path");
    let opts = LauncherOptions {
        prefix_output: false,
        env: vec![("TRIDENT_TRANSPORT".into(), "shm".into())],
        ..LauncherOptions::default()
    };
    let code =
        launcher::run(2, &[exe.to_string_lossy().into_owned()], &opts).expect("launching the bench's ranks");
    std::process::exit(code);
}
