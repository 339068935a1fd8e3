//! Checkpoints of parallel runs: the same grid resumes bit for bit, and any other grid (or the
//! single-rank trainer) resumes with the losses of an uninterrupted run on that grid.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use trident_runtime::Device;

use super::grids::{data, settings, SEQ, VOCAB};
use crate::checkpoint::{step_dir, Checkpoint};
use crate::model::{gpt2_init, GptConfig, ParamLayout};
use crate::parallel::SplitDims;
use crate::parallel::{run_ranks, ParallelConfig};
use crate::train::checkpoint::faults::{self, Fault};
use crate::train::checkpoint::{padded_vocab_for, repad_params, repad_vocab, restore, SavePlan};
use crate::train::run::{train_rank, RankData, RankResult, RunSpec};
use crate::train::{TrainError, Trainer};
use trident_data::{DataLoader, DataOrder};

const GLOBAL: usize = 8;
const ITERS: u64 = 5;
const SAVED_AT: u64 = 3;
const SEED: u64 = 31;

/// Padded to 256: a multiple of 128 x TP for TP 1 and 2, padded again for TP 4.
fn config() -> GptConfig {
    GptConfig::new(SEQ, VOCAB, 4, 4, 32, 256).unwrap()
}

#[derive(Clone, Copy, Debug)]
struct Grid {
    tp: usize,
    pp: usize,
    dp: usize,
    zero: bool,
    /// Model chunks per stage (interleaved 1F1B when above 1).
    chunks: usize,
}

const fn grid(tp: usize, pp: usize, dp: usize, zero: bool) -> Grid {
    Grid { tp, pp, dp, zero, chunks: 1 }
}

/// `g` with each stage holding two model chunks (interleaved 1F1B).
const fn interleaved(g: Grid) -> Grid {
    Grid { chunks: 2, ..g }
}

/// The micro-batch per rank and micro-batches per step that make a global batch of 8.
fn batch_shape(dp: usize) -> (usize, usize) {
    let m = if dp >= 8 { 1 } else { 2 };
    (GLOBAL / (dp * m), m)
}

/// A run on `g` from the initialisation, or from `resume`; saving where `save` says.
fn run(g: Grid, resume: Option<&Checkpoint>, save: Option<SavePlan>) -> Vec<RankResult> {
    run_on(g, resume, save, None).unwrap_or_else(|e| panic!("{g:?}: {e}"))
}

/// [`run`], its ranks' collectives waiting `timeout` where given, its error returned.
fn run_on(
    g: Grid,
    resume: Option<&Checkpoint>,
    save: Option<SavePlan>,
    timeout: Option<Duration>,
) -> Result<Vec<RankResult>, TrainError> {
    let mut par = ParallelConfig::from_world(g.tp * g.pp * g.dp, g.tp, g.pp).unwrap();
    par.distributed_optimizer = g.zero;
    par.virtual_stages = g.chunks;
    let padded = padded_vocab_for(&config(), g.tp);
    let (config, init, resume) = match resume {
        Some(ck) => {
            let mut ck = ck.clone();
            repad_vocab(&mut ck, padded).unwrap();
            let init = std::mem::take(&mut ck.params);
            (ck.config, init, Some(Arc::new(ck)))
        }
        None => {
            let init = gpt2_init(&ParamLayout::new(config()), SEED);
            let init = repad_params(&config(), &init, padded, "parameters").unwrap();
            (GptConfig { padded_vocab_size: padded, ..config() }, init, None)
        }
    };
    let (micro, _) = batch_shape(g.dp);
    let spec = RunSpec {
        config,
        par,
        settings: settings(micro, GLOBAL),
        data_seed: SEED,
        data_order: DataOrder::Trident,
        iters: ITERS,
        eval_interval: 0,
        eval_iters: 1,
        save,
        resume,
        exit: Default::default(),
    };
    run_ranks(par.world_size(), |mut world| {
        if let Some(t) = timeout {
            world.set_timeout(t);
        }
        let data = RankData { train: data(SEED), val: None };
        train_rank(&mut world, &Device::Cpu, &spec, &init, data, &mut |_| {}, &mut |_, _, _| {})
    })
}

fn losses(results: &[RankResult]) -> Vec<(f32, f32)> {
    results[0].steps.iter().map(|s| (s.loss, s.grad_norm)).collect()
}

fn rel(a: f32, b: f32) -> f64 {
    (a as f64 - b as f64).abs() / (b as f64).abs().max(1e-30)
}

/// Saves at step 3 (and 5) of a TP 2 x PP 2 x DP 2 run; returns the checkpoint of step 3 and
/// the saving run's per-step losses.
fn saved_run(dir: &std::path::Path) -> (Checkpoint, Vec<(f32, f32)>) {
    let plan = SavePlan { dir: dir.to_path_buf(), interval: SAVED_AT, state: json!({ "data": "test" }) };
    let results = run(grid(2, 2, 2, false), None, Some(plan));
    let ck = Checkpoint::load(&step_dir(dir, SAVED_AT)).unwrap();
    (ck, losses(&results))
}

#[test]
fn the_same_grid_resumes_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let uninterrupted = losses(&run(grid(2, 2, 2, false), None, None));
    let (ck, saving) = saved_run(dir.path());
    assert_eq!(saving, uninterrupted, "saving changes nothing");
    assert_eq!(ck.step, SAVED_AT);
    assert_eq!(ck.config, config(), "the checkpoint holds the logical model, not a shard");
    assert_eq!(
        ck.state["grid"],
        json!({ "tensor": 2, "pipeline": 2, "data": 2, "distributed_optimizer": false })
    );
    let resumed = run(grid(2, 2, 2, false), Some(&ck), None);
    assert_eq!(resumed[0].steps.len() as u64, ITERS - SAVED_AT);
    assert_eq!(losses(&resumed), uninterrupted[SAVED_AT as usize..], "resumed on the same grid");
    // Every rank ends with the parameters of the uninterrupted run, bit for bit.
    let whole = run(grid(2, 2, 2, false), None, None);
    for (a, b) in resumed.iter().zip(&whole) {
        assert!(a.params == b.params, "rank {}: resumed parameters differ", a.rank);
    }
    // The final checkpoint of a run is written too.
    assert!(step_dir(dir.path(), ITERS).join("trainer.json").is_file());
}

#[test]
fn an_interleaved_run_resumes_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let g = interleaved(grid(2, 2, 2, false));
    let whole = run(g, None, None);
    let plan =
        SavePlan { dir: dir.path().to_path_buf(), interval: SAVED_AT, state: json!({ "data": "test" }) };
    let saving = run(g, None, Some(plan));
    assert_eq!(losses(&saving), losses(&whole), "saving changes nothing");
    let ck = Checkpoint::load(&step_dir(dir.path(), SAVED_AT)).unwrap();
    let resumed = run(g, Some(&ck), None);
    assert_eq!(losses(&resumed), losses(&whole)[SAVED_AT as usize..], "resumed on the same grid");
    for (a, b) in resumed.iter().zip(&whole) {
        assert!(a.params == b.params, "rank {}: resumed parameters differ", a.rank);
    }
}

#[test]
fn other_grids_resume_with_the_losses_of_their_own_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, _) = saved_run(dir.path());
    for g in [
        grid(4, 1, 1, false),
        grid(4, 2, 1, false),
        grid(1, 4, 2, true),
        grid(1, 4, 1, false),
        grid(1, 1, 8, true),
        grid(1, 1, 1, false),
        grid(2, 1, 4, true),
        interleaved(grid(1, 2, 2, false)),
        interleaved(grid(2, 2, 1, true)),
    ] {
        let want = losses(&run(g, None, None));
        let got = losses(&run(g, Some(&ck), None));
        assert_eq!(got.len(), want.len() - SAVED_AT as usize);
        for (i, (a, b)) in got.iter().zip(&want[SAVED_AT as usize..]).enumerate() {
            let step = SAVED_AT as usize + i + 1;
            assert!(
                rel(a.0, b.0) <= 1e-5,
                "{g:?} step {step}: loss {} resumed vs {} uninterrupted",
                a.0,
                b.0
            );
            assert!(rel(a.1, b.1) <= 1e-4, "{g:?} step {step}: grad norm {} vs {}", a.1, b.1);
        }
    }
}

/// A run handed on from grid to grid, one step on each: TP 1 -> 2 -> 4 -> 1, PP 1 -> 2 and
/// back, DP 2 -> 1 -> 2 -> 1 with ZeRO-1 on and off; each leg's losses are those of its grid's
/// uninterrupted run.
#[test]
fn a_run_grows_and_shrinks_every_dimension_leg_by_leg() {
    let legs = [grid(1, 1, 2, false), grid(2, 2, 1, false), grid(4, 1, 2, true), grid(1, 2, 1, false)];
    let mut ck: Option<Checkpoint> = None;
    for (i, g) in legs.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let plan = SavePlan { dir: dir.path().to_path_buf(), interval: 1, state: json!({ "data": "test" }) };
        let got = losses(&run(g, ck.as_ref(), Some(plan)));
        let want = losses(&run(g, None, None));
        let from = i;
        assert_eq!(ck.as_ref().map_or(0, |c| c.step), from as u64);
        assert_eq!(got.len(), want.len() - from, "{g:?}");
        for (j, (a, b)) in got.iter().zip(&want[from..]).enumerate() {
            let step = from + j + 1;
            assert!(rel(a.0, b.0) <= 1e-5, "leg {i} {g:?} step {step}: loss {} vs {}", a.0, b.0);
        }
        // The next leg starts one step later.
        let next = Checkpoint::load(&step_dir(dir.path(), from as u64 + 1)).unwrap();
        ck = Some(next);
    }
}

#[test]
fn one_rank_resumes_a_parallel_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, saving) = saved_run(dir.path());
    // One rank with row shares on the Cpu, as `trident train --load` runs it there.
    let device = Device::Cpu;
    let s = settings(GLOBAL, GLOBAL);
    let mut trainer = Trainer::single_with_lanes(&device, ck.config, &ck.params, s, 2).unwrap();
    let mut loader = DataLoader::new(data(SEED), GLOBAL, SEQ, SEED, true).unwrap();
    restore(&mut trainer, &mut loader, &ck).unwrap();
    for (i, want) in saving[SAVED_AT as usize..].iter().enumerate() {
        let got = trainer.step(&mut loader).unwrap();
        let step = SAVED_AT as usize + i + 1;
        assert!(rel(got.loss, want.0) <= 1e-5, "step {step}: loss {} vs {}", got.loss, want.0);
    }
}

#[test]
fn a_grid_that_does_not_divide_the_saved_model_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, _) = saved_run(dir.path());
    // 4 heads do not split over 8 tensor-parallel ranks.
    let mut par = ParallelConfig::from_world(8, 8, 1).unwrap();
    par.distributed_optimizer = false;
    let c = ck.config;
    let shape = SplitDims { heads: c.num_heads, layers: c.num_layers, padded_vocab: c.padded_vocab_size };
    let e = par.validate(shape, 1, GLOBAL).unwrap_err().to_string();
    assert!(e.contains("--num-attention-heads 4 is not divisible by --tensor-model-parallel-size 8"), "{e}");
}

/// Rank 0's write of a checkpoint takes longer than the ranks' collective timeout: the others
/// wait under the save's own deadline, and the run goes on unchanged.
#[test]
fn a_save_slower_than_the_collective_timeout_completes() {
    let dir = tempfile::tempdir().unwrap();
    let g = grid(1, 1, 2, false);
    faults::inject(dir.path(), SAVED_AT, Fault::Slow(Duration::from_secs(5)));
    let plan =
        SavePlan { dir: dir.path().to_path_buf(), interval: SAVED_AT, state: json!({ "data": "test" }) };
    let saving = run_on(g, None, Some(plan), Some(Duration::from_secs(2))).unwrap();
    assert_eq!(losses(&saving), losses(&run(g, None, None)), "the slow save changes nothing");
    assert_eq!(
        Checkpoint::<serde_json::Value>::load(&step_dir(dir.path(), SAVED_AT)).unwrap().step,
        SAVED_AT
    );
}

/// A write that fails ends every rank, each naming the previous checkpoint, which is whole.
#[test]
fn a_failed_save_names_the_intact_previous_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    faults::inject(dir.path(), ITERS, Fault::Fail);
    let plan =
        SavePlan { dir: dir.path().to_path_buf(), interval: SAVED_AT, state: json!({ "data": "test" }) };
    let err = run_on(grid(1, 1, 2, false), None, Some(plan), None).unwrap_err().to_string();
    let previous = step_dir(dir.path(), SAVED_AT);
    let note = format!("the previous checkpoint, {} (step {SAVED_AT}), is intact", previous.display());
    assert!(err.contains(&note) && err.contains("injected write fault"), "{err}");
    assert_eq!(Checkpoint::<serde_json::Value>::load(&previous).unwrap().step, SAVED_AT);
    assert!(!step_dir(dir.path(), ITERS).exists(), "the failed write left nothing in place");
}
