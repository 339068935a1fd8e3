//! The bytes one rank of Trident's trainer allocates, counted from the model's shape and the
//! grid alone (a closed form of the buffers `Trainer`, `Gpt`, `Workspace` and `MicroActs`
//! make), so that the planner's memory for a local run is the trainer's, not an estimate of
//! it.
//!
//! Notation as in docs/PLAN.md: `c` hidden, `t` TP, `b` micro-batch, `s` sequence,
//! `n = b s` token rows of a micro-batch, `ns` the rows of the residual stream a rank holds
//! (`n / t` with sequence parallelism, else `n`), `cl = c / t`, `fl = 4 c / t`, `hl` the
//! local heads, `Vp` the padded vocabulary, `S` the position table's rows. Every buffer is
//! f32 (4 bytes an element; the token buffers' `u32` too): the local planner times runs on the
//! Cpu, which under mixed precision keeps bf16 (fp16) values in f32 buffers (`Emu` and `Cuda`
//! keep some in 16-bit buffers; `train::memory` counts those).

use super::local::LocalRun;
use crate::model::layer_tensors::{layer_elements, Geometry};
use crate::model::Precision;
use crate::parallel::{Interleaved, Recompute};

/// What one rank holds, in bytes, split as the trainer's `MemoryReport` splits it, plus what
/// the report does not count: the data-parallel gradient buckets and mixed precision's
/// rounded copy of the weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RankBytes {
    /// The rank's parameter buffer (the fp32 master weights).
    pub params: usize,
    /// The gradients, the row lanes' own gradients (a single rank on the Cpu), and under
    /// ZeRO-1 the reduce-scattered shard the optimizer reads.
    pub grads: usize,
    /// AdamW's two moments of the range the rank updates.
    pub optimizer: usize,
    /// The in-flight micro-batches' saved tensors, the shared scratch and the received
    /// output gradients (with lanes: each lane's saved tensors and scratch).
    pub activations: usize,
    /// The registered buckets the data-parallel thread reduces (one copy of the gradients,
    /// DP > 1 without ZeRO-1).
    pub dp_buckets: usize,
    /// `--bf16`, `--fp16`: the master weights rounded for the products to read (one copy of
    /// the parameters).
    pub compute_weights: usize,
}

impl RankBytes {
    /// What the trainer's `MemoryReport` counts: parameters, gradients, optimizer state and
    /// activations.
    pub fn reported(&self) -> usize {
        self.params + self.grads + self.optimizer + self.activations
    }

    /// Everything the rank allocates: [`reported`](Self::reported), the DP buckets and the
    /// compute weights.
    pub fn total(&self) -> usize {
        self.reported() + self.dp_buckets + self.compute_weights
    }
}

/// Elements of one rank's parameter buffer: per layer `6 c` replicated (LayerNorms, the two
/// row-parallel biases) and `(12 c^2 + 7 c) / t` split; the embedding's `Vp c / t` rows on the
/// first and last stage, the position table `S c` on the first, the final LayerNorm `2 c` on
/// the last. Interleaving changes which layers a stage holds, not how many.
pub fn param_len(run: &LocalRun, stage: usize) -> usize {
    let (c, t, pp) = (run.config.channels, run.par.tp, run.par.pp);
    let (first, last) = (stage == 0, stage + 1 == pp);
    let mut len = layer_params(run);
    if first || last {
        len += run.config.padded_vocab_size / t * c;
    }
    if first {
        len += run.config.max_seq_len * c;
    }
    if last {
        len += 2 * c;
    }
    len
}

/// Elements of a stage's layers in its parameter buffer, the same on every stage (the
/// data-parallel layer buckets; the rest of [`param_len`] is the stage block).
pub fn layer_params(run: &LocalRun) -> usize {
    let (c, t) = (run.config.channels, run.par.tp);
    run.config.num_layers / run.par.pp * (6 * c + (12 * c * c + 7 * c) / t)
}

/// The sizes of `rows` sequences of `run`'s micro-batch (or one lane's rows of it) on a rank.
fn geometry(run: &LocalRun, rows: usize) -> Geometry {
    let sp = run.par.sequence_parallel;
    Geometry::new(rows, run.seq_len, run.config.channels, run.config.num_heads, run.par.tp, sp)
}

/// Elements one micro-batch keeps through one chunk of `layers` layers (`MicroActs`): its
/// input (`ns c`) and tokens (`n`), every layer's saved tensors (full recomputation: each
/// layer's output, `ns c`, only) and, in the model's last chunk, the head's (`lnf` `ns c`,
/// mean and rstd, logits `n Vp / t`, losses and targets `n` each).
fn micro_batch_len(run: &LocalRun, d: Geometry, layers: usize, head: bool) -> usize {
    let vl = run.config.padded_vocab_size / run.par.tp;
    d.ns * d.c
        + d.n
        + match run.par.recompute {
            Recompute::Full => layers * d.ns * d.c,
            r => layers * layer_elements(&d, r == Recompute::None),
        }
        + if head { d.ns * d.c + 2 * d.ns + d.n * vl + 2 * d.n } else { 0 }
}

/// Elements of the scratch every micro-batch of the rank shares (`Workspace`): `dres`, `dln`
/// (`ns c`), `datty` (`n cl`), `dqkv` (`3 n cl`), `dfch` (`n fl`); under recomputation the
/// recomputed attention output and log-sum-exp, under full recomputation one layer (its
/// attention kept); at TP > 1 on the first stage the extended embedding and its gradient
/// (`(Vp / t + 1) c` each) and, on TP ranks but 0, a zero position table (`S c`); under
/// sequence parallelism the products' partial sums `proj` (`n c`), `proj_local` (`ns c`),
/// three whole-row buffers (`n c`) and the LayerNorm gradient pair (`2 c`).
fn scratch_len(run: &LocalRun, d: Geometry, tp_rank: usize, first: bool) -> usize {
    let t = run.par.tp;
    let vl = run.config.padded_vocab_size / t;
    let sp = run.par.sequence_parallel && t > 1;
    let recompute = run.par.recompute;
    2 * d.ns * d.c
        + d.n * d.cl
        + 3 * d.n * d.cl
        + d.n * d.fl
        + if recompute != Recompute::None { d.n * d.cl + d.head_positions } else { 0 }
        + if recompute == Recompute::Full { layer_elements(&d, true) } else { 0 }
        + if first && t > 1 { 2 * (vl + 1) * d.c } else { 0 }
        + if first && tp_rank != 0 { run.config.max_seq_len * d.c } else { 0 }
        + if sp { d.n * d.c + d.ns * d.c + 3 * d.n * d.c + 2 * d.c } else { 0 }
}

/// The bytes of the rank at (`tp_rank`, `stage`, `dp_rank`) of `run`'s grid.
///
/// Activations, without lanes: for each model chunk of the stage, as many micro-batches as
/// the schedule holds in it at once ([`Interleaved::in_flight_of_chunk`]), each with its
/// saved tensors and, but in the model's last chunk, a received output gradient (`ns c`);
/// plus the shared scratch. With lanes (one rank on the Cpu), each lane of `rows` sequences
/// has one micro-batch's saved tensors and its own scratch, and gradients of its own.
///
/// Errors when the run's schedule cannot be built (see [`LocalRun::validate`]).
pub fn rank_bytes(run: &LocalRun, tp_rank: usize, stage: usize, dp_rank: usize) -> Result<RankBytes, String> {
    let (pp, dp) = (run.par.pp, run.par.dp);
    let (first, last) = (stage == 0, stage + 1 == pp);
    let v = run.chunks();
    let layers_per_chunk = run.config.num_layers / (pp * v);
    let len = param_len(run, stage);
    let zero = run.par.distributed_optimizer;
    let shard = if zero { len.div_ceil(dp) } else { 0 };
    let owned = crate::train::checkpoint::owned_range(len, dp, dp_rank, zero).len();
    let (activations, lane_grads) = if run.lanes > 1 {
        let b = run.micro_batch;
        let per_lane = (0..run.lanes).map(|i| {
            let d = geometry(run, (i + 1) * b / run.lanes - i * b / run.lanes);
            micro_batch_len(run, d, layers_per_chunk, true) + scratch_len(run, d, 0, true)
        });
        (per_lane.sum(), run.lanes * len)
    } else {
        let schedule = Interleaved::new(pp, run.micro_batches(), v)?;
        let d = geometry(run, run.micro_batch);
        let in_flight: usize = (0..v)
            .map(|c| {
                let head = last && c + 1 == v;
                let held =
                    micro_batch_len(run, d, layers_per_chunk, head) + if head { 0 } else { d.ns * d.c };
                schedule.in_flight_of_chunk(stage, c) * held
            })
            .sum();
        (in_flight + scratch_len(run, d, tp_rank, first), 0)
    };
    let half = run.precision != Precision::Fp32;
    Ok(RankBytes {
        params: 4 * len,
        grads: 4 * (len + lane_grads + shard),
        optimizer: 4 * 2 * owned,
        activations: 4 * activations,
        dp_buckets: if dp > 1 && !zero { 4 * len } else { 0 },
        compute_weights: if half { 4 * len } else { 0 },
    })
}
