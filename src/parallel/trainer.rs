//! One rank's training step under 3D parallelism: the pipeline schedule over micro-batches,
//! then data-parallel gradient reduction, the global gradient norm, and AdamW (optionally
//! ZeRO-1).

use std::time::{Duration, Instant};

use trident_collectives::ReduceOp;
use trident_runtime::{Buffer, Device};

use super::schedule::{Action, Schedule};
use super::{
    on_host, BucketPaths, DpWorker, MicroActs, ParallelConfig, ParallelError, Pending, RankGroups, Result,
    ShardLayout, ShardedAdamW, StageModel,
};
use crate::data::Batch;
use crate::model::{GptConfig, ParamTensor};
use crate::ops::{self, OpsContext};
use crate::optim::clip_scale;
use crate::train::{BatchSource, StepStats, TrainSettings};

/// Bytes one rank holds, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    pub params: usize,
    pub grads: usize,
    pub optimizer: usize,
    pub activations: usize,
}

impl std::fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "parameters {:.2} MiB, gradients {:.2} MiB, optimizer state {:.2} MiB, activations {:.2} MiB",
            mib(self.params),
            mib(self.grads),
            mib(self.optimizer),
            mib(self.activations)
        )
    }
}

/// How a stage spent its steps: computing, or waiting (the pipeline bubble and transfers).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTiming {
    pub busy: Duration,
    /// Time from the first to the last action of the schedule.
    pub wall: Duration,
}

impl StageTiming {
    pub fn idle_fraction(&self) -> f64 {
        if self.wall.is_zero() {
            return 0.0;
        }
        1.0 - self.busy.as_secs_f64() / self.wall.as_secs_f64()
    }
}

/// ZeRO-1 bookkeeping: the local buffer padded to a multiple of DP, and this rank's share.
struct Zero {
    padded: usize,
    shard: Buffer<f32>,
}

pub struct PipelineTrainer {
    pub ctx: OpsContext,
    pub model: StageModel,
    pub groups: RankGroups,
    pub dp: DpWorker,
    pub schedule: Schedule,
    pub optimizer: ShardedAdamW,
    /// Per rank: `micro_batch` is each rank's, `global_batch` the whole step's.
    pub settings: TrainSettings,
    pub par: ParallelConfig,
    pub iter: u64,
    pub timing: StageTiming,
    slots: Vec<MicroActs>,
    /// Per slot: the received gradient of the stage's output.
    grad_in: Vec<Vec<f32>>,
    /// Local range of each of the stage's layers: the data-parallel buckets.
    layer_blocks: Vec<std::ops::Range<usize>>,
    zero: Option<Zero>,
}

impl PipelineTrainer {
    /// A trainer for this rank, starting from `full` (the whole model's parameters in llm.c
    /// order, the same on every rank).
    pub fn new(
        device: &Device,
        config: GptConfig,
        full: &[f32],
        par: ParallelConfig,
        settings: TrainSettings,
        groups: RankGroups,
    ) -> Result<Self> {
        let micro_batches = par.validate(&config, settings.micro_batch, settings.global_batch)?;
        let ctx = OpsContext::new(device)?;
        let layout = ShardLayout::new(config, groups.place);
        let model = StageModel::new(
            device,
            layout.clone(),
            full,
            settings.micro_batch,
            settings.seq_len,
            par.recompute,
            par.sequence_parallel,
        )?;
        let schedule = Schedule::one_f_one_b(par.pp, micro_batches);
        let stage = groups.place.stage;
        let slots = (0..schedule.in_flight(stage))
            .map(|_| model.new_micro_acts(device))
            .collect::<Result<Vec<_>>>()?;
        let n_act = model.activation_len();
        let grad_in = vec![vec![0.0; n_act]; slots.len()];
        let (len, dp, dp_rank) = (layout.len(), par.dp, groups.dp_rank);
        let owned = super::checkpoint::owned_range(len, dp, dp_rank, par.distributed_optimizer);
        let zero = if par.distributed_optimizer {
            let padded = len.div_ceil(dp) * dp;
            Some(Zero { padded, shard: Buffer::zeros(device, padded / dp)? })
        } else {
            None
        };
        let optimizer = ShardedAdamW::new(device, &layout, owned, settings.adamw)?;
        let mut groups = groups;
        let dp_comm = groups.dp.take().expect("the groups hold the data-parallel communicator");
        let mut dp = DpWorker::new(dp_comm);
        let layer_blocks: Vec<_> = layout.layers.clone().map(|l| layout.layer_block(l)).collect();
        if par.dp > 1 && zero.is_none() {
            // The buckets, in the order the backward hands them over: bucket i is layer
            // block i (local layer order), then the stage block (when the stage has one).
            let stage_block = layout.stage_block();
            let lens: Vec<usize> = layer_blocks
                .iter()
                .chain(Some(&stage_block).filter(|b| !b.is_empty()))
                .map(|b| b.len())
                .collect();
            dp.register_buckets(&lens)?;
        }
        Ok(Self {
            ctx,
            model,
            groups,
            dp,
            schedule,
            optimizer,
            settings,
            par,
            iter: 0,
            timing: StageTiming::default(),
            slots,
            grad_in,
            layer_blocks,
            zero,
        })
    }

    /// How this rank's data-parallel gradient buckets were reduced so far.
    pub fn dp_bucket_paths(&self) -> BucketPaths {
        self.dp.bucket_paths()
    }

    /// What this rank holds.
    pub fn memory(&self) -> MemoryReport {
        let act: usize = self.slots.iter().map(MicroActs::bytes).sum::<usize>()
            + self.model.scratch_bytes()
            + self.grad_in.iter().map(|g| g.len() * 4).sum::<usize>();
        MemoryReport {
            params: self.model.params.len() * 4,
            grads: self.model.grads.len() * 4 + self.zero.as_ref().map_or(0, |z| z.shard.len() * 4),
            optimizer: self.optimizer.bytes(),
            activations: act,
        }
    }

    fn slot(&self, micro_batch: usize) -> usize {
        micro_batch % self.slots.len()
    }

    /// One optimizer step over this step's micro-batches from `data` (this rank's share).
    pub fn step(&mut self, data: &mut dyn BatchSource) -> Result<StepStats> {
        let m = self.schedule.micro_batches;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        let batches = (0..m).map(|_| self.checked_batch(data)).collect::<Result<Vec<_>>>()?;
        let dloss = 1.0 / (m * b * self.par.dp * t) as f32;
        self.model.zero_grads()?;
        let overlap = self.par.dp > 1 && self.zero.is_none();
        let mut pending: Vec<Pending> = Vec::new();
        let mut loss_sum = 0.0f64;
        let stage = self.groups.place.stage;
        let (prev, next) = (stage.wrapping_sub(1), stage + 1);
        let actions = self.schedule.actions[stage].clone();
        let blocks_start = self.model.layout.layers.start;
        let started = Instant::now();
        let mut busy = Duration::ZERO;
        for action in actions {
            match action {
                Action::Forward(i) => {
                    let t0 = Instant::now();
                    let s = self.slot(i);
                    let acts = &mut self.slots[s];
                    let tp = &mut self.groups.tp;
                    if self.groups.place.is_first_stage() {
                        self.model.embed(&self.ctx, tp, acts, &batches[i].inputs)?;
                    }
                    let targets = Some(&batches[i].targets[..]);
                    if let Some(loss) = self.model.forward(&self.ctx, tp, acts, targets, Some(dloss))? {
                        loss_sum += loss as f64;
                    }
                    busy += t0.elapsed();
                }
                Action::Backward(i) => {
                    let t0 = Instant::now();
                    let s = self.slot(i);
                    let last_micro_batch = i + 1 == m;
                    let (blocks, dp) = (&self.layer_blocks, &self.dp);
                    // Each layer's gradients go to the DP thread as soon as the last
                    // micro-batch's backward is past it.
                    let mut hook = |layer: usize, grads: &Buffer<f32>| -> Result<()> {
                        if overlap && last_micro_batch {
                            let bucket = layer - blocks_start;
                            let range = blocks[bucket].clone();
                            pending.push(dp.all_reduce_registered(
                                bucket,
                                range.clone(),
                                grads.view(range)?,
                            )?);
                        }
                        Ok(())
                    };
                    let dout = (!self.groups.place.is_last_stage()).then(|| &self.grad_in[s][..]);
                    self.model.backward(&self.ctx, &mut self.groups.tp, &self.slots[s], dout, &mut hook)?;
                    busy += t0.elapsed();
                }
                Action::RecvForward(i) => {
                    let s = self.slot(i);
                    let pipe = &mut self.groups.pipe;
                    on_host(&mut self.slots[s].input.view_mut(..)?, |h| {
                        pipe.exchange(None, Some((h, prev)))
                    })?;
                }
                Action::SendForward(i) => {
                    let out = self.slots[self.slot(i)].output().to_vec()?;
                    self.groups.pipe.exchange(Some((&out, next)), None)?;
                }
                Action::SendForwardRecvBackward { send, recv } => {
                    let out = self.slots[self.slot(send)].output().to_vec()?;
                    let r = self.slot(recv);
                    self.groups.pipe.exchange(Some((&out, next)), Some((&mut self.grad_in[r], next)))?;
                }
                Action::RecvBackward(i) => {
                    let r = self.slot(i);
                    self.groups.pipe.exchange(None, Some((&mut self.grad_in[r], next)))?;
                }
                Action::SendBackward(_) => {
                    let g = self.model.input_grad().to_vec()?;
                    self.groups.pipe.exchange(Some((&g, prev)), None)?;
                }
                Action::SendBackwardRecvForward { send: _, recv } => {
                    let g = self.model.input_grad().to_vec()?;
                    let s = self.slot(recv);
                    let pipe = &mut self.groups.pipe;
                    on_host(&mut self.slots[s].input.view_mut(..)?, |h| {
                        pipe.exchange(Some((&g, prev)), Some((h, prev)))
                    })?;
                }
            }
        }
        self.timing.busy += busy;
        self.timing.wall += started.elapsed();

        let sq = self.reduce_gradients(pending)?;
        let loss = loss_sum / m as f64;
        // Sum of squares (ZeRO: each DP rank holds a different share) and the loss over DP.
        let mut dp_vals = [if self.zero.is_some() { sq } else { 0.0 }, loss];
        if self.par.dp > 1 {
            let mut v = dp_vals;
            v = self.dp.run(move |c| c.all_reduce(&mut v, ReduceOp::Sum).map(|()| v))?;
            dp_vals = v;
        }
        let mut norm_sq = [if self.zero.is_some() { dp_vals[0] } else { sq }];
        self.groups.tp.all_reduce_f64(&mut norm_sq)?;
        let mut pp_vals = [norm_sq[0], dp_vals[1] / self.par.dp as f64];
        self.groups.pipe.all_reduce_f64(&mut pp_vals)?;
        let (norm, loss) = (pp_vals[0].sqrt() as f32, pp_vals[1] as f32);
        if !loss.is_finite() {
            return Err(ParallelError::NonFinite { loss, iter: self.iter });
        }
        let lr = self.settings.schedule.lr(self.iter);
        let scale = clip_scale(norm, self.settings.clip_grad);
        match &self.zero {
            None => {
                self.optimizer.step(&self.ctx, &mut self.model.params, &self.model.grads, 0, lr, scale)?
            }
            Some(z) => {
                self.optimizer.step(&self.ctx, &mut self.model.params, &z.shard, 0, lr, scale)?;
                self.all_gather_params()?;
            }
        }
        self.iter += 1;
        Ok(StepStats { loss, grad_norm: norm, lr })
    }

    /// Finishes the gradients: the layer buckets already in flight, the tied embedding summed
    /// between the first and last stage, the rest over DP (ZeRO-1: reduce-scattered). Returns
    /// this rank's share of the squared gradient norm.
    fn reduce_gradients(&mut self, pending: Vec<Pending>) -> Result<f64> {
        let place = self.groups.place;
        if place.pp > 1 && (place.is_first_stage() || place.is_last_stage()) {
            let wte = self.model.layout.range(ParamTensor::Wte, 0);
            let pipe = &mut self.groups.pipe;
            on_host(&mut self.model.grads.view_mut(wte)?, |h| pipe.sum_first_last(h))?;
        }
        let dp = self.par.dp;
        if let Some(z) = &mut self.zero {
            let mut all = self.model.grads.to_vec()?;
            all.resize(z.padded, 0.0);
            let share = z.padded / dp;
            let shard = self.dp.run(move |c| {
                let mut out = vec![0.0f32; share];
                c.reduce_scatter(&all, &mut out, ReduceOp::Sum).map(|()| out)
            })?;
            let owned = self.optimizer.owned.clone();
            z.shard.view_mut(..owned.len())?.copy_from_slice(&shard[..owned.len()])?;
            let z = self.zero.as_ref().expect("ZeRO-1 is on");
            return self.squared_norm_of(&z.shard, owned);
        }
        if dp > 1 {
            let mut all = pending;
            let block = self.model.layout.stage_block();
            if !block.is_empty() {
                let bucket = self.layer_blocks.len();
                all.push(self.dp.all_reduce_registered(
                    bucket,
                    block.clone(),
                    self.model.grads.view(block)?,
                )?);
            }
            for p in all {
                p.wait(&mut self.model.grads)?;
            }
        }
        self.squared_norm_of(&self.model.grads, 0..self.model.layout.len())
    }

    /// Sum of squares of the gradients in local range `owned` (held in `grads` from 0) that
    /// count on this rank.
    fn squared_norm_of(&self, grads: &Buffer<f32>, owned: std::ops::Range<usize>) -> Result<f64> {
        let layout = &self.model.layout;
        let mut sum = 0.0;
        for t in layout.tensors() {
            let start = t.range.start.max(owned.start);
            let end = t.range.end.min(owned.end);
            if start < end && layout.counts_in_norm(t) {
                sum += ops::sum_of_squares(&self.ctx, grads.view(start - owned.start..end - owned.start)?)?;
            }
        }
        Ok(sum)
    }

    /// ZeRO-1: every DP rank's updated share back to all of them.
    fn all_gather_params(&mut self) -> Result<()> {
        let z = self.zero.as_ref().expect("ZeRO-1 is on");
        let (padded, len) = (z.padded, self.model.layout.len());
        let share = padded / self.par.dp;
        let owned = self.optimizer.owned.clone();
        let mut mine = vec![0.0f32; share];
        mine[..owned.len()].copy_from_slice(&self.model.params.view(owned)?.to_vec()?);
        let all = self.dp.run(move |c| {
            let mut out = vec![0.0f32; padded];
            c.all_gather(&mine, &mut out).map(|()| out)
        })?;
        self.model.params.copy_from_slice(&all[..len])?;
        Ok(())
    }

    /// Mean loss over `iters` micro-batches of `data` (forward only, stage after stage), the
    /// same on every rank.
    pub fn evaluate(&mut self, data: &mut dyn BatchSource, iters: usize) -> Result<f32> {
        let iters = iters.max(1);
        let place = self.groups.place;
        let (prev, next) = (place.stage.wrapping_sub(1), place.stage + 1);
        let mut total = 0.0f64;
        for _ in 0..iters {
            let batch = self.checked_batch(data)?;
            let acts = &mut self.slots[0];
            let (tp, pipe) = (&mut self.groups.tp, &mut self.groups.pipe);
            if place.is_first_stage() {
                self.model.embed(&self.ctx, tp, acts, &batch.inputs)?;
            } else {
                on_host(&mut acts.input.view_mut(..)?, |h| pipe.exchange(None, Some((h, prev))))?;
            }
            if let Some(loss) = self.model.forward(&self.ctx, tp, acts, Some(&batch.targets), None)? {
                total += loss as f64;
            }
            if !place.is_last_stage() {
                let out = acts.output().to_vec()?;
                pipe.exchange(Some((&out, next)), None)?;
            }
        }
        let mut mean = [total / iters as f64];
        if self.par.dp > 1 {
            let mut v = mean;
            v = self.dp.run(move |c| c.all_reduce(&mut v, ReduceOp::Sum).map(|()| v))?;
            mean = [v[0] / self.par.dp as f64];
        }
        self.groups.pipe.all_reduce_f64(&mut mean)?;
        Ok(mean[0] as f32)
    }

    fn checked_batch(&self, data: &mut dyn BatchSource) -> Result<Batch> {
        let batch = data.next_batch()?;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        if batch.batch_size != b || batch.seq_len != t || batch.inputs.len() != b * t {
            return Err(ParallelError::Unsupported(format!(
                "the data gave a {} x {} batch, the trainer expects {b} x {t}",
                batch.batch_size, batch.seq_len
            )));
        }
        Ok(batch)
    }

    /// This rank's parameters (its share, in [`ShardLayout`] order).
    pub fn local_params(&self) -> Result<Vec<f32>> {
        Ok(self.model.params.to_vec()?)
    }
}
