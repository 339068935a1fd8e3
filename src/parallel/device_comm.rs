//! A device communicator for the ranks of a group that are threads of one process, each with
//! its own device: the collectives run as kernels over peer memory (the launch wrappers of
//! `trident_ops::launch`: ring, one-shot and two-shot), with no host round trip of the data.
//!
//! Each rank owns a communication buffer on its device: data and output regions and an f32
//! scratch region of the same capacity, the flag words in a region of their own, and its
//! status words. Every rank learns every peer's addresses through the group's host
//! [`Communicator`] (an all-gather of the addresses), and builds its peer table from them
//! (`trident_kernels::collective::layout`). Collectives are numbered 1, 2, ... on every rank
//! alike; the kernels use the two flag sets in turn and compare flags with the number, so
//! consecutive collectives need no reset of the flags.
//!
//! Before each collective the ranks exchange its kind and length through the host
//! communicator: a rank whose length differs gets an error naming both ranks instead of a
//! corrupted sum, and the kernels start together (their waits for peers are then short). A
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
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "an all-reduce",
            Kind::ReduceScatter => "a reduce-scatter",
            Kind::AllGather => "an all-gather",
            Kind::Probe => "the start-up check",
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
        self.prepare(comm, Kind::AllReduce, n, &[view.device()])?;
        self.data.view_mut(..n)?.copy_from(&view.as_view())?;
        self.run(Kind::AllReduce, algorithm, n)?;
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
        self.prepare(comm, Kind::ReduceScatter, n, &[full.device(), local.device()])?;
        self.data.view_mut(..n)?.copy_from(full)?;
        self.run(Kind::ReduceScatter, Algorithm::Ring, n)?;
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
        self.prepare(comm, Kind::AllGather, n, &[local.device(), full.device()])?;
        let (s, e) = launch::segment(n, self.world, self.rank);
        self.data.view_mut(s..e)?.copy_from(local)?;
        self.run(Kind::AllGather, Algorithm::Ring, n)?;
        full.copy_from(&self.data.view(..n)?)?;
        Ok(())
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
    fn prepare(&mut self, comm: &mut Communicator, kind: Kind, n: usize, devices: &[&Device]) -> Result<()> {
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
        let mine = [kind as u32 as f64, n as f64];
        let mut all = vec![0.0f64; 2 * self.world];
        comm.all_gather(&mine, &mut all)?;
        if let Some(p) = (0..self.world).find(|&p| all[2 * p..2 * p + 2] != mine) {
            let (k, m) = (all[2 * p] as u32, all[2 * p + 1]);
            let theirs = [Kind::AllReduce, Kind::ReduceScatter, Kind::AllGather, Kind::Probe]
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
        if n > self.capacity {
            self.grow(comm, n.max(2 * self.capacity))?;
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

    /// Launches collective `kind` over the first `n` elements as the next collective and turns
    /// a timed-out wait into an error naming the peer.
    fn run(&mut self, kind: Kind, algorithm: Algorithm, n: usize) -> Result<()> {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.status.view_mut(..)?.fill_zero()?;
        let (kernels, rank, world, seq, wait) = (&self.kernels, self.rank, self.world, self.seq, self.wait);
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
            // collective and its length, and every rank numbers its collectives alike. The
            // output buffers are not the data buffers (one-shot reads one, writes the other).
            let launched = unsafe {
                match kind {
                    Kind::AllReduce | Kind::Probe => {
                        launch::all_reduce::<f32>(kernels, algorithm, &mut peers, n)
                    }
                    Kind::ReduceScatter => launch::reduce_scatter::<f32>(kernels, &mut peers, n),
                    Kind::AllGather => launch::all_gather::<f32>(kernels, &mut peers, n),
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
        self.prepare(comm, Kind::Probe, n, &[])?;
        let input: Vec<f32> = (0..n).map(|i| if i % w == self.rank { 1.0 } else { 0.0 }).collect();
        self.data.view_mut(..n)?.copy_from_slice(&input)?;
        self.out.view_mut(..n)?.copy_from_slice(&vec![-1.0; n])?;
        let ran = self.run(Kind::Probe, Algorithm::TwoShot, n);
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
            let outcome = if r == 0 { Some(dc.run(Kind::AllReduce, Algorithm::OneShot, 16)) } else { None };
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
