//! `trident-coll`: runs Trident's collectives under a launcher.
//!
//! ```text
//! trident-coll launch --nproc-per-node N [--nnodes K --node-rank I --master-addr A --master-port P] -- CMD...
//! trident-coll check [--seed S] [--lens 0,1,7,...] [--grid tp,pp,dp]   (under a launcher)
//! trident-coll bench [--transport inproc|shm|tcp] [--world-size N] [--op all_reduce]
//!                    [--min-bytes B] [--max-bytes B] [--iters K] [--registered true]
//! trident-coll fault die --victim R --at K                  (a rank kills itself mid-AllReduce)
//! trident-coll fault mismatch                               (rank 1 calls with another size)
//! trident-coll fault run --iters K [--grid tp,pp,dp]        (AllReduces, printing each step; for
//!                                                            tests that stop or kill a rank; with
//!                                                            a grid, a training step's pattern:
//!                                                            TP AllReduce, pipeline sends forward
//!                                                            and back, DP AllReduce)
//! ```

use std::collections::HashMap;
use std::process::ExitCode;
use trident_collectives::bench::{self, BenchOp, BenchOptions};
use trident_collectives::bootstrap::init_from_env;
use trident_collectives::launcher::{self, LauncherOptions};
use trident_collectives::{verify, ParallelGroups, RankGrid, ReduceOp};

type Error = Box<dyn std::error::Error>;

/// `--key value` pairs.
fn flags(args: &[String]) -> Result<HashMap<String, String>, Error> {
    let mut map = HashMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let key = a.strip_prefix("--").ok_or_else(|| format!("unexpected argument {a:?}"))?;
        let value = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
        map.insert(key.to_string(), value.clone());
    }
    Ok(map)
}

fn get<T: std::str::FromStr>(f: &HashMap<String, String>, key: &str, default: T) -> Result<T, Error> {
    match f.get(key) {
        Some(v) => v.parse().map_err(|_| format!("--{key} {v:?} is not valid").into()),
        None => Ok(default),
    }
}

fn cmd_launch(args: &[String]) -> Result<i32, Error> {
    let split = args.iter().position(|a| a == "--").ok_or("launch: put the command after --")?;
    let f = flags(&args[..split])?;
    let opts = LauncherOptions {
        nnodes: get(&f, "nnodes", 1)?,
        node_rank: get(&f, "node-rank", 0)?,
        master_addr: get(&f, "master-addr", "127.0.0.1".to_string())?,
        master_port: f.get("master-port").map(|p| p.parse()).transpose()?,
        ..LauncherOptions::default()
    };
    Ok(launcher::run(get(&f, "nproc-per-node", 1)?, &args[split + 1..], &opts)?)
}

fn cmd_check(args: &[String]) -> Result<i32, Error> {
    let f = flags(args)?;
    let seed: u64 = get(&f, "seed", 0x7a11_0001)?;
    let lens: Vec<usize> = get(&f, "lens", "0,1,7,61,1021,16411,262147".to_string())?
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let mut comm = init_from_env()?;
    verify::check_all(&mut comm, seed, &lens)?;
    if let Some(grid) = f.get("grid") {
        let grid = parse_grid(grid, comm.size())?;
        verify::check_groups(&mut comm, &grid)?;
    }
    let shared = if comm.shared_buffer::<f32>(1)?.is_shared() { "mapped" } else { "private" };
    println!(
        "rank {}/{} ({}, large all_reduce: {}, shared buffers: {shared}): every collective matched the reference",
        comm.rank(),
        comm.size(),
        comm.transport_name(),
        comm.large_all_reduce_path()
    );
    Ok(0)
}

/// `--grid tp,pp,dp` over a world of `world` ranks.
fn parse_grid(grid: &str, world: usize) -> Result<RankGrid, Error> {
    let dims: Vec<usize> = grid.split(',').map(|s| s.trim().parse()).collect::<Result<_, _>>()?;
    let [tp, pp, dp] = dims[..] else {
        return Err("--grid expects tp,pp,dp".into());
    };
    Ok(RankGrid::new(tp, pp, dp, world)?)
}

/// One training step's communication on a grid: an AllReduce in the tensor-parallel group,
/// activations sent down the pipeline and gradients back up, and an AllReduce of the
/// data-parallel replicas.
fn grid_step(g: &mut ParallelGroups, buf: &mut [f32]) -> trident_collectives::Result<()> {
    g.tp.all_reduce(buf, ReduceOp::Max)?;
    let (stage, stages) = (g.pp.rank(), g.pp.size());
    if stage > 0 {
        g.pp.recv(buf, stage - 1, 1)?;
    }
    if stage + 1 < stages {
        g.pp.send(buf, stage + 1, 1)?;
        g.pp.recv(buf, stage + 1, 2)?;
    }
    if stage > 0 {
        g.pp.send(buf, stage - 1, 2)?;
    }
    g.dp.all_reduce(buf, ReduceOp::Max)
}

fn cmd_bench(args: &[String]) -> Result<i32, Error> {
    let f = flags(args)?;
    let opts = BenchOptions {
        op: BenchOp::parse(&get(&f, "op", "all_reduce".to_string())?)?,
        min_bytes: get(&f, "min-bytes", 1 << 20)?,
        max_bytes: get(&f, "max-bytes", 256 << 20)?,
        iters: get(&f, "iters", 20)?,
        registered: get(&f, "registered", false)?,
        ..BenchOptions::default()
    };
    let transport = get(&f, "transport", "shm".to_string())?;
    let world: usize = get(&f, "world-size", 2)?;
    let mut command = vec![std::env::current_exe()?.to_string_lossy().into_owned(), "bench".to_string()];
    command.extend_from_slice(args);
    Ok(bench::main(&transport, world, &opts, &command)?)
}

/// Survivors of an injected fault print the error and exit with 3.
fn cmd_fault(args: &[String]) -> Result<i32, Error> {
    let (kind, rest) = args.split_first().ok_or("fault: expected die or mismatch")?;
    let f = flags(rest)?;
    let mut comm = init_from_env()?;
    let rank = comm.rank();
    let result = match kind.as_str() {
        "die" => {
            let victim: usize = get(&f, "victim", 1)?;
            let at: usize = get(&f, "at", 2)?;
            let mut buf = vec![1.0f32; 1 << 20];
            (0..at + 20).try_for_each(|i| {
                if i == at && rank == victim {
                    // SAFETY: ending our own process the hard way, as a crash would.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
                comm.all_reduce(&mut buf, ReduceOp::Sum)
            })
        }
        "run" => {
            use std::io::Write;
            let iters: usize = get(&f, "iters", 1000)?;
            let mut buf = vec![1.0f32; 4096];
            let mut groups = match f.get("grid") {
                Some(grid) => Some(comm.parallel_groups(&parse_grid(grid, comm.size())?)?),
                None => None,
            };
            (0..iters).try_for_each(|i| {
                match groups.as_mut() {
                    Some(g) => grid_step(g, &mut buf)?,
                    None => comm.all_reduce(&mut buf, ReduceOp::Max)?,
                }
                println!("step {i}");
                let _ = std::io::stdout().flush();
                Ok(())
            })
        }
        "mismatch" => {
            let len = if rank == 1 { 100_001 } else { 100_000 };
            let mut buf = vec![1.0f32; len];
            comm.all_reduce(&mut buf, ReduceOp::Sum)
        }
        other => return Err(format!("unknown fault {other:?}").into()),
    };
    match result {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("rank {rank}: error: {e}");
            Ok(3)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: trident-coll launch|check|bench|fault ... (see the source header)");
        return ExitCode::from(2);
    };
    let result = match cmd.as_str() {
        "launch" => cmd_launch(rest),
        "check" => cmd_check(rest),
        "bench" => cmd_bench(rest),
        "fault" => cmd_fault(rest),
        other => Err(format!("unknown command {other:?}").into()),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("trident-coll: {e}");
            ExitCode::from(1)
        }
    }
}
