//! Pipeline schedules as data: per stage, the list of computations and transfers it runs, in
//! order. The same [`Schedule`] drives training ([`super::PipelineTrainer`]) and
//! [`simulate`], and prints as a table.

use std::fmt;

/// One step of a stage. Transfers name the micro-batch whose activation (forward) or gradient
/// (backward) they carry; the paired ones run both directions at once, as Megatron-LM's
/// `send_forward_recv_backward` and `send_backward_recv_forward` do, so that neighbouring
/// stages never wait on each other's sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    RecvForward(usize),
    Forward(usize),
    SendForward(usize),
    RecvBackward(usize),
    Backward(usize),
    SendBackward(usize),
    /// Send micro-batch `send`'s activation to the next stage, receive `recv`'s gradient from it.
    SendForwardRecvBackward {
        send: usize,
        recv: usize,
    },
    /// Send micro-batch `send`'s gradient to the previous stage, receive `recv`'s activation.
    SendBackwardRecvForward {
        send: usize,
        recv: usize,
    },
}

/// What every stage runs for one optimizer step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub stages: usize,
    pub micro_batches: usize,
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
    pub makespan: f64,
}

impl Timeline {
    /// Fraction of the step stage `r` spent without computing.
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
}
