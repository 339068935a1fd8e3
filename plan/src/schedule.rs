//! Pipeline schedules as data: per stage, the list of computations and transfers it runs, in
//! order. [`Interleaved`]'s steps drive training (the trainer runs every pipeline, interleaved
//! or not, through them) and [`simulate_interleaved`]; [`Schedule`] spells out the 1F1B
//! transfers and [`simulate`] times it; both print as tables.

use std::fmt;

/// One step of a stage. Transfers name the micro-batch whose activation (forward) or gradient
/// (backward) they carry; the paired ones run both directions at once, as Megatron-LM's
/// `send_forward_recv_backward` and `send_backward_recv_forward` do, so that neighbouring
/// stages never wait on each other's sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Receive micro-batch `i`'s activation from the previous stage.
    RecvForward(usize),
    /// Run micro-batch `i`'s forward through the stage's layers.
    Forward(usize),
    /// Send micro-batch `i`'s output activation to the next stage.
    SendForward(usize),
    /// Receive the gradient of micro-batch `i`'s output from the next stage.
    RecvBackward(usize),
    /// Run micro-batch `i`'s backward through the stage's layers.
    Backward(usize),
    /// Send the gradient of micro-batch `i`'s input to the previous stage.
    SendBackward(usize),
    /// Send micro-batch `send`'s activation to the next stage, receive `recv`'s gradient from it.
    SendForwardRecvBackward {
        /// The micro-batch whose activation goes out.
        send: usize,
        /// The micro-batch whose gradient comes in.
        recv: usize,
    },
    /// Send micro-batch `send`'s gradient to the previous stage, receive `recv`'s activation.
    SendBackwardRecvForward {
        /// The micro-batch whose gradient goes out.
        send: usize,
        /// The micro-batch whose activation comes in.
        recv: usize,
    },
}

/// What every stage runs for one optimizer step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Pipeline stages (`p`).
    pub stages: usize,
    /// Micro-batches per step (`m`).
    pub micro_batches: usize,
    /// Per stage (`p` lists), its actions in the order it runs them: every stage runs each
    /// micro-batch's forward and backward once.
    pub actions: Vec<Vec<Action>>,
}

impl Schedule {
    /// Megatron-LM's non-interleaved one-forward-one-backward schedule: stage `r` runs
    /// `min(p - r - 1, m)` warm-up forwards, then alternates one forward and one backward,
    /// then drains the remaining backwards.
    pub fn one_f_one_b(stages: usize, micro_batches: usize) -> Self {
        let (p, m) = (stages, micro_batches);
        let actions = (0..p)
            .map(|r| {
                let (first, last) = (r == 0, r + 1 == p);
                let warmup = (p - r - 1).min(m);
                let steady = m - warmup;
                let mut a = Vec::new();
                for i in 0..warmup {
                    if !first {
                        a.push(Action::RecvForward(i));
                    }
                    a.push(Action::Forward(i));
                    if !last {
                        a.push(Action::SendForward(i));
                    }
                }
                if steady > 0 && !first {
                    a.push(Action::RecvForward(warmup));
                }
                for i in 0..steady {
                    let (fwd, bwd) = (warmup + i, i);
                    a.push(Action::Forward(fwd));
                    if !last {
                        a.push(Action::SendForwardRecvBackward { send: fwd, recv: bwd });
                    }
                    a.push(Action::Backward(bwd));
                    if !first {
                        if i + 1 == steady {
                            a.push(Action::SendBackward(bwd));
                        } else {
                            a.push(Action::SendBackwardRecvForward { send: bwd, recv: fwd + 1 });
                        }
                    }
                }
                for bwd in steady..m {
                    if !last {
                        a.push(Action::RecvBackward(bwd));
                    }
                    a.push(Action::Backward(bwd));
                    if !first {
                        a.push(Action::SendBackward(bwd));
                    }
                }
                a
            })
            .collect();
        Self { stages, micro_batches, actions }
    }

    /// The idle fraction of the ideal 1F1B pipeline: `(p - 1) / (m + p - 1)`.
    pub fn bubble_fraction(&self) -> f64 {
        let (p, m) = (self.stages as f64, self.micro_batches as f64);
        (p - 1.0) / (m + p - 1.0)
    }

    /// Most micro-batches whose activations stage `stage` holds at once.
    pub fn in_flight(&self, stage: usize) -> usize {
        let mut live = 0usize;
        let mut most = 0;
        for a in &self.actions[stage] {
            match a {
                Action::Forward(_) => {
                    live += 1;
                    most = most.max(live);
                }
                Action::Backward(_) => live -= 1,
                _ => {}
            }
        }
        most
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::RecvForward(i) => write!(f, "recv-f{i}"),
            Action::Forward(i) => write!(f, "F{i}"),
            Action::SendForward(i) => write!(f, "send-f{i}"),
            Action::RecvBackward(i) => write!(f, "recv-b{i}"),
            Action::Backward(i) => write!(f, "B{i}"),
            Action::SendBackward(i) => write!(f, "send-b{i}"),
            Action::SendForwardRecvBackward { send, recv } => write!(f, "send-f{send}/recv-b{recv}"),
            Action::SendBackwardRecvForward { send, recv } => write!(f, "send-b{send}/recv-f{recv}"),
        }
    }
}

impl fmt::Display for Schedule {
    /// One line per stage; computations only with `{}`, transfers too with `{:#}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "1F1B: {} stages, {} micro-batches", self.stages, self.micro_batches)?;
        for (r, actions) in self.actions.iter().enumerate() {
            write!(f, "stage {r}:")?;
            for a in actions {
                if f.alternate() || matches!(a, Action::Forward(_) | Action::Backward(_)) {
                    write!(f, " {a}")?;
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// When each stage computed in a simulated step.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Per stage, `(action, start, end)` of each forward and backward.
    pub spans: Vec<Vec<(Action, f64, f64)>>,
    /// When the last stage to finish finished (the step's time, in the unit of the
    /// simulated durations).
    pub makespan: f64,
}

impl Timeline {
    /// Fraction of the step stage `r` spent without computing.
    ///
    /// # Panics
    ///
    /// If `r` is not a stage of the timeline.
    pub fn idle_fraction(&self, r: usize) -> f64 {
        let busy: f64 = self.spans[r].iter().map(|(_, s, e)| e - s).sum();
        1.0 - busy / self.makespan
    }
}

/// Runs `schedule` on a model of the hardware: a forward takes `forward` and a backward
/// `backward` on every stage, transfers are instantaneous, and a stage starts a computation
/// once its previous one has finished and its input exists (the previous stage's forward of
/// that micro-batch, or the next stage's backward). Fails if the schedule deadlocks.
pub fn simulate(schedule: &Schedule, forward: f64, backward: f64) -> Result<Timeline, String> {
    let (p, m) = (schedule.stages, schedule.micro_batches);
    let mut f_end = vec![vec![f64::NAN; m]; p];
    let mut b_end = vec![vec![f64::NAN; m]; p];
    let mut next = vec![0usize; p];
    let mut clock = vec![0.0f64; p];
    let mut spans = vec![Vec::new(); p];
    loop {
        let mut progressed = false;
        for r in 0..p {
            while let Some(&a) = schedule.actions[r].get(next[r]) {
                let ready = match a {
                    Action::Forward(_) if r == 0 => Some(0.0),
                    Action::Forward(i) => Some(f_end[r - 1][i]).filter(|t| !t.is_nan()),
                    Action::Backward(i) if r + 1 == p => Some(f_end[r][i]).filter(|t| !t.is_nan()),
                    Action::Backward(i) => Some(b_end[r + 1][i]).filter(|t| !t.is_nan()),
                    _ => Some(clock[r]),
                };
                let Some(ready) = ready else { break };
                let start = clock[r].max(ready);
                match a {
                    Action::Forward(i) => {
                        clock[r] = start + forward;
                        f_end[r][i] = clock[r];
                        spans[r].push((a, start, clock[r]));
                    }
                    Action::Backward(i) => {
                        clock[r] = start + backward;
                        b_end[r][i] = clock[r];
                        spans[r].push((a, start, clock[r]));
                    }
                    _ => {}
                }
                next[r] += 1;
                progressed = true;
            }
        }
        if (0..p).all(|r| next[r] == schedule.actions[r].len()) {
            break;
        }
        if !progressed {
            let stuck: Vec<String> = (0..p)
                .map(|r| {
                    format!(
                        "stage {r} at {}",
                        schedule.actions[r][next[r].min(schedule.actions[r].len() - 1)]
                    )
                })
                .collect();
            return Err(format!("the schedule deadlocks: {}", stuck.join(", ")));
        }
    }
    let makespan = clock.iter().cloned().fold(0.0, f64::max);
    Ok(Timeline { spans, makespan })
}

/// One computation of the interleaved schedule: a forward or backward of `micro_batch` through
/// model chunk `chunk` of the stage. Stage `r`'s chunk `c` holds layers
/// `[(c * p + r) * l, (c * p + r + 1) * l)` with `l = layers / (p * v)`, as Megatron-LM's
/// virtual pipeline places them, so a micro-batch passes the stages `v` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkStep {
    /// A backward (else a forward).
    pub backward: bool,
    /// The micro-batch, `0..m`.
    pub micro_batch: usize,
    /// The stage's model chunk, `0..v`.
    pub chunk: usize,
}

impl fmt::Display for ChunkStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}.{}", if self.backward { 'B' } else { 'F' }, self.micro_batch, self.chunk)
    }
}

/// Megatron-LM's interleaved 1F1B schedule (Narayanan et al. 2021, section 2.2.2): each stage
/// holds `chunks` model chunks; its computations only, in order (each forward's output goes to
/// the next stage's same chunk, or from the last stage to stage 0's next chunk; backwards
/// flow the other way).
///
/// Two stages of two chunks each over four micro-batches: stage 0 warms up with four
/// forwards, stage 1 with two, and the bubble shrinks from 1/5 (one chunk) to 1/9 of the
/// step. The simulated step (a forward 1, a backward 2, free transfers) shows the same idle
/// time on the first stage:
///
/// ```
/// use trident_plan::schedule::{simulate_interleaved, Interleaved};
///
/// let schedule = Interleaved::new(2, 4, 2).unwrap();
/// print!("{schedule}");
/// let table = schedule.to_string();
/// let stage1 = table.lines().nth(2).unwrap();
/// assert_eq!(stage1, "stage 1: F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
/// assert_eq!(schedule.steps[0].len(), 2 * 2 * 4); // forward and backward, per chunk, per micro-batch
///
/// // (p - 1) / (v m + p - 1)
/// assert!((schedule.bubble_fraction() - 1.0 / 9.0).abs() < 1e-12);
/// let plain = Interleaved::new(2, 4, 1).unwrap();
/// assert!((plain.bubble_fraction() - 1.0 / 5.0).abs() < 1e-12);
///
/// // Activations held at once: the deeper warm-up of stage 0 keeps more micro-batch chunks.
/// assert_eq!((schedule.in_flight(0), schedule.in_flight(1)), (5, 3));
///
/// let timeline = simulate_interleaved(&schedule, 1.0, 2.0).unwrap();
/// assert!((timeline.idle_fraction(0) - schedule.bubble_fraction()).abs() < 1e-12);
///
/// // The interleaved schedule takes micro-batches in groups of `p`.
/// assert!(Interleaved::new(2, 3, 2).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interleaved {
    /// Pipeline stages (`p`).
    pub stages: usize,
    /// Model chunks per stage (`v`; 1 without interleaving).
    pub chunks: usize,
    /// Micro-batches per step (`m`).
    pub micro_batches: usize,
    /// Per stage (`p` lists), its `2 v m` computations in order: each micro-batch's forward
    /// and backward through each of the stage's chunks.
    pub steps: Vec<Vec<ChunkStep>>,
}

impl Interleaved {
    /// Virtual micro-batch `k` of a stage (its `k`-th forward) is micro-batch
    /// `(k / (p v)) p + k % p` through chunk `(k % (p v)) / p`: groups of `p` micro-batches go
    /// through chunk 0, then the same group through chunk 1, and so on. Backwards take the
    /// same order with the chunks reversed. Stage `r` runs `2 (p - r - 1) + (v - 1) p` warm-up
    /// forwards (all of them when `m == p`), then one forward one backward, then the rest of
    /// the backwards. Needs `m` a multiple of `p`, as Megatron-LM does.
    ///
    /// With one chunk (`v = 1`) this is the non-interleaved 1F1B order of
    /// [`Schedule::one_f_one_b`] (`min(p - r - 1, m)` warm-up forwards), for any `p` and `m`:
    /// the trainer runs every pipeline through these steps.
    pub fn new(stages: usize, micro_batches: usize, chunks: usize) -> Result<Self, String> {
        let (p, m, v) = (stages, micro_batches, chunks);
        if p == 0 || m == 0 || v == 0 {
            return Err(format!("a pipeline needs stages, micro-batches and chunks, not {p}, {m} and {v}"));
        }
        if v == 1 {
            let steps = (0..p)
                .map(|r| {
                    let warmup = (p - r - 1).min(m);
                    let f = |i| ChunkStep { backward: false, micro_batch: i, chunk: 0 };
                    let b = |i| ChunkStep { backward: true, micro_batch: i, chunk: 0 };
                    let mut a: Vec<ChunkStep> = (0..warmup).map(f).collect();
                    for i in 0..m - warmup {
                        a.push(f(warmup + i));
                        a.push(b(i));
                    }
                    a.extend((m - warmup..m).map(b));
                    a
                })
                .collect();
            return Ok(Self { stages, chunks, micro_batches, steps });
        }
        if p < 2 {
            return Err(format!(
                "the interleaved schedule needs 2 or more stages and chunks, not {p} and {v}"
            ));
        }
        if m % p != 0 {
            return Err(format!(
                "the interleaved schedule runs micro-batches in groups of the {p} stages: {m} micro-batches \
                 is not a multiple of {p}"
            ));
        }
        let total = m * v;
        let step = |k: usize, backward: bool| {
            let group = k % (p * v);
            let chunk = if backward { v - 1 - group / p } else { group / p };
            ChunkStep { backward, micro_batch: (k / (p * v)) * p + k % p, chunk }
        };
        let steps = (0..p)
            .map(|r| {
                let warmup = if m == p { total } else { (2 * (p - r - 1) + (v - 1) * p).min(total) };
                let mut a: Vec<ChunkStep> = (0..warmup).map(|k| step(k, false)).collect();
                for k in 0..total - warmup {
                    a.push(step(k + warmup, false));
                    a.push(step(k, true));
                }
                a.extend((total - warmup..total).map(|k| step(k, true)));
                a
            })
            .collect();
        Ok(Self { stages, chunks, micro_batches, steps })
    }

    /// Idle fraction of the ideal interleaved pipeline: the bubble is `(p - 1) / v` of one
    /// micro-batch's forward and backward, against `m` of them of work:
    /// `(p - 1) / (v m + p - 1)`, that is `(p - 1) / (v m)` of the compute time.
    pub fn bubble_fraction(&self) -> f64 {
        let (p, m, v) = (self.stages as f64, self.micro_batches as f64, self.chunks as f64);
        (p - 1.0) / (v * m + p - 1.0)
    }

    /// Most micro-batch chunks whose activations stage `stage` holds at once.
    pub fn in_flight(&self, stage: usize) -> usize {
        let (mut live, mut most) = (0usize, 0usize);
        for s in &self.steps[stage] {
            if s.backward {
                live -= 1;
            } else {
                live += 1;
                most = most.max(live);
            }
        }
        most
    }

    /// Most micro-batches whose activations stage `stage` holds at once in chunk `chunk`. The
    /// live ones are always consecutive (forwards and backwards of a chunk both go in
    /// micro-batch order), so micro-batch `i` can take slot `i % in_flight_of_chunk`.
    pub fn in_flight_of_chunk(&self, stage: usize, chunk: usize) -> usize {
        let (mut live, mut most) = (0usize, 0usize);
        for s in self.steps[stage].iter().filter(|s| s.chunk == chunk) {
            if s.backward {
                live -= 1;
            } else {
                live += 1;
                most = most.max(live);
            }
        }
        most
    }
}

impl fmt::Display for Interleaved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "interleaved 1F1B: {} stages, {} chunks each, {} micro-batches",
            self.stages, self.chunks, self.micro_batches
        )?;
        for (r, steps) in self.steps.iter().enumerate() {
            write!(f, "stage {r}:")?;
            for s in steps {
                write!(f, " {s}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// When each stage computed in a simulated interleaved step.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkTimeline {
    /// Per stage, `(step, start, end)` of each chunk's forward and backward.
    pub spans: Vec<Vec<(ChunkStep, f64, f64)>>,
    /// When the last stage to finish finished (the step's time, in the unit of the
    /// simulated durations).
    pub makespan: f64,
}

impl ChunkTimeline {
    /// Fraction of the step stage `r` spent without computing (its share of the bubble).
    ///
    /// # Panics
    ///
    /// If `r` is not a stage of the timeline.
    pub fn idle_fraction(&self, r: usize) -> f64 {
        let busy: f64 = self.spans[r].iter().map(|(_, s, e)| e - s).sum();
        1.0 - busy / self.makespan
    }
}

/// [`simulate`] for the interleaved schedule: a chunk's forward takes `forward` and its
/// backward `backward` on every stage; a forward of chunk `c` needs the previous stage's
/// forward of it (stage 0: the last stage's forward through chunk `c - 1`), a backward the
/// next stage's backward (the last stage: stage 0's backward of chunk `c + 1`, or for the last
/// chunk its own forward). Fails if the schedule deadlocks.
pub fn simulate_interleaved(
    schedule: &Interleaved,
    forward: f64,
    backward: f64,
) -> Result<ChunkTimeline, String> {
    let (p, m, v) = (schedule.stages, schedule.micro_batches, schedule.chunks);
    // Finish times, indexed [stage][chunk * m + micro-batch].
    let mut f_end = vec![vec![f64::NAN; v * m]; p];
    let mut b_end = vec![vec![f64::NAN; v * m]; p];
    let mut next = vec![0usize; p];
    let mut clock = vec![0.0f64; p];
    let mut spans = vec![Vec::new(); p];
    let known = |t: f64| Some(t).filter(|t| !t.is_nan());
    loop {
        let mut progressed = false;
        for r in 0..p {
            while let Some(&s) = schedule.steps[r].get(next[r]) {
                let (i, c) = (s.micro_batch, s.chunk);
                let ready = match (s.backward, r, c) {
                    (false, 0, 0) => Some(0.0),
                    (false, 0, c) => known(f_end[p - 1][(c - 1) * m + i]),
                    (false, r, c) => known(f_end[r - 1][c * m + i]),
                    (true, r, c) if r + 1 == p && c + 1 == v => known(f_end[r][c * m + i]),
                    (true, r, c) if r + 1 == p => known(b_end[0][(c + 1) * m + i]),
                    (true, r, c) => known(b_end[r + 1][c * m + i]),
                };
                let Some(ready) = ready else { break };
                let start = clock[r].max(ready);
                clock[r] = start + if s.backward { backward } else { forward };
                if s.backward {
                    b_end[r][c * m + i] = clock[r];
                } else {
                    f_end[r][c * m + i] = clock[r];
                }
                spans[r].push((s, start, clock[r]));
                next[r] += 1;
                progressed = true;
            }
        }
        if (0..p).all(|r| next[r] == schedule.steps[r].len()) {
            break;
        }
        if !progressed {
            let stuck: Vec<String> = (0..p)
                .filter(|&r| next[r] < schedule.steps[r].len())
                .map(|r| format!("stage {r} at {}", schedule.steps[r][next[r]]))
                .collect();
            return Err(format!("the interleaved schedule deadlocks: {}", stuck.join(", ")));
        }
    }
    let makespan = clock.iter().cloned().fold(0.0, f64::max);
    Ok(ChunkTimeline { spans, makespan })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_f_one_b_has_megatron_warmup_and_the_formula_bubble() {
        let s = Schedule::one_f_one_b(4, 8);
        let text = format!("{s}");
        assert!(text.contains("stage 0: F0 F1 F2 F3 B0 F4 B1"), "{text}");
        assert!(text.contains("stage 3: F0 B0 F1 B1"), "{text}");
        for r in 0..4 {
            let warmup = s.actions[r]
                .iter()
                .filter(|a| matches!(a, Action::Forward(_) | Action::Backward(_)))
                .take_while(|a| matches!(a, Action::Forward(_)))
                .count();
            assert_eq!(warmup, (4 - r - 1) + 1, "stage {r}: warm-up forwards then the first steady forward");
            assert_eq!(s.in_flight(r), 4 - r);
        }
        for (p, m) in [(2, 4), (4, 4), (4, 16), (2, 1), (4, 2)] {
            let s = Schedule::one_f_one_b(p, m);
            // With a backward twice a forward the ideal bubble is still (p-1)/(m+p-1).
            let t = simulate(&s, 1.0, 2.0).unwrap();
            let expected = 3.0 * (m + p - 1) as f64;
            assert!((t.makespan - expected).abs() < 1e-9, "p {p} m {m}: makespan {}", t.makespan);
            if m >= p {
                for r in 0..p {
                    let idle = t.idle_fraction(r);
                    assert!((idle - s.bubble_fraction()).abs() < 1e-9, "p {p} m {m} stage {r}: {idle}");
                }
            }
        }
    }

    #[test]
    fn a_schedule_that_waits_on_itself_is_reported() {
        let mut s = Schedule::one_f_one_b(2, 2);
        s.actions[1].swap(1, 2);
        let err = simulate(&s, 1.0, 1.0).unwrap_err();
        assert!(err.contains("deadlocks"), "{err}");
    }

    #[test]
    fn interleaved_runs_every_chunk_once_and_has_the_v_times_smaller_bubble() {
        for (p, m, v) in [(2, 4, 2), (4, 8, 2), (4, 4, 3), (4, 16, 4), (3, 6, 2)] {
            let s = Interleaved::new(p, m, v).unwrap();
            for r in 0..p {
                let mut seen: Vec<(bool, usize, usize)> =
                    s.steps[r].iter().map(|x| (x.backward, x.micro_batch, x.chunk)).collect();
                seen.sort();
                seen.dedup();
                assert_eq!(
                    seen.len(),
                    2 * m * v,
                    "p {p} m {m} v {v} stage {r}: each chunk forward and backward once"
                );
            }
            // Chunk times: 1/v of a stage's forward (1) and backward (2).
            let (f, b) = (1.0 / v as f64, 2.0 / v as f64);
            let t = simulate_interleaved(&s, f, b).unwrap();
            let ideal = m as f64 * 3.0;
            let bubble = (p - 1) as f64 * 3.0 / v as f64;
            assert!(
                (t.makespan - (ideal + bubble)).abs() < 1e-9,
                "p {p} m {m} v {v}: makespan {}",
                t.makespan
            );
            for r in 0..p {
                assert!(
                    (t.idle_fraction(r) - s.bubble_fraction()).abs() < 1e-9,
                    "p {p} m {m} v {v} stage {r}"
                );
            }
            // The non-interleaved pipeline of the same work idles more.
            let plain = simulate(&Schedule::one_f_one_b(p, m), 1.0, 2.0).unwrap();
            assert!(plain.makespan > t.makespan + 1e-9);
        }
        let s = Interleaved::new(4, 8, 2).unwrap();
        // Stage 0 warms up with 2 (p - 1) + (v - 1) p = 10 forwards, in groups of p per chunk.
        let text = format!("{s}");
        assert!(
            text.contains("stage 0: F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1"),
            "{text}"
        );
        assert_eq!(s.in_flight(0), 11);
        assert_eq!(s.in_flight(3), 5);
        assert!(Interleaved::new(4, 6, 2).unwrap_err().contains("multiple of 4"));
        // One chunk: the non-interleaved 1F1B order, computations for computations.
        for (p, m) in [(1, 3), (2, 4), (4, 2), (4, 8)] {
            let one = Interleaved::new(p, m, 1).unwrap();
            let plain = Schedule::one_f_one_b(p, m);
            for r in 0..p {
                let computations: Vec<ChunkStep> = plain.actions[r]
                    .iter()
                    .filter_map(|a| match *a {
                        Action::Forward(i) => Some(ChunkStep { backward: false, micro_batch: i, chunk: 0 }),
                        Action::Backward(i) => Some(ChunkStep { backward: true, micro_batch: i, chunk: 0 }),
                        _ => None,
                    })
                    .collect();
                assert_eq!(one.steps[r], computations, "p {p} m {m} stage {r}");
                assert_eq!(one.in_flight_of_chunk(r, 0), plain.in_flight(r));
            }
        }
    }

    #[test]
    fn an_interleaved_schedule_that_waits_on_itself_is_reported() {
        let mut s = Interleaved::new(2, 2, 2).unwrap();
        let first_backward = s.steps[1].iter().position(|x| x.backward).unwrap();
        s.steps[1].swap(0, first_backward);
        let err = simulate_interleaved(&s, 1.0, 1.0).unwrap_err();
        assert!(err.contains("deadlocks"), "{err}");
    }
}
