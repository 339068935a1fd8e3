//! The training step, one for every grid: the pipeline schedule over the step's
//! micro-batches (a single rank is a pipeline of one stage), then the data-parallel gradient
//! reduction (buckets reduced while the backward runs), the global gradient norm, and AdamW
//! over the parameters this rank owns (ZeRO-1: its 1/DP share).
//!
//! On the Cpu device, a run of one rank splits each micro-batch into one share of rows per
//! core ("lanes"), each with its own activations and gradients: a core then runs whole
//! forward and backward passes instead of meeting the others at the end of every op, and an
//! idle core still takes work from a busy one's ops. The lanes' gradients are summed into the
//! model's at the end of the step. The split is fixed by the core count, so a run is
//! deterministic on a given machine.

use std::ops::Range;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use trident_collectives::{CommConfig, Communicator, ReduceOp};
use trident_runtime::{Buffer, Device, DeviceKind, ViewMut};

use super::{BatchSource, LossScaler, Result, StepStats, TrainError, TrainSettings};
use crate::model::{
    Gpt, GptConfig, GptOptions, MicroActs, ModelError, ParamTensor, Precision, ShardLayout, Workspace,
};
use crate::ops::{self, OpsContext};
use crate::optim::{clip_scale, AdamW};
use crate::parallel::{
    on_host, BucketPaths, DpWorker, Interleaved, ParallelConfig, ParallelError, Pending, RankGroups,
    SplitDims, TpGroup,
};
use trident_data::Batch;

/// Bytes one rank holds, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// The fp32 parameters of the rank's share.
    pub params: usize,
    /// The fp32 gradients: the model's, the Cpu lanes' and ZeRO-1's shard.
    pub grads: usize,
    /// AdamW's two moments over the owned range.
    pub optimizer: usize,
    /// Mixed precision's compute weights: 2 bytes a parameter in a 16-bit buffer (`Emu`,
    /// `Cuda`), 4 in the `Cpu`'s rounded f32 copy.
    pub compute_weights: usize,
    /// Every buffer of the passes in flight: the workspaces, the micro-batches' saved
    /// activations and the received gradients of the stage's output.
    pub activations: usize,
}

impl std::fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "parameters {:.2} MiB, gradients {:.2} MiB, optimizer state {:.2} MiB, compute weights {:.2} MiB, \
             activations {:.2} MiB",
            mib(self.params),
            mib(self.grads),
            mib(self.optimizer),
            mib(self.compute_weights),
            mib(self.activations)
        )
    }
}

/// How a stage spent its steps: computing, or waiting (the pipeline bubble and transfers).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTiming {
    /// Time spent in the stage's forwards and backwards.
    pub busy: Duration,
    /// Time from the first to the last action of the schedule.
    pub wall: Duration,
}

impl StageTiming {
    /// Fraction of [`wall`](Self::wall) not spent computing: the measured bubble and
    /// transfer time (0 before any step).
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

/// One share of a micro-batch's rows with its own pass state (see the module's docs).
struct Lane {
    rows: Range<usize>,
    tp: TpGroup,
    ws: Workspace,
    acts: MicroActs,
    grads: Buffer<f32>,
    /// Whether `grads` is known to hold zeros, so the next step need not clear it.
    zeroed: bool,
}

/// One rank's trainer.
///
/// [`single`](Self::single) makes the trainer of a one-rank run; [`new`](Self::new) takes a
/// rank's groups of a parallel one (see [`train_rank`](super::run::train_rank)). Each [`step`](Self::step)
/// draws its micro-batches from a [`BatchSource`]. A tiny model learning to count on the CPU:
///
/// ```
/// use trident::data::{Batch, DataError};
/// use trident::model::{gpt2_init, GptConfig, ParamLayout};
/// use trident::optim::AdamWConfig;
/// use trident::runtime::Device;
/// use trident::train::{BatchSource, DecayStyle, LrSchedule, TrainError, TrainSettings, Trainer};
///
/// /// Sequence `i` counts up from `i` (mod 10); each target is the next number.
/// struct Counting;
///
/// impl BatchSource for Counting {
///     fn next_batch(&mut self) -> Result<Batch, DataError> {
///         let (b, t) = (2, 8);
///         let at = |i: usize, j: usize| ((i + j) % 10) as u32;
///         let inputs = (0..b * t).map(|k| at(k / t, k % t)).collect();
///         let targets = (0..b * t).map(|k| at(k / t, k % t + 1)).collect();
///         Ok(Batch { batch_size: b, seq_len: t, inputs, targets })
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // 8 positions, a vocabulary of 10 (padded to 16), 2 layers, 2 heads, hidden size 16.
/// let config = GptConfig::new(8, 10, 2, 2, 16, 16)?;
/// let init = gpt2_init(&ParamLayout::new(config), 1234);
/// let settings = TrainSettings {
///     micro_batch: 2,
///     global_batch: 4, // two micro-batches per step
///     seq_len: 8,
///     lr_schedule: LrSchedule { max_lr: 1e-2, min_lr: 0.0, warmup_iters: 0, decay_iters: 20, style: DecayStyle::Constant },
///     adamw: AdamWConfig::default(),
///     clip_grad: 1.0,
///     precision: Default::default(), // fp32
///     loss_scale: Default::default(),
/// };
/// let mut trainer = Trainer::single(&Device::Cpu, config, &init, settings)?;
/// let first = trainer.step(&mut Counting)?;
/// // GPT-2's initialisation gives nearly uniform predictions: a loss near ln 10.
/// assert!((first.loss - 10f32.ln()).abs() < 0.1, "{}", first.loss);
/// assert_eq!((first.lr, first.skipped, trainer.iter), (1e-2, false, 1));
/// assert!(first.grad_norm.is_finite() && first.grad_norm > 0.0);
///
/// let mut last = first;
/// for _ in 0..10 {
///     last = trainer.step(&mut Counting)?;
/// }
/// assert!(last.loss < first.loss - 0.5, "{} -> {}", first.loss, last.loss);
///
/// // A batch of another shape than the settings' is refused.
/// struct OneRow;
/// impl BatchSource for OneRow {
///     fn next_batch(&mut self) -> Result<Batch, DataError> {
///         Ok(Batch { batch_size: 1, seq_len: 8, inputs: vec![0; 8], targets: vec![1; 8] })
///     }
/// }
/// let err = trainer.step(&mut OneRow).unwrap_err();
/// assert!(matches!(err, TrainError::BatchShape { got_b: 1, b: 2, .. }), "{err}");
/// # Ok(())
/// # }
/// ```
pub struct Trainer {
    /// The ops' context on the rank's device (its kernels and stream).
    pub ctx: OpsContext,
    /// The rank's share of the model, its parameters and gradients.
    pub model: Gpt,
    /// The rank's tensor-parallel and pipeline groups and its place in the grid (the
    /// data-parallel communicator moved to [`dp`](Self::dp)).
    pub groups: RankGroups,
    /// The data-parallel group, reducing gradient buckets on its own thread.
    pub dp: DpWorker,
    /// The pipeline schedule this rank runs (1F1B, interleaved over the model chunks when
    /// the stage holds several).
    pub schedule: Interleaved,
    /// AdamW over the parameters this rank updates (its 1/DP share under ZeRO-1).
    pub optimizer: AdamW,
    /// Per rank: `micro_batch` is each rank's, `global_batch` the whole step's.
    pub settings: TrainSettings,
    /// The run's parallel layout.
    pub par: ParallelConfig,
    /// Steps taken, skipped fp16 steps included: the 0-based index of the next step.
    pub iter: u64,
    /// Steps skipped for an fp16 overflow (the learning-rate schedule counts the others).
    pub skipped: u64,
    /// fp16's loss scaler (`None` in fp32 and bf16).
    pub scaler: Option<LossScaler>,
    /// Measured compute and wall time of the pipeline schedule, summed over the steps.
    pub timing: StageTiming,
    /// The pass state of the micro-batches in flight (`None` with lanes, which hold their own).
    ws: Option<Workspace>,
    /// Per model chunk, the activations of its micro-batches in flight (micro-batch `i` in
    /// slot `i % len`).
    slots: Vec<Vec<MicroActs>>,
    /// Row shares of each micro-batch (Cpu, one rank); empty otherwise.
    lanes: Vec<Lane>,
    /// Per slot: the received gradient of the stage's output.
    grad_in: Vec<Vec<Buffer<f32>>>,
    /// Each of the stage's layers and its local range: the data-parallel buckets.
    layer_blocks: Vec<(usize, std::ops::Range<usize>)>,
    zero: Option<Zero>,
}

impl Trainer {
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
        Self::with_lanes(device, config, full, par, settings, groups, rayon::current_num_threads())
    }

    /// The trainer of a run on one rank (no tensor, pipeline or data parallelism).
    pub fn single(device: &Device, config: GptConfig, full: &[f32], settings: TrainSettings) -> Result<Self> {
        Self::single_with_lanes(device, config, full, settings, rayon::current_num_threads())
    }

    /// As [`single`](Self::single), splitting each micro-batch into up to `lanes` shares of
    /// rows on the Cpu device (1: the whole micro-batch through one pass, as a GPU runs it).
    pub fn single_with_lanes(
        device: &Device,
        config: GptConfig,
        full: &[f32],
        settings: TrainSettings,
        lanes: usize,
    ) -> Result<Self> {
        let mut world = Communicator::inproc_world(1, CommConfig::from_env()?)?.remove(0);
        let par = ParallelConfig::from_world(1, 1, 1)?;
        let groups = RankGroups::new(&mut world, &par)?;
        Self::with_lanes(device, config, full, par, settings, groups, lanes)
    }

    fn with_lanes(
        device: &Device,
        config: GptConfig,
        full: &[f32],
        par: ParallelConfig,
        settings: TrainSettings,
        groups: RankGroups,
        lanes: usize,
    ) -> Result<Self> {
        let shape = SplitDims {
            heads: config.num_heads,
            layers: config.num_layers,
            padded_vocab: config.padded_vocab_size,
        };
        let micro_batches = par.validate(shape, settings.micro_batch, settings.global_batch)?;
        let ctx = OpsContext::new(device)?;
        let layout = ShardLayout::new(config, groups.place);
        let options = GptOptions {
            recompute: par.recompute,
            sequence_parallel: par.sequence_parallel,
            precision: settings.precision,
        };
        let model = Gpt::new(device, layout.clone(), full, options)?;
        let (b, t) = (settings.micro_batch, settings.seq_len);
        let chunks = groups.place.chunks;
        let schedule = Interleaved::new(par.pp, micro_batches, chunks).map_err(ParallelError::Unsupported)?;
        let stage = groups.place.stage;
        let lanes = lanes.min(b);
        let lanes = if device.kind() == DeviceKind::Cpu && par.world_size() == 1 && lanes > 1 {
            (0..lanes)
                .map(|i| {
                    let rows = i * b / lanes..(i + 1) * b / lanes;
                    let ws = Workspace::new(device, &model, rows.len(), t)?;
                    let acts = MicroActs::new(device, &model, &ws)?;
                    let grads = Buffer::zeros(device, model.num_params())?;
                    Ok(Lane { rows, tp: TpGroup::single(), ws, acts, grads, zeroed: true })
                })
                .collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        // With lanes, the micro-batch's activations live in them.
        let ws = lanes.is_empty().then(|| Workspace::new(device, &model, b, t)).transpose()?;
        let mut slots = Vec::with_capacity(chunks);
        let mut grad_in = Vec::with_capacity(chunks);
        if let Some(ws) = &ws {
            for chunk in 0..chunks {
                let acts = (0..schedule.in_flight_of_chunk(stage, chunk))
                    .map(|_| MicroActs::for_chunk(device, &model, ws, chunk))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                // Received gradients of the chunk's output: all but the model's last chunk.
                let inner = !groups.place.is_last_chunk(chunk);
                let n_act = ws.activation_len();
                grad_in.push(if inner {
                    (0..acts.len())
                        .map(|_| Buffer::zeros(device, n_act))
                        .collect::<std::result::Result<Vec<_>, _>>()?
                } else {
                    Vec::new()
                });
                slots.push(acts);
            }
        }
        let (len, dp, dp_rank) = (layout.len(), par.dp, groups.dp_rank);
        let owned = super::checkpoint::owned_range(len, dp, dp_rank, par.distributed_optimizer);
        let zero = if par.distributed_optimizer {
            let padded = len.div_ceil(dp) * dp;
            Some(Zero { padded, shard: Buffer::zeros(device, padded / dp)? })
        } else {
            None
        };
        let optimizer = AdamW::new(device, &layout, owned, settings.adamw)?;
        let mut groups = groups;
        // The tensor-parallel collectives on the ranks' devices, where they can run there.
        groups.tp.attach(device)?;
        // The pipeline's links on the stages' devices, where they can run there.
        groups.links.attach(device)?;
        let dp_comm = groups.dp.take().expect("the groups hold the data-parallel communicator");
        let mut dp = DpWorker::new(dp_comm);
        if par.dp > 1 {
            // The gradient buckets (ZeRO-1: the reduce-scatter and the all-gather) on the
            // ranks' devices, where the group can run them there.
            dp.attach(device)?;
        }
        let layer_blocks: Vec<_> = layout.layers().map(|l| (l, layout.layer_block(l))).collect();
        if par.dp > 1 && zero.is_none() {
            // The buckets: bucket i is layer block i (local layer order), then the stage block
            // (when the stage has one). Every data-parallel replica hands them to its DP
            // thread in the same order, the order its schedule finishes them.
            let stage_block = layout.stage_block();
            let lens: Vec<usize> = layer_blocks
                .iter()
                .map(|(_, b)| b.len())
                .chain(Some(stage_block.len()).filter(|&n| n > 0))
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
            skipped: 0,
            scaler: (settings.precision == Precision::Fp16).then(|| LossScaler::new(&settings.loss_scale)),
            timing: StageTiming::default(),
            ws,
            slots,
            lanes,
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
        let lanes: usize = self.lanes.iter().map(|l| l.acts.bytes() + l.ws.bytes()).sum();
        let act: usize = self.slots.iter().flatten().map(MicroActs::bytes).sum::<usize>()
            + self.ws.as_ref().map_or(0, Workspace::bytes)
            + lanes
            + self.grad_in.iter().flatten().map(|g| g.len() * 4).sum::<usize>();
        let lane_grads: usize = self.lanes.iter().map(|l| l.grads.len() * 4).sum();
        MemoryReport {
            params: self.model.params().len() * 4,
            grads: self.model.grads().len() * 4
                + lane_grads
                + self.zero.as_ref().map_or(0, |z| z.shard.len() * 4),
            optimizer: self.optimizer.bytes(),
            compute_weights: self.model.compute_weight_bytes(),
            activations: act,
        }
    }

    fn slot(&self, chunk: usize, micro_batch: usize) -> usize {
        micro_batch % self.slots[chunk].len()
    }

    /// One optimizer step over this step's micro-batches from `data` (this rank's share).
    pub fn step(&mut self, data: &mut dyn BatchSource) -> Result<StepStats> {
        let m = self.schedule.micro_batches;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        let batches = (0..m).map(|_| self.checked_batch(data)).collect::<Result<Vec<_>>>()?;
        // fp16: the loss gradient is scaled up so that small gradients survive fp16.
        let dloss = self.scaler.map_or(1.0, |s| s.scale) / (m * b * self.par.dp * t) as f32;
        if self.lanes.is_empty() {
            self.model.zero_grads()?;
        } else {
            for lane in self.lanes.iter_mut().filter(|l| !l.zeroed) {
                // Split across the cores: one core alone cannot saturate the memory bus.
                host_mut(&mut lane.grads.view_mut(..)?).par_chunks_mut(1 << 16).for_each(|c| c.fill(0.0));
                lane.zeroed = true;
            }
        }
        let overlap = self.par.dp > 1 && self.zero.is_none();
        let mut pending: Vec<Pending> = Vec::new();
        let mut loss_sum = 0.0f64;
        let place = self.groups.place;
        let steps = self.schedule.steps[place.stage].clone();
        let started = Instant::now();
        let mut busy = Duration::ZERO;
        for step in steps {
            let (c, i) = (step.chunk, step.micro_batch);
            if !self.lanes.is_empty() {
                // A pipeline of one stage runs each backward right after its forward: the
                // lanes do both at once.
                if !step.backward {
                    let t0 = Instant::now();
                    loss_sum +=
                        lanes_pass(&mut self.lanes, &self.model, &self.ctx, &batches[i], t, Some(dloss))?;
                    busy += t0.elapsed();
                }
                continue;
            }
            let s = self.slot(c, i);
            if !step.backward {
                let (loss, compute) = self.forward_chunk(c, s, &batches[i], Some(dloss))?;
                loss_sum += loss.map_or(0.0, f64::from);
                busy += compute;
            } else {
                let ws = self.ws.as_mut().expect("a pipeline without lanes has a workspace");
                let (tp, links) = (&mut self.groups.tp, &mut self.groups.links);
                let dout = if place.is_last_chunk(c) {
                    None
                } else {
                    links.recv_gradient_view(&mut self.grad_in[c][s].view_mut(..)?)?;
                    Some(self.grad_in[c][s].view(..)?)
                };
                let t0 = Instant::now();
                let last_micro_batch = i + 1 == m;
                let (blocks, dp) = (&self.layer_blocks, &self.dp);
                // Each layer's gradients go to the DP thread as soon as the last
                // micro-batch's backward is past it.
                let mut hook = |layer: usize, grads: &Buffer<f32>| -> std::result::Result<(), ModelError> {
                    if overlap && last_micro_batch {
                        let bucket =
                            blocks.iter().position(|(l, _)| *l == layer).expect("a layer of this stage");
                        let range = blocks[bucket].1.clone();
                        pending.push(dp.all_reduce_registered(bucket, range.clone(), grads.view(range)?)?);
                    }
                    Ok(())
                };
                self.model.backward(&self.ctx, tp, ws, &mut self.slots[c][s], dout, &mut hook)?;
                busy += t0.elapsed();
                if !place.is_first_chunk(c) {
                    links.send_gradient_view(&ws.input_grad().view(..)?)?;
                }
            }
        }
        self.groups.links.flush()?;
        self.timing.busy += busy;
        self.timing.wall += started.elapsed();
        let lanes_norm_sq = self.drain_lanes()?;

        let sq = match lanes_norm_sq {
            Some(sq) => sq,
            None => self.reduce_gradients(pending)?,
        };
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
            return Err(TrainError::NonFinite { loss, iter: self.iter });
        }
        // The schedule counts the updates taken: a skipped step does not advance it.
        let lr = self.settings.lr_schedule.lr(self.iter - self.skipped);
        let loss_scale = self.scaler.map(|s| s.scale);
        // The gradients were scaled with the loss; their true norm is the scaled one / scale.
        let norm = norm / loss_scale.unwrap_or(1.0);
        if let Some(scaler) = self.scaler.as_mut() {
            let found_inf = !norm.is_finite() || !loss.is_finite();
            scaler.update(found_inf);
            if found_inf {
                // fp16 overflowed: no update; the scaler backs off.
                self.iter += 1;
                self.skipped += 1;
                return Ok(StepStats { loss, grad_norm: norm, lr, loss_scale, skipped: true });
            }
        }
        if !loss.is_finite() {
            return Err(TrainError::NonFinite { loss, iter: self.iter });
        }
        let scale = clip_scale(norm, self.settings.clip_grad) / loss_scale.unwrap_or(1.0);
        match &self.zero {
            None => {
                let (params, grads) = self.model.params_and_grads();
                self.optimizer.step(&self.ctx, params, grads, 0, lr, scale)?
            }
            Some(z) => {
                self.optimizer.step(&self.ctx, self.model.params_mut(), &z.shard, 0, lr, scale)?;
                self.all_gather_params()?;
            }
        }
        self.model.sync_compute_weights(&self.ctx)?;
        self.iter += 1;
        Ok(StepStats { loss, grad_norm: norm, lr, loss_scale, skipped: false })
    }

    /// With lanes: their gradients summed into the model's (the first lane's buffer, holding
    /// the sum, trades places with the model's, which that lane clears at the next step);
    /// returns the squared norm of the sum. Without lanes: `None`.
    fn drain_lanes(&mut self) -> Result<Option<f64>> {
        let Some((first, rest)) = self.lanes.split_first_mut() else { return Ok(None) };
        let mut rest_views =
            rest.iter_mut().map(|l| l.grads.view_mut(..)).collect::<std::result::Result<Vec<_>, _>>()?;
        let mut parts: Vec<&mut [f32]> = rest_views.iter_mut().map(|v| host_mut(v)).collect();
        let sumsq = ops::cpu::drain_into(host_mut(&mut first.grads.view_mut(..)?), &mut parts);
        drop(rest_views);
        rest.iter_mut().for_each(|l| l.zeroed = true);
        std::mem::swap(self.model.grads_mut(), &mut first.grads);
        first.zeroed = false;
        Ok(Some(sumsq))
    }

    /// Finishes the gradients: the layer buckets already in flight, the tied embedding summed
    /// between the first and last stage, the rest over DP (ZeRO-1: reduce-scattered). Returns
    /// this rank's share of the squared gradient norm.
    fn reduce_gradients(&mut self, pending: Vec<Pending>) -> Result<f64> {
        let place = self.groups.place;
        if place.pp > 1 && (place.is_first_stage() || place.is_last_stage()) {
            let wte = self.model.layout().range(ParamTensor::Wte, 0);
            let pipe = &mut self.groups.pipe;
            on_host(&mut self.model.grads_mut().view_mut(wte)?, |h| pipe.sum_first_last(h))?;
        }
        let dp = self.par.dp;
        if let Some(z) = &mut self.zero {
            let owned = self.optimizer.owned.clone();
            let mut out = z.shard.view_mut(..owned.len())?;
            // On the devices: reduce-scattered by the collective kernels, no host copy.
            if !self.dp.reduce_scatter_on_devices(&self.model.grads().view(..)?, z.padded, &mut out)? {
                let mut all = self.model.grads().to_vec()?;
                all.resize(z.padded, 0.0);
                let share = z.padded / dp;
                let shard = self.dp.run(move |c| {
                    let mut out = vec![0.0f32; share];
                    c.reduce_scatter(&all, &mut out, ReduceOp::Sum).map(|()| out)
                })?;
                out.copy_from_slice(&shard[..owned.len()])?;
            }
            let z = self.zero.as_ref().expect("ZeRO-1 is on");
            return self.squared_norm_of(&z.shard, owned);
        }
        if dp > 1 {
            let mut all = pending;
            let block = self.model.layout().stage_block();
            if !block.is_empty() {
                let bucket = self.layer_blocks.len();
                all.push(self.dp.all_reduce_registered(
                    bucket,
                    block.clone(),
                    self.model.grads().view(block)?,
                )?);
            }
            for p in all {
                p.wait(self.model.grads_mut())?;
            }
        }
        self.squared_norm_of(self.model.grads(), 0..self.model.layout().len())
    }

    /// Sum of squares of the gradients in local range `owned` (held in `grads` from 0) that
    /// count on this rank: every counted tensor's part of the range in one reduction (on `Emu`
    /// and `Cuda` one grid-filling launch and one block).
    fn squared_norm_of(&self, grads: &Buffer<f32>, owned: std::ops::Range<usize>) -> Result<f64> {
        let ranges = norm_ranges(self.model.layout(), owned);
        Ok(ops::sum_of_squares_ranges(&self.ctx, grads.view(..)?, &ranges)?)
    }

    /// ZeRO-1: every DP rank's updated share back to all of them.
    fn all_gather_params(&mut self) -> Result<()> {
        let z = self.zero.as_ref().expect("ZeRO-1 is on");
        let (padded, len) = (z.padded, self.model.layout().len());
        let share = padded / self.par.dp;
        let owned = self.optimizer.owned.clone();
        // On the devices: gathered by the collective kernels, no host copy.
        if self.dp.all_gather_on_devices(self.model.params_mut(), owned.clone(), padded)? {
            return Ok(());
        }
        let mut mine = vec![0.0f32; share];
        mine[..owned.len()].copy_from_slice(&self.model.params().view(owned)?.to_vec()?);
        let all = self.dp.run(move |c| {
            let mut out = vec![0.0f32; padded];
            c.all_gather(&mine, &mut out).map(|()| out)
        })?;
        self.model.params_mut().copy_from_slice(&all[..len])?;
        Ok(())
    }

    /// Mean loss over `iters` micro-batches of `data` (forward only, stage after stage), the
    /// same on every rank.
    pub fn evaluate(&mut self, data: &mut dyn BatchSource, iters: usize) -> Result<f32> {
        let iters = iters.max(1);
        let place = self.groups.place;
        let mut total = 0.0f64;
        for _ in 0..iters {
            let batch = self.checked_batch(data)?;
            if !self.lanes.is_empty() {
                total +=
                    lanes_pass(&mut self.lanes, &self.model, &self.ctx, &batch, self.settings.seq_len, None)?;
                continue;
            }
            // Through every chunk of the stage in order: the micro-batch's whole forward.
            for c in 0..place.chunks {
                let (loss, _) = self.forward_chunk(c, 0, &batch, None)?;
                total += loss.map_or(0.0, f64::from);
            }
        }
        self.groups.links.flush()?;
        let mut mean = [total / iters as f64];
        if self.par.dp > 1 {
            let mut v = mean;
            v = self.dp.run(move |c| c.all_reduce(&mut v, ReduceOp::Sum).map(|()| v))?;
            mean = [v[0] / self.par.dp as f64];
        }
        self.groups.pipe.all_reduce_f64(&mut mean)?;
        Ok(mean[0] as f32)
    }

    /// One micro-batch's forward through model chunk `c` in activation slot `slot`, as a
    /// training step and an evaluation both run it: the input embedded (the model's first
    /// chunk) or received from the previous stage, the output sent to the next; with `dloss`
    /// the loss's gradient left for the backward. Returns the loss where the chunk ends the
    /// model, and the time spent computing (transfers excluded).
    fn forward_chunk(
        &mut self,
        c: usize,
        slot: usize,
        batch: &Batch,
        dloss: Option<f32>,
    ) -> Result<(Option<f32>, Duration)> {
        let place = self.groups.place;
        let ws = self.ws.as_mut().expect("a pipeline without lanes has a workspace");
        let (tp, links) = (&mut self.groups.tp, &mut self.groups.links);
        let acts = &mut self.slots[c][slot];
        if !place.is_first_chunk(c) {
            links.recv_activation_view(&mut acts.input.view_mut(..)?)?;
        }
        let t0 = Instant::now();
        if place.is_first_chunk(c) {
            self.model.embed(&self.ctx, tp, ws, acts, &batch.inputs)?;
        }
        let loss = self.model.forward(&self.ctx, tp, ws, acts, Some(&batch.targets), dloss)?;
        let compute = t0.elapsed();
        if !place.is_last_chunk(c) {
            links.send_activation_view(&acts.output().view(..)?)?;
        }
        Ok((loss, compute))
    }

    fn checked_batch(&self, data: &mut dyn BatchSource) -> Result<Batch> {
        let batch = data.next_batch()?;
        let (b, t) = (self.settings.micro_batch, self.settings.seq_len);
        let tokens = b * t;
        if batch.batch_size != b
            || batch.seq_len != t
            || batch.inputs.len() != tokens
            || batch.targets.len() != tokens
        {
            return Err(TrainError::BatchShape { got_b: batch.batch_size, got_t: batch.seq_len, b, t });
        }
        Ok(batch)
    }

    /// This rank's parameters (its share, in [`ShardLayout`] order).
    pub fn local_params(&self) -> Result<Vec<f32>> {
        Ok(self.model.params().to_vec()?)
    }
}

/// Runs every lane's rows of `batch` side by side and returns the mean loss over the batch.
/// With `dloss`, each lane's backward pass adds its gradients into its own buffer.
fn lanes_pass(
    lanes: &mut [Lane],
    model: &Gpt,
    ctx: &OpsContext,
    batch: &Batch,
    t: usize,
    dloss: Option<f32>,
) -> Result<f64> {
    let sums = lanes.par_iter_mut().map(|l| -> Result<f64> {
        let tokens = l.rows.start * t..l.rows.end * t;
        let (tp, ws, acts) = (&mut l.tp, &mut l.ws, &mut l.acts);
        model.embed(ctx, tp, ws, acts, &batch.inputs[tokens.clone()])?;
        let loss = model.forward(ctx, tp, ws, acts, Some(&batch.targets[tokens]), dloss)?;
        if dloss.is_some() {
            model.backward_into(ctx, tp, ws, acts, None, &mut l.grads, &mut |_, _| Ok(()))?;
        }
        Ok(loss.expect("a single rank is the last stage") as f64 * l.rows.len() as f64)
    });
    Ok(sums.collect::<Result<Vec<_>>>()?.iter().sum::<f64>() / batch.batch_size as f64)
}

/// The host memory of a view of a Cpu buffer.
fn host_mut<'a>(view: &'a mut ViewMut<'_, f32>) -> &'a mut [f32] {
    view.host_mut().expect("Cpu buffers live in host memory")
}

/// The pieces of local range `owned` (as offsets from its start) whose gradients count in
/// the global norm on this rank ([`ShardLayout::counts_in_norm`]), tensor by tensor.
pub fn norm_ranges(layout: &ShardLayout, owned: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
    layout
        .tensors()
        .iter()
        .filter(|t| layout.counts_in_norm(t))
        .map(|t| t.range.start.max(owned.start)..t.range.end.min(owned.end))
        .filter(|r| r.start < r.end)
        .map(|r| r.start - owned.start..r.end - owned.start)
        .collect()
}
