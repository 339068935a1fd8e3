//! Mixed precision: bf16 on every grid follows the single-rank bf16 run and the fp32 run; fp16
//! overflows skip the step and back the scale off as Megatron-LM's scaler does; checkpoints
//! record the precision and resume exactly.

use serde_json::json;
use trident_runtime::Device;

use super::grids::{data, settings, SEQ, VOCAB};
use crate::checkpoint::{step_dir, Checkpoint};
use crate::model::{gpt2_init, GptConfig, ParamLayout, Precision};
use crate::parallel::{run_ranks, ParallelConfig, Recompute};
use crate::train::checkpoint::SavePlan;
use crate::train::run::{train_rank, RankData, RankResult, RunSpec};
use crate::train::{LossScaleConfig, LossScaler, StepStats, TrainError, TrainSettings, Trainer};
use trident_data::{DataLoader, DataOrder};

const STEPS: u64 = 5;
const MICRO: usize = 2;

fn config() -> GptConfig {
    GptConfig::new(SEQ, VOCAB, 4, 4, 32, 512).unwrap()
}

fn with(precision: Precision, micro: usize, global: usize) -> TrainSettings {
    TrainSettings { precision, ..settings(micro, global) }
}

/// A grid run in `precision`, with `options` on its layout: `micro` sequences per rank and
/// micro-batch, two micro-batches per step.
fn grid_losses(
    precision: Precision,
    (tp, pp, dp, micro): (usize, usize, usize, usize),
    options: impl Fn(&mut ParallelConfig),
    save: Option<SavePlan>,
    resume: Option<&Checkpoint>,
) -> Vec<RankResult> {
    let mut par = ParallelConfig::from_world(tp * pp * dp, tp, pp).unwrap();
    options(&mut par);
    let init = match resume {
        Some(ck) => ck.params.clone(),
        None => gpt2_init(&ParamLayout::new(config()), 41),
    };
    let spec = RunSpec {
        config: config(),
        par,
        settings: with(precision, micro, micro * dp * 2),
        data_seed: 41,
        data_order: DataOrder::Trident,
        iters: STEPS,
        eval_interval: 0,
        eval_iters: 1,
        save,
        resume: resume.map(|ck| std::sync::Arc::new(ck.clone())),
        exit: Default::default(),
    };
    run_ranks(par.world_size(), |mut world| {
        let data = RankData { train: data(41), val: None };
        train_rank(&mut world, &Device::Cpu, &spec, &init, data, &mut |_| {}, &mut |_, _, _| {})
    })
    .unwrap_or_else(|e| panic!("{precision} {tp}x{pp}x{dp}: {e}"))
}

fn losses(results: &[RankResult]) -> Vec<f32> {
    results[0].steps.iter().map(|s| s.loss).collect()
}

fn rel(a: f32, b: f32) -> f32 {
    ((a - b) / b).abs()
}

#[test]
fn bf16_on_every_grid_follows_the_single_rank_bf16_run() {
    // The one-rank runs read what all data-parallel ranks read together.
    let one_rank = |precision, dp| losses(&grid_losses(precision, (1, 1, 1, MICRO * dp), |_| {}, None, None));
    let one = one_rank(Precision::Bf16, 1);
    let fp32 = one_rank(Precision::Fp32, 1);
    for (s, (a, b)) in one.iter().zip(&fp32).enumerate() {
        // bf16 keeps 8 bits of mantissa: the loss stays within 1% of fp32's over these steps.
        assert!(rel(*a, *b) <= 1e-2, "step {s}: bf16 loss {a} vs fp32 {b}");
    }
    assert_ne!(one, fp32, "bf16 rounds: the losses are not fp32's bit for bit");
    type Options = fn(&mut ParallelConfig);
    let grids: [((usize, usize, usize), Options); 5] = [
        ((2, 1, 1), |_| {}),
        ((1, 2, 1), |_| {}),
        ((1, 1, 2), |p| p.distributed_optimizer = true),
        ((2, 2, 2), |p| p.recompute = Recompute::Full),
        ((2, 2, 1), |p| {
            p.sequence_parallel = true;
            p.virtual_stages = 2;
        }),
    ];
    let one_dp2 = one_rank(Precision::Bf16, 2);
    for ((tp, pp, dp), options) in grids {
        let got = losses(&grid_losses(Precision::Bf16, (tp, pp, dp, MICRO), options, None, None));
        let want = if dp == 1 { &one } else { &one_dp2 };
        let grid = (tp, pp, dp);
        for (s, (a, b)) in got.iter().zip(want).enumerate() {
            // Sums in another order round to bf16 differently now and then.
            assert!(rel(*a, *b) <= 2e-3, "{grid:?} step {s}: bf16 loss {a} vs one rank's {b}");
        }
    }
}

/// A one-rank fp16 trainer with a small dynamic scale (no natural overflow at this size).
fn fp16_trainer(scaling: LossScaleConfig) -> Trainer {
    let init = gpt2_init(&ParamLayout::new(config()), 42);
    let s = TrainSettings { loss_scale: scaling, ..with(Precision::Fp16, 4, 4) };
    Trainer::single_with_lanes(&Device::Cpu, config(), &init, s, 1).unwrap()
}

#[test]
fn an_fp16_overflow_skips_the_step_and_backs_the_scale_off_as_megatron_does() {
    // Megatron-LM's default starting scale, 2^32 (`--initial-loss-scale`), overflows fp16's
    // gradients (largest finite value 65504) at any model size: the run skips steps and backs
    // the scale off until the gradients fit, as a real fp16 run starts. Nothing is injected.
    let scaling = LossScaleConfig { fixed: None, initial: 2f32.powi(32), min: 1.0, window: 4, hysteresis: 2 };
    let mut trainer = fp16_trainer(scaling);
    let mut loader = DataLoader::new(data(42), 4, SEQ, 42, true).unwrap();
    let mut replay = LossScaler::new(&scaling);
    let mut stats: Vec<StepStats> = Vec::new();
    for step in 0..40 {
        let before = trainer.model.params().to_vec().unwrap();
        let adam_steps = trainer.optimizer.steps();
        let s = trainer.step(&mut loader).unwrap();
        // The scale each step ran with is the one Megatron's scaler reaches from the same
        // sequence of overflows.
        assert_eq!(s.loss_scale, Some(replay.scale), "step {step}: the scale Megatron's scaler would use");
        assert_eq!(
            s.skipped,
            !s.grad_norm.is_finite(),
            "step {step}: skipped exactly when the gradients overflowed"
        );
        replay.update(s.skipped);
        if s.skipped {
            assert!(
                trainer.model.params().to_vec().unwrap() == before,
                "step {step}: a skipped step changes no weight"
            );
            assert_eq!(trainer.optimizer.steps(), adam_steps, "step {step}: AdamW's step count stands still");
        } else {
            assert_eq!(trainer.optimizer.steps(), adam_steps + 1, "step {step}: a clean step updates");
        }
        stats.push(s);
    }
    let skipped: Vec<bool> = stats.iter().map(|s| s.skipped).collect();
    // 2^32 overflows; the first overflow spends the hysteresis, each later one halves the scale.
    assert!(skipped[0] && skipped[1], "2^32 must overflow fp16's gradients: {skipped:?}");
    assert_eq!(stats[2].loss_scale, Some(2f32.powi(31)), "halved after the hysteresis was spent");
    let first_clean =
        skipped.iter().position(|s| !s).expect("the scale came down to where the gradients fit");
    assert!(first_clean < 30, "{skipped:?}");
    // After the first clean step the run keeps training: each growth (after 4 clean steps)
    // may overflow again, and two overflows in a row back it off, so most later steps update.
    let later_updates = skipped[first_clean..].iter().filter(|s| !**s).count();
    assert!(later_updates * 2 > skipped.len() - first_clean, "{skipped:?}");
    let skips = skipped.iter().filter(|s| **s).count() as u64;
    assert_eq!((trainer.iter, trainer.skipped, trainer.optimizer.steps()), (40, skips, 40 - skips));
    // The learning-rate schedule counts updates, not steps.
    let schedule = trainer.settings.lr_schedule;
    for (i, s) in stats.iter().enumerate() {
        let updates_before = skipped[..i].iter().filter(|s| !**s).count() as u64;
        assert_eq!(s.lr, schedule.lr(updates_before), "step {i}");
    }
}

#[test]
fn fp16_and_bf16_checkpoints_resume_exactly_and_name_their_precision() {
    for precision in [Precision::Fp16, Precision::Bf16] {
        let dir = tempfile::tempdir().unwrap();
        let plan = SavePlan { dir: dir.path().to_path_buf(), interval: 2, state: json!({ "data": "test" }) };
        let whole = grid_losses(precision, (1, 2, 1, MICRO), |_| {}, Some(plan), None);
        let ck: Checkpoint = Checkpoint::load(&step_dir(dir.path(), 2)).unwrap();
        assert_eq!(ck.state["precision"], json!(precision.name()));
        if precision == Precision::Fp16 {
            assert!(ck.state["loss_scaler"]["scale"].is_number(), "{}", ck.state);
        }
        let resumed = grid_losses(precision, (1, 2, 1, MICRO), |_| {}, None, Some(&ck));
        assert_eq!(losses(&resumed), losses(&whole)[2..], "{precision}: resumed on the same grid");
        // Another precision is refused, naming the flag that resumes it.
        let err = run_ranks(2, |mut world| {
            let mut par = ParallelConfig::from_world(2, 1, 2).unwrap();
            par.pp = 2;
            par.dp = 1;
            let spec = RunSpec {
                config: config(),
                par,
                settings: with(Precision::Fp32, MICRO, MICRO * 2),
                data_seed: 41,
                data_order: DataOrder::Trident,
                iters: STEPS,
                eval_interval: 0,
                eval_iters: 1,
                save: None,
                resume: Some(std::sync::Arc::new(ck.clone())),
                exit: Default::default(),
            };
            let data = RankData { train: data(41), val: None };
            train_rank(&mut world, &Device::Cpu, &spec, &ck.params, data, &mut |_| {}, &mut |_, _, _| {})
        })
        .unwrap_err();
        assert!(matches!(&err, TrainError::Checkpoint(m) if m.contains(&format!("--{precision}"))), "{err}");
    }
}

/// Per-step losses of `steps` bf16 steps on `Emu` over a `tp x 1 x 1` grid (with sequence
/// parallelism when `sp`, and `recompute`) of a one-layer model with two heads of 64
/// channels: under tensor parallelism one head per rank, still a flash-attention head size.
fn emu_bf16_losses(tp: usize, (sp, recompute): (bool, Recompute), steps: u64) -> Vec<f32> {
    let config = GptConfig::new(SEQ, VOCAB, 1, 2, 128, 256).unwrap();
    let mut par = ParallelConfig::from_world(tp, tp, 1).unwrap();
    par.sequence_parallel = sp;
    par.recompute = recompute;
    let init = gpt2_init(&ParamLayout::new(config), 43);
    let spec = RunSpec {
        config,
        par,
        settings: with(Precision::Bf16, MICRO, MICRO * 2),
        data_seed: 43,
        data_order: DataOrder::Trident,
        iters: steps,
        eval_interval: 0,
        eval_iters: 1,
        save: None,
        resume: None,
        exit: Default::default(),
    };
    let results = run_ranks(tp, |mut world| {
        let data = RankData { train: data(43), val: None };
        train_rank(&mut world, &Device::Emu, &spec, &init, data, &mut |_| {}, &mut |_, _, _| {})
    })
    .unwrap_or_else(|e| panic!("emu bf16 tp {tp}: {e}"));
    losses(&results)
}

/// bf16 on `Emu` (16-bit buffers, tensor-core GEMMs, flash attention): a tensor-parallel pair,
/// plain, and with sequence parallelism and selective recomputation (the attention output
/// recomputed into the shared 16-bit scratch), follows the one-rank run. The row-parallel products
/// sum f32 partials over the pair, so only the order of f32 sums differs, and with it a bf16
/// rounding now and then.
#[test]
fn bf16_on_emu_with_tensor_parallelism_follows_the_one_rank_run() {
    const STEPS: u64 = 2;
    let one = emu_bf16_losses(1, (false, Recompute::None), STEPS);
    assert_eq!(one.len(), STEPS as usize);
    for options in [(false, Recompute::None), (true, Recompute::Selective)] {
        let two = emu_bf16_losses(2, options, STEPS);
        for (s, (a, b)) in two.iter().zip(&one).enumerate() {
            // Seen: equal at every step (the bf16 roundings absorb the sums' order here).
            assert!(rel(*a, *b) <= 2e-3, "tp 2 {options:?} step {s}: loss {a} vs one rank's {b}");
        }
    }
}
