//! One optimizer step of a local run ([`LocalRun`]), simulated with its ranks sharing the
//! machine's cores: the schedule the trainer runs ([`Interleaved`]'s steps; one chunk per
//! stage is plain 1F1B), with the measured costs of [`LocalCosts`].
//!
//! Every rank is a thread of one process, and every op runs on one rayon pool as wide as the
//! machine: so the ranks do not each get a core; what runs at a moment shares the cores. The
//! simulation is a fluid one. Each piece of work has its seconds alone on the machine and the
//! cores it kept busy then (both measured); while the pieces running at once ask for more
//! cores than the machine has, or than other sessions on it leave them
//! ([`super::local::Competition::cores_for`]), all of them slow down by the same factor
//! (processor sharing). A stage's forward or backward stands for its `dp` replicas' TP
//! groups, which run in lockstep, so it asks `dp` times its group's cores. Waiting on a
//! transfer takes no core.
//!
//! Per stage, in the trainer's order: each schedule step — a forward of micro-batch `i`
//! through chunk `c` receives its input (but in the model's first chunk), computes, and posts
//! its output (but in the model's last chunk); a backward receives its output gradient (but
//! in the last chunk), computes, and posts its input gradient (but in the first chunk).
//! Posted sends leave on the link's own thread, so the stage goes on at once; a receive ends
//! one measured transfer time after the stage reached it, or, when the stage was there first,
//! one measured wake-up after the message was posted (the link's thread and the waiting stage
//! each woken while the sender's next pass holds the cores), whichever is later.
//! Then the flush (every posted send taken: at once for payloads the in-process transport
//! copies eagerly, else when the receiver took it), which ends the schedule's span; the tied
//! embedding's exchange (first and last stage); the data-parallel reduction on the rank's DP
//! thread, whose layer buckets started with each chunk's last backward and whose stage block
//! starts now, waited for; ZeRO-1's reduce-scatter; the norm and loss all-reduces, which
//! every rank reaches before any goes on (a barrier); the step's tail (norm, AdamW) and
//! ZeRO-1's all-gather. A single rank with row lanes runs each micro-batch's lanes pass,
//! forward and backward together, at its forward step.

use std::collections::HashMap;

use super::local::{LocalCosts, LocalRun, Work};
use crate::parallel::Interleaved;

/// Payloads up to this size are copied into the receiver's mailbox by the in-process
/// transport, so their send completes without the receiver (larger ones wait for it).
const EAGER_BYTES: usize = 32 << 10;

/// The simulated step.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LocalTimes {
    /// Seconds of one optimizer step.
    pub iteration: f64,
    /// Per stage: seconds inside forwards and backwards (slowed by the sharing), as the
    /// trainer's `StageTiming::busy` counts them.
    pub busy: Vec<f64>,
    /// Per stage: from the step's start to the end of its schedule, the flush of its posted
    /// sends included (`StageTiming::wall`).
    pub wall: Vec<f64>,
    /// The slowest stage's time after its schedule waiting for the DP reduction, the tied
    /// embedding's exchange and the other stages, and in ZeRO-1's reduce-scatter.
    pub after_schedule: f64,
    /// The slowest stage's DP reduction (and ZeRO-1 all-gather) as measured alone, hidden
    /// or not.
    pub dp_comm: f64,
    /// From the barrier to the end: the step's tail and ZeRO-1's all-gather.
    pub optimizer: f64,
    /// Per stage: seconds moving pipeline transfers (the wait for the other side is bubble).
    pub pp_comm: Vec<f64>,
}

impl LocalTimes {
    /// `1 - busy / wall` of stage `r`: the trainer's `StageTiming::idle_fraction`.
    pub fn idle_fraction(&self, r: usize) -> f64 {
        if self.wall[r] <= 0.0 {
            return 0.0;
        }
        1.0 - self.busy[r] / self.wall[r]
    }
}

/// A pipeline message: the activation (`forward`) or gradient of micro-batch `i` for the
/// chunk that is virtual stage `to` of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Message {
    forward: bool,
    i: usize,
    to: usize,
}

#[derive(Clone, Debug)]
enum Step {
    /// Work on the cores; `busy` when it is a forward or backward.
    Compute { work: Work, demand: f64, busy: bool },
    /// Waits for a message, then moves it.
    Recv(Message),
    /// Hands a message to the link's send thread (does not wait).
    Post(Message),
    /// Waits until every message this stage posted was taken.
    Flush,
    /// The end of the schedule's span (records the stage's wall time).
    ScheduleEnd,
    /// Hands this fraction of the stage's gradient reduction to the DP thread (does not wait).
    DpStart(f64),
    /// Waits for the DP thread.
    DpWait,
    /// A fixed time on no core (the tied embedding's exchange).
    Delay(f64),
    /// Every stage reaches it before any goes on.
    Barrier,
}

/// Each stage's steps for one optimizer step.
fn programs(run: &LocalRun, costs: &LocalCosts, schedule: &Interleaved) -> Result<Vec<Vec<Step>>, String> {
    let (t, pp, dp, v) = (run.par.tp as f64, run.par.pp, run.par.dp, run.chunks());
    let zero = run.par.distributed_optimizer && dp > 1;
    let overlapped_dp = dp > 1 && !zero;
    let lanes = run.lanes > 1;
    let m = schedule.micro_batches;
    let group = |w: Work| Step::Compute { work: w, demand: dp as f64 * w.cores, busy: false };
    // The DP rings of a stage: one per TP rank, each of `dp` ranks, as measured alone.
    let rings = |w: Work| Step::Compute { work: w, demand: t * w.cores, busy: false };
    let pass = |w: Work| Step::Compute { work: w, demand: dp as f64 * w.cores, busy: true };
    (0..pp)
        .map(|r| {
            let c = &costs.stages[r];
            let chunks_measured = if lanes { 1 } else { v };
            if c.chunks.len() != chunks_measured {
                return Err(format!("stage {r} has {} chunk costs, not {chunks_measured}", c.chunks.len()));
            }
            // The share of the stage's gradients in its layers (the rest is the stage block:
            // embedding, position table, final LayerNorm).
            let len = super::rank_memory::param_len(run, r) as f64;
            let layer_share = super::rank_memory::layer_params(run) as f64 / len.max(1.0);
            let mut steps = Vec::new();
            for s in &schedule.steps[r] {
                let (i, chunk) = (s.micro_batch, s.chunk);
                if lanes {
                    // The lanes run forward and backward together at the forward step.
                    if !s.backward {
                        steps.push(pass(c.chunks[0].forward));
                    }
                    continue;
                }
                let vs = chunk * pp + r;
                let (first, last) = (vs == 0, vs + 1 == pp * v);
                let cost = c.chunks[chunk];
                if !s.backward {
                    if !first {
                        steps.push(Step::Recv(Message { forward: true, i, to: vs }));
                    }
                    steps.push(pass(cost.forward));
                    if !last {
                        steps.push(Step::Post(Message { forward: true, i, to: vs + 1 }));
                    }
                } else {
                    if !last {
                        steps.push(Step::Recv(Message { forward: false, i, to: vs }));
                    }
                    if overlapped_dp && i + 1 == m {
                        steps.push(Step::DpStart(layer_share / v as f64));
                    }
                    steps.push(pass(cost.backward));
                    if !first {
                        steps.push(Step::Post(Message { forward: false, i, to: vs - 1 }));
                    }
                }
            }
            steps.push(Step::Flush);
            steps.push(Step::ScheduleEnd);
            if pp > 1 && (r == 0 || r + 1 == pp) {
                steps.push(Step::Delay(costs.embedding_sync));
            }
            if overlapped_dp {
                if layer_share < 1.0 {
                    steps.push(Step::DpStart(1.0 - layer_share));
                }
                steps.push(Step::DpWait);
            }
            if zero {
                steps.push(rings(c.dp_reduce));
            }
            steps.push(Step::Barrier);
            steps.push(group(c.optimizer));
            if zero {
                steps.push(rings(c.dp_gather));
            }
            Ok(steps)
        })
        .collect()
}

/// Where a stage is.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    pc: usize,
    arrived: f64,
    /// Seconds of alone-work left in the current compute step.
    remaining: f64,
    /// When the current receive, flush or delay ends, once known.
    done_at: Option<f64>,
    /// Whether the arrival bookkeeping of the current step ran.
    entered: bool,
}

/// Simulates one step of `run` with `costs`.
pub fn simulate(run: &LocalRun, costs: &LocalCosts) -> Result<LocalTimes, String> {
    let pp = run.par.pp;
    let schedule = run.schedule()?;
    if costs.stages.len() != pp {
        return Err(format!("{} stage costs for {pp} stages", costs.stages.len()));
    }
    let progs = programs(run, costs, &schedule)?;
    let act_bytes = {
        let n = run.micro_batch * run.seq_len;
        let sp = run.par.sequence_parallel && run.par.tp > 1;
        4 * run.config.channels * if sp { n / run.par.tp } else { n }
    };
    let eager = act_bytes <= EAGER_BYTES;
    let capacity = costs.cores.max(1) as f64;
    let mut cur = vec![Cursor { pc: 0, arrived: 0.0, remaining: 0.0, done_at: None, entered: false }; pp];
    // When each message was posted, and when its receive ended (the send is then complete).
    let mut posted: HashMap<Message, f64> = HashMap::new();
    let mut taken: HashMap<Message, f64> = HashMap::new();
    // Per stage, the messages it posted.
    let mut outbox: Vec<Vec<Message>> = vec![Vec::new(); pp];
    // The DP thread's job per stage: alone-seconds left, cores asked; `None` when idle.
    let mut dp_job: Vec<Option<(f64, f64)>> = vec![None; pp];
    let mut times = LocalTimes {
        busy: vec![0.0; pp],
        wall: vec![0.0; pp],
        pp_comm: vec![0.0; pp],
        ..LocalTimes::default()
    };
    let mut after_schedule = vec![0.0f64; pp];
    let mut barrier_at = None;
    let mut now = 0.0f64;
    for _round in 0..10_000_000 {
        // Settle every zero-time transition at `now`.
        loop {
            let mut changed = false;
            for r in 0..pp {
                let Some(step) = progs[r].get(cur[r].pc) else { continue };
                let c = &mut cur[r];
                if !c.entered {
                    c.entered = true;
                    c.arrived = now;
                    c.done_at = None;
                    changed = true;
                    match step {
                        Step::Compute { work, .. } => c.remaining = work.seconds,
                        Step::Delay(x) => c.done_at = Some(now + x),
                        _ => {}
                    }
                }
                let advance = match step {
                    Step::Compute { .. } => false,
                    Step::Recv(m) => {
                        if c.done_at.is_none() {
                            c.done_at =
                                posted.get(m).map(|&p| (c.arrived + costs.pp_send).max(p + costs.pp_wake));
                        }
                        let done = c.done_at.is_some_and(|d| d <= now);
                        if done {
                            taken.insert(*m, now);
                            times.pp_comm[r] += costs.pp_send.min(now - c.arrived);
                        }
                        done
                    }
                    Step::Post(m) => {
                        posted.insert(*m, now);
                        outbox[r].push(*m);
                        true
                    }
                    Step::Flush => {
                        if c.done_at.is_none() {
                            let ends: Option<Vec<f64>> = outbox[r]
                                .iter()
                                .map(|m| {
                                    if eager {
                                        Some(posted[m] + costs.pp_send)
                                    } else {
                                        taken.get(m).copied()
                                    }
                                })
                                .collect();
                            c.done_at = ends.map(|e| e.into_iter().fold(now, f64::max));
                        }
                        c.done_at.is_some_and(|d| d <= now)
                    }
                    Step::Delay(_) => c.done_at.is_some_and(|d| d <= now),
                    Step::ScheduleEnd => {
                        times.wall[r] = now;
                        true
                    }
                    Step::DpStart(share) => {
                        let w = costs.stages[r].dp_reduce;
                        let (left, _) = dp_job[r].unwrap_or((0.0, 0.0));
                        dp_job[r] = Some((left + share * w.seconds, run.par.tp as f64 * w.cores));
                        true
                    }
                    Step::DpWait => dp_job[r].is_none(),
                    Step::Barrier => {
                        let all = (0..pp).all(|q| matches!(progs[q].get(cur[q].pc), Some(Step::Barrier)));
                        if all {
                            barrier_at.get_or_insert(now);
                        }
                        barrier_at.is_some()
                    }
                };
                if advance {
                    let c = &mut cur[r];
                    if matches!(step, Step::Barrier) {
                        after_schedule[r] = now - times.wall[r];
                    }
                    c.pc += 1;
                    c.entered = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if (0..pp).all(|r| cur[r].pc >= progs[r].len()) {
            times.iteration = now;
            times.after_schedule = after_schedule.iter().copied().fold(0.0, f64::max);
            times.optimizer = now - barrier_at.unwrap_or(now);
            times.dp_comm = if run.par.dp > 1 {
                costs.stages.iter().map(|c| c.dp_reduce.seconds + c.dp_gather.seconds).fold(0.0, f64::max)
            } else {
                0.0
            };
            return Ok(times);
        }
        // The work running now and the speed the sharing leaves it.
        let mut demand = 0.0;
        for r in 0..pp {
            if let Some(Step::Compute { demand: d, .. }) = progs[r].get(cur[r].pc) {
                demand += d;
            }
            if let Some((_, d)) = dp_job[r] {
                demand += d;
            }
        }
        // What the competition leaves the run's threads, shared by all its work alike.
        let speed = if demand > 0.0 {
            (costs.competition.cores_for(demand, capacity) / demand).min(1.0)
        } else {
            1.0
        };
        let mut next = f64::INFINITY;
        for r in 0..pp {
            match progs[r].get(cur[r].pc) {
                Some(Step::Compute { .. }) => next = next.min(now + cur[r].remaining / speed),
                Some(Step::Recv(_) | Step::Flush | Step::Delay(_)) => {
                    if let Some(d) = cur[r].done_at {
                        next = next.min(d);
                    }
                }
                _ => {}
            }
            if let Some((left, _)) = dp_job[r] {
                next = next.min(now + left / speed);
            }
        }
        if !next.is_finite() {
            return Err(format!(
                "the simulated schedule stalled at {now:.6} s (stages at {:?})",
                cur.iter().map(|c| c.pc).collect::<Vec<_>>()
            ));
        }
        let dt = next - now;
        now = next;
        // Completed work within a picosecond counts as done (float rounding).
        for r in 0..pp {
            if let Some(Step::Compute { busy, .. }) = progs[r].get(cur[r].pc) {
                let c = &mut cur[r];
                c.remaining -= dt * speed;
                if c.remaining <= 1e-12 {
                    if *busy {
                        times.busy[r] += now - c.arrived;
                    }
                    c.pc += 1;
                    c.entered = false;
                }
            }
            if let Some((left, d)) = dp_job[r] {
                let left = left - dt * speed;
                dp_job[r] = (left > 1e-12).then_some((left, d));
            }
        }
    }
    Err("the simulated schedule did not finish".into())
}
