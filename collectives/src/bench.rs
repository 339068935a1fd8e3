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

/// The buffer sizes a sweep from `min_bytes` to `max_bytes` times: powers of two times
/// `min_bytes` (at least 4), up to `max_bytes`, stopping before a doubling would overflow.
pub fn sizes(min_bytes: usize, max_bytes: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut bytes = min_bytes.max(4);
    while bytes <= max_bytes {
        out.push(bytes);
        match bytes.checked_mul(2) {
            Some(next) => bytes = next,
            None => break,
        }
    }
    out
}

/// Refuses options no sweep can run with `world` ranks, naming the flag: no rank, sizes that
/// leave no whole f32 per rank (`--max-bytes` below 4 x world size), `--min-bytes` above
/// `--max-bytes`, and buffers larger than the memory `available` to the `local` ranks of this
/// machine (each holds two buffers of `--max-bytes`, three with registered buffers).
pub fn check_options(opts: &BenchOptions, world: usize, local: usize, available: Option<u64>) -> Result<()> {
    if world == 0 {
        return Err(CommError::InvalidArgument("--world-size must be at least 1".into()));
    }
    let least = 4u64.saturating_mul(world as u64);
    if (opts.max_bytes as u64) < least {
        return Err(CommError::InvalidArgument(format!(
            "--max-bytes {} is below 4 x {world} ranks: every rank needs at least one f32 of the buffer; \
             pass --max-bytes {least} or more",
            opts.max_bytes
        )));
    }
    if opts.min_bytes > opts.max_bytes {
        return Err(CommError::InvalidArgument(format!(
            "--min-bytes {} is above --max-bytes {}: no size to time",
            opts.min_bytes, opts.max_bytes
        )));
    }
    let per_rank = (opts.max_bytes as u64).saturating_mul(if opts.registered { 3 } else { 2 });
    let need = per_rank.saturating_mul(local.max(1) as u64);
    if let Some(available) = available.filter(|&a| need > a) {
        return Err(CommError::InvalidArgument(format!(
            "--max-bytes {}: the {local} local ranks' buffers need {need} bytes and {available} are \
             available (MemAvailable in /proc/meminfo); lower --max-bytes",
            opts.max_bytes
        )));
    }
    Ok(())
}

/// MemAvailable of `/proc/meminfo`, in bytes; `None` where it cannot be read.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// A vector of `n` values from `f`, allocated fallibly: a size past memory is an error.
fn try_vec(n: usize, f: impl Fn(usize) -> f32) -> Result<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        CommError::InvalidArgument(format!("--max-bytes: a buffer of {n} f32 cannot be allocated; lower it"))
    })?;
    v.extend((0..n).map(f));
    Ok(v)
}

/// Runs the benchmark on every rank of `comm` (all must call it); every rank returns the
/// same rows (times are the slowest rank's).
pub fn run(comm: &mut Communicator, opts: &BenchOptions) -> Result<Vec<BenchRow>> {
    let n = comm.size();
    check_options(opts, n, 1, available_memory())?;
    if opts.registered && !matches!(opts.op, BenchOp::AllReduce) {
        return Err(CommError::InvalidArgument(format!(
            "registered buffers are benchmarked for all_reduce only, not {}",
            opts.op.name()
        )));
    }
    let max_count = (opts.max_bytes / 4).max(1);
    // Repeated sums grow these towards infinity; IEEE arithmetic on infinities runs at full
    // speed, so the timings are unaffected.
    let mut buf = try_vec(max_count, |i| 1.0 + (i % 7) as f32 * 0.25)?;
    let mut out = try_vec(max_count, |_| 0.0)?;
    let mut rows = Vec::new();
    for bytes in sizes(opts.min_bytes, opts.max_bytes) {
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
    }
    Ok(rows)
}

/// [`run`] on `world` in-process ranks; returns rank 0's rows.
pub fn run_inproc(world: usize, opts: &BenchOptions) -> Result<Vec<BenchRow>> {
    check_options(opts, world, world, available_memory())?;
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
/// command line that leads back here) through [`crate::launcher::run`] with the transport
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
        // Before any rank starts: the ranks would each refuse the same options.
        check_options(opts, world, world, available_memory())?;
        let launch = crate::launcher::LauncherOptions {
            env: vec![(crate::bootstrap::ENV_TRANSPORT.to_string(), transport.to_string())],
            prefix_output: false,
            ..Default::default()
        };
        return crate::launcher::run(world, self_command, &launch);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(min_bytes: usize, max_bytes: usize) -> BenchOptions {
        BenchOptions { min_bytes, max_bytes, iters: 3, warmup: 0, ..Default::default() }
    }

    #[test]
    fn impossible_sweeps_are_refused_naming_the_flag() {
        let e = run_inproc(4, &opts(4, 8)).unwrap_err().to_string();
        assert!(e.contains("--max-bytes 8 is below 4 x 4 ranks") && e.contains("--max-bytes 16"), "{e}");
        let e = check_options(&opts(64, 32), 2, 1, None).unwrap_err().to_string();
        assert!(e.contains("--min-bytes 64 is above --max-bytes 32"), "{e}");
        // Larger than memory, and near 2^63: refused before any buffer is allocated.
        let e = check_options(&opts(4, 1 << 40), 2, 2, Some(1 << 30)).unwrap_err().to_string();
        assert!(
            e.contains("2 local ranks' buffers need 4398046511104 bytes") && e.contains("lower --max-bytes"),
            "{e}"
        );
        let e = run_inproc(2, &opts(1 << 62, (1 << 63) + 5)).unwrap_err().to_string();
        assert!(e.contains("--max-bytes"), "{e}");
        // The smallest sweep that gives every rank one element runs.
        let rows = run_inproc(2, &opts(8, 8)).unwrap();
        assert_eq!((rows.len(), rows[0].count), (1, 2));
    }

    #[test]
    fn sizes_double_without_overflowing() {
        assert_eq!(sizes(4, 16), [4, 8, 16]);
        assert_eq!(sizes(0, 5), [4]);
        assert_eq!(sizes(1 << 62, usize::MAX), [1 << 62, 1 << 63]);
        assert!(sizes(8, 4).is_empty());
    }
}
