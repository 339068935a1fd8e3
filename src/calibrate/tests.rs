use super::*;
use crate::parallel::Recompute;

#[test]
fn calibration_fit_recovers_alpha_and_busbw() {
    let (alpha, busbw) = (20e-6, 3e9);
    let n = 4;
    let points: Vec<(f64, f64)> =
        [1e4, 1e5, 1e6, 1e7].iter().map(|&b| (b, 2.0 * 3.0 * alpha + b * 2.0 * 3.0 / 4.0 / busbw)).collect();
    let (a, bw) = machine::fit_ring(&points, n);
    assert!((a / alpha - 1.0).abs() < 1e-6 && (bw / busbw - 1.0).abs() < 1e-6, "{a} {bw}");
}

#[test]
fn ranks_sharing_a_machine_split_its_rates() {
    // Alone: every core. As many ranks as cores: each its thread's rate. More: a share of it.
    assert_eq!(machine::per_rank(40.0, 25.0, 2, 1), 40.0);
    assert_eq!(machine::per_rank(40.0, 25.0, 2, 2), 25.0);
    assert_eq!(machine::per_rank(40.0, 25.0, 2, 8), 6.25);
    // Never below an equal split of the all-core rate.
    assert_eq!(machine::per_rank(40.0, 5.0, 2, 2), 20.0);
}

/// The plan's closed-form bytes per rank are exactly what every rank of the trainer
/// allocates and reports (`Trainer::memory`), across TP, PP, DP, ZeRO-1, sequence
/// parallelism, both recomputations, the interleaved schedule, mixed precision, and a single
/// rank's row lanes (an uneven split included).
#[test]
fn local_rank_bytes_equal_the_trainers_report() {
    use crate::model::{gpt2_init, GptConfig, ParamLayout, Precision as Stored};
    use crate::parallel::{run_ranks, ParallelConfig, RankGroups};
    use crate::train::{DecayStyle, LrSchedule, TrainError, TrainSettings, Trainer};

    let config = GptConfig::new(16, 100, 4, 4, 32, 256).unwrap();
    let init = gpt2_init(&ParamLayout::new(config), 3);
    let settings = |micro: usize, global: usize, precision: Stored| TrainSettings {
        micro_batch: micro,
        global_batch: global,
        seq_len: 16,
        lr_schedule: LrSchedule {
            max_lr: 1e-3,
            min_lr: 1e-3,
            warmup_iters: 0,
            decay_iters: 1,
            style: DecayStyle::Constant,
        },
        adamw: Default::default(),
        clip_grad: 1.0,
        precision,
        loss_scale: Default::default(),
    };
    let check = |run: &local::LocalRun,
                 place: crate::model::ShardPlace,
                 dp_rank: usize,
                 m: crate::train::MemoryReport,
                 case: &str| {
        let plan = rank_memory::rank_bytes(run, place.tp_rank, place.stage, dp_rank).unwrap();
        let case = format!("{case}, rank {place:?} dp {dp_rank}");
        assert_eq!(plan.params, m.params, "{case}");
        assert_eq!(plan.grads, m.grads, "{case}");
        assert_eq!(plan.optimizer, m.optimizer, "{case}");
        assert_eq!(plan.activations, m.activations, "{case}");
    };
    // (tp, pp, dp, ZeRO-1, recomputation, sequence parallelism, micro-batch, chunks, precision)
    let cases = [
        (1, 1, 2, false, Recompute::None, false, 2, 1, Stored::Fp32),
        (2, 2, 1, false, Recompute::None, false, 2, 1, Stored::Bf16),
        (1, 2, 2, false, Recompute::Selective, false, 1, 1, Stored::Fp32),
        (2, 1, 2, true, Recompute::Full, true, 2, 1, Stored::Fp16),
        (2, 2, 2, true, Recompute::None, true, 1, 1, Stored::Fp32),
        (1, 4, 1, false, Recompute::Full, false, 2, 1, Stored::Fp32),
        (1, 2, 1, false, Recompute::None, false, 1, 2, Stored::Fp32),
        (2, 2, 1, false, Recompute::Selective, true, 2, 2, Stored::Bf16),
    ];
    for (tp, pp, dp, zero1, recompute, sp, micro, chunks, precision) in cases {
        let par = ParallelConfig {
            distributed_optimizer: zero1,
            recompute,
            sequence_parallel: sp,
            virtual_stages: chunks,
            ..ParallelConfig::from_world(tp * pp * dp, tp, pp).unwrap()
        };
        let s = settings(micro, micro * dp * 4, precision);
        let run = local::LocalRun::new(config, par, micro, 16, s.global_batch, precision);
        assert_eq!(run.lanes, 1, "a grid of several ranks has no lanes");
        let reports = run_ranks(par.world_size(), |mut world| {
            let groups = RankGroups::new(&mut world, &par)?;
            let (place, dp_rank) = (groups.place, groups.dp_rank);
            let t = Trainer::new(&trident_runtime::Device::Cpu, config, &init, par, s, groups)?;
            Ok::<_, TrainError>((place, dp_rank, t.memory()))
        })
        .unwrap();
        let case = format!("tp{tp} pp{pp} dp{dp} v{chunks} zero1 {zero1} {recompute:?} sp {sp} {precision}");
        for (place, dp_rank, m) in reports {
            check(&run, place, dp_rank, m, &case);
        }
    }
    // One rank on the Cpu, through the grid's constructor: the row lanes the trainer picks
    // (one per thread of the pool, at most one per sequence), with each recomputation.
    for recompute in [Recompute::None, Recompute::Full, Recompute::Selective] {
        let par = ParallelConfig { recompute, ..ParallelConfig::from_world(1, 1, 1).unwrap() };
        let s = settings(5, 10, Stored::Fp32);
        let run = local::LocalRun::new(config, par, 5, 16, 10, Stored::Fp32);
        let reports = run_ranks(1, |mut world| {
            let groups = RankGroups::new(&mut world, &par)?;
            let t = Trainer::new(&trident_runtime::Device::Cpu, config, &init, par, s, groups)?;
            Ok::<_, TrainError>(t.memory())
        })
        .unwrap();
        let case = format!("one rank, {} lanes, {recompute:?}", run.lanes);
        check(&run, crate::model::ShardPlace::SINGLE, 0, reports[0], &case);
    }
    // An uneven split, 5 sequences in 3 lanes of 1, 2 and 2, and the whole micro-batch in one
    // pass, in bf16.
    for lanes in [3, 1] {
        let s = settings(5, 10, Stored::Bf16);
        let par = ParallelConfig::from_world(1, 1, 1).unwrap();
        let run = local::LocalRun { lanes, ..local::LocalRun::new(config, par, 5, 16, 10, Stored::Bf16) };
        let t = Trainer::single_with_lanes(&trident_runtime::Device::Cpu, config, &init, s, lanes).unwrap();
        check(&run, crate::model::ShardPlace::SINGLE, 0, t.memory(), &format!("one rank, {lanes} lanes"));
    }
}

/// The shared-core simulation: alone on enough cores a 1F1B step takes the makespan of its
/// schedule, and an interleaved one the makespan of the interleaved schedule's own
/// simulation; transfers lengthen it; when the stages ask for more cores than there are, the
/// same work takes longer, and never less than the total work spread over the cores.
#[test]
fn the_shared_core_simulation_slows_work_that_oversubscribes_the_cores() {
    use crate::model::GptConfig;
    use crate::parallel::ParallelConfig;
    use local::{ChunkCost, LocalCosts, LocalRun, StageCost, Work};

    let config = GptConfig::new(16, 100, 4, 4, 32, 256).unwrap();
    let par = ParallelConfig::from_world(2, 1, 2).unwrap();
    let run = LocalRun::new(config, par, 1, 16, 4, crate::model::Precision::Fp32);
    let stage = |cores, chunks: usize| StageCost {
        chunks: vec![
            ChunkCost {
                forward: Work { seconds: 1.0 / chunks as f64, cores },
                backward: Work { seconds: 2.0 / chunks as f64, cores },
            };
            chunks
        ],
        ..StageCost::default()
    };
    let costs = |cores, machine| LocalCosts {
        cores: machine,
        stages: vec![stage(cores, 1); 2],
        competition: local::Competition::default(),
        pp_send: 0.0,
        pp_wake: 0.0,
        embedding_sync: 0.0,
    };
    // p = 2, m = 4, f = 1, b = 2: (m + p - 1) (f + b) = 15 s, the 1F1B makespan; the last
    // stage starts one forward late and ends one backward early.
    let alone = shared::simulate(&run, &costs(1.0, 2)).unwrap();
    assert!((alone.iteration - 15.0).abs() < 1e-9, "{alone:?}");
    assert!((alone.busy[0] - 12.0).abs() < 1e-9 && (alone.wall[0] - 15.0).abs() < 1e-9, "{alone:?}");
    assert!((alone.wall[1] - 13.0).abs() < 1e-9, "{alone:?}");
    let simulated =
        crate::parallel::simulate(&crate::parallel::Schedule::one_f_one_b(2, 4), 1.0, 2.0).unwrap();
    assert!((alone.idle_fraction(0) - simulated.idle_fraction(0)).abs() < 1e-9);
    // The interleaved schedule the trainer runs with two chunks per stage, each half the
    // stage's work: the ideal interleaved makespan m (f + b) + (p - 1) (f + b) / v = 13.5 s,
    // as the schedule's own simulation has it, and its idle fraction on every stage.
    let interleaved = LocalRun { par: ParallelConfig { virtual_stages: 2, ..par }, ..run };
    let two = LocalCosts { stages: vec![stage(1.0, 2); 2], ..costs(1.0, 2) };
    let got = shared::simulate(&interleaved, &two).unwrap();
    let want = crate::parallel::simulate_interleaved(&interleaved.schedule().unwrap(), 0.5, 1.0).unwrap();
    assert!((got.iteration - 13.5).abs() < 1e-9 && (want.makespan - 13.5).abs() < 1e-9, "{got:?}");
    assert!((got.wall[0] - want.makespan).abs() < 1e-9, "{got:?}");
    assert!((got.busy[0] - 12.0).abs() < 1e-9 && (got.busy[1] - 12.0).abs() < 1e-9, "{got:?}");
    assert!((got.idle_fraction(0) - want.idle_fraction(0)).abs() < 1e-9, "{got:?}");
    // A transfer time: the last backward's three hops back to stage 0 wait on it at least;
    // the step grows by no more than all 24 transfers (3 hops each way per micro-batch).
    let slow =
        shared::simulate(&interleaved, &LocalCosts { pp_send: 0.1, pp_wake: 0.1, ..two.clone() }).unwrap();
    let grown = slow.iteration - got.iteration;
    assert!((0.3 - 1e-9..=2.4 + 1e-9).contains(&grown), "{slow:?}");
    // A wake-up on the receives a stage waited for (and none on those it found waiting):
    // the first forward's hop and the last backward's are on the critical path, so the 1F1B
    // step grows by at least two wake-ups and by at most one per transfer (8).
    let woken = shared::simulate(&run, &LocalCosts { pp_wake: 0.1, ..costs(1.0, 2) }).unwrap();
    let grown = woken.iteration - alone.iteration;
    assert!((0.2 - 1e-9..=0.8 + 1e-9).contains(&grown), "{woken:?}");
    // One core for two stages that each want one: slower, but at least 24 core-seconds of
    // work over one core.
    let squeezed = shared::simulate(&run, &costs(1.0, 1)).unwrap();
    assert!(squeezed.iteration > alone.iteration && squeezed.iteration >= 24.0 - 1e-9, "{squeezed:?}");
    // Two other threads on the two cores, shared per thread: a stage alone (1 thread) gets
    // 2 / 3 of a core, two stages together 2 / 4 each: slower still, at most twice the idle
    // machine's step.
    let threads = local::Competition { autogroups: false, others: 2.0 };
    let loaded = shared::simulate(&run, &LocalCosts { competition: threads, ..costs(1.0, 2) }).unwrap();
    assert!(
        loaded.iteration > 1.5 * alone.iteration && loaded.iteration <= 2.0 * alone.iteration + 1e-9,
        "{loaded:?}"
    );
    // One other busy session, shared per session: the run gets half of each core whatever
    // its threads, so the step takes exactly twice as long.
    let sessions = local::Competition { autogroups: true, others: 1.0 };
    let halved = shared::simulate(&run, &LocalCosts { competition: sessions, ..costs(1.0, 2) }).unwrap();
    assert!((halved.iteration - 2.0 * alone.iteration).abs() < 1e-9, "{halved:?}");
    // And the measurement's side: one thread of work among 3 other threads on 2 cores runs
    // at half speed and shows half a core; alone it takes half the time on 1 core.
    let three = local::Competition { autogroups: false, others: 3.0 };
    assert_eq!(
        local::unloaded(Work { seconds: 2.0, cores: 0.5 }, three, 2),
        Work { seconds: 1.0, cores: 1.0 }
    );
    // Two threads against one other session: a core's worth over two, alone twice as fast.
    let w = local::unloaded(Work { seconds: 2.0, cores: 1.0 }, sessions, 2);
    assert_eq!(w, Work { seconds: 1.0, cores: 2.0 });
    // Work and load that fit the cores are left as measured.
    let one = local::Competition { autogroups: false, others: 1.0 };
    assert_eq!(local::unloaded(Work { seconds: 2.0, cores: 1.0 }, one, 2), Work { seconds: 2.0, cores: 1.0 });
}
