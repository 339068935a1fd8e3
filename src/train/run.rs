//! A whole run on one rank: groups from the world communicator, the data-parallel share of
//! the data, the trainer, and what the rank reports at the end.

use std::sync::Arc;

use trident_collectives::{Communicator, ReduceOp};
use trident_runtime::Device;

use super::checkpoint::{self, SavePlan};
use super::exit::{self, ExitPolicy, ExitReason};
use super::{MemoryReport, Result, StageTiming, StepStats, TrainSettings, Trainer};
use crate::checkpoint::Checkpoint;
use crate::model::{GptConfig, ParamLayout, ShardLayout, ShardPlace};
use crate::parallel::{BucketPaths, ParallelConfig, RankGroups};
use trident_data::{DataLoader, DataOrder, TokenSet};

/// What every rank of a run is given.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The whole model's shape.
    pub config: GptConfig,
    /// The grid (`--tensor-model-parallel-size`, `--pipeline-model-parallel-size`, DP from
    /// `--world-size`) and its options.
    pub par: ParallelConfig,
    /// `micro_batch` per rank; `global_batch` = micro-batch x DP x micro-batches.
    pub settings: TrainSettings,
    /// Seed of the data order.
    pub data_seed: u64,
    /// How the training windows are drawn (`--data-order`).
    pub data_order: DataOrder,
    /// The iteration the run ends at (`--train-iters`); a resumed run continues up to it.
    pub iters: u64,
    /// Validation every this many steps (0: only after the last), over `eval_iters`
    /// micro-batches; only when a validation set is given.
    pub eval_interval: u64,
    /// Validation micro-batches per evaluation (`--eval-iters`; 0: no evaluation).
    pub eval_iters: usize,
    /// `--save`: where and how often the run writes checkpoints.
    pub save: Option<SavePlan>,
    /// `--load`: the checkpoint the run resumes (its parameters are `init`), padded for this
    /// run's tensor-parallel size.
    pub resume: Option<Arc<Checkpoint>>,
    /// `--exit-interval`, `--exit-signal-handler`: stopping early (with a checkpoint).
    pub exit: ExitPolicy,
}

/// The splits a rank reads (each rank takes its data-parallel share).
#[derive(Clone, Debug)]
pub struct RankData {
    /// The training split's tokens (each rank draws its data-parallel share).
    pub train: TokenSet,
    /// Evaluated every `eval_interval` steps and after the last, when present.
    pub val: Option<TokenSet>,
}

/// What one rank ends with.
#[derive(Clone, Debug)]
pub struct RankResult {
    /// The rank in the world.
    pub rank: usize,
    /// Its tensor-parallel index, stage and chunks.
    pub place: ShardPlace,
    /// Its index among the data-parallel replicas.
    pub dp_rank: usize,
    /// Per step: the loss and gradient norm (the same on every rank).
    pub steps: Vec<StepStats>,
    /// `(step, validation loss)` of each evaluation.
    pub val_losses: Vec<(u64, f32)>,
    /// The rank's parameters in [`ShardLayout`] order.
    pub params: Vec<f32>,
    /// What the rank held at the end ([`Trainer::memory`]).
    pub memory: MemoryReport,
    /// The rank's measured compute and wall time in the pipeline schedule.
    pub timing: StageTiming,
    /// How the data-parallel gradient buckets were reduced (exact counts over the run).
    pub dp_buckets: BucketPaths,
    /// Why the run stopped before `spec.iters`, if it did.
    pub stopped: Option<ExitReason>,
}

/// Trains `spec.iters` steps as this rank of `world`, from `init` (the whole model in llm.c
/// order, the same on every rank). `on_start` sees the trainer before the first step (for
/// reports), `on_step` each step's statistics.
pub fn train_rank(
    world: &mut Communicator,
    device: &Device,
    spec: &RunSpec,
    init: &[f32],
    data: RankData,
    on_start: &mut dyn FnMut(&Trainer),
    on_step: &mut dyn FnMut(&Trainer, &StepStats, Option<f32>),
) -> Result<RankResult> {
    let groups = RankGroups::new(world, &spec.par)?;
    let (rank, place, dp_rank) = (groups.rank, groups.place, groups.dp_rank);
    let s = &spec.settings;
    let mut loader = DataLoader::new(data.train, s.micro_batch, s.seq_len, spec.data_seed, true)?
        .with_rank(dp_rank, spec.par.dp)?
        .with_order(spec.data_order)?;
    let mut val_loader = data
        .val
        .map(|v| {
            DataLoader::new(v, s.micro_batch, s.seq_len, spec.data_seed, false)?
                .with_rank(dp_rank, spec.par.dp)?
                .with_order(spec.data_order)
        })
        .transpose()?;
    let grid = groups.grid;
    let mut trainer = Trainer::new(device, spec.config, init, spec.par, *s, groups)?;
    if let Some(ck) = &spec.resume {
        checkpoint::restore(&mut trainer, &mut loader, ck)?;
    }
    on_start(&trainer);
    if trainer.iter >= spec.iters {
        // Nothing to train (a checkpoint at or past --train-iters, or none asked for): --save
        // still writes where the run stands.
        if let Some(plan) = &spec.save {
            checkpoint::save(world, &grid, &trainer, &loader, plan)?;
        }
    }
    let (mut steps, mut val_losses, mut stopped) = (Vec::new(), Vec::new(), None);
    while trainer.iter < spec.iters {
        let stats = trainer.step(&mut loader)?;
        let iter = trainer.iter;
        let mut val_loss = None;
        // --eval-iters 0 evaluates nothing, as in Megatron-LM.
        if let Some(v) = val_loader.as_mut().filter(|_| spec.eval_iters > 0) {
            if (spec.eval_interval > 0 && iter % spec.eval_interval == 0) || iter == spec.iters {
                v.reset();
                let loss = trainer.evaluate(v, spec.eval_iters)?;
                val_losses.push((iter, loss));
                val_loss = Some(loss);
            }
        }
        // A signal reaches the ranks at different moments: they agree on it before acting.
        let signal = if spec.exit.on_signal {
            let mut seen = [exit::signal_received().unwrap_or(0) as f64];
            world.all_reduce(&mut seen, ReduceOp::Max)?;
            (seen[0] > 0.0).then_some(seen[0] as i32)
        } else {
            None
        };
        stopped = spec.exit.reason(iter, signal).filter(|_| iter < spec.iters);
        if let Some(plan) = spec.save.as_ref().filter(|p| p.due(iter, spec.iters) || stopped.is_some()) {
            checkpoint::save(world, &grid, &trainer, &loader, plan)?;
        }
        on_step(&trainer, &stats, val_loss);
        steps.push(stats);
        if stopped.is_some() {
            break;
        }
    }
    Ok(RankResult {
        rank,
        place,
        dp_rank,
        steps,
        val_losses,
        params: trainer.local_params()?,
        memory: trainer.memory(),
        timing: trainer.timing,
        dp_buckets: trainer.dp_bucket_paths(),
        stopped,
    })
}

/// The whole model's parameters (llm.c order) from the shards of data-parallel replica 0.
pub fn assemble(config: GptConfig, results: &[RankResult]) -> Vec<f32> {
    let mut full = vec![0.0; ParamLayout::new(config).len()];
    for r in results.iter().filter(|r| r.dp_rank == 0) {
        ShardLayout::new(config, r.place).insert(&r.params, &mut full);
    }
    full
}

/// `(p, m)`: pipeline stages and micro-batches of a spec.
pub fn pipeline_shape(par: &ParallelConfig, settings: &TrainSettings) -> (usize, usize) {
    (par.pp, settings.global_batch / (settings.micro_batch * par.dp))
}
