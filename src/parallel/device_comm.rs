//! A device communicator for the ranks of a group that are threads of one process, each with
//! its own device: the collectives run as kernels over peer memory (the launch wrappers of
//! `trident_ops::launch`: ring, one-shot and two-shot all-reduce, reduce-scatter, all-gather,
//! broadcast, and point-to-point send and receive), with no host round trip of the data.
//!
//! Each rank owns a communication buffer on its device: data and output regions and an f32
//! scratch region of the same capacity, the flag words in a region of their own, and its
//! status words. Every rank learns every peer's addresses through the group's host
//! [`Communicator`] (an all-gather of the addresses), and builds its peer table from them
//! (`trident_kernels::collective::layout`). Collectives are numbered 1, 2, ... on every rank
//! alike; the kernels use the two flag sets in turn and compare flags with the number, so
//! consecutive collectives need no reset of the flags. A send and its receive are numbered
//! apart, per direction of each pair of ranks (the link's transfers 1, 2, ...), since only the
//! two ranks take part.
//!
//! Before each collective the ranks exchange its kind and length through the host
//! communicator: a rank whose length differs gets an error naming both ranks instead of a
//! corrupted sum, and the kernels start together (their waits for peers are then short); a
//! send and its receive exchange their lengths between the two ranks only. A
//! wait that passes its deadline ends the kernel; the rank's status words name the peer that
//! never arrived, and the collective returns [`ParallelError::PeerTimeout`].
//!
//! At start-up ([`DeviceComm::connect`]) every rank reads from and writes into every peer's
//! buffer once (a two-shot all-reduce of a pattern that tells every pair apart) and refuses,
//! naming the pair, where one cannot reach the other.
//!
//! Where the group cannot run on its devices the host path stays ([`Connected::Host`], with
//! the reason): `Cpu` (no kernels), ranks in different processes (no shared memory), and
//! `Cuda`, whose peer access between the ranks' GPUs the runtime does not check (the first
//! group that tries says so on standard error).
//!
//! On `Emu` the rank's collectives run as emulated device `ordinal` (the one its thread drives,
//! [`Device::emu`], else its world rank), so the emulator checks every access to the
//! communication buffers across devices; the rank's other kernels and buffers stay as they
//! were.

use std::sync::Once;
use std::time::Duration;

use trident_collectives::Communicator;
use trident_ops::launch::{self, Algorithm, CollectiveElement, Kernels, Peers};
use trident_runtime::{Buffer, Device, DeviceKind, View, ViewMut};

use super::{ParallelError, Result};

/// Blocks of every collective kernel: the chunks a ring keeps in flight. The same on every
/// rank (the flags are laid out for it).
const BLOCKS: u32 = 2;

/// Tag of the host messages by which a send and its receive agree on the length.
const PAIR_TAG: u32 = 0x5032;

/// The longest a kernel waits for a peer that passed the same host exchange just before.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// Elements of f32 the buffers hold at first; they grow (on every rank at once) to the largest
/// collective asked for.
const INITIAL_CAPACITY: usize = 1 << 12;

/// The kind of a collective, as the ranks compare it before running one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce = 1,
    ReduceScatter = 2,
    AllGather = 3,
    Probe = 4,
    Broadcast = 5,
    Send = 6,
    Recv = 7,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "an all-reduce",
            Kind::ReduceScatter => "a reduce-scatter",
            Kind::AllGather => "an all-gather",
            Kind::Probe => "the start-up check",
            Kind::Broadcast => "a broadcast",
            Kind::Send => "a send",
            Kind::Recv => "a receive",
        }
    }
}

/// What [`DeviceComm::connect`] found.
pub enum Connected {
    /// The group's collectives run on its devices.
    Device(Box<DeviceComm>),
    /// They stay on the host path, for the reason given.
    Host(String),
}

/// The group's buffers of one rank and what the kernels need to reach its peers' (see the
/// module documentation).
pub struct DeviceComm {
    kernels: Kernels,
    rank: usize,
    world: usize,
    /// World ranks of the group's members, in group order (for messages).
    members: Vec<usize>,
    /// The emulated device the collectives run as (`Emu` only).
    ordinal: Option<u32>,
    /// Elements (f32) each of `data`, `out` and `scratch` holds.
    capacity: usize,
    data: Buffer<f32>,
    out: Buffer<f32>,
    scratch: Buffer<f32>,
    flags: Buffer<u32>,
    status: Buffer<u32>,
    table: Buffer<u64>,
    /// The number of the last collective.
    seq: u32,
    /// Per peer, the number of the last transfer sent to it.
    sent: Vec<u32>,
    /// Per peer, the number of the last transfer received from it.
    received: Vec<u32>,
    /// How long a kernel waits for a peer.
    wait: Duration,
}

/// Device kind as a number the ranks compare.
fn kind_code(kind: DeviceKind) -> f64 {
    match kind {
        DeviceKind::Cpu => 0.0,
        DeviceKind::Emu => 1.0,
        DeviceKind::Cuda => 2.0,
    }
}

/// A `u64` as two `f64` words that hold its halves exactly (the host communicator moves
/// floats).
fn split(v: u64) -> [f64; 2] {
    [(v >> 32) as f64, (v & 0xFFFF_FFFF) as f64]
}

fn join(w: &[f64]) -> u64 {
    ((w[0] as u64) << 32) | (w[1] as u64)
}

impl DeviceComm {
    /// Connects the ranks of `comm` (every rank calls it at the same point) on `device`, this
    /// rank's device: the device path where the group can take it, else the host path and
    /// why. A group of one has nothing to connect ([`Connected::Host`]).
    ///
    /// # Errors
    /// Where the ranks' devices are of different kinds, two ranks drive the same emulated
    /// device, a peer's buffer cannot be reached (naming the pair) or the start-up check times
    /// out (naming the peer); the host communicator's errors.
    pub fn connect(comm: &mut Communicator, device: &Device) -> Result<Connected> {
        match Self::open(comm, device)? {
            Connected::Device(mut dc) => {
                dc.probe(comm)?;
                Ok(Connected::Device(dc))
            }
            host => Ok(host),
        }
    }

    /// [`DeviceComm::connect`] without the start-up check.
    fn open(comm: &mut Communicator, device: &Device) -> Result<Connected> {
        let (rank, world) = (comm.rank(), comm.size());
        if world == 1 {
            return Ok(Connected::Host("a group of one rank has nothing to exchange".into()));
        }
        let members = comm.members().to_vec();
        let ordinal = match device.kind() {
            DeviceKind::Emu => Some(Device::emu_ordinal().unwrap_or(members[rank] as u32)),
            _ => None,
        };
        // Every rank's device kind, process and emulated device.
        let mine = [kind_code(device.kind()), f64::from(std::process::id()), ordinal.map_or(-1.0, f64::from)];
        let mut all = vec![0.0f64; 3 * world];
        comm.all_gather(&mine, &mut all)?;
        let of = |p: usize| &all[3 * p..3 * p + 3];
        if let Some(p) = (0..world).find(|&p| of(p)[0] != mine[0]) {
            return Err(ParallelError::DeviceCollective(format!(
                "ranks {} and {} run on different kinds of device; every rank of a group needs the same kind",
                members[rank], members[p]
            )));
        }
        match device.kind() {
            DeviceKind::Cpu => return Ok(Connected::Host("the CPU runs no kernels".into())),
            DeviceKind::Cuda => {
                let why = "the runtime does not check peer access between the ranks' GPUs, so the \
                           collectives stage through host memory";
                static SAID: Once = Once::new();
                SAID.call_once(|| eprintln!("trident: the device collectives stay off cuda: {why}"));
                return Ok(Connected::Host(why.into()));
            }
            DeviceKind::Emu => {}
        }
        if (0..world).any(|p| of(p)[1] != mine[1]) {
            return Ok(Connected::Host("the ranks are processes that share no device memory".into()));
        }
        if let Some(p) = (0..world).find(|&p| p != rank && of(p)[2] == mine[2]) {
            return Err(ParallelError::DeviceCollective(format!(
                "ranks {} and {} both drive emulated device {}; each rank needs a device of its own \
                 (Device::emu with its rank)",
                members[rank.min(p)],
                members[rank.max(p)],
                mine[2]
            )));
        }
        let kernels = launch_err(Kernels::load(device))?;
        let flag_words = launch::flag_words(world, BLOCKS as usize);
        let status_words = launch::status_words(BLOCKS as usize);
        let flags = as_device(ordinal, &mut || Ok(Buffer::<u32>::zeros(device, flag_words)?))?;
        let status = as_device(ordinal, &mut || Ok(Buffer::<u32>::zeros(device, status_words)?))?;
        let mut dc = DeviceComm {
            kernels,
            rank,
            world,
            members,
            ordinal,
            capacity: 0,
            data: Buffer::zeros(device, 0)?,
            out: Buffer::zeros(device, 0)?,
            scratch: Buffer::zeros(device, 0)?,
            flags,
            status,
            table: Buffer::zeros(device, 0)?,
            seq: 0,
            sent: vec![0; world],
            received: vec![0; world],
            wait: comm.timeout().min(MAX_WAIT),
        };
        dc.grow(comm, INITIAL_CAPACITY.max(world * world))?;
        Ok(Connected::Device(Box::new(dc)))
    }

    /// This rank in the group.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.world
    }

    /// Collectives run so far (the start-up check included).
    pub fn collectives(&self) -> u32 {
        self.seq
    }

    /// Sets how long a kernel waits for a peer (at most the host communicator's timeout is
    /// taken at connection; tests shorten it).
    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// Sums `view` over the group in place, with the algorithm [`launch::choose_all_reduce`]
    /// picks for its size.
    ///
    /// # Errors
    /// A view on another device, a length that differs between ranks (naming both), a peer
    /// that never arrived (naming it), the host communicator's errors.
    pub fn all_reduce(&mut self, comm: &mut Communicator, view: &mut ViewMut<f32>) -> Result<()> {
        let algorithm = launch::choose_all_reduce(view.len() * size_of::<f32>(), self.world);
        self.all_reduce_with(comm, view, algorithm)
    }

    /// [`DeviceComm::all_reduce`] with `algorithm`.
    fn all_reduce_with(
        &mut self,
        comm: &mut Communicator,
        view: &mut ViewMut<f32>,
        algorithm: Algorithm,
    ) -> Result<()> {
        let n = view.len();
        self.prepare(comm, Kind::AllReduce, n, 0, &[view.device()])?;
        self.data.view_mut(..n)?.copy_from(&view.as_view())?;
        self.run(Kind::AllReduce, algorithm, n, 0)?;
        let result = if algorithm == Algorithm::Ring { &self.data } else { &self.out };
        view.copy_from(&result.view(..n)?)?;
        Ok(())
    }

    /// Sums `full` (`world` blocks of `local.len()` elements) over the group and leaves block
    /// `rank` of the sums in `local`.
    ///
    /// # Errors
    /// As [`DeviceComm::all_reduce`], and `full` not `world` times `local`.
    pub fn reduce_scatter(
        &mut self,
        comm: &mut Communicator,
        full: &View<f32>,
        local: &mut ViewMut<f32>,
    ) -> Result<()> {
        let n = full.len();
        self.expect_blocks("reduce-scatter", n, local.len())?;
        self.prepare(comm, Kind::ReduceScatter, n, 0, &[full.device(), local.device()])?;
        self.data.view_mut(..n)?.copy_from(full)?;
        self.run(Kind::ReduceScatter, Algorithm::Ring, n, 0)?;
        let (s, e) = launch::segment(n, self.world, self.rank);
        local.copy_from(&self.data.view(s..e)?)?;
        Ok(())
    }

    /// Gathers every rank's `local` into `full` (`world` blocks of `local.len()` elements), in
    /// rank order.
    ///
    /// # Errors
    /// As [`DeviceComm::reduce_scatter`].
    pub fn all_gather(
        &mut self,
        comm: &mut Communicator,
        local: &View<f32>,
        full: &mut ViewMut<f32>,
    ) -> Result<()> {
        let n = full.len();
        self.expect_blocks("all-gather", n, local.len())?;
        self.prepare(comm, Kind::AllGather, n, 0, &[local.device(), full.device()])?;
        let (s, e) = launch::segment(n, self.world, self.rank);
        self.data.view_mut(s..e)?.copy_from(local)?;
        self.run(Kind::AllGather, Algorithm::Ring, n, 0)?;
        full.copy_from(&self.data.view(..n)?)?;
        Ok(())
    }

    /// Copies rank `root`'s `view` into every rank's `view` (every rank passes the same root and
    /// length).
    ///
    /// # Errors
    /// As [`DeviceComm::all_reduce`], and a root outside the group or one that differs between
    /// ranks (naming both).
    pub fn broadcast(&mut self, comm: &mut Communicator, view: &mut ViewMut<f32>, root: usize) -> Result<()> {
        self.expect_rank(Kind::Broadcast, root)?;
        let n = view.len();
        self.prepare(comm, Kind::Broadcast, n, root, &[view.device()])?;
        if self.rank == root {
            self.data.view_mut(..n)?.copy_from(&view.as_view())?;
        }
        self.run(Kind::Broadcast, Algorithm::Ring, n, root)?;
        if self.rank != root {
            view.copy_from(&self.data.view(..n)?)?;
        }
        Ok(())
    }

    /// Sends `view` to rank `to` of the group, which receives it with [`DeviceComm::recv`]:
    /// the two ranks exchange the length on the host, then the data goes from this rank's
    /// buffer into `to`'s by the send kernel. Returns once the data is in `to`'s buffer; it
    /// waits for `to`'s receive to start (so a schedule must not have `to` blocked in a send
    /// to this rank meanwhile: post sends from a thread of their own, as the pipeline does).
    ///
    /// # Errors
    /// A view on another device, `to` outside the group or this rank, a length that differs
    /// from the receiver's (naming both), a receiver that never arrives (naming it), the host
    /// communicator's errors.
    pub fn send(&mut self, comm: &mut Communicator, view: &View<f32>, to: usize) -> Result<()> {
        let n = view.len();
        self.pair(comm, Kind::Send, n, to, &[view.device()])?;
        self.data.view_mut(..n)?.copy_from(view)?;
        self.run(Kind::Send, Algorithm::Ring, n, to)
    }

    /// Receives into `view` what rank `from` sends with [`DeviceComm::send`].
    ///
    /// # Errors
    /// As [`DeviceComm::send`], for the sender.
    pub fn recv(&mut self, comm: &mut Communicator, view: &mut ViewMut<f32>, from: usize) -> Result<()> {
        let n = view.len();
        self.pair(comm, Kind::Recv, n, from, &[view.device()])?;
        self.run(Kind::Recv, Algorithm::Ring, n, from)?;
        view.copy_from(&self.out.view(..n)?)?;
        Ok(())
    }

    /// A send's (or receive's) agreement with its peer `other`: the two exchange their lengths
    /// on the host (the sender first), each refusing a mismatch naming both; a transfer larger
    /// than the buffers grows them where the group is the pair itself.
    fn pair(
        &mut self,
        comm: &mut Communicator,
        kind: Kind,
        n: usize,
        other: usize,
        devices: &[&Device],
    ) -> Result<()> {
        self.expect_rank(kind, other)?;
        if other == self.rank {
            return Err(ParallelError::DeviceCollective(format!(
                "{} on rank {}: a rank cannot send to or receive from itself",
                kind.name(),
                self.members[self.rank]
            )));
        }
        self.check_devices(kind, devices)?;
        let mine = [n as f64];
        let mut theirs = [0.0f64];
        if kind == Kind::Send {
            comm.send(&mine, other, PAIR_TAG)?;
            comm.recv(&mut theirs, other, PAIR_TAG)?;
        } else {
            comm.recv(&mut theirs, other, PAIR_TAG)?;
            comm.send(&mine, other, PAIR_TAG)?;
        }
        if theirs != mine {
            return Err(ParallelError::DeviceCollective(format!(
                "rank {} runs {} of {n} elements while rank {} runs its counterpart of {} elements: \
                 a send and its receive must have the same length",
                self.members[self.rank],
                kind.name(),
                self.members[other],
                theirs[0]
            )));
        }
        if n > self.capacity {
            if self.world != 2 {
                return Err(ParallelError::DeviceCollective(format!(
                    "{} of {n} elements on rank {}: the buffers hold {} and grow only with the whole \
                     group; call DeviceComm::reserve on every rank first",
                    kind.name(),
                    self.members[self.rank],
                    self.capacity
                )));
            }
            self.grow(comm, n.max(2 * self.capacity))?;
        }
        Ok(())
    }

    /// Grows the buffers (on every rank of the group at once) to hold at least `n` elements,
    /// so that sends and receives up to `n` need no group-wide step.
    ///
    /// # Errors
    /// The host communicator's errors.
    pub fn reserve(&mut self, comm: &mut Communicator, n: usize) -> Result<()> {
        let mut all = vec![0.0f64; self.world];
        comm.all_gather(&[n as f64], &mut all)?;
        let most = all.iter().fold(0.0f64, |a, b| a.max(*b)) as usize;
        if most > self.capacity {
            self.grow(comm, most)?;
        }
        Ok(())
    }

    /// `rank` must be a rank of the group.
    fn expect_rank(&self, kind: Kind, rank: usize) -> Result<()> {
        if rank < self.world {
            return Ok(());
        }
        Err(ParallelError::DeviceCollective(format!(
            "{} on rank {}: rank {rank} is not a rank of this group of {}",
            kind.name(),
            self.members[self.rank],
            self.world
        )))
    }

    /// `full` must be `world` blocks of `local` elements.
    fn expect_blocks(&self, what: &str, full: usize, local: usize) -> Result<()> {
        if local.checked_mul(self.world) == Some(full) {
            return Ok(());
        }
        Err(ParallelError::DeviceCollective(format!(
            "{what} on rank {}: the full tensor has {full} elements, expected {} ranks x {local}",
            self.members[self.rank], self.world
        )))
    }

    /// Checks the views' devices, agrees with the peers on the collective and its length, and
    /// grows the buffers (on every rank at once) where they are too small.
    fn prepare(
        &mut self,
        comm: &mut Communicator,
        kind: Kind,
        n: usize,
        root: usize,
        devices: &[&Device],
    ) -> Result<()> {
        self.check_devices(kind, devices)?;
        let mine = [kind as u32 as f64, n as f64, root as f64];
        let mut all = vec![0.0f64; 3 * self.world];
        comm.all_gather(&mine, &mut all)?;
        if let Some(p) = (0..self.world).find(|&p| all[3 * p..3 * p + 2] != mine[..2]) {
            let (k, m) = (all[3 * p] as u32, all[3 * p + 1]);
            let theirs = [
                Kind::AllReduce,
                Kind::ReduceScatter,
                Kind::AllGather,
                Kind::Probe,
                Kind::Broadcast,
                Kind::Send,
                Kind::Recv,
            ]
            .into_iter()
            .find(|x| *x as u32 == k)
            .map_or("another collective", Kind::name);
            return Err(ParallelError::DeviceCollective(format!(
                "rank {} runs {} of {n} elements while rank {} runs {theirs} of {m} elements: the ranks of a \
                 group must run the same collectives on tensors of the same length",
                self.members[self.rank],
                kind.name(),
                self.members[p]
            )));
        }
        if let Some(p) = (0..self.world).find(|&p| all[3 * p + 2] != mine[2]) {
            let theirs = all[3 * p + 2] as usize;
            return Err(ParallelError::DeviceCollective(format!(
                "rank {} runs {} from rank {} while rank {} runs it from rank {}: every rank of a group \
                 names the same root",
                self.members[self.rank],
                kind.name(),
                self.members.get(root).copied().unwrap_or(root),
                self.members[p],
                self.members.get(theirs).copied().unwrap_or(theirs)
            )));
        }
        if n > self.capacity {
            self.grow(comm, n.max(2 * self.capacity))?;
        }
        Ok(())
    }

    /// Refuses views that are not on this rank's device.
    fn check_devices(&self, kind: Kind, devices: &[&Device]) -> Result<()> {
        for d in devices {
            if !d.same_as(self.kernels.device()) {
                return Err(ParallelError::DeviceCollective(format!(
                    "{} on rank {}: a view on {} was passed to the group's collectives on {}, this rank's device",
                    kind.name(),
                    self.members[self.rank],
                    d.kind(),
                    self.kernels.device().kind()
                )));
            }
        }
        Ok(())
    }

    /// Reallocates data, output and scratch for `capacity` elements and exchanges the new
    /// addresses (every rank calls it at once, with the same capacity).
    fn grow(&mut self, comm: &mut Communicator, capacity: usize) -> Result<()> {
        let device = self.kernels.device().clone();
        let ordinal = self.ordinal;
        self.data = as_device(ordinal, &mut || Ok(Buffer::zeros(&device, capacity)?))?;
        self.out = as_device(ordinal, &mut || Ok(Buffer::zeros(&device, capacity)?))?;
        self.scratch = as_device(ordinal, &mut || Ok(Buffer::zeros(&device, capacity)?))?;
        self.capacity = capacity;
        let mine: Vec<f64> = [
            self.data.view(..)?.addr(),
            self.scratch.view(..)?.addr(),
            self.flags.view(..)?.addr(),
            self.out.view(..)?.addr(),
        ]
        .into_iter()
        .flat_map(split)
        .collect();
        let words = mine.len();
        let mut all = vec![0.0f64; words * self.world];
        comm.all_gather(&mine, &mut all)?;
        let w = self.world;
        let mut table = vec![0u64; launch::TABLE_WORDS_PER_RANK * w];
        for p in 0..w {
            let theirs = &all[words * p..words * (p + 1)];
            for region in 0..launch::TABLE_WORDS_PER_RANK {
                table[region * w + p] = join(&theirs[2 * region..2 * region + 2]);
            }
        }
        self.table = as_device(ordinal, &mut || Ok(Buffer::from_slice(&device, &table)?))?;
        Ok(())
    }

    /// Launches collective `kind` over the first `n` elements as the next collective (the next
    /// transfer of the link to or from `other` for a send or receive; `other` is the root of a
    /// broadcast) and turns a timed-out wait into an error naming the peer.
    fn run(&mut self, kind: Kind, algorithm: Algorithm, n: usize, other: usize) -> Result<()> {
        let next = |c: &mut u32| {
            *c = c.wrapping_add(1).max(1);
            *c
        };
        let seq = match kind {
            Kind::Send => next(&mut self.sent[other]),
            Kind::Recv => next(&mut self.received[other]),
            _ => next(&mut self.seq),
        };
        self.status.view_mut(..)?.fill_zero()?;
        let (kernels, rank, world, wait) = (&self.kernels, self.rank, self.world, self.wait);
        let (table, status) = (&self.table, &mut self.status);
        as_device(self.ordinal, &mut || {
            let mut peers = Peers {
                table: table.view(..)?,
                status: status.view_mut(..)?,
                rank,
                world,
                seq,
                timeout: wait,
                blocks: BLOCKS,
            };
            // SAFETY: the table holds, for every rank of the group, the addresses of its data,
            // scratch, flags and output buffers, each of `capacity >= n` elements (the flags
            // of `flag_words(world, BLOCKS)` words), which live as long as this communicator
            // and are only touched by its collectives; `prepare` made every rank agree on the
            // collective and its length (a send and its receive: the two ranks), and every rank
            // numbers its collectives alike (a link's two ends its transfers). The output
            // buffers are not the data buffers (one-shot reads one, writes the other).
            let launched = unsafe {
                match kind {
                    Kind::AllReduce | Kind::Probe => {
                        launch::all_reduce::<f32>(kernels, algorithm, &mut peers, n)
                    }
                    Kind::ReduceScatter => launch::reduce_scatter::<f32>(kernels, &mut peers, n),
                    Kind::AllGather => launch::all_gather::<f32>(kernels, &mut peers, n),
                    Kind::Broadcast => launch::broadcast::<f32>(kernels, &mut peers, other, n),
                    Kind::Send => launch::send::<f32>(kernels, &mut peers, other, n),
                    Kind::Recv => launch::recv::<f32>(kernels, &mut peers, other, n),
                }
            };
            launch_err(launched)
        })?;
        self.kernels.device().synchronize()?;
        let words = match self.status.view(..)?.host() {
            Some(h) => h.to_vec(),
            None => self.status.to_vec()?,
        };
        let kernel = <f32 as CollectiveElement>::kernel(kind.family(algorithm));
        if let Some((peer, message)) = launch::timeout(kernel, self.members[self.rank], &words) {
            let peer = self.members.get(peer as usize).copied().unwrap_or(peer as usize);
            return Err(ParallelError::PeerTimeout { peer, message });
        }
        Ok(())
    }

    /// The start-up check: a two-shot all-reduce of `world x world` elements in which rank `p`
    /// contributes 1 at elements `o world + p` (for every `o`) and 0 elsewhere, over outputs
    /// preset to -1. Element `o world + p` of rank `r`'s output is computed by rank `o` from
    /// rank `p`'s input and written into rank `r`'s output: still -1 where `o` could not write
    /// into `r`'s buffer, not 1 where `o` could not read `p`'s. Every rank then learns whether
    /// every other passed.
    fn probe(&mut self, comm: &mut Communicator) -> Result<()> {
        let w = self.world;
        let n = w * w;
        self.prepare(comm, Kind::Probe, n, 0, &[])?;
        let input: Vec<f32> = (0..n).map(|i| if i % w == self.rank { 1.0 } else { 0.0 }).collect();
        self.data.view_mut(..n)?.copy_from_slice(&input)?;
        self.out.view_mut(..n)?.copy_from_slice(&vec![-1.0; n])?;
        let ran = self.run(Kind::Probe, Algorithm::TwoShot, n, 0);
        let mut problem = match ran {
            Err(e) => Some(format!("{e}")),
            Ok(()) => {
                let got = self.out.view(..n)?.to_vec()?;
                let me = self.members[self.rank];
                got.iter().enumerate().find(|(_, v)| **v != 1.0).map(|(i, v)| {
                    let (o, p) = (self.members[i / w], self.members[i % w]);
                    if *v == -1.0 {
                        format!("rank {o} could not write into rank {me}'s communication buffer")
                    } else {
                        format!("rank {o} could not read rank {p}'s communication buffer (rank {me} got {v})")
                    }
                })
            }
        };
        // Everyone learns who failed, so that no rank goes on with a group that cannot work.
        let mut verdicts = vec![0.0f64; w];
        comm.all_gather(&[f64::from(u8::from(problem.is_some()))], &mut verdicts)?;
        if problem.is_none() {
            if let Some(p) = verdicts.iter().position(|v| *v != 0.0) {
                problem = Some(format!("rank {} failed the check of its peers' buffers", self.members[p]));
            }
        }
        match problem {
            None => Ok(()),
            Some(why) => Err(ParallelError::DeviceCollective(format!(
                "the group's device collectives cannot start on rank {}: {why}",
                self.members[self.rank]
            ))),
        }
    }
}

impl Kind {
    /// The kernel family that runs this kind with `algorithm`.
    fn family(self, algorithm: Algorithm) -> launch::Family {
        match (self, algorithm) {
            (Kind::ReduceScatter, _) => launch::Family::RingReduceScatter,
            (Kind::AllGather, _) => launch::Family::RingAllGather,
            (Kind::Broadcast, _) => launch::Family::Broadcast,
            (Kind::Send, _) => launch::Family::Send,
            (Kind::Recv, _) => launch::Family::Recv,
            (_, Algorithm::OneShot) => launch::Family::OneShotAllReduce,
            (_, Algorithm::TwoShot) => launch::Family::TwoShotAllReduce,
            (_, Algorithm::Ring) => launch::Family::RingAllReduce,
        }
    }
}

/// Runs `f` as emulated device `ordinal` (where there is one), then restores the thread's own.
fn as_device<R>(ordinal: Option<u32>, f: &mut dyn FnMut() -> Result<R>) -> Result<R> {
    let Some(o) = ordinal else { return f() };
    let before = trident_simt::set_emulated_device(Some(o));
    let r = f();
    trident_simt::set_emulated_device(before);
    r
}

fn launch_err<T>(r: launch::Result<T>) -> Result<T> {
    r.map_err(|e| ParallelError::DeviceCollective(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_collectives::CommConfig;

    /// Runs `f(rank, comm)` on `world` threads, one rank each, with an in-process group.
    fn on_ranks<R: Send>(world: usize, f: impl Fn(usize, &mut Communicator) -> R + Sync) -> Vec<R> {
        let comms = Communicator::inproc_world(world, CommConfig::default()).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .enumerate()
                .map(|(r, mut c)| {
                    let f = &f;
                    s.spawn(move || f(r, &mut c))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
        })
    }

    fn connect(comm: &mut Communicator, device: &Device) -> DeviceComm {
        match DeviceComm::connect(comm, device).unwrap() {
            Connected::Device(d) => *d,
            Connected::Host(why) => panic!("host path on {}: {why}", device.kind()),
        }
    }

    /// Rank `r`'s input: small integers, so that every order of summation gives the same sum.
    fn input(r: usize, n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7 + r * 13) % 17) as f32 - 8.0).collect()
    }

    /// The all-reduce lengths of the test: 1, odd, larger, and past the first capacity (the
    /// buffers grow on every rank at once).
    const LENGTHS: [usize; 4] = [1, 7, 1000, INITIAL_CAPACITY + 5];

    #[test]
    fn collectives_on_two_and_three_emulated_devices_equal_the_sums() {
        let algorithms = [Algorithm::OneShot, Algorithm::TwoShot, Algorithm::Ring];
        for world in [2, 3] {
            let results = on_ranks(world, |r, comm| {
                let device = Device::Emu;
                let mut dc = connect(comm, &device);
                // Every algorithm on every length, then the ring's reduce-scatter and
                // all-gather: consecutive collectives on alternate flag sets, no reset.
                let mut out = Vec::new();
                for algorithm in algorithms {
                    for n in LENGTHS {
                        let mut b = Buffer::from_slice(&device, &input(r, n)).unwrap();
                        dc.all_reduce_with(comm, &mut b.view_mut(..).unwrap(), algorithm).unwrap();
                        out.push(b.to_vec().unwrap());
                    }
                }
                for m in [3, 250] {
                    let full = Buffer::from_slice(&device, &input(r, m * world)).unwrap();
                    let mut local = Buffer::<f32>::zeros(&device, m).unwrap();
                    dc.reduce_scatter(comm, &full.view(..).unwrap(), &mut local.view_mut(..).unwrap())
                        .unwrap();
                    out.push(local.to_vec().unwrap());
                    let mut gathered = Buffer::<f32>::zeros(&device, m * world).unwrap();
                    dc.all_gather(comm, &local.view(..).unwrap(), &mut gathered.view_mut(..).unwrap())
                        .unwrap();
                    out.push(gathered.to_vec().unwrap());
                }
                assert_eq!(dc.collectives() as usize, 1 + 3 * LENGTHS.len() + 4, "the check, then each once");
                out
            });
            let sum =
                |n: usize| -> Vec<f32> { (0..n).map(|i| (0..world).map(|r| input(r, n)[i]).sum()).collect() };
            for (r, out) in results.iter().enumerate() {
                for (a, algorithm) in algorithms.into_iter().enumerate() {
                    for (k, n) in LENGTHS.into_iter().enumerate() {
                        let got = &out[a * LENGTHS.len() + k];
                        assert_eq!(*got, sum(n), "world {world} rank {r}: {algorithm:?} all-reduce of {n}");
                    }
                }
                let at = algorithms.len() * LENGTHS.len();
                for (k, m) in [3, 250].into_iter().enumerate() {
                    let all = sum(m * world);
                    assert_eq!(
                        out[at + 2 * k],
                        all[r * m..(r + 1) * m],
                        "world {world} rank {r}: reduce-scatter"
                    );
                    assert_eq!(out[at + 2 * k + 1], all, "world {world} rank {r}: all-gather of the sums");
                }
            }
        }
    }

    /// Opens the group on two emulated devices, lets `break_table(rank, table)` change each
    /// rank's peer table, and returns each rank's start-up check error.
    fn probe_with(break_table: impl Fn(usize, &mut [u64]) + Sync) -> Vec<String> {
        on_ranks(2, |r, comm| {
            let Connected::Device(mut dc) = DeviceComm::open(comm, &Device::Emu).unwrap() else {
                panic!("two emulated ranks of one process connect")
            };
            let mut table = dc.table.to_vec().unwrap();
            break_table(r, &mut table);
            dc.table.copy_from_slice(&table).unwrap();
            dc.probe(comm).map(|()| String::new()).unwrap_or_else(|e| e.to_string())
        })
    }

    #[test]
    fn the_start_up_check_names_the_pair_that_cannot_reach() {
        // Rank 1 writes its sums meant for rank 0's output into its own scratch instead.
        let errors = probe_with(|r, t| {
            if r == 1 {
                t[3 * 2] = t[2 + 1];
            }
        });
        assert!(
            errors[0].contains("rank 1 could not write into rank 0's communication buffer"),
            "{}",
            errors[0]
        );
        assert!(errors[1].contains("rank 0 failed the check"), "{}", errors[1]);
        // Rank 1 reads its own data where rank 0's should be.
        let errors = probe_with(|r, t| {
            if r == 1 {
                t[0] = t[1];
            }
        });
        for e in &errors {
            assert!(e.contains("rank 1 could not read rank 0's communication buffer"), "{e}");
        }
        assert_eq!(probe_with(|_, _| {}), ["", ""], "an intact table passes");
    }

    #[test]
    fn broadcasts_and_transfers_on_emulated_devices_deliver_with_no_host_transfer() {
        for world in [2, 3] {
            let results = on_ranks(world, |r, comm| {
                let device = Device::Emu;
                let mut dc = connect(comm, &device);
                // Growing the buffers uploads the new peer table (addresses, not data): before
                // the count.
                dc.reserve(comm, LENGTHS[3]).unwrap();
                let upload = |n: usize| Buffer::from_slice(&device, &input(r, n)).unwrap();
                let mut casts: Vec<Vec<Buffer<f32>>> =
                    LENGTHS.iter().map(|&n| (0..world).map(|_| upload(n)).collect()).collect();
                let sends: Vec<Buffer<f32>> = LENGTHS.iter().map(|&n| upload(n)).collect();
                let mut forward: Vec<Buffer<f32>> = LENGTHS.iter().map(|&n| upload(n)).collect();
                let mut backward: Vec<Buffer<f32>> = LENGTHS.iter().map(|&n| upload(n)).collect();
                let before = trident_runtime::host_transfers();
                for (k, _) in LENGTHS.iter().enumerate() {
                    for (root, b) in casts[k].iter_mut().enumerate() {
                        dc.broadcast(comm, &mut b.view_mut(..).unwrap(), root).unwrap();
                    }
                    // A pipeline's transfers, forward then backward: rank r receives from the
                    // rank before it, then sends on.
                    if r > 0 {
                        dc.recv(comm, &mut forward[k].view_mut(..).unwrap(), r - 1).unwrap();
                    }
                    if r + 1 < world {
                        dc.send(comm, &sends[k].view(..).unwrap(), r + 1).unwrap();
                        dc.recv(comm, &mut backward[k].view_mut(..).unwrap(), r + 1).unwrap();
                    }
                    if r > 0 {
                        dc.send(comm, &sends[k].view(..).unwrap(), r - 1).unwrap();
                    }
                }
                let transfers = trident_runtime::host_transfers() - before;
                assert_eq!(
                    dc.collectives() as usize,
                    1 + world * LENGTHS.len(),
                    "the check, then the broadcasts"
                );
                // A transfer past the buffers' capacity grows them where the group is the
                // pair; in a larger group it is refused.
                let big = 3 * LENGTHS[3];
                let mut grown = Buffer::from_slice(&device, &input(r, big)).unwrap();
                match (world, r) {
                    (2, 0) => dc.send(comm, &grown.view(..).unwrap(), 1).unwrap(),
                    (2, _) => dc.recv(comm, &mut grown.view_mut(..).unwrap(), 0).unwrap(),
                    (_, 0) => {
                        let e = dc.send(comm, &grown.view(..).unwrap(), 1).unwrap_err().to_string();
                        assert!(e.contains("call DeviceComm::reserve on every rank first"), "{e}");
                    }
                    (_, 1) => {
                        let e = dc.recv(comm, &mut grown.view_mut(..).unwrap(), 0).unwrap_err().to_string();
                        assert!(e.contains("the buffers hold"), "{e}");
                    }
                    _ => {}
                }
                let download = |b: &Buffer<f32>| b.to_vec().unwrap();
                let casts: Vec<Vec<Vec<f32>>> =
                    casts.iter().map(|c| c.iter().map(download).collect()).collect();
                let forward: Vec<Vec<f32>> = forward.iter().map(download).collect();
                let backward: Vec<Vec<f32>> = backward.iter().map(download).collect();
                (transfers, casts, forward, backward, download(&grown))
            });
            for (r, (transfers, casts, forward, backward, grown)) in results.iter().enumerate() {
                if world == 2 {
                    let want = input(0, 3 * LENGTHS[3]);
                    assert_eq!(*grown, want, "world 2 rank {r}: the transfer that grew the buffers");
                }
                assert_eq!(
                    *transfers, 0,
                    "world {world} rank {r}: host transfers during the device transfers"
                );
                for (k, n) in LENGTHS.into_iter().enumerate() {
                    for (root, got) in casts[k].iter().enumerate() {
                        assert_eq!(
                            *got,
                            input(root, n),
                            "world {world} rank {r}: broadcast of {n} from {root}"
                        );
                    }
                    // Rank 0 receives nothing forward, the last rank nothing backward: their
                    // buffers keep their own input.
                    assert_eq!(
                        forward[k],
                        input(r.saturating_sub(1), n),
                        "world {world} rank {r}: forward transfer of {n}"
                    );
                    assert_eq!(
                        backward[k],
                        input((r + 1).min(world - 1), n),
                        "world {world} rank {r}: backward transfer of {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_send_and_a_receive_of_different_lengths_are_refused_naming_both() {
        let errors = on_ranks(2, |r, comm| {
            let device = Device::Emu;
            let mut dc = connect(comm, &device);
            let mut b = Buffer::<f32>::zeros(&device, 10 + r).unwrap();
            if r == 0 {
                dc.send(comm, &b.view(..).unwrap(), 1).unwrap_err().to_string()
            } else {
                dc.recv(comm, &mut b.view_mut(..).unwrap(), 0).unwrap_err().to_string()
            }
        });
        assert!(
            errors[0].contains("rank 0 runs a send of 10 elements while rank 1 runs its counterpart of 11"),
            "{}",
            errors[0]
        );
        assert!(
            errors[1]
                .contains("rank 1 runs a receive of 11 elements while rank 0 runs its counterpart of 10"),
            "{}",
            errors[1]
        );
    }

    #[test]
    fn lengths_that_differ_between_ranks_are_refused_naming_both() {
        let errors = on_ranks(2, |r, comm| {
            let device = Device::Emu;
            let mut dc = connect(comm, &device);
            let mut b = Buffer::<f32>::zeros(&device, 10 + r).unwrap();
            dc.all_reduce(comm, &mut b.view_mut(..).unwrap()).unwrap_err().to_string()
        });
        assert!(errors[0].contains("rank 0 runs an all-reduce of 10 elements while rank 1"), "{}", errors[0]);
        assert!(errors[1].contains("rank 1 runs an all-reduce of 11 elements while rank 0"), "{}", errors[1]);
    }

    #[test]
    fn a_peer_that_never_arrives_is_named_in_an_error() {
        let outcomes = on_ranks(2, |r, comm| {
            let device = Device::Emu;
            let mut dc = connect(comm, &device);
            dc.set_wait(Duration::from_millis(200));
            // Rank 0 launches past the exchange that would have kept it waiting on the host;
            // rank 1 never launches.
            let outcome =
                if r == 0 { Some(dc.run(Kind::AllReduce, Algorithm::OneShot, 16, 0)) } else { None };
            // Rank 1's buffers stay alive until rank 0's kernel has given up.
            comm.barrier().unwrap();
            outcome
        });
        match &outcomes[0] {
            Some(Err(ParallelError::PeerTimeout { peer: 1, message })) => {
                assert!(message.contains("rank 0 waited for rank 1"), "{message}")
            }
            other => panic!(
                "rank 0 should have timed out waiting for rank 1: {:?}",
                other.as_ref().map(|r| r.is_ok())
            ),
        }
    }

    #[test]
    fn the_cpu_and_mixed_devices_do_not_connect() {
        let cpu = on_ranks(2, |_, comm| match DeviceComm::connect(comm, &Device::Cpu).unwrap() {
            Connected::Host(why) => why,
            Connected::Device(_) => panic!("the CPU runs no kernels"),
        });
        assert!(cpu[0].contains("CPU"), "{}", cpu[0]);
        let mixed = on_ranks(2, |r, comm| {
            let device = if r == 0 { Device::Emu } else { Device::Cpu };
            DeviceComm::connect(comm, &device).err().map(|e| e.to_string())
        });
        for e in mixed {
            let e = e.expect("ranks on an emulated device and the CPU are refused");
            assert!(e.contains("ranks 0 and 1") || e.contains("ranks 1 and 0"), "{e}");
        }
    }

    #[test]
    fn a_view_on_another_device_is_refused() {
        let errors = on_ranks(2, |_, comm| {
            let mut dc = connect(comm, &Device::Emu);
            let mut b = Buffer::<f32>::zeros(&Device::Cpu, 4).unwrap();
            dc.all_reduce(comm, &mut b.view_mut(..).unwrap()).unwrap_err().to_string()
        });
        assert!(errors[0].contains("a view on cpu") && errors[0].contains("on emu"), "{}", errors[0]);
    }
}
