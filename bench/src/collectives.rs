//! `trident bench collectives --device emu`: the peer-memory collective kernels
//! (`trident_kernels::collective`) run on `world` emulated devices that map each other's
//! memory, checked against a host reference, counted exactly, and their time PREDICTED for a
//! node of named GPUs by the collective time model (`trident_perfmodel::collective`).
//!
//! Each rank is one host thread driving its own emulated device; the kernel of every rank is
//! launched at once (the kernels wait for each other through flags in peer memory, as they do
//! on GPUs). Every rank's buffers are registered with the emulator as that device's memory
//! (`Registration::set_owner`), so a launch's counters split its global bytes into its own
//! memory's and its peers' (`LaunchStats::peer_loads`, `peer_stores`, `own_loads`,
//! `own_stores`): the traffic the model prices.
//!
//! Inputs are small integers (`-9 ..= 9`), so every sum is exact in f32 whatever order the
//! kernel adds in, and the output is compared for equality: `#wrong` counts the elements
//! (over every rank) that differ.
//!
//! Messages larger than the largest emulated one are predicted from that one's counters scaled
//! linearly: the kernels' traffic is linear in the message (`Traffic::of` states it, and the
//! tests hold the counters to it), and their critical path does not depend on it.

use std::fmt;
use std::time::Duration;

use trident::launch::{choose_all_reduce, Algorithm};
use trident_kernels::collective::layout::{flag_words, part, status_words, TABLE_WORDS_PER_RANK};
use trident_kernels::collective::wait::describe_timeout;
use trident_kernels::collective::{one_shot, ring, two_shot};
use trident_kernels::trident_simt::{
    host_order, join_host_order, launch, register, set_emulated_device, HostKernel, LaunchConfig,
    LaunchStats, Registration,
};
use trident_perfmodel::collective::{predict, CollectiveKernel, CollectiveTime, Node, Traffic};

/// Threads per block, as `trident_ops::launch::COLLECTIVE_THREADS`.
pub const THREADS: u32 = 128;

/// Blocks per kernel, as the trainer's device communicator launches them.
pub const BLOCKS: u32 = 2;

/// How long one wait for a peer may take (a correct run never waits that long).
const TIMEOUT: Duration = Duration::from_secs(120);

/// Bytes of one f32, the element the benchmark moves (nccl-tests' `float`).
const ELEMENT: u64 = 4;

/// The largest world size: the ranks of one node.
pub const MAX_WORLD: usize = 8;

/// What `trident bench collectives --device emu` runs.
#[derive(Clone, Debug)]
pub struct EmuOptions {
    /// The GPU the node is made of (`h100`, `h200`, a hardware-table name).
    pub gpu: String,
    /// Ranks, 2 ..= 8.
    pub world: usize,
    /// Smallest message, bytes (at least one f32).
    pub min_bytes: u64,
    /// Largest message, bytes.
    pub max_bytes: u64,
    /// Largest message run on the emulator; larger ones are predicted from its counters.
    pub emulate_max_bytes: u64,
}

/// Why the benchmark cannot run, naming the flag.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A flag's value is out of range.
    #[error("{flag} {value}: {why}")]
    Flag {
        /// The flag (`--max-bytes`).
        flag: &'static str,
        /// Its value, as given.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A kernel failed on the emulator.
    #[error("{kernel} on {world} emulated devices, {bytes} bytes: {why}")]
    Kernel {
        /// The kernel.
        kernel: &'static str,
        /// Ranks.
        world: usize,
        /// The message.
        bytes: u64,
        /// What the emulator or a rank's status said.
        why: String,
    },
}

fn flag(flag: &'static str, value: impl fmt::Display, why: impl Into<String>) -> BenchError {
    BenchError::Flag { flag, value: value.to_string(), why: why.into() }
}

impl EmuOptions {
    /// Checks the options' ranges, naming the flag at fault.
    pub fn check(&self) -> Result<Node, BenchError> {
        if !(2..=MAX_WORLD).contains(&self.world) {
            return Err(flag(
                "--world-size",
                self.world,
                format!("the node model covers 2 to {MAX_WORLD} GPUs of one node"),
            ));
        }
        if self.min_bytes < ELEMENT {
            return Err(flag("--min-bytes", self.min_bytes, "the smallest message is one f32 (4 bytes)"));
        }
        if self.max_bytes < self.min_bytes {
            return Err(flag(
                "--max-bytes",
                self.max_bytes,
                format!("less than --min-bytes {}", self.min_bytes),
            ));
        }
        // The kernels take a u32 element count.
        let most = u64::from(u32::MAX) * ELEMENT;
        if self.max_bytes > most {
            return Err(flag(
                "--max-bytes",
                self.max_bytes,
                format!("the kernels take at most 2^32 - 1 elements ({most} bytes of f32)"),
            ));
        }
        if self.emulate_max_bytes < self.min_bytes.min(self.max_bytes) {
            return Err(flag(
                "--emulate-max-bytes",
                self.emulate_max_bytes,
                format!(
                    "at least the smallest message (--min-bytes {}) must run on the emulator",
                    self.min_bytes
                ),
            ));
        }
        Node::named(&self.gpu, self.world).map_err(|e| flag("--gpu", &self.gpu, e.to_string()))
    }

    /// The message sizes: doubling from `min_bytes` up to `max_bytes`.
    pub fn sizes(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut b = self.min_bytes;
        while b <= self.max_bytes {
            out.push(b);
            match b.checked_mul(2) {
                Some(next) => b = next,
                None => break,
            }
        }
        out
    }
}

/// A collective operation of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// All-reduce (sum).
    AllReduce,
    /// Reduce-scatter (sum).
    ReduceScatter,
    /// All-gather.
    AllGather,
}

impl Op {
    /// nccl-tests' name.
    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::ReduceScatter => "reduce_scatter",
            Op::AllGather => "all_gather",
        }
    }

    /// nccl-tests' `redop` column.
    pub fn redop(self) -> &'static str {
        match self {
            Op::AllGather => "none",
            _ => "sum",
        }
    }
}

/// The algorithm name of a kernel family.
pub fn algorithm_name(kernel: CollectiveKernel) -> &'static str {
    match kernel {
        CollectiveKernel::OneShotAllReduce => "one_shot",
        CollectiveKernel::TwoShotAllReduce => "two_shot",
        _ => "ring",
    }
}

/// The kernel family an all-reduce algorithm runs.
pub fn all_reduce_kernel(algorithm: Algorithm) -> CollectiveKernel {
    match algorithm {
        Algorithm::OneShot => CollectiveKernel::OneShotAllReduce,
        Algorithm::TwoShot => CollectiveKernel::TwoShotAllReduce,
        Algorithm::Ring => CollectiveKernel::RingAllReduce,
    }
}

fn op_of(kernel: CollectiveKernel) -> Op {
    match kernel {
        CollectiveKernel::RingReduceScatter => Op::ReduceScatter,
        CollectiveKernel::RingAllGather => Op::AllGather,
        _ => Op::AllReduce,
    }
}

fn host_kernel(kernel: CollectiveKernel) -> &'static HostKernel {
    let (list, name): (&'static [HostKernel], &str) = match kernel {
        CollectiveKernel::RingAllReduce => (ring::HOST_KERNELS, "ring_all_reduce_f32"),
        CollectiveKernel::RingReduceScatter => (ring::HOST_KERNELS, "ring_reduce_scatter_f32"),
        CollectiveKernel::RingAllGather => (ring::HOST_KERNELS, "ring_all_gather_f32"),
        CollectiveKernel::OneShotAllReduce => (one_shot::HOST_KERNELS, "one_shot_all_reduce_f32"),
        CollectiveKernel::TwoShotAllReduce => (two_shot::HOST_KERNELS, "two_shot_all_reduce_f32"),
    };
    list.iter().find(|k| k.name == name).expect("every collective kernel is in its module's list")
}

/// Rank `r`'s input element `i`: a small integer, so sums are exact in any order.
fn input(r: usize, i: usize) -> f32 {
    ((r * 31 + i * 7) % 19) as f32 - 9.0
}

/// One emulated run: every rank's counters and the elements that differ from the reference.
#[derive(Clone, Debug)]
pub struct Emulated {
    /// Each rank's launch counters.
    pub stats: Vec<LaunchStats>,
    /// Elements, over every rank's result, that differ from the host reference.
    pub wrong: u64,
}

impl Emulated {
    /// The mean traffic per rank.
    pub fn traffic(&self) -> Traffic {
        let n = self.stats.len().max(1) as f64;
        let mut t = Traffic::default();
        for s in &self.stats {
            let r = Traffic::from_stats(s);
            t.peer_loads += r.peer_loads / n;
            t.peer_stores += r.peer_stores / n;
            t.local += r.local / n;
        }
        t
    }
}

/// Runs `kernel` over `n` f32 on `world` emulated devices with `blocks` blocks each, and checks
/// the result against the host reference.
pub fn emulate(
    kernel: CollectiveKernel,
    world: usize,
    n: usize,
    blocks: u32,
) -> Result<Emulated, BenchError> {
    let hk = host_kernel(kernel);
    let fail = |why: String| BenchError::Kernel { kernel: hk.name, world, bytes: n as u64 * ELEMENT, why };
    let seg_of = |i: usize| (0..world).find(|&p| i < part(n, world, p).1).unwrap_or(world - 1);
    let data: Vec<Vec<f32>> = (0..world)
        .map(|r| {
            (0..n)
                .map(|i| {
                    // All-gather's input is segment `r`; the rest must be overwritten.
                    if kernel == CollectiveKernel::RingAllGather && seg_of(i) != r {
                        f32::NAN
                    } else {
                        input(r, i)
                    }
                })
                .collect()
        })
        .collect();
    let out: Vec<Vec<f32>> = vec![vec![0.0; n]; world];
    let scratch: Vec<Vec<f32>> = vec![vec![0.0; n]; world];
    let flags: Vec<Vec<u32>> = vec![vec![0; flag_words(world, blocks as usize)]; world];
    let status: Vec<Vec<u32>> = vec![vec![0; status_words(blocks as usize)]; world];
    let mut held: Vec<Registration> = Vec::new();
    for r in 0..world {
        for (buffer, label) in [(&data[r], "data"), (&out[r], "output"), (&scratch[r], "scratch")] {
            let reg = register(buffer.as_ptr().cast(), buffer.len() * 4, true, label);
            reg.share_with_peers();
            reg.set_owner(r as u32);
            held.push(reg);
        }
        let reg = register(flags[r].as_ptr().cast(), flags[r].len() * 4, true, "flags");
        reg.share_with_peers();
        reg.set_owner(r as u32);
        held.push(reg);
        held.push(register(status[r].as_ptr().cast(), status[r].len() * 4, true, "status"));
    }
    let mut table = vec![0u64; TABLE_WORDS_PER_RANK * world];
    for p in 0..world {
        table[p] = data[p].as_ptr() as u64;
        table[world + p] = scratch[p].as_ptr() as u64;
        table[2 * world + p] = flags[p].as_ptr() as u64;
        table[3 * world + p] = out[p].as_ptr() as u64;
    }
    held.push(register(table.as_ptr().cast(), table.len() * 8, true, "peer table"));
    let args: Vec<[u64; 7]> = (0..world)
        .map(|r| {
            [
                table.as_ptr() as u64,
                n as u64,
                r as u64,
                world as u64,
                1,
                TIMEOUT.as_nanos() as u64,
                status[r].as_ptr() as u64,
            ]
        })
        .collect();
    let before = host_order();
    let results: Vec<(Result<LaunchStats, String>, _)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world)
            .map(|r| {
                let (before, args, status) = (&before, &args[r], &status[r]);
                scope.spawn(move || {
                    set_emulated_device(Some(r as u32));
                    join_host_order(before);
                    // SAFETY: every pointer word of `args` and of the table addresses a buffer
                    // registered above with the lengths the layout needs for `n`, `world` and
                    // `blocks`, alive until every rank's thread is joined; every rank launches
                    // the same kernel, length, `seq` and grid.
                    let launched = unsafe { launch(hk, &LaunchConfig::linear(blocks, THREADS), args) };
                    let result = match launched {
                        Ok(stats) => match describe_timeout(hk.name, r as u32, status) {
                            Some(t) => Err(t.to_string()),
                            None => Ok(stats),
                        },
                        Err(e) => Err(e.to_string()),
                    };
                    (result, host_order())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank's thread panicked")).collect()
    });
    let mut stats = Vec::with_capacity(world);
    for (r, (result, order)) in results.into_iter().enumerate() {
        join_host_order(&order);
        stats.push(result.map_err(|e| fail(format!("rank {r}: {e}")))?);
    }
    drop(held);
    let wrong = count_wrong(kernel, world, n, &data, &out);
    Ok(Emulated { stats, wrong })
}

/// Elements of the ranks' results (`data` in place for the ring kernels, `out` for one-shot
/// and two-shot) that differ from the host reference: for all-reduce every element of every
/// rank, for reduce-scatter segment `r` of rank `r`, for all-gather every element (segment
/// `p` from rank `p`'s input).
#[allow(clippy::needless_range_loop)]
fn count_wrong(kernel: CollectiveKernel, world: usize, n: usize, data: &[Vec<f32>], out: &[Vec<f32>]) -> u64 {
    let seg_of = |i: usize| (0..world).find(|&p| i < part(n, world, p).1).unwrap_or(world - 1);
    let sum = |i: usize| (0..world).map(|r| input(r, i)).sum::<f32>();
    let mut wrong = 0u64;
    for r in 0..world {
        let (range, result) = match kernel {
            CollectiveKernel::OneShotAllReduce | CollectiveKernel::TwoShotAllReduce => ((0, n), &out[r]),
            CollectiveKernel::RingReduceScatter => (part(n, world, r), &data[r]),
            CollectiveKernel::RingAllReduce | CollectiveKernel::RingAllGather => ((0, n), &data[r]),
        };
        for (i, got) in result.iter().enumerate().take(range.1).skip(range.0) {
            let expect = if kernel == CollectiveKernel::RingAllGather { input(seg_of(i), i) } else { sum(i) };
            if got.to_bits() != expect.to_bits() {
                wrong += 1;
            }
        }
    }
    wrong
}

/// One line of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// The collective.
    pub op: Op,
    /// `ring`, `one_shot`, `two_shot`.
    pub algorithm: &'static str,
    /// The message, bytes.
    pub bytes: u64,
    /// f32 elements.
    pub count: u64,
    /// The predicted time and its terms.
    pub time: CollectiveTime,
    /// Algorithm bandwidth, bytes/s: `bytes / time`.
    pub algbw: f64,
    /// Bus bandwidth, bytes/s (nccl-tests' factors).
    pub busbw: f64,
    /// Wrong elements, where the size ran on the emulator.
    pub wrong: Option<u64>,
}

/// The benchmark's result: rows per kernel family, and the all-reduce the runtime's table
/// chooses at each size.
#[derive(Clone, Debug)]
pub struct Report {
    /// The node predicted for.
    pub node: Node,
    /// Ranks.
    pub world: usize,
    /// The largest size that ran on the emulator.
    pub emulated_max_bytes: u64,
    /// Per kernel family (in [`CollectiveKernel::ALL`]'s order), its rows.
    pub rows: Vec<(CollectiveKernel, Vec<Row>)>,
}

impl Report {
    /// The rows of `kernel`.
    pub fn rows_of(&self, kernel: CollectiveKernel) -> &[Row] {
        self.rows.iter().find(|(k, _)| *k == kernel).map_or(&[], |(_, r)| r.as_slice())
    }

    /// Per size, the all-reduce algorithm the runtime chooses and its row.
    pub fn chosen(&self) -> Vec<(Algorithm, Row)> {
        let ring = self.rows_of(CollectiveKernel::RingAllReduce);
        ring.iter()
            .enumerate()
            .map(|(i, r)| {
                let algorithm = choose_all_reduce(r.bytes as usize, self.world);
                (algorithm, self.rows_of(all_reduce_kernel(algorithm))[i].clone())
            })
            .collect()
    }
}

/// Runs the benchmark: every size up to `emulate_max_bytes` on the emulator, the rest scaled.
pub fn run(opts: &EmuOptions, mut progress: impl FnMut(&str)) -> Result<Report, BenchError> {
    let node = opts.check()?;
    let sizes = opts.sizes();
    let mut rows = Vec::new();
    let mut emulated_max_bytes = 0;
    for kernel in CollectiveKernel::ALL {
        let mut krows = Vec::new();
        let mut last: Option<(u64, Traffic)> = None;
        for &bytes in &sizes {
            let count = bytes / ELEMENT;
            let (traffic, wrong) = match last {
                Some((at, t)) if bytes > opts.emulate_max_bytes => (t.scaled(bytes as f64 / at as f64), None),
                _ => {
                    progress(&format!(
                        "{} {} bytes on {} emulated devices",
                        host_kernel(kernel).name,
                        bytes,
                        opts.world
                    ));
                    let e = emulate(kernel, opts.world, count as usize, BLOCKS)?;
                    let t = e.traffic();
                    last = Some((count * ELEMENT, t));
                    emulated_max_bytes = emulated_max_bytes.max(bytes);
                    (t, Some(e.wrong))
                }
            };
            let time = predict(&node, kernel, opts.world, &traffic);
            let moved = (count * ELEMENT) as f64;
            let algbw = moved / time.total_s;
            krows.push(Row {
                op: op_of(kernel),
                algorithm: algorithm_name(kernel),
                bytes,
                count,
                time,
                algbw,
                busbw: algbw * kernel.busbw_factor(opts.world),
                wrong,
            });
        }
        rows.push((kernel, krows));
    }
    Ok(Report { node, world: opts.world, emulated_max_bytes, rows })
}

/// The report as nccl-tests' columns, every time labelled PREDICTED.
pub fn format(report: &Report) -> String {
    let mut out = String::new();
    let node = &report.node;
    out.push_str(&format!(
        "# PREDICTED for {} x {} over {} ({:.0} GB/s per direction sustained, launch {:.1} us, flag \
         hand-off {:.1} us, remote round {:.1} us) by the collective time model from exact emulator \
         counters; not measured.\n",
        report.world,
        node.gpu,
        node.link,
        node.link_bytes_per_s / 1e9,
        node.launch_s * 1e6,
        node.flag_latency_s * 1e6,
        node.remote_round_s * 1e6
    ));
    let header =
        "#       size(B)        count   type   redop  PREDICTED time(us)  algbw(GB/s)  busbw(GB/s)  #wrong\n";
    let line = |r: &Row| {
        format!(
            "{:>15} {:>12} {:>6} {:>7} {:>19.2} {:>12.2} {:>12.2} {:>7}\n",
            r.bytes,
            r.count,
            "float",
            r.op.redop(),
            r.time.total_s * 1e6,
            r.algbw / 1e9,
            r.busbw / 1e9,
            r.wrong.map_or_else(|| "n/e*".to_string(), |w| w.to_string())
        )
    };
    for (kernel, rows) in &report.rows {
        out.push_str(&format!(
            "\n# {} / {} ({})\n",
            op_of(*kernel).name(),
            algorithm_name(*kernel),
            host_kernel(*kernel).name
        ));
        out.push_str(header);
        for r in rows {
            out.push_str(&line(r));
        }
    }
    out.push_str("\n# all_reduce / chosen (the runtime's table, trident_ops::launch::choose_all_reduce)\n");
    out.push_str("#       size(B)  chosen    PREDICTED time(us)  busbw(GB/s)  fastest predicted\n");
    for (algorithm, r) in report.chosen() {
        let fastest = [
            CollectiveKernel::OneShotAllReduce,
            CollectiveKernel::TwoShotAllReduce,
            CollectiveKernel::RingAllReduce,
        ]
        .into_iter()
        .map(|k| {
            (
                k,
                report
                    .rows_of(k)
                    .iter()
                    .find(|x| x.bytes == r.bytes)
                    .map_or(f64::INFINITY, |x| x.time.total_s),
            )
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or("-", |(k, _)| algorithm_name(k));
        out.push_str(&format!(
            "{:>15}  {:<8} {:>19.2} {:>12.2}  {}\n",
            r.bytes,
            algorithm_name(all_reduce_kernel(algorithm)),
            r.time.total_s * 1e6,
            r.busbw / 1e9,
            fastest
        ));
    }
    out.push_str(&format!(
        "\n* n/e: not emulated. Sizes above {} bytes are predicted from the {}-byte run's counters scaled \
         linearly (the kernels' traffic is linear in the message; tested); #wrong counts elements over \
         every rank that differ from the host reference.\n",
        report.emulated_max_bytes, report.emulated_max_bytes
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_exact_and_its_counters_are_the_model_formulas() {
        // 3 * 2 * 8 = 48 elements: whole segments and slices on 3 ranks with 2 blocks.
        for world in [2, 3] {
            let n = 48 * world;
            for kernel in CollectiveKernel::ALL {
                let e = emulate(kernel, world, n, BLOCKS).unwrap();
                assert_eq!(e.wrong, 0, "{kernel:?} on {world}");
                let want = Traffic::of(kernel, (n as u64 * ELEMENT) as f64, world, 4);
                for (r, s) in e.stats.iter().enumerate() {
                    assert_eq!(Traffic::from_stats(s), want, "{kernel:?}, world {world}, rank {r}");
                    assert!(s.peer_atomics > 0 || world == 1, "the flags cross to peers");
                }
            }
        }
    }

    #[test]
    fn counters_are_linear_in_the_message() {
        for kernel in CollectiveKernel::ALL {
            let a = emulate(kernel, 4, 64, BLOCKS).unwrap().traffic();
            let b = emulate(kernel, 4, 256, BLOCKS).unwrap().traffic();
            assert_eq!(a.scaled(4.0), b, "{kernel:?}");
        }
    }

    #[test]
    fn a_wrong_element_is_counted() {
        let (world, n) = (3, 10);
        let sums: Vec<f32> = (0..n).map(|i| (0..world).map(|r| input(r, i)).sum()).collect();
        let mut data = vec![sums.clone(); world];
        let out = vec![vec![f32::NAN; n]; world];
        assert_eq!(count_wrong(CollectiveKernel::RingAllReduce, world, n, &data, &out), 0);
        data[1][4] += 1.0;
        assert_eq!(count_wrong(CollectiveKernel::RingAllReduce, world, n, &data, &out), 1);
        // Two-shot's result is the output, all NaN here: every element of every rank.
        assert_eq!(
            count_wrong(CollectiveKernel::TwoShotAllReduce, world, n, &data, &out),
            (world * n) as u64
        );
        // Reduce-scatter checks segment r of rank r only: element 4 is in segment 1.
        assert_eq!(count_wrong(CollectiveKernel::RingReduceScatter, world, n, &data, &out), 1);
    }

    #[test]
    fn bad_options_name_their_flag() {
        let ok = EmuOptions {
            gpu: "h100".into(),
            world: 8,
            min_bytes: 8,
            max_bytes: 1 << 20,
            emulate_max_bytes: 4096,
        };
        assert!(ok.check().is_ok());
        let e = |o: EmuOptions| o.check().unwrap_err().to_string();
        assert!(e(EmuOptions { world: 1, ..ok.clone() }).starts_with("--world-size 1"));
        assert!(e(EmuOptions { world: 9, ..ok.clone() }).starts_with("--world-size 9"));
        assert!(e(EmuOptions { max_bytes: 4, ..ok.clone() })
            .starts_with("--max-bytes 4: less than --min-bytes 8"));
        assert!(e(EmuOptions { min_bytes: 2, ..ok.clone() }).starts_with("--min-bytes 2"));
        assert!(e(EmuOptions { max_bytes: u64::MAX, ..ok.clone() }).starts_with("--max-bytes"));
        assert!(e(EmuOptions { gpu: "nope".into(), ..ok.clone() }).starts_with("--gpu nope"));
        assert_eq!(ok.sizes().len(), 18);
    }

    #[test]
    fn larger_sizes_are_scaled_and_the_chosen_row_is_the_table_s() {
        let o = EmuOptions {
            gpu: "h100".into(),
            world: 4,
            min_bytes: 64,
            max_bytes: 1024,
            emulate_max_bytes: 256,
        };
        let report = run(&o, |_| {}).unwrap();
        assert_eq!(report.emulated_max_bytes, 256);
        for (k, rows) in &report.rows {
            assert_eq!(rows.len(), 5, "{k:?}");
            assert!(rows.iter().all(|r| r.bytes > 256 || r.wrong == Some(0)), "{k:?}");
            assert!(rows.iter().all(|r| r.bytes <= 256 || r.wrong.is_none()), "{k:?}");
        }
        for (algorithm, row) in report.chosen() {
            assert_eq!(row.algorithm, algorithm_name(all_reduce_kernel(algorithm)));
        }
        let text = format(&report);
        assert!(text.contains("PREDICTED"), "{text}");
    }
}
