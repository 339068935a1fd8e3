//! Collective benchmarks with nccl-tests' columns: size, count, time, algbw and busbw
//! (algbw = size / time; busbw scales algbw by the traffic each rank must carry:
//! 2(n-1)/n for AllReduce, (n-1)/n for all-gather and reduce-scatter, 1 for broadcast).

use crate::communicator::Communicator;
use crate::config::CommConfig;
use crate::element::ReduceOp;
use crate::error::{CommError, Result};
use crate::transport::inproc::InprocFabric;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

/// The collective a benchmark times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchOp {
    /// [`Communicator::all_reduce`](crate::Communicator::all_reduce), sum.
    AllReduce,
    /// [`Communicator::all_gather`](crate::Communicator::all_gather).
    AllGather,
    /// [`Communicator::reduce_scatter`](crate::Communicator::reduce_scatter), sum.
    ReduceScatter,
    /// [`Communicator::broadcast`](crate::Communicator::broadcast) from rank 0.
    Broadcast,
}

impl BenchOp {
    /// The collective named `s` (`all_reduce`, `allreduce`, ...), or
    /// [`CommError::InvalidArgument`].
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "all_reduce" | "allreduce" => BenchOp::AllReduce,
            "all_gather" | "allgather" => BenchOp::AllGather,
            "reduce_scatter" | "reducescatter" => BenchOp::ReduceScatter,
            "broadcast" => BenchOp::Broadcast,
            _ => {
                return Err(CommError::InvalidArgument(format!(
                    "unknown collective {s:?}: expected all_reduce, all_gather, reduce_scatter or broadcast"
                )))
            }
        })
    }

    /// The name reports use (`all_reduce`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BenchOp::AllReduce => "all_reduce",
            BenchOp::AllGather => "all_gather",
            BenchOp::ReduceScatter => "reduce_scatter",
            BenchOp::Broadcast => "broadcast",
        }
    }

    /// busbw / algbw for `n` ranks.
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            BenchOp::AllReduce => 2.0 * (n - 1.0) / n,
            BenchOp::AllGather | BenchOp::ReduceScatter => (n - 1.0) / n,
            BenchOp::Broadcast => 1.0,
        }
    }
}

/// What a benchmark sweeps, as nccl-tests' options do.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The collective.
    pub op: BenchOp,
    /// Smallest buffer, bytes; sizes double up to `max_bytes`.
    pub min_bytes: usize,
    /// Largest buffer, bytes.
    pub max_bytes: usize,
    /// Most timed iterations per size (fewer for large sizes).
    pub iters: usize,
    /// Untimed iterations per size before the timed ones.
    pub warmup: usize,
    /// AllReduce on [`crate::SharedBuffer`]s, which the ranks reach in each other's memory
    /// where the transport shares it (registered buffers, as nccl-tests' `-R`).
    pub registered: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            op: BenchOp::AllReduce,
            min_bytes: 1 << 20,
            max_bytes: 256 << 20,
            iters: 20,
            warmup: 2,
            registered: false,
        }
    }
}

/// One size's result, as nccl-tests reports it (measured on the machine that runs it).
#[derive(Clone, Copy, Debug)]
pub struct BenchRow {
    /// Bytes of the whole buffer (the all-gather output, the reduce-scatter input).
    pub bytes: usize,
    /// Elements of the buffer.
    pub count: usize,
    /// Mean time per call, microseconds (the slowest rank's).
    pub time_us: f64,
    /// Algorithm bandwidth: `bytes / time`, 10^9 bytes/s.
    pub algbw: f64,
    /// Bus bandwidth: `algbw` times the collective's factor (`2 (n - 1) / n` for AllReduce,
    /// `(n - 1) / n` for AllGather and ReduceScatter, 1 for broadcast), 10^9 bytes/s.
    pub busbw: f64,
}

/// Runs the benchmark on every rank of `comm` (all must call it); every rank returns the
/// same rows (times are the slowest rank's).
pub fn run(comm: &mut Communicator, opts: &BenchOptions) -> Result<Vec<BenchRow>> {
    let n = comm.size();
    if opts.registered && !matches!(opts.op, BenchOp::AllReduce) {
        return Err(CommError::InvalidArgument(format!(
            "registered buffers are benchmarked for all_reduce only, not {}",
            opts.op.name()
        )));
    }
    let max_count = (opts.max_bytes / 4).max(1);
    // Repeated sums grow these towards infinity; IEEE arithmetic on infinities runs at full
    // speed, so the timings are unaffected.
    let mut buf: Vec<f32> = (0..max_count).map(|i| 1.0 + (i % 7) as f32 * 0.25).collect();
    let mut out: Vec<f32> = vec![0.0; max_count];
    let mut rows = Vec::new();
    let mut bytes = opts.min_bytes.max(4);
    while bytes <= opts.max_bytes {
        // Divisible by n, so all-gather and reduce-scatter chunks are whole.
        let count = (bytes / 4 / n).max(1) * n;
        let iters = ((1usize << 30) / bytes).clamp(3, opts.iters.max(3));
        let mut shared = if opts.registered {
            let mut s = comm.shared_buffer::<f32>(count)?;
            s.copy_from_slice(&buf[..count]);
            Some(s)
        } else {
            None
        };
        let mut once = |comm: &mut Communicator| -> Result<()> {
            match opts.op {
                BenchOp::AllReduce => match shared.as_mut() {
                    Some(s) => comm.all_reduce_shared(s, ReduceOp::Sum),
                    None => comm.all_reduce(&mut buf[..count], ReduceOp::Sum),
                },
                BenchOp::AllGather => {
                    let m = count / n;
                    comm.all_gather(&buf[..m], &mut out[..count])
                }
                BenchOp::ReduceScatter => {
                    let m = count / n;
                    comm.reduce_scatter(&buf[..count], &mut out[..m], ReduceOp::Sum)
                }
                BenchOp::Broadcast => comm.broadcast(&mut buf[..count], 0),
            }
        };
        for _ in 0..opts.warmup {
            once(comm)?;
        }
        comm.barrier()?;
        let start = Instant::now();
        for _ in 0..iters {
            once(comm)?;
        }
        let mut secs = [start.elapsed().as_secs_f64() / iters as f64];
        comm.all_reduce(&mut secs, ReduceOp::Max)?;
        let size = count * 4;
        let algbw = size as f64 / secs[0] / 1e9;
        rows.push(BenchRow {
            bytes: size,
            count,
            time_us: secs[0] * 1e6,
            algbw,
            busbw: algbw * opts.op.bus_factor(n),
        });
        bytes *= 2;
    }
    Ok(rows)
}

/// [`run`] on `world` in-process ranks; returns rank 0's rows.
pub fn run_inproc(world: usize, opts: &BenchOptions) -> Result<Vec<BenchRow>> {
    let fabric = Arc::new(InprocFabric::new());
    let handles: Vec<_> = (0..world)
        .map(|rank| {
            let (fabric, opts) = (fabric.clone(), opts.clone());
            std::thread::spawn(move || {
                let mut comm = Communicator::world(fabric, rank, world, CommConfig::from_env()?)?;
                run(&mut comm, &opts)
            })
        })
        .collect();
    let mut first = None;
    for h in handles {
        let rows = h.join().map_err(|_| CommError::InvalidArgument("a benchmark rank panicked".into()))??;
        first.get_or_insert(rows);
    }
    Ok(first.unwrap_or_default())
}

/// The whole `bench collectives` command. `inproc` runs `world` threads here. For `shm` and
/// `tcp`: inside a launched job (RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID set) this
/// process is one rank; otherwise it starts `world` local ranks of `self_command` (the
/// command line that leads back here) through [`crate::launch::run`] with the transport
/// set. Rank 0 prints the table to stdout. Returns the exit code.
pub fn main(transport: &str, world: usize, opts: &BenchOptions, self_command: &[String]) -> Result<i32> {
    let mut stdout = std::io::stdout();
    let print = |out: &mut std::io::Stdout, name: &str, n: usize, rows: &[BenchRow]| {
        print_table(out, opts, name, n, rows).map_err(|e| CommError::io("writing the benchmark table", e))
    };
    match transport {
        "inproc" => {
            let rows = run_inproc(world, opts)?;
            print(&mut stdout, "inproc", world, &rows)?;
            return Ok(0);
        }
        "shm" | "tcp" => {}
        other => {
            return Err(CommError::InvalidArgument(format!(
                "unknown transport {other:?}: expected inproc, shm or tcp"
            )))
        }
    }
    let launched = ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"].iter().any(|v| std::env::var(v).is_ok());
    if !launched {
        let launch = crate::launch::LaunchOptions {
            env: vec![(crate::bootstrap::ENV_TRANSPORT.to_string(), transport.to_string())],
            prefix_output: false,
            ..Default::default()
        };
        return crate::launch::run(world, self_command, &launch);
    }
    let env = crate::bootstrap::LaunchEnv::from_env()?;
    let mut comm = crate::bootstrap::init_with_transport(&env, CommConfig::from_env()?, transport)?;
    let rows = run(&mut comm, opts)?;
    if comm.rank() == 0 {
        print(&mut stdout, comm.transport_name(), comm.size(), &rows)?;
    }
    Ok(0)
}

/// Read+write bandwidth, GB/s, of every core copying its own buffer of `bytes` at once: the
/// machine's memory bandwidth, which busbw is compared to.
pub fn memcpy_bandwidth(bytes: usize) -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let iters = ((1usize << 30) / bytes.max(1)).clamp(3, 50);
    let start = std::sync::Barrier::new(cores);
    let rates: Vec<f64> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..cores)
            .map(|_| {
                s.spawn(|| {
                    let src = vec![1u8; bytes];
                    let mut dst = vec![0u8; bytes];
                    dst.copy_from_slice(&src);
                    start.wait();
                    let t = Instant::now();
                    for _ in 0..iters {
                        dst.copy_from_slice(std::hint::black_box(&src));
                        std::hint::black_box(&mut dst);
                    }
                    2.0 * bytes as f64 * iters as f64 / t.elapsed().as_secs_f64() / 1e9
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0.0)).collect()
    });
    rates.iter().sum()
}

/// Prints `rows` as nccl-tests does.
pub fn print_table(
    out: &mut dyn Write,
    opts: &BenchOptions,
    transport: &str,
    world: usize,
    rows: &[BenchRow],
) -> std::io::Result<()> {
    let buffers = if opts.registered { "registered" } else { "ordinary" };
    writeln!(out, "# trident {} over {transport}, {world} ranks, {buffers} buffers", opts.op.name())?;
    writeln!(
        out,
        "#{:>12} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8}",
        "size", "count", "type", "redop", "time", "algbw", "busbw"
    )?;
    writeln!(
        out,
        "#{:>12} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8}",
        "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)"
    )?;
    let redop = match opts.op {
        BenchOp::AllReduce | BenchOp::ReduceScatter => "sum",
        _ => "none",
    };
    for r in rows {
        writeln!(
            out,
            " {:>12} {:>12} {:>6} {:>6} {:>10.1} {:>8.2} {:>8.2}",
            r.bytes, r.count, "float", redop, r.time_us, r.algbw, r.busbw
        )?;
    }
    if let Some(peak) = rows.iter().map(|r| r.busbw).reduce(f64::max) {
        let copy = memcpy_bandwidth(64 << 20);
        writeln!(
            out,
            "# peak busbw {peak:.2} GB/s; memcpy read+write on every core {copy:.2} GB/s; ratio {:.2}",
            peak / copy
        )?;
    }
    Ok(())
}
