//! Launch wrappers of the collective kernels over peer memory
//! (`trident_kernels::collective`): ring reduce-scatter, all-gather and all-reduce, one-shot
//! and two-shot all-reduce, point-to-point [`send`] and [`recv`], and [`broadcast`], for f32
//! and bf16 (`u16` bits, summed in f32), and the choice of all-reduce algorithm by message
//! size and world size ([`choose_all_reduce`], from the table the collective benchmark writes,
//! [`ALL_REDUCE_TABLE_TSV`]).
//!
//! Every rank of a group launches the same collective, with the same length, the same number
//! `seq` and the same grid, at about the same time: each kernel waits for its peers through
//! flags in their memory. What each rank passes ([`Peers`]) is its peer table (the addresses of
//! every rank's data, scratch, flag and output buffers, as this rank reaches them), its status
//! words and its place in the group; the layout of the table and of the flags, and the flag
//! protocol, are in `trident_kernels::collective::layout`. A wait that passes its deadline ends
//! the kernel and leaves the peer's rank in the status words; [`timeout`] reads them back into
//! a message that names it.

use std::time::Duration;

use bytemuck::Pod;
use trident_kernels::collective::layout;
use trident_kernels::collective::wait::describe_timeout;
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result};

/// Words of the peer table per rank: data, f32 scratch, flags and output buffer addresses.
pub const TABLE_WORDS_PER_RANK: usize = layout::TABLE_WORDS_PER_RANK;

/// Threads per block of every collective kernel.
pub const COLLECTIVE_THREADS: u32 = 128;

/// The `u32` flag words each rank needs for `world` ranks and kernels of `blocks` blocks.
pub const fn flag_words(world: usize, blocks: usize) -> usize {
    layout::flag_words(world, blocks)
}

/// The `u32` status words each rank needs for kernels of `blocks` blocks.
pub const fn status_words(blocks: usize) -> usize {
    layout::status_words(blocks)
}

/// An element the collective kernels move: f32, or bf16 as its `u16` bits. Sums are taken in
/// f32 either way.
pub trait CollectiveElement: Pod {
    /// The kernels' name suffix (`f32`, `bf16`).
    const SUFFIX: &'static str;
    /// The name of kernel `family` (`ring_all_reduce`, ...) for this element.
    fn kernel(family: Family) -> &'static str;
}

/// A collective kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Ring all-reduce, in place in the data buffers.
    RingAllReduce,
    /// Ring reduce-scatter, in place: segment `rank` of the data gets the sums.
    RingReduceScatter,
    /// Ring all-gather, in place: segment `rank` of the data is the input.
    RingAllGather,
    /// One-shot all-reduce into the output buffers.
    OneShotAllReduce,
    /// Two-shot all-reduce into the output buffers.
    TwoShotAllReduce,
    /// The sending side of a point-to-point transfer: this rank's data into the peer's output.
    Send,
    /// The receiving side of a point-to-point transfer, into this rank's output.
    Recv,
    /// Broadcast from a root rank, in place in the data buffers.
    Broadcast,
}

impl CollectiveElement for f32 {
    const SUFFIX: &'static str = "f32";
    fn kernel(family: Family) -> &'static str {
        match family {
            Family::RingAllReduce => "ring_all_reduce_f32",
            Family::RingReduceScatter => "ring_reduce_scatter_f32",
            Family::RingAllGather => "ring_all_gather_f32",
            Family::OneShotAllReduce => "one_shot_all_reduce_f32",
            Family::TwoShotAllReduce => "two_shot_all_reduce_f32",
            Family::Send => "send_f32",
            Family::Recv => "recv_f32",
            Family::Broadcast => "broadcast_f32",
        }
    }
}

/// bf16, as its bits.
impl CollectiveElement for u16 {
    const SUFFIX: &'static str = "bf16";
    fn kernel(family: Family) -> &'static str {
        match family {
            Family::RingAllReduce => "ring_all_reduce_bf16",
            Family::RingReduceScatter => "ring_reduce_scatter_bf16",
            Family::RingAllGather => "ring_all_gather_bf16",
            Family::OneShotAllReduce => "one_shot_all_reduce_bf16",
            Family::TwoShotAllReduce => "two_shot_all_reduce_bf16",
            Family::Send => "send_bf16",
            Family::Recv => "recv_bf16",
            Family::Broadcast => "broadcast_bf16",
        }
    }
}

/// How an all-reduce runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Every rank reads every peer's input: one round, `world - 1` reads of the whole message
    /// per rank (latency bound: small messages). The result lands in the output buffers.
    OneShot,
    /// A reduce-scatter by reading, then an all-gather by writing: two rounds, every byte
    /// crosses the links twice (medium messages). The result lands in the output buffers.
    TwoShot,
    /// The ring: `2 (world - 1)` pipelined steps to the next rank, bandwidth optimal (large
    /// messages). The result lands in the data buffers.
    Ring,
}

/// The all-reduce table as checked in: the cut-offs `trident bench collectives --device emu
/// --write-table` found with the collective time model (`trident_perfmodel::collective`) for a
/// node of 8 x H100 SXM over NVLink 4. Lines: `world`, `one_shot_max_bytes`,
/// `two_shot_max_bytes` (tab-separated, `-` for no limit); `#` starts a comment.
pub const ALL_REDUCE_TABLE_TSV: &str = include_str!("all_reduce_table.tsv");

/// One row of the all-reduce table: for groups of `world` ranks, one-shot up to
/// `one_shot_max` bytes, two-shot up to `two_shot_max` bytes, ring above (`usize::MAX`: no
/// limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllReduceCutoffs {
    /// Ranks in the group.
    pub world: usize,
    /// The largest message one-shot takes.
    pub one_shot_max: usize,
    /// The largest message two-shot takes.
    pub two_shot_max: usize,
}

/// Parses the all-reduce table's text (see [`ALL_REDUCE_TABLE_TSV`]): rows in increasing
/// world size, each with `one_shot_max <= two_shot_max`. The error names the line.
pub fn parse_all_reduce_table(text: &str) -> std::result::Result<Vec<AllReduceCutoffs>, String> {
    let mut rows: Vec<AllReduceCutoffs> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("all-reduce table, line {}: `{line}`", i + 1);
        let fields: Vec<&str> = line.split('\t').collect();
        let [world, one, two] = fields[..] else {
            return Err(format!("{}: expected 3 tab-separated fields", at()));
        };
        let bytes = |f: &str| match f {
            "-" => Ok(usize::MAX),
            _ => f.parse::<usize>().map_err(|e| format!("{}: `{f}`: {e}", at())),
        };
        let world = world.parse::<usize>().map_err(|e| format!("{}: world `{world}`: {e}", at()))?;
        let row = AllReduceCutoffs { world, one_shot_max: bytes(one)?, two_shot_max: bytes(two)? };
        if row.one_shot_max > row.two_shot_max {
            return Err(format!("{}: the one-shot cut-off exceeds the two-shot one", at()));
        }
        if rows.last().is_some_and(|r| r.world >= world) {
            return Err(format!("{}: world sizes must increase", at()));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err("all-reduce table: no rows".into());
    }
    Ok(rows)
}

/// The checked-in all-reduce table, parsed at first use.
pub fn all_reduce_table() -> &'static [AllReduceCutoffs] {
    static TABLE: std::sync::OnceLock<Vec<AllReduceCutoffs>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        parse_all_reduce_table(ALL_REDUCE_TABLE_TSV)
            .expect("the checked-in all-reduce table parses (a unit test holds it)")
    })
}

/// The algorithm `table` gives a message of `bytes` over `world` ranks: the row of the
/// smallest world size that covers the group (the largest row's for a larger group).
pub fn choose_all_reduce_in(table: &[AllReduceCutoffs], bytes: usize, world: usize) -> Algorithm {
    let Some(row) = table.iter().find(|r| world <= r.world).or(table.last()) else {
        return Algorithm::Ring;
    };
    if bytes <= row.one_shot_max {
        Algorithm::OneShot
    } else if bytes <= row.two_shot_max {
        Algorithm::TwoShot
    } else {
        Algorithm::Ring
    }
}

/// The all-reduce algorithm for a message of `bytes` over `world` ranks, from the checked-in
/// table ([`all_reduce_table`]).
///
/// One-shot pulls `(world - 1) x bytes` into every rank in one round of reads, so it pays off
/// while the latency of the extra round two-shot takes outweighs that traffic; two-shot moves
/// `2 (world - 1) / world x bytes` per rank each way, as the ring does, in two rounds instead
/// of the ring's `2 (world - 1)` steps, so on a node where every GPU reaches every other at
/// its full link bandwidth (NVSwitch) the model finds the ring slower at every size.
///
/// ```
/// use trident_ops::launch::{choose_all_reduce, Algorithm};
///
/// assert_eq!(choose_all_reduce(4 << 10, 8), Algorithm::OneShot);
/// assert_eq!(choose_all_reduce(1 << 20, 8), Algorithm::TwoShot);
/// ```
pub fn choose_all_reduce(bytes: usize, world: usize) -> Algorithm {
    choose_all_reduce_in(all_reduce_table(), bytes, world)
}

/// What one rank passes to a collective kernel: its peer table (`TABLE_WORDS_PER_RANK x world`
/// addresses, see `trident_kernels::collective::layout`), its status words
/// ([`status_words`]`(blocks)`), its place in the group, the collective's number and how long
/// one wait may take.
pub struct Peers<'a> {
    /// This rank's peer table.
    pub table: View<'a, u64>,
    /// This rank's status words, zero before the launch; a timed-out block writes four.
    pub status: ViewMut<'a, u32>,
    /// This rank, `0..world`.
    pub rank: usize,
    /// Ranks in the group.
    pub world: usize,
    /// The collective's number: 1, 2, ... on every rank alike (consecutive collectives use the
    /// two flag sets in turn and need no reset).
    pub seq: u32,
    /// How long one wait for a peer may take.
    pub timeout: Duration,
    /// Blocks per kernel: the same on every rank, and the number the flags were laid out for.
    pub blocks: u32,
}

/// Launches `family` over `n` elements of `E` on every rank's buffers; `other` is the peer
/// of a send or receive, the root of a broadcast (the kernel's argument after the status
/// words), `None` for the kernels without one.
///
/// # Safety
/// As for [`all_reduce`].
unsafe fn launch_family<E: CollectiveElement>(
    k: &Kernels,
    family: Family,
    p: &mut Peers,
    n: usize,
    other: Option<usize>,
) -> Result<()> {
    let kernel = E::kernel(family);
    let ch = Check::new(k.device(), kernel);
    ch.shape(p.world >= 1 && p.rank < p.world, || {
        format!("rank {} is not a rank of a group of {}", p.rank, p.world)
    })?
    .shape(other.is_none_or(|o| o < p.world), || {
        format!("rank {} is not a rank of a group of {}", other.unwrap_or(0), p.world)
    })?
    .shape(!matches!(family, Family::Send | Family::Recv) || other != Some(p.rank), || {
        format!("rank {} cannot send to or receive from itself", p.rank)
    })?
    .shape(p.blocks >= 1, || "a collective needs at least one block".into())?
    .input("the peer table", &p.table, TABLE_WORDS_PER_RANK * p.world)?
    .output("the status words", &p.status, status_words(p.blocks as usize))?;
    let cfg =
        LaunchConfig { grid: [p.blocks, 1, 1], block: [COLLECTIVE_THREADS, 1, 1], dynamic_smem_bytes: 0 };
    let args = [
        p.table.arg(),
        to_u32("length", n)?.into(),
        to_u32("rank", p.rank)?.into(),
        to_u32("world", p.world)?.into(),
        p.seq.into(),
        u64::try_from(p.timeout.as_nanos()).unwrap_or(u64::MAX).into(),
        p.status.arg_mut(),
    ];
    let mut args = args.to_vec();
    if let Some(o) = other {
        args.push(to_u32("peer", o)?.into());
    }
    // SAFETY: the table and status lengths and the ranks are checked above; what the table's
    // words address is the caller's contract.
    unsafe { k.launch(kernel, &cfg, &args) }
}

/// Sums `n` elements over the group with `algorithm`: into every rank's output buffer
/// ([`Algorithm::OneShot`], [`Algorithm::TwoShot`]) or its data buffer in place
/// ([`Algorithm::Ring`]).
///
/// # Safety
/// Every word of the table must address, on this rank, the buffer the layout names, of at
/// least `n` elements (`n` f32 for the scratch, the flag and status words their layout's
/// counts for this world and grid), alive and reserved for the group's collectives until every
/// rank's kernel has returned; every rank of the group must launch the same collective with the
/// same `n`, `seq`, `blocks` and its own rank, or the waits time out. Data buffers must not be
/// the output buffers for [`Algorithm::OneShot`].
pub unsafe fn all_reduce<E: CollectiveElement>(
    k: &Kernels,
    algorithm: Algorithm,
    peers: &mut Peers,
    n: usize,
) -> Result<()> {
    let family = match algorithm {
        Algorithm::OneShot => Family::OneShotAllReduce,
        Algorithm::TwoShot => Family::TwoShotAllReduce,
        Algorithm::Ring => Family::RingAllReduce,
    };
    // SAFETY: forwarded from the caller.
    unsafe { launch_family::<E>(k, family, peers, n, None) }
}

/// Sums `n` elements over the group in place, leaving segment `rank` of the data (elements
/// `[rank n / world, (rank + 1) n / world)`, rounded down) summed; the other segments keep
/// partial sums.
///
/// # Safety
/// As for [`all_reduce`].
pub unsafe fn reduce_scatter<E: CollectiveElement>(k: &Kernels, peers: &mut Peers, n: usize) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_family::<E>(k, Family::RingReduceScatter, peers, n, None) }
}

/// Gathers segment `p` of rank `p`'s data (the segments as in [`reduce_scatter`]) into every
/// rank's data, in place.
///
/// # Safety
/// As for [`all_reduce`].
pub unsafe fn all_gather<E: CollectiveElement>(k: &Kernels, peers: &mut Peers, n: usize) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_family::<E>(k, Family::RingAllGather, peers, n, None) }
}

/// Sends `n` elements of this rank's data buffer into rank `to`'s output buffer, as the
/// link's transfer number `peers.seq` (numbered 1, 2, ... per direction of the link, apart
/// from the group's collectives). Returns when the data is stored and released: this rank's
/// data buffer is its own again. The kernel first waits for `to`'s [`recv`] to start (its
/// output buffer is then free), so a caller must not block `to` in a send to this rank
/// meanwhile; see `trident_kernels::collective::send_recv` for the protocol.
///
/// # Safety
/// As for [`all_reduce`] (the scratch buffers are not used); `to` launches [`recv`] from this
/// rank with the same `n`, `seq` and `blocks`.
pub unsafe fn send<E: CollectiveElement>(k: &Kernels, peers: &mut Peers, to: usize, n: usize) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_family::<E>(k, Family::Send, peers, n, Some(to)) }
}

/// Receives `n` elements from rank `from` into this rank's output buffer, as the link's
/// transfer number `peers.seq`. Returns when the data is there; nobody writes the output
/// buffer again before this rank's next receive starts.
///
/// # Safety
/// As for [`send`], `from` launching [`send`] to this rank.
pub unsafe fn recv<E: CollectiveElement>(
    k: &Kernels,
    peers: &mut Peers,
    from: usize,
    n: usize,
) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_family::<E>(k, Family::Recv, peers, n, Some(from)) }
}

/// Copies `n` elements of rank `root`'s data buffer into every rank's data buffer, in place.
///
/// # Safety
/// As for [`all_reduce`] (the scratch and output buffers are not used); every rank passes the
/// same `root`.
pub unsafe fn broadcast<E: CollectiveElement>(
    k: &Kernels,
    peers: &mut Peers,
    root: usize,
    n: usize,
) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_family::<E>(k, Family::Broadcast, peers, n, Some(root)) }
}

/// The element range `[start, end)` of segment `segment` of `n` elements split over `world`
/// ranks, as the ring kernels split them.
pub fn segment(n: usize, world: usize, segment: usize) -> (usize, usize) {
    layout::part(n, world, segment)
}

/// Where a rank's status words (read after its kernel has finished) say a wait timed out: a
/// message naming the kernel, the rank and the peer that never arrived.
pub fn timeout(kernel: &str, rank: usize, status: &[u32]) -> Option<(u32, String)> {
    describe_timeout(kernel, rank as u32, status).map(|t| (t.peer, t.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_picks_by_size_and_world() {
        let table = parse_all_reduce_table("# c\n2\t100\t1000\n4\t50\t-\n").unwrap();
        assert_eq!(choose_all_reduce_in(&table, 0, 2), Algorithm::OneShot);
        assert_eq!(choose_all_reduce_in(&table, 100, 2), Algorithm::OneShot);
        assert_eq!(choose_all_reduce_in(&table, 101, 2), Algorithm::TwoShot);
        assert_eq!(choose_all_reduce_in(&table, 1001, 2), Algorithm::Ring);
        assert_eq!(choose_all_reduce_in(&table, 60, 3), Algorithm::TwoShot);
        assert_eq!(choose_all_reduce_in(&table, usize::MAX, 4), Algorithm::TwoShot);
        // Larger groups take the largest row.
        assert_eq!(choose_all_reduce_in(&table, 10, 16), Algorithm::OneShot);
        assert_eq!(choose_all_reduce_in(&table, 51, 16), Algorithm::TwoShot);
    }

    #[test]
    fn a_bad_table_is_refused_naming_the_line() {
        let e = parse_all_reduce_table("2\t1\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("3 tab-separated"), "{e}");
        let e = parse_all_reduce_table("# x\n2\t10\t5\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("exceeds"), "{e}");
        let e = parse_all_reduce_table("4\t1\t2\n2\t1\t2\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("increase"), "{e}");
        let e = parse_all_reduce_table("2\tx\t2\n").unwrap_err();
        assert!(e.contains("`x`"), "{e}");
        assert!(parse_all_reduce_table("# only\n").is_err());
    }

    /// The kernel family the model prices for an algorithm.
    fn modelled(a: Algorithm) -> trident_perfmodel::collective::CollectiveKernel {
        use trident_perfmodel::collective::CollectiveKernel as K;
        match a {
            Algorithm::OneShot => K::OneShotAllReduce,
            Algorithm::TwoShot => K::TwoShotAllReduce,
            Algorithm::Ring => K::RingAllReduce,
        }
    }

    #[test]
    fn the_checked_in_table_is_the_model_s() {
        use trident_perfmodel::collective::{all_reduce_table, Node};
        let want = all_reduce_table(&Node::named("h100", 8).unwrap());
        if std::env::var_os("TRIDENT_UPDATE_ALL_REDUCE_TABLE").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/launch/all_reduce_table.tsv");
            std::fs::write(path, &want).unwrap();
        }
        assert_eq!(
            ALL_REDUCE_TABLE_TSV, want,
            "the all-reduce table drifted from the model: regenerate it with `trident bench collectives \
             --device emu --gpu h100 --write-table ops/src/launch/all_reduce_table.tsv` (or \
             TRIDENT_UPDATE_ALL_REDUCE_TABLE=1 cargo test -p trident-ops --lib collective, then rebuild)"
        );
    }

    #[test]
    fn the_chosen_all_reduce_is_never_predicted_slower_than_another() {
        use trident_perfmodel::collective::{predict_bytes, Node, ALL_REDUCE_KERNELS};
        let node = Node::named("h100", 8).unwrap();
        for world in 2..=8 {
            let row = all_reduce_table().iter().find(|r| r.world == world).copied().unwrap();
            let mut sizes: Vec<usize> = Vec::new();
            for p in 3..=33 {
                let b = 1usize << p;
                sizes.extend([b - 1, b, b + b / 2]);
            }
            for edge in [row.one_shot_max, row.two_shot_max].into_iter().filter(|&e| e < usize::MAX) {
                sizes.extend([edge, edge + 1]);
            }
            for bytes in sizes {
                let chosen = choose_all_reduce(bytes, world);
                let t = |k| predict_bytes(&node, k, world, bytes as f64).total_s;
                let best = ALL_REDUCE_KERNELS.iter().map(|&k| t(k)).fold(f64::INFINITY, f64::min);
                let got = t(modelled(chosen));
                assert!(
                    got <= best * (1.0 + 1e-9),
                    "{bytes} bytes over {world}: {chosen:?} predicted {got:e} s, the fastest {best:e} s"
                );
            }
        }
    }

    #[test]
    fn the_checked_in_table_parses_and_covers_a_node() {
        let t = all_reduce_table();
        assert_eq!(t.first().map(|r| r.world), Some(2));
        assert_eq!(t.last().map(|r| r.world), Some(8));
    }

    #[test]
    fn a_wrong_table_status_or_rank_is_refused_before_any_launch() {
        use trident_runtime::{Buffer, Device};
        let device = Device::Emu;
        let k = Kernels::load(&device).unwrap();
        let table = Buffer::<u64>::zeros(&device, TABLE_WORDS_PER_RANK * 2).unwrap();
        let mut status = Buffer::<u32>::zeros(&device, status_words(2)).unwrap();
        let mut try_launch = |table_len: usize, rank: usize, blocks: u32| {
            let mut peers = Peers {
                table: table.view(..table_len).unwrap(),
                status: status.view_mut(..).unwrap(),
                rank,
                world: 2,
                seq: 1,
                timeout: Duration::from_millis(1),
                blocks,
            };
            // SAFETY: every call is refused by the checks before the launch.
            unsafe { all_reduce::<f32>(&k, Algorithm::OneShot, &mut peers, 4) }.unwrap_err().to_string()
        };
        let e = try_launch(TABLE_WORDS_PER_RANK * 2 - 1, 0, 2);
        assert!(e.contains("one_shot_all_reduce_f32: the peer table has 7 elements, expected 8"), "{e}");
        let e = try_launch(TABLE_WORDS_PER_RANK * 2, 2, 2);
        assert!(e.contains("rank 2 is not a rank of a group of 2"), "{e}");
        let e = try_launch(TABLE_WORDS_PER_RANK * 2, 0, 3);
        assert!(e.contains("the status words has 8 elements, expected 12"), "{e}");
        assert!(k.launch_counts().is_empty(), "nothing was launched");
    }

    #[test]
    fn a_send_to_itself_or_a_root_outside_the_group_is_refused_before_any_launch() {
        use trident_runtime::{Buffer, Device};
        let device = Device::Emu;
        let k = Kernels::load(&device).unwrap();
        let table = Buffer::<u64>::zeros(&device, TABLE_WORDS_PER_RANK * 2).unwrap();
        let mut status = Buffer::<u32>::zeros(&device, status_words(1)).unwrap();
        let mut peers = Peers {
            table: table.view(..).unwrap(),
            status: status.view_mut(..).unwrap(),
            rank: 1,
            world: 2,
            seq: 1,
            timeout: Duration::from_millis(1),
            blocks: 1,
        };
        // SAFETY: every call is refused by the checks before the launch.
        let e = unsafe { send::<f32>(&k, &mut peers, 1, 4) }.unwrap_err().to_string();
        assert!(e.contains("send_f32: rank 1 cannot send to or receive from itself"), "{e}");
        // SAFETY: as above.
        let e = unsafe { recv::<u16>(&k, &mut peers, 2, 4) }.unwrap_err().to_string();
        assert!(e.contains("recv_bf16: rank 2 is not a rank of a group of 2"), "{e}");
        // SAFETY: as above.
        let e = unsafe { broadcast::<f32>(&k, &mut peers, 5, 4) }.unwrap_err().to_string();
        assert!(e.contains("broadcast_f32: rank 5 is not a rank of a group of 2"), "{e}");
        assert!(k.launch_counts().is_empty(), "nothing was launched");
    }

    #[test]
    fn segments_tile_the_elements() {
        let mut at = 0;
        for s in 0..3 {
            let (a, b) = segment(10, 3, s);
            assert_eq!(a, at);
            at = b;
        }
        assert_eq!(at, 10);
    }
}
