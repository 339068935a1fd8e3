//! The planner's layouts run for real on this machine: the local run of a layout
//! ([`local_run`]), the bytes the trainer holds on its largest rank ([`trainer_bytes`]), and
//! the calibrated search ([`time_layouts`]), which times every layout that fits and ranks them
//! again by their simulated step.

use anyhow::bail;
use trident_hardware::GIB;

use super::local::{self, Budget, LocalRun};
use crate::model::GptConfig;
use crate::parallel::ParallelConfig;
use trident_plan::search::Ranked;
use trident_plan::{Layout, Precision, Problem};

/// How long the calibrated search measures each layout: one round of 3 repetitions (one
/// layout's calibration takes 3 rounds of 5), so that a search of a hundred small layouts
/// takes seconds, not minutes.
pub const SEARCH_BUDGET: Budget = Budget { reps: 3, rounds: 1 };

/// The local run that calibration times for one layout: `config` when the caller has the
/// trainer's own (`trident train --dry-run`), else the problem's shape; the vocabulary padded
/// as the trainer pads it for the layout's TP (a multiple of 128 x TP).
pub fn local_run(problem: &Problem, layout: &Layout, config: Option<GptConfig>) -> anyhow::Result<LocalRun> {
    let m = &problem.model;
    let config = match config {
        Some(c) => c,
        None => GptConfig::new(m.seq_len, m.vocab, m.layers, m.heads, m.hidden, 128)?,
    };
    let config = GptConfig {
        padded_vocab_size: crate::train::checkpoint::padded_vocab_for(&config, layout.tp),
        ..config
    };
    let precision = match problem.options.precision {
        Precision::Fp32 => crate::model::Precision::Fp32,
        Precision::Bf16 => crate::model::Precision::Bf16,
        Precision::Fp16 => crate::model::Precision::Fp16,
        Precision::Tf32 => {
            bail!("--calibrate times Trident's trainer, which has no tf32: use --bf16, --fp16 or neither")
        }
    };
    let par = ParallelConfig {
        tp: layout.tp,
        pp: layout.pp,
        dp: layout.dp,
        distributed_optimizer: layout.distributed_optimizer,
        recompute: layout.recompute,
        sequence_parallel: layout.sequence_parallel,
        virtual_stages: layout.virtual_stages,
    };
    Ok(LocalRun::new(config, par, layout.micro_batch, m.seq_len, problem.global_batch, precision))
}

/// The bytes the trainer holds on `run`'s largest rank (every buffer it allocates, counted in
/// closed form: [`super::rank_memory::rank_bytes`]), so that a layout is refused before its
/// ops are timed rather than by a failed allocation.
pub fn trainer_bytes(run: &LocalRun) -> anyhow::Result<f64> {
    let mut most = 0usize;
    for stage in 0..run.par.pp {
        let bytes = super::rank_memory::rank_bytes(run, 0, stage, 0).map_err(anyhow::Error::msg)?;
        most = most.max(bytes.total());
    }
    Ok(most as f64)
}

/// The calibrated search: every layout of `ranked` whose trainer fits this machine's share per
/// rank ([`trainer_bytes`]), its real ops timed here and its step simulated (as
/// [`local::measure`] and [`local::predict`] do for one layout), then ranked again by the
/// simulated iteration; layouts the local trainer cannot run are left out. `progress` is
/// told each layout before it is timed (its number from 1, the count, the layout). Returns
/// how many were timed.
pub fn time_layouts(
    problem: &Problem,
    ranked: &mut Ranked,
    config: Option<GptConfig>,
    mut progress: impl FnMut(usize, usize, &Layout),
) -> anyhow::Result<usize> {
    // The rate model's memory counts a GPU's reserved bytes; the trainer's own count decides.
    let mut candidates = std::mem::take(&mut ranked.fitting);
    candidates.append(&mut ranked.too_big);
    let (mut runnable, mut least) = (Vec::with_capacity(candidates.len()), None::<(f64, f64)>);
    for plan in candidates {
        let run = local_run(problem, &plan.layout, config)?;
        if run.validate().is_err() {
            continue;
        }
        let need = trainer_bytes(&run)?;
        if need <= plan.memory_limit {
            runnable.push((plan, run));
        } else if least.is_none_or(|(n, _)| need < n) {
            least = Some((need, plan.memory_limit));
        }
    }
    let n = runnable.len();
    if n == 0 {
        return Err(match least {
            Some((need, limit)) => anyhow::anyhow!(
                "--calibrate --search: no layout of {} fits this machine's trainer: the least needs {:.2} GiB on \
                 its largest rank, and each of the --gpus-per-node ranks gets {:.2} GiB; pick a smaller model",
                problem.model.name,
                need / GIB,
                limit / GIB
            ),
            None => anyhow::anyhow!(
                "--calibrate --search: the local trainer runs none of the layouts of {} (their layers, batch and \
                 sequence do not split over the ranks)",
                problem.model.name
            ),
        });
    }
    let mut timed = Vec::with_capacity(n);
    for (k, (plan, run)) in runnable.into_iter().enumerate() {
        progress(k + 1, n, &plan.layout);
        let costs = local::measure(&run, SEARCH_BUDGET)?;
        let prediction = local::predict(&run, &costs).map_err(anyhow::Error::msg)?;
        let mut plan = plan;
        local::apply(&mut plan, &run, &prediction);
        timed.push(plan);
    }
    timed.sort_by(|a, b| a.time.total.total_cmp(&b.time.total));
    let count = timed.len();
    let (fitting, too_big): (Vec<_>, Vec<_>) = timed.into_iter().partition(|p| p.fits);
    ranked.fitting = fitting;
    ranked.too_big.extend(too_big);
    Ok(count)
}
