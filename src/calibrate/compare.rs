//! The plan beside a finished run: after `trident train` on `cpu`, the calibrated prediction
//! of the same run (measured here, [`super::local`]) next to what the run measured —
//! iteration time, bytes per rank (the trainer's report), pipeline idle fraction.

use super::local::{measure, predict, Budget, LocalRun};

/// What a finished run measured.
#[derive(Clone, Debug, Default)]
pub struct RunMeasurement {
    /// Mean seconds per optimizer step.
    pub iteration_s: f64,
    /// Per stage: the bytes the trainer reports for its TP rank 0, DP rank 0 (`None` where the
    /// trainer reports none).
    pub memory: Vec<Option<usize>>,
    /// Per stage: the idle fraction of its schedule (`None` for a single stage).
    pub idle: Vec<Option<f64>>,
}

/// The calibration after a run: 3 repetitions of each measurement in one round (the bench and
/// `trident plan --calibrate` take 5 in each of 3 rounds), so that it adds a few forward and
/// backward passes per stage to the run, not a second run.
const AFTER_RUN: Budget = Budget { reps: 3, rounds: 1 };

/// The largest model whose run is calibrated when it ends (see [`print_summary`]).
const CALIBRATE_AFTER_RUN_MAX_PARAMS: usize = 20_000_000;

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / (1u64 << 20) as f64)
}

fn error(predicted: f64, measured: f64) -> String {
    if measured > 0.0 {
        format!("{:+.1}%", 100.0 * (predicted / measured - 1.0))
    } else {
        "n/a".into()
    }
}

/// Lines that print the calibrated prediction of `run` beside `measured`: the costs are
/// measured now, on this machine (a fraction of a second for small models), with `budget`.
pub fn summary(run: &LocalRun, measured: &RunMeasurement, budget: Budget) -> Vec<String> {
    let prediction = measure(run, budget).map_err(|e| e.to_string()).and_then(|c| predict(run, &c));
    let p = match prediction {
        Ok(p) => p,
        Err(e) => return vec![format!("plan beside this run: not available ({e})")],
    };
    let t = &p.times;
    let mut lines = vec![format!(
        "plan beside this run (calibrated here, predicted / measured; measured per step as the run's tokens/s \
         counts it, start-up and evaluation included): iteration {:.1} / {:.1} ms ({}), {:.0} / {:.0} tokens/s",
        1e3 * t.iteration,
        1e3 * measured.iteration_s,
        error(t.iteration, measured.iteration_s),
        p.tokens_per_s,
        (run.global_batch * run.seq_len) as f64 / measured.iteration_s.max(1e-12),
    )];
    for (r, bytes) in p.memory.iter().enumerate() {
        let predicted = bytes.reported() as f64;
        let line = match measured.memory.get(r).copied().flatten() {
            Some(m) => format!(
                "  stage {r}: memory per rank {} / {} ({}){}",
                mib(predicted),
                mib(m as f64),
                error(predicted, m as f64),
                match measured.idle.get(r).copied().flatten() {
                    Some(idle) => format!(
                        ", pipeline idle {:.1}% / {:.1}%",
                        100.0 * t.idle_fraction(r),
                        100.0 * idle
                    ),
                    None => String::new(),
                }
            ),
            None => format!(
                "  stage {r}: memory per rank {} predicted (parameters, gradients, optimizer state, activations; \
                 the run reported none for this stage)",
                mib(predicted)
            ),
        };
        lines.push(line);
    }
    lines
}

/// After a run on `cpu` with every rank a thread of this process (one rank included): prints
/// [`summary`] with each stage's bytes and idle fraction from TP rank 0, DP rank 0, and the
/// wall time per step (start-up included). Prints nothing on other devices, for a launched
/// rank (the others are elsewhere), or when no step ran.
pub fn print_summary(
    device: trident_runtime::DeviceKind,
    spec: &crate::train::run::RunSpec,
    results: &[crate::train::run::RankResult],
    elapsed_s: f64,
) {
    let steps = results.first().map_or(0, |r| r.steps.len());
    if device != trident_runtime::DeviceKind::Cpu || steps == 0 || results.len() != spec.par.world_size() {
        return;
    }
    // Calibrating times the run's own stage passes again: cheap for small models, as long as
    // a few steps (and as much memory again) for large ones, which `trident plan --calibrate`
    // with the run's flags measures instead.
    let params = crate::model::ParamLayout::new(spec.config).len();
    if params > CALIBRATE_AFTER_RUN_MAX_PARAMS {
        println!(
            "plan beside this run: not calibrated after a run of {params} parameters (as long as a few steps); \
             `trident plan --calibrate` with the same flags prints it"
        );
        return;
    }
    let s = &spec.settings;
    let run = LocalRun::new(spec.config, spec.par, s.micro_batch, s.seq_len, s.global_batch, s.precision);
    let pp = spec.par.pp;
    let mut measured = RunMeasurement {
        iteration_s: elapsed_s / steps as f64,
        memory: vec![None; pp],
        idle: vec![None; pp],
    };
    for r in results.iter().filter(|r| r.place.tp_rank == 0 && r.dp_rank == 0) {
        let m = r.memory;
        measured.memory[r.place.stage] = Some(m.params + m.grads + m.optimizer + m.activations);
        measured.idle[r.place.stage] = (pp > 1).then(|| r.timing.idle_fraction());
    }
    for line in summary(&run, &measured, AFTER_RUN) {
        println!("{line}");
    }
}
