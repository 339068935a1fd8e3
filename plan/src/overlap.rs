//! Communication on its own stream: which part of a collective or a pipeline transfer the
//! computation hides, found by simulating the operations on two in-order streams (compute and
//! communication, as CUDA streams run them) with their data dependences, so that a transfer is
//! exposed only where something waits on its result.
//!
//! Megatron-LM's overlap flags, each modelled here:
//! - `--overlap-grad-reduce`: the data-parallel reduction of each gradient bucket starts as the
//!   last micro-batch's backward produces it ([`grad_reduce_exposed`]).
//! - `--overlap-param-gather`: with the distributed optimizer, the updated weights' all-gather
//!   runs bucket by bucket during the next forward, each bucket waited for where the forward
//!   first needs it ([`param_gather_exposed`]).
//! - `--tp-comm-overlap` (Transformer Engine's userbuffers, which Megatron-LM allows with
//!   sequence parallelism only): each forward all-gather / reduce-scatter is split into `t`
//!   pieces pipelined with the pieces of the GEMM next to it; in the backward each collective
//!   runs beside the GEMM that does not need it (the weight gradient's, or the input
//!   gradient's) ([`tp_layer`]).
//! - `--overlap-p2p-communication`: the interleaved schedule's sends and receives run on their
//!   own stream; a stage waits for a transfer only when its next computation needs the data
//!   ([`pipeline_makespan`]).
//!
//! Without a flag (Megatron-DeepSpeed-style runs) the transfer sits on the compute stream.

use crate::schedule::Interleaved;

/// Which stream an operation runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Kernels that compute.
    Compute,
    /// Collectives and transfers.
    Comm,
}

/// One operation: its stream, its duration and the operations whose results it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    /// The stream it is issued on (each stream runs its operations in issue order).
    pub stream: Stream,
    /// Seconds it takes once started.
    pub seconds: f64,
    /// Indices of earlier operations it waits for.
    pub after: Vec<usize>,
}

impl Op {
    /// A computation waiting for `after`.
    pub fn compute(seconds: f64, after: &[usize]) -> Self {
        Op { stream: Stream::Compute, seconds, after: after.to_vec() }
    }

    /// A transfer waiting for `after`.
    pub fn comm(seconds: f64, after: &[usize]) -> Self {
        Op { stream: Stream::Comm, seconds, after: after.to_vec() }
    }
}

/// Runs `ops` (each depending only on earlier ones) on the two streams: an operation starts
/// when its stream has finished the one issued before it and its inputs exist. Returns each
/// operation's end time.
pub fn run_streams(ops: &[Op]) -> Vec<f64> {
    let mut end = Vec::with_capacity(ops.len());
    let (mut compute, mut comm) = (0.0f64, 0.0f64);
    for op in ops {
        let ready = op.after.iter().filter_map(|&i| end.get(i).copied()).fold(0.0, f64::max);
        let free = match op.stream {
            Stream::Compute => &mut compute,
            Stream::Comm => &mut comm,
        };
        let finish = free.max(ready) + op.seconds;
        *free = finish;
        end.push(finish);
    }
    end
}

/// When the last operation ends.
pub fn makespan(ops: &[Op]) -> f64 {
    run_streams(ops).into_iter().fold(0.0, f64::max)
}

/// Seconds of `ops` not spent computing: the communication the computation did not hide.
pub fn exposed(ops: &[Op]) -> f64 {
    let busy: f64 = ops.iter().filter(|o| o.stream == Stream::Compute).map(|o| o.seconds).sum();
    (makespan(ops) - busy).max(0.0)
}

/// `--overlap-grad-reduce`: the last backward (`window` seconds) produces `buckets` gradient
/// buckets one after the other, each reduced (`reduce / buckets`) as soon as it exists. Without
/// the flag the whole reduction follows the backward.
pub fn grad_reduce_exposed(reduce: f64, window: f64, buckets: usize, overlapped: bool) -> f64 {
    if !overlapped || reduce <= 0.0 {
        return reduce.max(0.0);
    }
    let n = buckets.max(1);
    let mut ops = Vec::with_capacity(2 * n);
    for i in 0..n {
        let prev: Vec<usize> = if i == 0 { vec![] } else { vec![2 * (i - 1)] };
        ops.push(Op::compute(window / n as f64, &prev));
        ops.push(Op::comm(reduce / n as f64, &[2 * i]));
    }
    exposed(&ops)
}

/// `--overlap-param-gather`: the weights' all-gather (`gather` seconds in `buckets` buckets) is
/// issued at once and the next forward (`window` seconds, using the buckets in order) waits for
/// each bucket before its part. Without the flag the gather precedes the forward.
pub fn param_gather_exposed(gather: f64, window: f64, buckets: usize, overlapped: bool) -> f64 {
    if !overlapped || gather <= 0.0 {
        return gather.max(0.0);
    }
    let n = buckets.max(1);
    let mut ops: Vec<Op> = (0..n).map(|_| Op::comm(gather / n as f64, &[])).collect();
    for i in 0..n {
        let mut after = vec![i];
        if i > 0 {
            after.push(n + i - 1);
        }
        ops.push(Op::compute(window / n as f64, &after));
    }
    exposed(&ops)
}

/// One transformer layer's GEMMs and other work for one micro-batch forward, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LayerWork {
    /// QKV projection.
    pub qkv: f64,
    /// Attention output projection.
    pub proj: f64,
    /// MLP up projection.
    pub fc: f64,
    /// MLP down projection.
    pub fc_proj: f64,
    /// Attention core and the memory-bound operations.
    pub other: f64,
}

impl LayerWork {
    /// The forward's computation, all of it.
    pub fn forward(&self) -> f64 {
        self.qkv + self.proj + self.fc + self.fc_proj + self.other
    }
}

/// One layer's forward and backward with its tensor-parallel traffic: `(forward, backward)`
/// seconds, communication the computation does not hide included. `collective` is one of the
/// layer's collectives: with sequence parallelism (`sp`) there are four a pass (all-gather
/// before QKV and before the MLP, reduce-scatter after the projection and after the MLP),
/// else two all-reduces (after the projection and after the MLP). The backward computes twice
/// the forward (each GEMM's input gradient and weight gradient) with the same collectives.
///
/// `overlap` (`--tp-comm-overlap`, applied with sequence parallelism only, as Megatron-LM
/// requires) splits each forward collective and its GEMM into `pieces` pipelined pieces, and
/// in the backward runs each collective beside the GEMM that does not need it.
pub fn tp_layer(work: &LayerWork, collective: f64, sp: bool, overlap: bool, pieces: usize) -> (f64, f64) {
    let w = work;
    if collective <= 0.0 {
        return (w.forward(), 2.0 * w.forward());
    }
    if !(overlap && sp) {
        let count = if sp { 4.0 } else { 2.0 };
        return (w.forward() + count * collective, 2.0 * w.forward() + count * collective);
    }
    let n = pieces.max(1) as f64;
    // Forward: (all-gather, qkv), other, (proj, reduce-scatter), (all-gather, fc),
    // (fc_proj, reduce-scatter), each piece of a GEMM waiting for its piece of the gather and
    // each piece of a scatter for its piece of the GEMM.
    let mut ops: Vec<Op> = Vec::new();
    let mut last = None;
    let gather_then = |ops: &mut Vec<Op>, gemm: f64, last: &mut Option<usize>| {
        let start = ops.len();
        for _ in 0..pieces.max(1) {
            let after: Vec<usize> = last.iter().copied().collect();
            ops.push(Op::comm(collective / n, &after));
        }
        for i in 0..pieces.max(1) {
            ops.push(Op::compute(gemm / n, &[start + i]));
        }
        *last = Some(ops.len() - 1);
    };
    let scatter_after = |ops: &mut Vec<Op>, gemm: f64, last: &mut Option<usize>| {
        let mut pieces_done = Vec::new();
        for i in 0..pieces.max(1) {
            let after: Vec<usize> = if i == 0 { last.iter().copied().collect() } else { vec![] };
            ops.push(Op::compute(gemm / n, &after));
            pieces_done.push(ops.len() - 1);
        }
        for &g in &pieces_done {
            ops.push(Op::comm(collective / n, &[g]));
        }
        *last = Some(ops.len() - 1);
    };
    gather_then(&mut ops, w.qkv, &mut last);
    ops.push(Op::compute(w.other, &last.iter().copied().collect::<Vec<_>>()));
    last = Some(ops.len() - 1);
    scatter_after(&mut ops, w.proj, &mut last);
    gather_then(&mut ops, w.fc, &mut last);
    scatter_after(&mut ops, w.fc_proj, &mut last);
    let forward = makespan(&ops);
    // Backward, MLP first: each pair computes the input gradient its collective needs, then
    // the collective runs beside the weight gradient; the next pair waits for the collective.
    let mut ops: Vec<Op> = Vec::new();
    let mut prev: Vec<usize> = vec![];
    for (k, gemm) in [w.fc_proj, w.fc, w.proj, w.qkv].into_iter().enumerate() {
        ops.push(Op::compute(gemm, &prev));
        let input_grad = ops.len() - 1;
        ops.push(Op::comm(collective, &[input_grad]));
        let comm = ops.len() - 1;
        ops.push(Op::compute(gemm, &[input_grad]));
        if k == 2 {
            // The attention core's backward, between the projection and QKV.
            ops.push(Op::compute(2.0 * w.other, &[comm]));
            prev = vec![ops.len() - 1];
        } else {
            prev = vec![comm];
        }
    }
    let backward = makespan(&ops);
    (forward, backward)
}

/// The pipeline's makespan with each transfer between stages taking `transfer` seconds on the
/// sender's communication stream: a forward (backward) waits for its input's arrival, the
/// computations themselves do not wait for sends (`--overlap-p2p-communication`). `forward`
/// and `backward` are one chunk's computation. With `transfer` 0 it is the schedule's own
/// simulation ([`crate::schedule::simulate_interleaved`]).
pub fn pipeline_makespan(
    schedule: &Interleaved,
    forward: f64,
    backward: f64,
    transfer: f64,
) -> Result<f64, String> {
    let (p, m, v) = (schedule.stages, schedule.micro_batches, schedule.chunks);
    let mut f_end = vec![vec![f64::NAN; v * m]; p];
    let mut b_end = vec![vec![f64::NAN; v * m]; p];
    let mut next = vec![0usize; p];
    let mut clock = vec![0.0f64; p];
    let known = |t: f64| Some(t).filter(|t| !t.is_nan());
    loop {
        let mut progressed = false;
        for r in 0..p {
            while let Some(&s) = schedule.steps[r].get(next[r]) {
                let (i, c) = (s.micro_batch, s.chunk);
                // Inputs from another stage arrive `transfer` after they were produced.
                let ready = match (s.backward, r, c) {
                    (false, 0, 0) => Some(0.0),
                    (false, 0, c) => known(f_end[p - 1][(c - 1) * m + i]).map(|t| t + transfer),
                    (false, r, c) => known(f_end[r - 1][c * m + i]).map(|t| t + transfer),
                    (true, r, c) if r + 1 == p && c + 1 == v => known(f_end[r][c * m + i]),
                    (true, r, c) if r + 1 == p => known(b_end[0][(c + 1) * m + i]).map(|t| t + transfer),
                    (true, r, c) => known(b_end[r + 1][c * m + i]).map(|t| t + transfer),
                };
                let Some(ready) = ready else { break };
                let start = clock[r].max(ready);
                clock[r] = start + if s.backward { backward } else { forward };
                if s.backward {
                    b_end[r][c * m + i] = clock[r];
                } else {
                    f_end[r][c * m + i] = clock[r];
                }
                next[r] += 1;
                progressed = true;
            }
        }
        if (0..p).all(|r| next[r] == schedule.steps[r].len()) {
            break;
        }
        if !progressed {
            return Err("the pipeline schedule deadlocks".into());
        }
    }
    Ok(clock.iter().cloned().fold(0.0, f64::max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::simulate_interleaved;

    #[test]
    fn a_transfer_waits_only_for_what_it_needs() {
        // compute 3 s; a 2 s transfer of the first result runs beside the second computation.
        let ops = [Op::compute(1.0, &[]), Op::comm(2.0, &[0]), Op::compute(2.0, &[0])];
        assert_eq!(run_streams(&ops), vec![1.0, 3.0, 3.0]);
        assert_eq!(exposed(&ops), 0.0);
        // A computation that needs the transfer waits for it: 1 + 2 + 2.
        let ops = [Op::compute(1.0, &[]), Op::comm(2.0, &[0]), Op::compute(2.0, &[1])];
        assert_eq!(makespan(&ops), 5.0);
        assert_eq!(exposed(&ops), 2.0);
    }

    #[test]
    fn grad_reduce_hides_all_when_compute_bound_and_exactly_the_compute_when_comm_bound() {
        // Compute-bound: 4 buckets of 0.25 s reduction under a 4 s backward; only the last
        // bucket's reduction (0.25 s) follows the backward.
        assert!((grad_reduce_exposed(1.0, 4.0, 4, true) - 0.25).abs() < 1e-12);
        // Comm-bound: 8 s of reduction in 4 buckets behind a 2 s backward: the first bucket
        // starts after 0.5 s, the stream then stays busy: 0.5 + 8 - 2 = 6.5 s exposed, the
        // reduction less the compute after its first bucket (1.5 s).
        assert!((grad_reduce_exposed(8.0, 2.0, 4, true) - 6.5).abs() < 1e-12);
        // Without the flag: all of it.
        assert_eq!(grad_reduce_exposed(8.0, 2.0, 4, false), 8.0);
    }

    #[test]
    fn param_gather_waits_for_the_first_bucket_only_when_compute_bound() {
        // 4 buckets of 0.25 s before a 4 s forward: only the first bucket is waited for.
        assert!((param_gather_exposed(1.0, 4.0, 4, true) - 0.25).abs() < 1e-12);
        // Comm-bound: 4 s of gather, 1 s of forward: the forward's last quarter waits for the
        // last bucket at 4 s and ends at 4.25 s: 3.25 s exposed, the gather less the compute
        // that ran beside it (0.75 s).
        assert!((param_gather_exposed(4.0, 1.0, 4, true) - 3.25).abs() < 1e-12);
        assert_eq!(param_gather_exposed(4.0, 1.0, 4, false), 4.0);
    }

    #[test]
    fn tp_overlap_pipelines_pieces_and_hides_collectives_behind_independent_gemms() {
        let w = LayerWork { qkv: 2.0, proj: 2.0, fc: 2.0, fc_proj: 2.0, other: 0.0 };
        // Serial: 4 collectives of 1 s a pass with sequence parallelism, 2 without.
        assert_eq!(tp_layer(&w, 1.0, true, false, 4), (12.0, 20.0));
        assert_eq!(tp_layer(&w, 1.0, false, false, 4), (10.0, 18.0));
        // Overlapped with 4 pieces: each (gather, GEMM) pair costs its GEMM plus one piece
        // (0.25 s) of the collective; each (GEMM, scatter) pair likewise: 4 x 2.25 s.
        let (f, b) = tp_layer(&w, 1.0, true, true, 4);
        assert!((f - 9.0).abs() < 1e-12, "{f}");
        // Backward: each collective (1 s) hides behind a 2 s weight-gradient GEMM: 16 s.
        assert!((b - 16.0).abs() < 1e-12, "{b}");
        // Comm-bound: 8 s collectives beside 2 s GEMMs; the backward exposes 8 - 2 per pair.
        let (_, b) = tp_layer(&w, 8.0, true, true, 4);
        assert!((b - (4.0 * 2.0 + 4.0 * 8.0)).abs() < 1e-12, "{b}");
        // Without sequence parallelism Megatron-LM has no TP overlap: serial.
        assert_eq!(tp_layer(&w, 1.0, false, true, 4), (10.0, 18.0));
    }

    #[test]
    fn overlapped_transfers_delay_only_the_dependent_stage() {
        let s = Interleaved::new(4, 8, 2).unwrap();
        let free = pipeline_makespan(&s, 1.0, 2.0, 0.0).unwrap();
        assert_eq!(free, simulate_interleaved(&s, 1.0, 2.0).unwrap().makespan);
        // Transfers of 0.1 s: every crossing on the critical path adds 0.1 s, far less than
        // charging each stage 0.1 s for every send (a blocking send adds 2 v m x 0.1 = 3.2 s
        // of busy time to each stage).
        let delayed = pipeline_makespan(&s, 1.0, 2.0, 0.1).unwrap();
        assert!(delayed > free && delayed < free + 3.2, "{free} {delayed}");
        // One stage: no transfers.
        let one = Interleaved::new(1, 4, 1).unwrap();
        assert_eq!(pipeline_makespan(&one, 1.0, 2.0, 5.0).unwrap(), 12.0);
    }
}
