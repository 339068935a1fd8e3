//! The user-facing communicator: a group of ranks and the collectives over it.

use crate::agree;
use crate::algo::{self, broadcast, direct, doubling, op_header, ring, scratch_as, Link, Recv};
use crate::config::{CommConfig, LargeAllReduce};
use crate::element::{Combine, DType, Element, HostCombine, ReduceOp};
use crate::error::{CommError, PeerNames, Result};
use crate::frame::OpKind;
use crate::grid::{GridCoords, RankGrid};
use crate::shared_buffer::SharedBuffer;
use crate::sink::CopySink;
use crate::transport::Fabric;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A group of ranks that run collectives together. Every member must make the same
/// collective calls in the same order with the same sizes; a mismatch is reported as
/// [`CommError::Mismatch`]. After any error the communicator is broken and refuses work.
///
/// Two ranks as threads of one process:
///
/// ```
/// use trident_collectives::{CommConfig, Communicator, ReduceOp};
///
/// let ranks = Communicator::inproc_world(2, CommConfig::default()).unwrap();
/// let results: Vec<(Vec<f32>, Vec<f32>)> = std::thread::scope(|s| {
///     let threads: Vec<_> = ranks
///         .into_iter()
///         .map(|mut comm| {
///             s.spawn(move || {
///                 let r = comm.rank() as f32;
///                 let mut sum = vec![r + 1.0; 3]; // rank 0: 1s, rank 1: 2s
///                 comm.all_reduce(&mut sum, ReduceOp::Sum).unwrap();
///                 let mut both = vec![0.0f32; 4];
///                 comm.all_gather(&[r, r], &mut both).unwrap();
///                 (sum, both)
///             })
///         })
///         .collect();
///     threads.into_iter().map(|t| t.join().unwrap()).collect()
/// });
/// for (sum, both) in results {
///     assert_eq!(sum, [3.0; 3]);
///     assert_eq!(both, [0.0, 0.0, 1.0, 1.0]);
/// }
/// ```
pub struct Communicator {
    link: Link,
    fabric: Arc<dyn Fabric>,
    key: String,
    /// World ranks of the members, in group order.
    members: Vec<usize>,
    config: CommConfig,
    seq: u64,
    sent: Vec<u64>,
    received: Vec<u64>,
    scratch: Vec<u64>,
    /// Peers' buffer addresses during a direct AllReduce.
    peer_addrs: Vec<u64>,
    /// Shared buffers made so far (names the next one).
    shared_made: u64,
    groups_made: HashMap<String, u32>,
}

/// The tensor-, pipeline- and data-parallel groups of one rank.
pub struct ParallelGroups {
    /// The rank's position in the grid.
    pub coords: GridCoords,
    /// The ranks sharing its data- and pipeline-parallel indices.
    pub tp: Communicator,
    /// The ranks sharing its tensor- and data-parallel indices (one per stage).
    pub pp: Communicator,
    /// The ranks sharing its tensor- and pipeline-parallel indices (the model's replicas).
    pub dp: Communicator,
}

impl Communicator {
    /// Joins the world group of `size` ranks through `fabric`. Every rank calls this.
    pub fn world(fabric: Arc<dyn Fabric>, rank: usize, size: usize, config: CommConfig) -> Result<Self> {
        Self::world_at(fabric, rank, size, config, Vec::new())
    }

    /// [`Communicator::world`] whose errors say where each rank runs: `places[r]` for world
    /// rank r ("host gpu3 as pid 4242"), as the launcher's processes published them.
    pub fn world_at(
        fabric: Arc<dyn Fabric>,
        rank: usize,
        size: usize,
        config: CommConfig,
        places: Vec<String>,
    ) -> Result<Self> {
        if size == 0 || rank >= size {
            return Err(CommError::InvalidArgument(format!("rank {rank} is not in a world of {size}")));
        }
        let members: Vec<usize> = (0..size).collect();
        let names = Arc::new(PeerNames::world(size, Arc::new(places)));
        Self::connect(fabric, "world".into(), members, rank, config, names)
    }

    /// `size` in-process ranks, one communicator each, to be moved into their threads.
    pub fn inproc_world(size: usize, config: CommConfig) -> Result<Vec<Self>> {
        let fabric: Arc<dyn Fabric> = Arc::new(crate::transport::inproc::InprocFabric::new());
        (0..size).map(|rank| Self::world(fabric.clone(), rank, size, config.clone())).collect()
    }

    /// The world communicator of a process started by a launcher (torchrun, Slurm, Open MPI
    /// or `trident launch`); see [`crate::bootstrap`].
    pub fn from_env() -> Result<Self> {
        crate::bootstrap::init_from_env()
    }

    fn connect(
        fabric: Arc<dyn Fabric>,
        key: String,
        members: Vec<usize>,
        index: usize,
        config: CommConfig,
        names: Arc<PeerNames>,
    ) -> Result<Self> {
        let size = members.len();
        let transport = fabric.connect(&key, &members, index, config.timeout)?;
        let link_fabric = fabric.clone();
        Ok(Communicator {
            link: Link {
                transport,
                rank: index,
                size,
                timeout: config.timeout,
                broken: None,
                names,
                fabric: link_fabric,
            },
            fabric,
            key,
            members,
            config,
            seq: 0,
            sent: vec![0; size],
            received: vec![0; size],
            scratch: Vec::new(),
            peer_addrs: Vec::with_capacity(size),
            shared_made: 0,
            groups_made: HashMap::new(),
        })
    }

    /// This rank within the communicator, `0..size()`.
    pub fn rank(&self) -> usize {
        self.link.rank
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> usize {
        self.link.size
    }

    /// World ranks of the members, in this group's rank order.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    /// The transport's name: `inproc`, `shm` or `tcp`.
    pub fn transport_name(&self) -> &'static str {
        self.fabric.name()
    }

    /// How an AllReduce above the small-message size runs here: `"direct"` (reduced in the
    /// peers' memory) or `"ring"`.
    pub fn large_all_reduce_path(&self) -> &'static str {
        if self.uses_direct() {
            "direct"
        } else {
            "ring"
        }
    }

    fn uses_direct(&self) -> bool {
        self.config.large_all_reduce == LargeAllReduce::Auto && self.link.transport.peer_memory().is_some()
    }

    /// How long a call waits for a peer before failing with [`CommError::Timeout`].
    pub fn timeout(&self) -> Duration {
        self.link.timeout
    }

    /// Changes the timeout of every later blocking call on this communicator.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.link.timeout = timeout;
    }

    /// Carves a sub-group out of this communicator. `members` are ranks of this
    /// communicator in the new group's order and must include this rank; every member calls
    /// this with the same `label` and `members` (other ranks need not call it).
    ///
    /// Errors of the new group name peers by world rank, with their role in the group: the
    /// role they have in this communicator when it is itself a sub-group (a pair of pipeline
    /// stages keeps "pipeline stage 1 of group [1, 5]"), else "member 1 of group "label"
    /// [2, 3]".
    pub fn new_group(&mut self, label: &str, members: &[usize]) -> Result<Communicator> {
        self.new_group_as(label, members, None)
    }

    /// [`Communicator::new_group`] whose members' roles are `role` and their index ("pipeline
    /// stage" gives "pipeline stage 1 of group [1, 5]").
    fn new_group_as(&mut self, label: &str, members: &[usize], role: Option<&str>) -> Result<Communicator> {
        let index = members.iter().position(|&m| m == self.rank()).ok_or_else(|| {
            CommError::InvalidArgument(format!(
                "rank {} creates group {label:?} {members:?} without being in it",
                self.rank()
            ))
        })?;
        let mut seen = vec![false; self.size()];
        for &m in members {
            if m >= self.size() || std::mem::replace(&mut seen[m], true) {
                return Err(CommError::InvalidArgument(format!(
                    "group {label:?} members {members:?} must be distinct ranks below {}",
                    self.size()
                )));
            }
        }
        let list: Vec<String> = members.iter().map(|m| m.to_string()).collect();
        let name = format!("{label}[{}]", list.join(","));
        let generation = self.groups_made.entry(name.clone()).or_insert(0);
        *generation += 1;
        let key = format!("{}/{name}#{generation}", self.key);
        let world: Vec<usize> = members.iter().map(|&m| self.members[m]).collect();
        let roles = members
            .iter()
            .enumerate()
            .map(|(i, &m)| match (role, self.link.names.roles.get(m)) {
                (Some(role), _) => format!("{role} {i} of group {world:?}"),
                (None, Some(parent)) => parent.clone(),
                (None, None) => format!("member {i} of group {label:?} {world:?}"),
            })
            .collect();
        let places = self.link.names.places.clone();
        let names = Arc::new(PeerNames { world: world.clone(), roles, places });
        Self::connect(self.fabric.clone(), key, world, index, self.config.clone(), names)
    }

    /// Checks that every member passed the same `settings` (name, value) pairs, and fails on
    /// every member with [`CommError::Disagreement`] naming the first setting that differs,
    /// the two (world) ranks and their values, if any does. `what` says what the settings
    /// are, for the message ("the training configuration"). Every member calls it; the
    /// order of the pairs counts only for which difference is reported first.
    ///
    /// Cost: one all-gather of 40 bytes per rank when all agree; when they do not, one more
    /// of the encoded lists.
    pub fn agree<K: AsRef<str>, V: AsRef<str>>(&mut self, what: &str, settings: &[(K, V)]) -> Result<()> {
        let encoded = agree::encode(settings)?;
        let n = self.size();
        if n == 1 {
            return Ok(());
        }
        // Length and digest (in 16-bit pieces, so every value is exact in an f64).
        let d = agree::digest(&encoded);
        let summary = [
            encoded.len() as f64,
            (d & 0xffff) as f64,
            (d >> 16 & 0xffff) as f64,
            (d >> 32 & 0xffff) as f64,
            (d >> 48) as f64,
        ];
        let mut all = vec![0.0f64; summary.len() * n];
        self.all_gather(&summary, &mut all)?;
        if all.chunks(summary.len()).all(|c| c == summary) {
            return Ok(());
        }
        let members = self.members.clone();
        let malformed = |peer: usize, detail: &str| CommError::Malformed {
            op: format!("agree on {what}"),
            peer: members[peer],
            detail: detail.to_string(),
        };
        let lens: Vec<usize> = all.chunks(summary.len()).map(|c| c[0] as usize).collect();
        if let Some(r) = lens.iter().position(|&l| l > agree::MAX_SETTINGS_BYTES) {
            return Err(malformed(r, "settings longer than the limit"));
        }
        let words = agree::words_for(lens.iter().copied().max().unwrap_or(0));
        let mut gathered = vec![0.0f64; words * n];
        self.all_gather(&agree::pack(&encoded, words), &mut gathered)?;
        let mut lists = Vec::with_capacity(n);
        for (r, &len) in lens.iter().enumerate() {
            let list = agree::unpack(&gathered[r * words..(r + 1) * words], len)
                .and_then(|bytes| agree::decode(&bytes))
                .ok_or_else(|| malformed(r, "not a list of settings"))?;
            lists.push(list);
        }
        match agree::first_difference(&lists) {
            Some(diff) => Err(agree::disagreement(what, diff, |r| self.members[r])),
            None => Ok(()),
        }
    }

    /// The TP, PP and DP groups of this rank (this communicator must span the whole grid).
    /// The members first check that they all asked for the same grid, so that ranks started
    /// with different parallel sizes fail naming the size, instead of waiting for groups
    /// the others never form.
    pub fn parallel_groups(&mut self, grid: &RankGrid) -> Result<ParallelGroups> {
        let sizes = [
            ("tensor-parallel size", grid.tp.to_string()),
            ("pipeline-parallel size", grid.pp.to_string()),
            ("data-parallel size", grid.dp.to_string()),
        ];
        self.agree("the parallel grid", &sizes)?;
        if grid.world_size() != self.size() {
            return Err(CommError::InvalidArgument(format!(
                "grid {grid:?} covers {} ranks but the communicator has {}",
                grid.world_size(),
                self.size()
            )));
        }
        let r = self.rank();
        Ok(ParallelGroups {
            coords: grid.coords(r),
            tp: self.new_group_as("tp", &grid.tp_group(r), Some("tensor-parallel rank"))?,
            pp: self.new_group_as("pp", &grid.pp_group(r), Some("pipeline stage"))?,
            dp: self.new_group_as("dp", &grid.dp_group(r), Some("data-parallel rank"))?,
        })
    }

    fn next_seq(&mut self) -> Result<u64> {
        self.link.ensure_healthy()?;
        self.seq += 1;
        Ok(self.seq)
    }

    /// In-place AllReduce of `buf` over all ranks.
    pub fn all_reduce<T: Element>(&mut self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        self.all_reduce_with(buf, op, &HostCombine)
    }

    /// [`Communicator::all_reduce`] with the reduction step supplied by `combine`.
    pub fn all_reduce_with<T: Element>(
        &mut self,
        buf: &mut [T],
        op: ReduceOp,
        combine: &dyn Combine<T>,
    ) -> Result<()> {
        let seq = self.next_seq()?;
        let header = op_header(OpKind::AllReduce, T::DTYPE, seq, buf.len(), Some(op), 0);
        if self.size() == 1 {
            return Ok(());
        }
        if std::mem::size_of_val(buf) <= self.config.small_bytes {
            let mut scratch = std::mem::take(&mut self.scratch);
            let tmp = scratch_as::<T>(&mut scratch, buf.len());
            let r = doubling::all_reduce(&mut self.link, &header, buf, tmp, op, combine);
            self.scratch = scratch;
            r
        } else if self.uses_direct() {
            let mut scratch = std::mem::take(&mut self.scratch);
            let r = direct::all_reduce(
                &mut self.link,
                &header,
                buf,
                op,
                combine,
                &mut scratch,
                &mut self.peer_addrs,
            );
            self.scratch = scratch;
            r
        } else {
            ring::all_reduce(&mut self.link, &header, buf, op, combine)
        }
    }

    /// A zeroed buffer of `len` elements that the other members reach in place where the
    /// transport allows (shared memory: a mapping every member has; elsewhere ordinary
    /// memory). Every member calls this, in the same order relative to other shared buffers,
    /// with the same `len`. Collectives on it through [`Communicator::all_reduce_shared`]
    /// then move each byte with plain loads and stores, with no copies through the transport.
    pub fn shared_buffer<T: Element>(&mut self, len: usize) -> Result<SharedBuffer<T>> {
        self.link.ensure_healthy()?;
        let id = self.shared_made;
        self.shared_made += 1;
        let key = format!("{}/shared#{id}", self.key);
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            CommError::InvalidArgument(format!("a shared buffer of {len} elements does not fit in memory"))
        })?;
        let rank = self.rank();
        Ok(match self.fabric.share(&key, &self.members, rank, bytes, self.link.timeout)? {
            Some(region) => SharedBuffer::shared(region, len, rank, id, self.key.clone()),
            None => SharedBuffer::private(len, rank, id, self.key.clone()),
        })
    }

    /// Whether [`Communicator::all_reduce_shared`] on `buf` reduces it in the members' mapped
    /// buffers (`true`: the buffer is shared, the group has more than one member and `buf` is
    /// above the small-message size) rather than falling back to [`Communicator::all_reduce`].
    pub fn reduces_in_place<T: Element>(&self, buf: &SharedBuffer<T>) -> bool {
        let small = self.size() == 1 || std::mem::size_of::<T>() * buf.len() <= self.config.small_bytes;
        buf.is_shared() && !small
    }

    /// [`Communicator::all_reduce`] on a buffer from [`Communicator::shared_buffer`]: where
    /// the buffers are mapped by every member, each rank sums its chunk straight out of the
    /// others' buffers and stores the result straight into them.
    pub fn all_reduce_shared<T: Element>(&mut self, buf: &mut SharedBuffer<T>, op: ReduceOp) -> Result<()> {
        if buf.owner != self.key {
            return Err(CommError::InvalidArgument(format!(
                "a shared buffer of group {:?} was passed to group {:?}: use it with the communicator that made it",
                buf.owner, self.key
            )));
        }
        let len = buf.len();
        let (id, region) = match buf.region() {
            Some(region) if self.reduces_in_place(buf) => (buf.id, region),
            _ => return self.all_reduce(buf, op),
        };
        let seq = self.next_seq()?;
        let header = op_header(OpKind::AllReduce, T::DTYPE, seq, len, Some(op), 0);
        direct::all_reduce_mapped::<T>(
            &mut self.link,
            &header,
            region,
            len,
            id,
            op,
            &HostCombine,
            &mut self.peer_addrs,
        )
    }

    /// Reduces `input` (length `size * output.len()`) over all ranks and leaves chunk
    /// `rank` of the result in `output`.
    pub fn reduce_scatter<T: Element>(&mut self, input: &[T], output: &mut [T], op: ReduceOp) -> Result<()> {
        self.reduce_scatter_with(input, output, op, &HostCombine)
    }

    /// [`Communicator::reduce_scatter`] with the reduction step supplied by `combine`.
    pub fn reduce_scatter_with<T: Element>(
        &mut self,
        input: &[T],
        output: &mut [T],
        op: ReduceOp,
        combine: &dyn Combine<T>,
    ) -> Result<()> {
        if input.len() != output.len() * self.size() {
            return Err(CommError::InvalidArgument(format!(
                "reduce_scatter input has {} elements, expected {} ranks x {} output elements",
                input.len(),
                self.size(),
                output.len()
            )));
        }
        let seq = self.next_seq()?;
        let header = op_header(OpKind::ReduceScatter, T::DTYPE, seq, input.len(), Some(op), 0);
        if self.size() == 1 {
            output.copy_from_slice(input);
            return Ok(());
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let tmp = scratch_as::<T>(&mut scratch, output.len());
        let r = ring::reduce_scatter(&mut self.link, &header, input, output, tmp, op, combine);
        self.scratch = scratch;
        r
    }

    /// Gathers every rank's `input` into `output` (length `size * input.len()`), rank order.
    pub fn all_gather<T: Element>(&mut self, input: &[T], output: &mut [T]) -> Result<()> {
        let m = input.len();
        if output.len() != m * self.size() {
            return Err(CommError::InvalidArgument(format!(
                "all_gather output has {} elements, expected {} ranks x {m} input elements",
                output.len(),
                self.size()
            )));
        }
        let seq = self.next_seq()?;
        let header = op_header(OpKind::AllGather, T::DTYPE, seq, output.len(), None, 0);
        let r = self.rank();
        output[r * m..(r + 1) * m].copy_from_slice(input);
        if self.size() == 1 {
            return Ok(());
        }
        ring::all_gather_in_place(&mut self.link, &header, output, 0)
    }

    /// Copies `root`'s `buf` into every other rank's `buf`.
    pub fn broadcast<T: Element>(&mut self, buf: &mut [T], root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(CommError::InvalidArgument(format!(
                "broadcast root {root} is not a rank of this {}-rank communicator",
                self.size()
            )));
        }
        let seq = self.next_seq()?;
        let header = op_header(OpKind::Broadcast, T::DTYPE, seq, buf.len(), None, root as u32);
        if self.size() == 1 {
            return Ok(());
        }
        let granule = std::mem::size_of::<T>();
        let bytes = algo::bytes_mut(buf);
        if bytes.len() <= self.config.small_bytes {
            broadcast::binomial(&mut self.link, &header, bytes, root, granule)
        } else {
            let slice = self.config.slice_bytes;
            broadcast::chain(&mut self.link, &header, bytes, root, slice, granule)
        }
    }

    /// Returns once every rank has entered the barrier (dissemination, ceil(log2 n) rounds).
    pub fn barrier(&mut self) -> Result<()> {
        let seq = self.next_seq()?;
        let header = op_header(OpKind::Barrier, DType::U8, seq, 0, None, 0);
        let (n, rank) = (self.size(), self.rank());
        let mut dist = 1;
        let mut round = 0;
        while dist < n {
            let mut nothing = CopySink { dst: &mut [], granule: 1 };
            let from = Recv { peer: (rank + n - dist) % n, len: 0, sink: &mut nothing };
            self.link.step(&header, round, Some(((rank + dist) % n, &[])), Some(from))?;
            dist *= 2;
            round += 1;
        }
        Ok(())
    }

    /// Sends `buf` to `dst`, which must call [`Communicator::recv`] with the same tag and
    /// length. Messages between two ranks arrive in order; the tag is checked, not matched.
    pub fn send<T: Element>(&mut self, buf: &[T], dst: usize, tag: u32) -> Result<()> {
        self.send_recv::<T>(Some((buf, dst)), None, tag)
    }

    /// Receives from `src` what it sent with [`Communicator::send`].
    pub fn recv<T: Element>(&mut self, buf: &mut [T], src: usize, tag: u32) -> Result<()> {
        self.send_recv::<T>(None, Some((buf, src)), tag)
    }

    /// Sends and receives at once, so two ranks exchanging data (pipeline stages) cannot
    /// deadlock on each other.
    pub fn send_recv<T: Element>(
        &mut self,
        send: Option<(&[T], usize)>,
        recv: Option<(&mut [T], usize)>,
        tag: u32,
    ) -> Result<()> {
        self.link.ensure_healthy()?;
        for peer in send.iter().map(|s| s.1).chain(recv.iter().map(|r| r.1)) {
            if peer >= self.size() || peer == self.rank() {
                return Err(CommError::InvalidArgument(format!(
                    "send/recv peer {peer} must be another rank of this {}-rank communicator",
                    self.size()
                )));
            }
        }
        let granule = std::mem::size_of::<T>();
        let send_msg = send.map(|(buf, dst)| {
            self.sent[dst] += 1;
            let h = op_header(OpKind::SendRecv, T::DTYPE, self.sent[dst], buf.len(), None, tag);
            (dst, h, algo::bytes(buf))
        });
        let (recv_head, mut sink) = match recv {
            Some((buf, src)) => {
                self.received[src] += 1;
                let h = op_header(OpKind::SendRecv, T::DTYPE, self.received[src], buf.len(), None, tag);
                let sink = CopySink { dst: algo::bytes_mut(buf), granule };
                (Some((src, h)), Some(sink))
            }
            None => (None, None),
        };
        let op = match (&send_msg, &recv_head) {
            (Some(s), _) => s.1,
            (None, Some(r)) => r.1,
            (None, None) => return Ok(()),
        };
        let incoming = match (recv_head, sink.as_mut()) {
            (Some((peer, h)), Some(s)) => {
                let len = s.dst.len();
                Some((h, Recv { peer, len, sink: s }))
            }
            _ => None,
        };
        self.link.step_pair(&op, send_msg, incoming)
    }
}
