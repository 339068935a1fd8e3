//! Time of the peer-memory collective kernels (`trident_kernels::collective`) on a node of GPUs
//! joined by NVLink: predicted from what one rank's launch moved over the links and through
//! its own memory, and from how many cross-GPU hand-offs its critical path waits for.
//!
//! **The node** ([`Node`]): `gpus` GPUs, each able to send and to receive `link_bytes_per_s`
//! at once (NVLink behind NVSwitch: every GPU reaches every other at its full port bandwidth,
//! so traffic to several peers shares one GPU's port, not a per-pair link), its HBM, and three
//! latencies: a kernel launch, a flag hand-off (a release store on one GPU seen by an acquire
//! poll on another) and a remote access round (a dependent remote load's round trip, or the
//! acknowledgement of remote stores that a system-scope release waits for).
//!
//! **One launch** ([`Traffic`], per rank, every rank alike): bytes loaded from peers' memory,
//! bytes stored into peers' memory, and bytes of its own memory accessed. From the emulator's
//! exact counters ([`Traffic::from_stats`]: `LaunchStats::peer_loads`, `peer_stores` and the
//! global bytes requested), or from the kernels' formulas ([`Traffic::of`]), which a test holds
//! equal to the counters.
//!
//! **The time** ([`predict`]), with the ranks symmetric:
//!
//! ```text
//! t = launch + flags x flag_latency + rounds x remote_round
//!     + max(link_bytes / link_bytes_per_s, hbm_bytes / hbm_bytes_per_s)
//! link_bytes = peer_loads + peer_stores      (per direction: what this rank pulls in and pushes
//!                                             out, plus, by symmetry, the same from its peers)
//! hbm_bytes  = local + peer_loads + peer_stores (its own accesses and the peers' into it)
//! ```
//!
//! `flags` and `rounds` ([`CollectiveKernel::critical_path`]) come from the kernels' protocol,
//! not the counters: the ring waits for `ready` and then for each of its steps in turn
//! (`2 (w - 1)` for all-reduce, `w - 1` for reduce-scatter or all-gather), each step's stores
//! acknowledged before its release; one-shot exchanges `start`, reads its peers, exchanges
//! `end`; two-shot does the same with its stores to every peer's output acknowledged before
//! `end`. The blocks of a launch are pipelines that run at once, so a step's data time is
//! shared by the link, not added per block; the model assumes the grid is wide enough to keep
//! the link and the memory busy (it does not model a per-SM limit on requests in flight).
//! Every time it gives is a *prediction*.

use trident_hardware::{Hardware, Link};
use trident_simt::LaunchStats;

use crate::arch::{hardware, resolve};
use crate::ModelError;

/// Kernel launch cost between back-to-back kernels of one stream, seconds. NVIDIA Developer
/// Blog, "Getting Started with CUDA Graphs" (A. Gray, 2019): kernels of a few microseconds
/// launched in a stream take about 2 us more each than under a graph; we take 2 us.
pub const LAUNCH_S: f64 = 2.0e-6;

/// A flag hand-off across NVLink (a `st.release.sys` on one GPU seen by `ld.acquire.sys`
/// polling on another), seconds. NCCL's tuning model (`src/graph/tuning.cc`, `hwLat` for
/// NVLink) charges 0.6 us per ring hop for its LL protocol, whose data and flag travel in one
/// store, the pure hand-off; we take that.
pub const FLAG_LATENCY_S: f64 = 0.6e-6;

/// A remote access round over NVLink: a dependent remote load's round trip, or remote stores'
/// acknowledgement that a system-scope release waits for, seconds. An estimate: between NCCL's
/// per-hop NVLink latencies for LL (0.6 us, one one-way store) and Simple (3.4 us, which adds
/// a system fence and a whole chunk's transfer) in `src/graph/tuning.cc`; we take 1 us.
pub const REMOTE_ROUND_S: f64 = 1.0e-6;

/// A collective kernel of `trident_kernels::collective`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveKernel {
    /// Ring all-reduce.
    RingAllReduce,
    /// Ring reduce-scatter.
    RingReduceScatter,
    /// Ring all-gather.
    RingAllGather,
    /// One-shot all-reduce.
    OneShotAllReduce,
    /// Two-shot all-reduce.
    TwoShotAllReduce,
}

/// The hand-offs on a collective's critical path (see [`CollectiveKernel::critical_path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CriticalPath {
    /// Flag hand-offs waited for one after another.
    pub flags: u32,
    /// Remote access rounds waited for one after another.
    pub rounds: u32,
}

impl CollectiveKernel {
    /// Every kernel family.
    pub const ALL: [CollectiveKernel; 5] = [
        CollectiveKernel::RingAllReduce,
        CollectiveKernel::RingReduceScatter,
        CollectiveKernel::RingAllGather,
        CollectiveKernel::OneShotAllReduce,
        CollectiveKernel::TwoShotAllReduce,
    ];

    /// The family of kernel `name` (`ring_all_reduce_f32`, `one_shot_all_reduce_bf16`, ...).
    pub fn from_kernel_name(name: &str) -> Option<CollectiveKernel> {
        let family = name.strip_suffix("_f32").or_else(|| name.strip_suffix("_bf16"))?;
        Some(match family {
            "ring_all_reduce" => CollectiveKernel::RingAllReduce,
            "ring_reduce_scatter" => CollectiveKernel::RingReduceScatter,
            "ring_all_gather" => CollectiveKernel::RingAllGather,
            "one_shot_all_reduce" => CollectiveKernel::OneShotAllReduce,
            "two_shot_all_reduce" => CollectiveKernel::TwoShotAllReduce,
            _ => return None,
        })
    }

    /// What the critical path of one launch over `world` ranks waits for, from the kernels'
    /// flag protocol (`trident_kernels::collective::layout`):
    /// - ring all-reduce: `ready`, then `2 (w - 1)` steps, each a store round and a flag:
    ///   `2 w - 1` flags, `2 (w - 1)` rounds;
    /// - ring reduce-scatter or all-gather: `ready` and `w - 1` steps: `w` flags, `w - 1`
    ///   rounds;
    /// - one-shot: `start`, the reads of the peers' inputs, `end`: 2 flags, 1 round;
    /// - two-shot: `start`, the reads, the stores into every output, `end`: 2 flags, 2 rounds.
    pub fn critical_path(self, world: usize) -> CriticalPath {
        let w = world.max(1) as u32;
        if w == 1 {
            return CriticalPath { flags: 0, rounds: 0 };
        }
        match self {
            CollectiveKernel::RingAllReduce => CriticalPath { flags: 2 * w - 1, rounds: 2 * (w - 1) },
            CollectiveKernel::RingReduceScatter | CollectiveKernel::RingAllGather => {
                CriticalPath { flags: w, rounds: w - 1 }
            }
            CollectiveKernel::OneShotAllReduce => CriticalPath { flags: 2, rounds: 1 },
            CollectiveKernel::TwoShotAllReduce => CriticalPath { flags: 2, rounds: 2 },
        }
    }

    /// The factor nccl-tests turns an algorithm bandwidth into a bus bandwidth with:
    /// `2 (n - 1) / n` for all-reduce, `(n - 1) / n` for reduce-scatter and all-gather.
    pub fn busbw_factor(self, world: usize) -> f64 {
        let n = world.max(1) as f64;
        match self {
            CollectiveKernel::RingReduceScatter | CollectiveKernel::RingAllGather => (n - 1.0) / n,
            _ => 2.0 * (n - 1.0) / n,
        }
    }
}

/// What one rank's launch moves, bytes (every rank moves alike).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Loaded from peers' memory.
    pub peer_loads: f64,
    /// Stored into peers' memory.
    pub peer_stores: f64,
    /// Loaded from and stored into its own memory.
    pub local: f64,
}

impl Traffic {
    /// The traffic one launch's counters show: the bytes its global loads and stores asked of
    /// peers' memory and of its own device's (`LaunchStats::peer_loads`, `peer_stores`,
    /// `own_loads`, `own_stores`). Flag words (atomics) are left out: their cost is the
    /// hand-off latency; so are reads of the peer table, which no device owns (a few words
    /// every thread reads, cached on a GPU).
    pub fn from_stats(stats: &LaunchStats) -> Traffic {
        Traffic {
            peer_loads: stats.peer_loads as f64,
            peer_stores: stats.peer_stores as f64,
            local: (stats.own_loads + stats.own_stores) as f64,
        }
    }

    /// The traffic of `kernel` over `world` ranks on a message of `bytes` in elements of
    /// `element_bytes` (4 for f32, 2 for bf16), as the kernels move it, with `s = bytes / w`
    /// one segment and `f = 4 / element_bytes` (the ring's reduce-scatter stores f32 partial
    /// sums into the next rank's scratch):
    /// - ring all-reduce: stores `(w - 1) s f + (w - 1) s` into the next rank; locally loads
    ///   `w s` data, `(w - 1) s f` scratch and `(w - 1) s` data again, stores `s`;
    /// - ring reduce-scatter: stores `(w - 1) s f`; locally `w s + (w - 1) s f + s`;
    /// - ring all-gather: stores `(w - 1) s`; locally loads `(w - 1) s`;
    /// - one-shot: loads `(w - 1) bytes` from peers; locally loads and stores `bytes` each;
    /// - two-shot: loads and stores `(w - 1) s` each from and into peers; locally `s` each.
    ///
    /// Exact when `bytes` is a whole number of segments of whole elements.
    pub fn of(kernel: CollectiveKernel, bytes: f64, world: usize, element_bytes: usize) -> Traffic {
        let w = world.max(1) as f64;
        if world <= 1 {
            return Traffic::default();
        }
        let s = bytes / w;
        let f = 4.0 / element_bytes as f64;
        match kernel {
            CollectiveKernel::RingAllReduce => Traffic {
                peer_loads: 0.0,
                peer_stores: (w - 1.0) * s * f + (w - 1.0) * s,
                local: w * s + (w - 1.0) * s * f + (w - 1.0) * s + s,
            },
            CollectiveKernel::RingReduceScatter => Traffic {
                peer_loads: 0.0,
                peer_stores: (w - 1.0) * s * f,
                local: w * s + (w - 1.0) * s * f + s,
            },
            CollectiveKernel::RingAllGather => {
                Traffic { peer_loads: 0.0, peer_stores: (w - 1.0) * s, local: (w - 1.0) * s }
            }
            CollectiveKernel::OneShotAllReduce => {
                Traffic { peer_loads: (w - 1.0) * bytes, peer_stores: 0.0, local: 2.0 * bytes }
            }
            CollectiveKernel::TwoShotAllReduce => {
                Traffic { peer_loads: (w - 1.0) * s, peer_stores: (w - 1.0) * s, local: 2.0 * s }
            }
        }
    }

    /// Every figure times `factor` (the counters of one size scaled to another: the kernels'
    /// traffic is linear in the message).
    pub fn scaled(self, factor: f64) -> Traffic {
        Traffic {
            peer_loads: self.peer_loads * factor,
            peer_stores: self.peer_stores * factor,
            local: self.local * factor,
        }
    }
}

/// A node of GPUs joined by one kind of link (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The GPU's table name (`h100-sxm`).
    pub gpu: String,
    /// The link's table name (`nvlink4`).
    pub link: String,
    /// GPUs in the node.
    pub gpus: usize,
    /// Bytes/s one GPU sustains into its peers' memory, and from it, at once: the link table's
    /// per-direction bandwidth times its efficiency (for `nvlink4`, the H100 datasheet's
    /// 900 GB/s both directions halved, times the share nccl-tests' ring reaches).
    pub link_bytes_per_s: f64,
    /// Bytes/s of the GPU's own memory: the datasheet bandwidth times the hardware table's
    /// `memory_efficiency`, as the kernel model's DRAM term takes it.
    pub hbm_bytes_per_s: f64,
    /// See [`LAUNCH_S`].
    pub launch_s: f64,
    /// See [`FLAG_LATENCY_S`].
    pub flag_latency_s: f64,
    /// See [`REMOTE_ROUND_S`].
    pub remote_round_s: f64,
}

impl Node {
    /// A node of `gpus` GPUs `gpu` (a table name or an alias: `h100`, `h200`) over the GPU's
    /// own link (`gpu_link` in the hardware table).
    pub fn named(gpu: &str, gpus: usize) -> Result<Node, ModelError> {
        let hw: Hardware = hardware();
        let g = hw.gpu(resolve(gpu))?;
        let link = hw.link(&g.gpu_link)?;
        let hbm = g.memory_bytes_per_s() * g.memory_efficiency;
        Ok(Node::with_link(&g.name, link, gpus, hbm))
    }

    /// A node of `gpus` GPUs of memory bandwidth `hbm_bytes_per_s` over `link`, with the
    /// latencies of this module.
    pub fn with_link(gpu: &str, link: &Link, gpus: usize, hbm_bytes_per_s: f64) -> Node {
        Node {
            gpu: gpu.to_string(),
            link: link.name.clone(),
            gpus,
            link_bytes_per_s: link.busbw_bytes_per_s(),
            hbm_bytes_per_s,
            launch_s: LAUNCH_S,
            flag_latency_s: FLAG_LATENCY_S,
            remote_round_s: REMOTE_ROUND_S,
        }
    }
}

/// A predicted collective time and its terms, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollectiveTime {
    /// The whole: launch + flags + rounds + the larger of link and memory.
    pub total_s: f64,
    /// The kernel launch.
    pub launch_s: f64,
    /// Flag hand-offs and remote rounds on the critical path.
    pub latency_s: f64,
    /// Bytes over the link, per direction, at the link's rate.
    pub link_s: f64,
    /// Bytes through the GPU's own memory at its rate.
    pub memory_s: f64,
}

/// The time of one launch of `kernel` over `world` ranks of `node` that moves `traffic` per
/// rank (see the module documentation).
pub fn predict(node: &Node, kernel: CollectiveKernel, world: usize, traffic: &Traffic) -> CollectiveTime {
    let path = kernel.critical_path(world);
    let latency_s =
        f64::from(path.flags) * node.flag_latency_s + f64::from(path.rounds) * node.remote_round_s;
    let peer = traffic.peer_loads + traffic.peer_stores;
    let link_s = peer / node.link_bytes_per_s;
    let memory_s = (traffic.local + peer) / node.hbm_bytes_per_s;
    CollectiveTime {
        total_s: node.launch_s + latency_s + link_s.max(memory_s),
        launch_s: node.launch_s,
        latency_s,
        link_s,
        memory_s,
    }
}

/// The predicted time of an all-reduce of `bytes` (f32) by `kernel` over `world` ranks, from
/// the kernels' formulas ([`Traffic::of`]).
pub fn predict_bytes(node: &Node, kernel: CollectiveKernel, world: usize, bytes: f64) -> CollectiveTime {
    predict(node, kernel, world, &Traffic::of(kernel, bytes, world, 4))
}

/// The all-reduce kernels, in the order the table lists them.
pub const ALL_REDUCE_KERNELS: [CollectiveKernel; 3] =
    [CollectiveKernel::OneShotAllReduce, CollectiveKernel::TwoShotAllReduce, CollectiveKernel::RingAllReduce];

/// The fastest all-reduce kernel for `bytes` over `world` ranks (ties to the earlier of
/// [`ALL_REDUCE_KERNELS`]).
pub fn fastest_all_reduce(node: &Node, world: usize, bytes: f64) -> CollectiveKernel {
    let mut best = ALL_REDUCE_KERNELS[0];
    let mut best_t = predict_bytes(node, best, world, bytes).total_s;
    for k in &ALL_REDUCE_KERNELS[1..] {
        let t = predict_bytes(node, *k, world, bytes).total_s;
        if t < best_t {
            (best, best_t) = (*k, t);
        }
    }
    best
}

/// The sizes the table is found at: powers of two from 8 B to 8 GiB.
pub fn table_sizes() -> impl Iterator<Item = u64> {
    (3..=33).map(|p| 1u64 << p)
}

/// One row of the all-reduce table: for groups of `world` ranks, one-shot for messages of at
/// most `one_shot_max` bytes, two-shot up to `two_shot_max`, ring above (`None`: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutoffRow {
    /// Ranks in the group.
    pub world: usize,
    /// The largest message one-shot takes (0: none).
    pub one_shot_max: Option<u64>,
    /// The largest message two-shot takes.
    pub two_shot_max: Option<u64>,
}

/// The table row for `world` ranks: the largest message (in bytes, to the byte) for which
/// one-shot is the fastest, then the largest for which two-shot is (at least the one-shot
/// cut-off); `None` where that algorithm is still the fastest at the largest of
/// [`table_sizes`]. Each region is found over [`table_sizes`] and its end then bisected
/// between the last power of two inside it and the next: the model's times are sums of
/// straight lines in the message, so each algorithm's region is one interval.
pub fn all_reduce_cutoffs(node: &Node, world: usize) -> CutoffRow {
    let sizes: Vec<u64> = table_sizes().collect();
    let last = *sizes.last().expect("sizes");
    let is = |k: CollectiveKernel, b: u64| fastest_all_reduce(node, world, b as f64) == k;
    // The last byte count in (from, from * 2] for which `k` is still the fastest.
    let edge = |k: CollectiveKernel, from: u64| {
        let (mut lo, mut hi) = (from, from * 2);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if is(k, mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let end = |k: CollectiveKernel, floor: u64| match sizes.iter().copied().filter(|&b| is(k, b)).max() {
        Some(b) if b == last => None,
        Some(b) => Some(edge(k, b).max(floor)),
        None => Some(floor),
    };
    let one = end(CollectiveKernel::OneShotAllReduce, 0);
    let two = one.and_then(|o| end(CollectiveKernel::TwoShotAllReduce, o));
    CutoffRow { world, one_shot_max: one, two_shot_max: two }
}

/// The world sizes the table has a row for: 2 to 8, the GPUs of one node.
pub const TABLE_WORLDS: std::ops::RangeInclusive<usize> = 2..=8;

/// The all-reduce table for the world sizes [`TABLE_WORLDS`] in its text form: a comment line, then one
/// line per world size, tab-separated: `world`, `one_shot_max_bytes`, `two_shot_max_bytes`
/// (`-`: no limit).
pub fn all_reduce_table(node: &Node) -> String {
    let mut out = format!(
        "# all-reduce cut-offs predicted for a node of {} over {} (trident bench collectives)\n\
         # world\tone_shot_max_bytes\ttwo_shot_max_bytes\n",
        node.gpu, node.link
    );
    let field = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |b| b.to_string());
    for world in TABLE_WORLDS {
        let row = all_reduce_cutoffs(node, world);
        out.push_str(&format!("{world}\t{}\t{}\n", field(row.one_shot_max), field(row.two_shot_max)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Node {
        Node::named("h100", 8).unwrap()
    }

    #[test]
    fn the_h100_node_reads_the_link_and_memory_tables() {
        let n = h100();
        assert_eq!((n.gpu.as_str(), n.link.as_str(), n.gpus), ("h100-sxm", "nvlink4", 8));
        // 450 GB/s per direction x 0.80 efficiency; 3.35 TB/s x 0.85.
        assert!((n.link_bytes_per_s - 360e9).abs() < 1e6, "{}", n.link_bytes_per_s);
        assert!((n.hbm_bytes_per_s - 2.8475e12).abs() < 1e6, "{}", n.hbm_bytes_per_s);
        assert!(Node::named("no-such-gpu", 8).is_err());
    }

    #[test]
    fn ring_bus_bandwidth_approaches_the_link_for_large_messages() {
        let n = h100();
        for world in [2, 4, 8] {
            let k = CollectiveKernel::RingAllReduce;
            let bytes = 8.0 * (1u64 << 30) as f64;
            let t = predict_bytes(&n, k, world, bytes);
            let busbw = bytes / t.total_s * k.busbw_factor(world);
            assert!(busbw < n.link_bytes_per_s && busbw > 0.99 * n.link_bytes_per_s, "w {world}: {busbw}");
            // Small messages are latency: far below.
            let t = predict_bytes(&n, k, world, 1024.0);
            assert!(1024.0 / t.total_s * k.busbw_factor(world) < 0.01 * n.link_bytes_per_s);
        }
    }

    #[test]
    fn one_shot_wins_small_messages_and_loses_large_ones_on_eight_gpus() {
        let n = h100();
        assert_eq!(fastest_all_reduce(&n, 8, 1024.0), CollectiveKernel::OneShotAllReduce);
        assert_ne!(fastest_all_reduce(&n, 8, (64 << 20) as f64), CollectiveKernel::OneShotAllReduce);
        // One-shot pulls (w - 1) x the message in; the others move 2 (w - 1) / w of it.
        let big = (1u64 << 30) as f64;
        let one = predict_bytes(&n, CollectiveKernel::OneShotAllReduce, 8, big).link_s;
        let two = predict_bytes(&n, CollectiveKernel::TwoShotAllReduce, 8, big).link_s;
        assert!((one / two - 7.0 / 1.75).abs() < 1e-9, "{one} {two}");
    }

    #[test]
    fn latency_terms_follow_the_protocol() {
        let n = h100();
        let t = predict_bytes(&n, CollectiveKernel::RingAllReduce, 8, 0.0);
        let expect = LAUNCH_S + 15.0 * FLAG_LATENCY_S + 14.0 * REMOTE_ROUND_S;
        assert!((t.total_s - expect).abs() < 1e-15, "{t:?}");
        let t = predict_bytes(&n, CollectiveKernel::OneShotAllReduce, 8, 0.0);
        assert!((t.total_s - (LAUNCH_S + 2.0 * FLAG_LATENCY_S + REMOTE_ROUND_S)).abs() < 1e-15);
        assert_eq!(CollectiveKernel::TwoShotAllReduce.critical_path(1), CriticalPath { flags: 0, rounds: 0 });
    }

    #[test]
    fn traffic_is_linear_in_the_message() {
        for k in CollectiveKernel::ALL {
            let a = Traffic::of(k, 1024.0, 8, 4);
            let b = Traffic::of(k, 4096.0, 8, 4);
            assert_eq!(a.scaled(4.0), b, "{k:?}");
        }
    }

    #[test]
    fn kernel_names_map_to_families() {
        assert_eq!(
            CollectiveKernel::from_kernel_name("two_shot_all_reduce_bf16"),
            Some(CollectiveKernel::TwoShotAllReduce)
        );
        assert_eq!(
            CollectiveKernel::from_kernel_name("ring_all_gather_f32"),
            Some(CollectiveKernel::RingAllGather)
        );
        assert_eq!(CollectiveKernel::from_kernel_name("layernorm_f32"), None);
    }

    #[test]
    fn a_cut_off_is_the_last_byte_its_algorithm_wins() {
        let n = h100();
        for world in [4, 8] {
            let row = all_reduce_cutoffs(&n, world);
            let o = row.one_shot_max.expect("one-shot ends");
            assert_eq!(fastest_all_reduce(&n, world, o as f64), CollectiveKernel::OneShotAllReduce);
            assert_ne!(fastest_all_reduce(&n, world, (o + 1) as f64), CollectiveKernel::OneShotAllReduce);
        }
    }

    #[test]
    fn the_table_rows_are_ordered() {
        let n = h100();
        for world in [2, 4, 8] {
            let row = all_reduce_cutoffs(&n, world);
            if let (Some(o), Some(t)) = (row.one_shot_max, row.two_shot_max) {
                assert!(o <= t, "{row:?}");
            }
            if row.one_shot_max.is_none() {
                assert!(row.two_shot_max.is_none());
            }
        }
        let text = all_reduce_table(&n);
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 7, "{text}");
    }
}
