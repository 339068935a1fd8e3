//! The communicators one rank uses, carved out of one rank grid, and the host staging that
//! lets collectives run on device views.

use trident_collectives::{Communicator, RankGrid, ReduceOp};
use trident_runtime::{RuntimeError, View, ViewMut};

use super::{ParallelConfig, PipeLinks, Result, ShardPlace};

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
pub struct TpGroup {
    comm: Option<Communicator>,
    /// This rank's index in the group (its [`ShardPlace::tp_rank`]).
    pub rank: usize,
    /// Ranks in the group (TP).
    pub size: usize,
}

impl TpGroup {
    /// The group of one rank: no communicator, every collective a no-op.
    pub fn single() -> Self {
        Self { comm: None, rank: 0, size: 1 }
    }

    /// The group over `comm`'s ranks; a communicator of one rank is dropped and the
    /// collectives become no-ops.
    pub fn new(comm: Communicator) -> Self {
        let (rank, size) = (comm.rank(), comm.size());
        Self { comm: (size > 1).then_some(comm), rank, size }
    }

    /// Reduces the host slice `buf` over the group with `op`, in place on every rank.
    pub fn all_reduce(&mut self, buf: &mut [f32], op: ReduceOp) -> Result<()> {
        match &mut self.comm {
            Some(c) => Ok(c.all_reduce(buf, op)?),
            None => Ok(()),
        }
    }

    /// Sums `view` over the group (Megatron's `g` forward and `f` backward).
    pub fn all_reduce_view(&mut self, view: &mut ViewMut<f32>) -> Result<()> {
        if self.comm.is_none() {
            return Ok(());
        }
        on_host(view, |h| self.all_reduce(h, ReduceOp::Sum))
    }

    /// Sums `buf` over the group in f64 (partial norms and loss sums, where f32 would round).
    pub fn all_reduce_f64(&mut self, buf: &mut [f64]) -> Result<()> {
        match &mut self.comm {
            Some(c) => Ok(c.all_reduce(buf, ReduceOp::Sum)?),
            None => Ok(()),
        }
    }

    /// Sequence parallelism's g forward (and f backward): sums `full` (every rank's partial
    /// `[n, c]`) over the group and leaves this rank's block of `n / TP` rows in `local`.
    pub fn reduce_scatter_rows(&mut self, full: &View<f32>, local: &mut ViewMut<f32>) -> Result<()> {
        let input = full.to_vec()?;
        match &mut self.comm {
            Some(c) => on_host(local, |out| Ok(c.reduce_scatter(&input, out, ReduceOp::Sum)?)),
            None => Ok(local.copy_from_slice(&input)?),
        }
    }

    /// Sequence parallelism's f forward (and g backward): every rank's block of rows `local`
    /// gathered, in rank order, into `full`.
    pub fn all_gather_rows(&mut self, local: &View<f32>, full: &mut ViewMut<f32>) -> Result<()> {
        let input = local.to_vec()?;
        match &mut self.comm {
            Some(c) => on_host(full, |out| Ok(c.all_gather(&input, out)?)),
            None => Ok(full.copy_from_slice(&input)?),
        }
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
