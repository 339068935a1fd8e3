//! The communicators one rank uses, carved out of one rank grid, and the host staging that
//! lets collectives run on device views.

use trident_collectives::{Communicator, RankGrid, ReduceOp};
use trident_runtime::{host_transfers, Device, RuntimeError, View, ViewMut};

use super::device_comm::{Connected, DeviceComm};
use super::{ParallelConfig, ParallelError, PipeLinks, Result, ShardPlace};

/// Runs `f` on the view's elements in host memory: in place on `Cpu` and `Emu`, through a
/// host copy on `Cuda`.
pub fn on_host<R, E: From<RuntimeError>>(
    view: &mut ViewMut<f32>,
    f: impl FnOnce(&mut [f32]) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    if let Some(host) = view.host_mut() {
        return f(host);
    }
    let mut copy = view.as_view().to_vec()?;
    let r = f(&mut copy)?;
    view.copy_from_slice(&copy)?;
    Ok(r)
}

/// The tensor-parallel group; a group of one makes every collective a no-op.
///
/// Its collectives on views are Megatron-LM's mappings between regions: the all-reduce
/// ([`TpGroup::all_reduce_view`]) is "reduce from the tensor-parallel region" (`g` forward, the
/// backward of "copy to the tensor-parallel region" `f`); the reduce-scatter
/// ([`TpGroup::reduce_scatter_rows`]) "reduce-scatter to the sequence-parallel region"; the
/// all-gather ([`TpGroup::all_gather_rows`]) "gather from the sequence-parallel region". Once
/// [`TpGroup::attach`] has connected the group on its devices ([`DeviceComm`]: `Emu`, ranks that
/// are threads of one process), they run as kernels on the views, with no host round trip;
/// otherwise (`Cpu`, `Cuda`, ranks in separate processes) through host memory.
pub struct TpGroup {
    comm: Option<Communicator>,
    device: Option<Box<DeviceComm>>,
    traffic: TpTraffic,
    /// This rank's index in the group (its [`ShardPlace::tp_rank`]).
    pub rank: usize,
    /// Ranks in the group (TP).
    pub size: usize,
}

/// What a [`TpGroup`]'s collectives on views have done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TpTraffic {
    /// Collectives that ran as kernels on the devices.
    pub on_device: u64,
    /// Collectives that went through host memory.
    pub on_host: u64,
    /// Host transfers ([`trident_runtime::host_transfers`]) this rank made inside them.
    pub host_transfers: u64,
}

impl TpGroup {
    /// The group of one rank: no communicator, every collective a no-op.
    pub fn single() -> Self {
        Self { comm: None, device: None, traffic: TpTraffic::default(), rank: 0, size: 1 }
    }

    /// The group over `comm`'s ranks; a communicator of one rank is dropped and the
    /// collectives become no-ops. The collectives go through host memory until
    /// [`TpGroup::attach`].
    pub fn new(comm: Communicator) -> Self {
        let (rank, size) = (comm.rank(), comm.size());
        Self { comm: (size > 1).then_some(comm), device: None, traffic: TpTraffic::default(), rank, size }
    }

    /// Connects the group on `device`, this rank's device (every rank of the group calls it at
    /// the same point): its collectives on views then run on the devices where
    /// [`DeviceComm::connect`] can connect them (on `Cuda` they stay on the host path, and the
    /// first group that tries says why on standard error). A no-op for a group of one.
    ///
    /// # Errors
    /// As [`DeviceComm::connect`]: ranks on different kinds of device or on the same emulated
    /// device, a peer whose buffer this rank cannot reach (naming both).
    pub fn attach(&mut self, device: &Device) -> Result<()> {
        let Some(comm) = &mut self.comm else { return Ok(()) };
        if let Connected::Device(d) = DeviceComm::connect(comm, device)? {
            self.device = Some(d);
        }
        Ok(())
    }

    /// Whether the collectives on views run on the devices.
    pub fn on_device(&self) -> bool {
        self.device.is_some()
    }

    /// What the collectives on views have done so far.
    pub fn traffic(&self) -> TpTraffic {
        self.traffic
    }

    /// Reduces the host slice `buf` over the group with `op`, in place on every rank.
    pub fn all_reduce(&mut self, buf: &mut [f32], op: ReduceOp) -> Result<()> {
        match &mut self.comm {
            Some(c) => Ok(c.all_reduce(buf, op)?),
            None => Ok(()),
        }
    }

    /// Counts one collective on views and the host transfers made since `before`.
    fn count(&mut self, before: u64) {
        match self.device {
            Some(_) => self.traffic.on_device += 1,
            None => self.traffic.on_host += 1,
        }
        self.traffic.host_transfers += host_transfers() - before;
    }

    /// Sums `view` over the group: Megatron-LM's "reduce from the tensor-parallel region" (`g`
    /// forward, and `f`'s backward).
    #[doc(alias = "reduce_from_tensor_model_parallel_region")]
    pub fn all_reduce_view(&mut self, view: &mut ViewMut<f32>) -> Result<()> {
        let Some(comm) = &mut self.comm else { return Ok(()) };
        let before = host_transfers();
        match &mut self.device {
            Some(d) => d.all_reduce(comm, view)?,
            None => on_host(view, |h| Ok::<_, ParallelError>(comm.all_reduce(h, ReduceOp::Sum)?))?,
        }
        self.count(before);
        Ok(())
    }

    /// Sums `buf` over the group in f64 (partial norms and loss sums, where f32 would round).
    pub fn all_reduce_f64(&mut self, buf: &mut [f64]) -> Result<()> {
        match &mut self.comm {
            Some(c) => Ok(c.all_reduce(buf, ReduceOp::Sum)?),
            None => Ok(()),
        }
    }

    /// Sequence parallelism's g forward (and f backward), Megatron-LM's "reduce-scatter to the
    /// sequence-parallel region": sums `full` (every rank's partial `[n, c]`) over the group
    /// and leaves this rank's block of `n / TP` rows in `local`.
    #[doc(alias = "reduce_scatter_to_sequence_parallel_region")]
    pub fn reduce_scatter_rows(&mut self, full: &View<f32>, local: &mut ViewMut<f32>) -> Result<()> {
        let Some(comm) = &mut self.comm else { return Ok(local.copy_from(full)?) };
        let before = host_transfers();
        match &mut self.device {
            Some(d) => d.reduce_scatter(comm, full, local)?,
            None => {
                let input = full.to_vec()?;
                on_host(local, |out| {
                    Ok::<_, ParallelError>(comm.reduce_scatter(&input, out, ReduceOp::Sum)?)
                })?
            }
        }
        self.count(before);
        Ok(())
    }

    /// Sequence parallelism's f forward (and g backward), Megatron-LM's "gather from the
    /// sequence-parallel region": every rank's block of rows `local` gathered, in rank order,
    /// into `full`.
    #[doc(alias = "gather_from_sequence_parallel_region")]
    pub fn all_gather_rows(&mut self, local: &View<f32>, full: &mut ViewMut<f32>) -> Result<()> {
        let Some(comm) = &mut self.comm else { return Ok(full.copy_from(local)?) };
        let before = host_transfers();
        match &mut self.device {
            Some(d) => d.all_gather(comm, local, full)?,
            None => {
                let input = local.to_vec()?;
                on_host(full, |out| Ok::<_, ParallelError>(comm.all_gather(&input, out)?))?
            }
        }
        self.count(before);
        Ok(())
    }
}

/// Tag of every pipeline transfer. Transfers between two stages arrive in the order they were
/// sent, and the schedule sends and receives micro-batches in the same order on both sides.
const PIPE_TAG: u32 = 0x5050;

/// The pipeline group: this stage's neighbours.
pub struct PipeGroup {
    comm: Option<Communicator>,
    /// This rank's pipeline stage, `0..stages`.
    pub stage: usize,
    /// Pipeline stages (PP).
    pub stages: usize,
}

impl PipeGroup {
    /// The group over `comm`'s ranks, one per stage in stage order; with one stage there is
    /// no communicator and the transfers below panic.
    pub fn new(comm: Communicator) -> Self {
        let (stage, stages) = (comm.rank(), comm.size());
        Self { comm: (stages > 1).then_some(comm), stage, stages }
    }

    fn comm(&mut self) -> &mut Communicator {
        self.comm.as_mut().expect("pipeline transfers need more than one stage")
    }

    /// Sends to `to` and/or receives from `from` (stage indices), both at once.
    ///
    /// # Panics
    ///
    /// With a single stage (there is no neighbour to exchange with).
    pub fn exchange(
        &mut self,
        send: Option<(&[f32], usize)>,
        recv: Option<(&mut [f32], usize)>,
    ) -> Result<()> {
        Ok(self.comm().send_recv(send, recv, PIPE_TAG)?)
    }

    /// Sums `buf` between the first and the last stage (the tied embedding's gradient); both
    /// get the bitwise same sum.
    ///
    /// # Panics
    ///
    /// With a single stage.
    pub fn sum_first_last(&mut self, buf: &mut [f32]) -> Result<()> {
        let last = self.stages - 1;
        let peer = if self.stage == 0 { last } else { 0 };
        let mut other = vec![0.0f32; buf.len()];
        self.comm().send_recv(Some((&*buf, peer)), Some((&mut other[..], peer)), PIPE_TAG + 1)?;
        // Addition commutes exactly, so first + last is the same bits on both ends.
        buf.iter_mut().zip(&other).for_each(|(x, y)| *x += y);
        Ok(())
    }

    /// Sums `buf` over all stages in f64 (a no-op with one stage).
    pub fn all_reduce_f64(&mut self, buf: &mut [f64]) -> Result<()> {
        match &mut self.comm {
            Some(c) => Ok(c.all_reduce(buf, ReduceOp::Sum)?),
            None => Ok(()),
        }
    }
}

/// A rank's groups and its place in the grid.
pub struct RankGroups {
    /// The rank in the world communicator.
    pub rank: usize,
    /// The TP x DP x PP grid the groups were carved from.
    pub grid: RankGrid,
    /// The rank's tensor-parallel index, stage and model chunks.
    pub place: ShardPlace,
    /// The rank's index among its stage's data-parallel replicas, `0..dp`.
    pub dp_rank: usize,
    /// The ranks sharing this rank's layers (same stage and DP index).
    pub tp: TpGroup,
    /// The ranks holding the other stages (same TP and DP index).
    pub pipe: PipeGroup,
    /// Taken by the trainer's data-parallel thread.
    pub dp: Option<Communicator>,
    /// The pipeline's point-to-point links (activations forward, gradients back).
    pub links: PipeLinks,
}

impl RankGroups {
    /// Splits `world` into TP, PP and DP groups (TP fastest, then DP, then PP).
    pub fn new(world: &mut Communicator, par: &ParallelConfig) -> Result<Self> {
        let grid = RankGrid::new(par.tp, par.pp, par.dp, world.size())?;
        let groups = world.parallel_groups(&grid)?;
        let c = groups.coords;
        let mut pp = groups.pp;
        let links = PipeLinks::new(&mut pp, par.virtual_stages > 1)?;
        Ok(Self {
            rank: world.rank(),
            grid,
            place: ShardPlace {
                tp_rank: c.tp,
                tp: par.tp,
                stage: c.pp,
                pp: par.pp,
                chunks: par.virtual_stages.max(1),
            },
            dp_rank: c.dp,
            tp: TpGroup::new(groups.tp),
            pipe: PipeGroup::new(pp),
            dp: Some(groups.dp),
            links,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_collectives::CommConfig;
    use trident_runtime::Buffer;

    #[test]
    fn the_host_path_counts_host_transfers_and_the_device_path_none() {
        let comms = Communicator::inproc_world(2, CommConfig::default()).unwrap();
        let traffic: Vec<(TpTraffic, TpTraffic, Vec<f32>)> = std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .enumerate()
                .map(|(r, comm)| {
                    s.spawn(move || {
                        let device = Device::Emu;
                        let mut tp = TpGroup::new(comm);
                        let mut b = Buffer::from_slice(&device, &[r as f32 + 1.0; 6]).unwrap();
                        tp.all_reduce_view(&mut b.view_mut(..).unwrap()).unwrap();
                        let host = tp.traffic();
                        tp.attach(&device).unwrap();
                        assert!(tp.on_device(), "two emulated ranks of one process connect");
                        tp.all_reduce_view(&mut b.view_mut(..).unwrap()).unwrap();
                        let full = Buffer::from_slice(&device, &[1.0f32; 6]).unwrap();
                        let mut local = Buffer::<f32>::zeros(&device, 3).unwrap();
                        tp.reduce_scatter_rows(&full.view(..).unwrap(), &mut local.view_mut(..).unwrap())
                            .unwrap();
                        let mut gathered = Buffer::<f32>::zeros(&device, 6).unwrap();
                        tp.all_gather_rows(&local.view(..).unwrap(), &mut gathered.view_mut(..).unwrap())
                            .unwrap();
                        let mut out = b.to_vec().unwrap();
                        out.extend(gathered.to_vec().unwrap());
                        (host, tp.traffic(), out)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (r, (host, after, out)) in traffic.iter().enumerate() {
            assert_eq!((host.on_host, host.on_device), (1, 0), "rank {r}");
            assert!(host.host_transfers > 0, "rank {r}: the host path touched the view from the host");
            assert_eq!((after.on_host, after.on_device), (1, 3), "rank {r}");
            assert_eq!(
                after.host_transfers, host.host_transfers,
                "rank {r}: the device path moved data to the host"
            );
            // (1 + 2) summed twice over two ranks; ones reduce-scattered then gathered.
            assert_eq!(out[..6], [6.0; 6], "rank {r}");
            assert_eq!(out[6..], [2.0; 6], "rank {r}");
        }
    }

    #[test]
    fn a_group_of_one_copies_and_touches_nothing_else() {
        let device = Device::Emu;
        let mut tp = TpGroup::single();
        tp.attach(&device).unwrap();
        let full = Buffer::from_slice(&device, &[1.0f32, 2.0]).unwrap();
        let mut local = Buffer::<f32>::zeros(&device, 2).unwrap();
        let before = host_transfers();
        tp.reduce_scatter_rows(&full.view(..).unwrap(), &mut local.view_mut(..).unwrap()).unwrap();
        tp.all_reduce_view(&mut local.view_mut(..).unwrap()).unwrap();
        assert_eq!(host_transfers(), before);
        assert_eq!(local.to_vec().unwrap(), [1.0, 2.0]);
        assert_eq!(tp.traffic(), TpTraffic::default());
    }
}
