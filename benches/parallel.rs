//! Throughput of the trainer (the code `trident train --world-size N` runs) on Cpu for
//! several (TP, PP, DP) and one interleaved pipeline, beside the calibrated plan's prediction
//! of each grid (`trident::calibrate::local`: the grid's real ops timed here just before each run,
//! then the trainer's schedule simulated with the ranks sharing the cores), the bytes per rank
//! the trainer reports beside the plan's count, and each pipeline stage's measured idle
//! fraction beside the plan's, the 1F1B bubble (p-1)/(m+p-1) and the uniform-stage
//! simulation.
//!
//! `cargo bench -p trident --bench parallel` (`TRIDENT_BENCH_STEPS` timed steps per run,
//! default 16; `TRIDENT_BENCH_REPEATS` runs per grid, each calibrated just before it, default
//! 5: the medians of the measured and of the predicted tokens/s are shown, with half the
//! measured runs' spread as the noise band the ranking treats as a tie;
//! `TRIDENT_BENCH_VERBOSE=1` prints each calibration's costs beside its run;
//! `TRIDENT_BENCH_GRIDS="1,2,1,1;1,2,1,2"` runs only the grids named `tp,pp,dp,v`, and not the
//! bubble table).

use std::time::Instant;

use trident::calibrate::local::{
    measure, predict, Budget, Competition, LocalCosts, LocalPrediction, LocalRun, Sampler,
};
use trident::data::{DataOrder, TokenSet};
use trident::model::{gpt2_init, init::NormalRng, GptConfig, ParamLayout};
use trident::optim::AdamWConfig;
use trident::parallel::{run_ranks, simulate, ParallelConfig, Schedule};
use trident::runtime::Device;
use trident::train::run::{train_rank, RankData, RunSpec};
use trident::train::{DecayStyle, LrSchedule, MemoryReport, TrainSettings};

const SEQ: usize = 64;
const VOCAB: usize = 256;

fn data() -> TokenSet {
    let mut r = NormalRng::new(5);
    TokenSet::from_tokens(
        "random",
        (0..200_000).map(|_| (r.next_u64() % VOCAB as u64) as u16).collect(),
        VOCAB,
    )
    .unwrap()
}

struct Outcome {
    tokens_per_s: f64,
    /// What competed for the cores during the run.
    competition: Competition,
    /// Process CPU seconds over wall seconds during the timed steps.
    busy_cores: f64,
    idle: Vec<f64>,
    /// Per rank: (tp rank, stage, dp rank) and what the trainer reports holding.
    memory: Vec<((usize, usize, usize), MemoryReport)>,
}

fn settings(micro: usize, global: usize, steps: u64) -> TrainSettings {
    TrainSettings {
        micro_batch: micro,
        global_batch: global,
        seq_len: SEQ,
        lr_schedule: LrSchedule {
            max_lr: 1e-3,
            min_lr: 1e-3,
            warmup_iters: 0,
            decay_iters: steps,
            style: DecayStyle::Constant,
        },
        adamw: AdamWConfig::default(),
        clip_grad: 1.0,
        precision: Default::default(),
        loss_scale: Default::default(),
    }
}

fn run(config: GptConfig, par: ParallelConfig, micro: usize, micro_batches: usize, steps: u64) -> Outcome {
    let settings = settings(micro, micro * par.dp * micro_batches, steps);
    // One warm-up step, then the timed ones.
    let spec = RunSpec {
        config,
        par,
        settings,
        data_seed: 1,
        data_order: DataOrder::Trident,
        iters: steps + 1,
        eval_interval: 0,
        eval_iters: 0,
        save: None,
        resume: None,
        exit: Default::default(),
    };
    let init = gpt2_init(&ParamLayout::new(config), 1);
    let set = data();
    let cpu0 = std::sync::Mutex::new(None);
    let sampler = Sampler::start();
    let results = run_ranks(par.world_size(), |mut world| {
        let mut t0 = None;
        let mut on_step = |t: &trident::train::Trainer, _: &trident::train::StepStats, _: Option<f32>| {
            if t.iter == 1 {
                t0 = Some(Instant::now());
                cpu0.lock().unwrap().get_or_insert(cpu_seconds());
            }
        };
        let r = train_rank(
            &mut world,
            &Device::Cpu,
            &spec,
            &init,
            RankData { train: set.clone(), val: None },
            &mut |_| {},
            &mut on_step,
        )?;
        Ok::<_, trident::train::TrainError>((r, t0.map(|t| t.elapsed().as_secs_f64())))
    })
    .unwrap();
    let cpu = cpu_seconds() - cpu0.into_inner().unwrap().unwrap_or(0.0);
    let competition = sampler.stop();
    let secs = results.iter().filter_map(|(_, s)| *s).fold(0.0, f64::max);
    let tokens = (settings.global_batch * SEQ) as f64 * steps as f64;
    let mut idle = vec![0.0; par.pp];
    for (r, _) in results.iter().filter(|(r, _)| r.place.tp_rank == 0 && r.dp_rank == 0) {
        idle[r.place.stage] = r.timing.idle_fraction();
    }
    let memory =
        results.iter().map(|(r, _)| ((r.place.tp_rank, r.place.stage, r.dp_rank), r.memory)).collect();
    Outcome { tokens_per_s: tokens / secs, competition, busy_cores: cpu / secs, idle, memory }
}

/// Whether `TRIDENT_BENCH_GRIDS` (`tp,pp,dp,v` grids separated by `;`, all when unset) names
/// this grid.
fn wanted(tp: usize, pp: usize, dp: usize, v: usize) -> bool {
    std::env::var("TRIDENT_BENCH_GRIDS")
        .map_or(true, |list| list.split(';').any(|g| g.trim() == format!("{tp},{pp},{dp},{v}")))
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we own.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// One grid's figures over its runs.
struct Row {
    /// Median measured tokens/s.
    measured: f64,
    /// Half the spread of the measured runs over their median.
    noise: f64,
    /// Median predicted tokens/s.
    predicted: f64,
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn min(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(0.0, f64::max)
}

/// The measured costs of one calibration, its simulated step and the run that followed.
fn print_costs(costs: &LocalCosts, predicted: &LocalPrediction, o: &Outcome, at_run: &LocalPrediction) {
    for (r, c) in costs.stages.iter().enumerate() {
        println!(
            "        stage {r} alone, as on an idle machine: forward {:.2} ms on {:.2} cores, backward {:.2} ms on {:.2}, tail \
             {:.2} ms on {:.2}, DP {:.2} ms on {:.2}",
            1e3 * c.forward_seconds(),
            c.chunks[0].forward.cores,
            1e3 * c.backward_seconds(),
            c.chunks[0].backward.cores,
            1e3 * c.optimizer.seconds,
            c.optimizer.cores,
            1e3 * (c.dp_reduce.seconds + c.dp_gather.seconds),
            c.dp_reduce.cores
        );
    }
    println!(
        "        transfer {:.3} ms ({:.3} ms to a waiting stage), embedding exchange {:.3} ms; {:.1} other {} runnable; simulated step {:.2} ms, \
         {:.0} tokens/s; the run: {:.0} tokens/s, {:.2} cores busy, {:.1} other runnable, predicted {:.0} tokens/s \
         for that",
        1e3 * costs.pp_send,
        1e3 * costs.pp_wake,
        1e3 * costs.embedding_sync,
        costs.competition.others,
        if costs.competition.autogroups { "sessions" } else { "threads" },
        1e3 * predicted.times.iteration,
        predicted.tokens_per_s,
        o.tokens_per_s,
        o.busy_cores,
        o.competition.others,
        at_run.tokens_per_s
    );
}

/// The grids fastest first, measured and predicted, and the pairs ordered differently. Two
/// grids whose measured medians lie closer than the larger of their noise bands are a tie:
/// the runs cannot order them, so neither order is counted wrong.
fn print_ranking(rows: &[Row]) {
    let order = |key: &dyn Fn(&Row) -> f64| {
        let mut idx: Vec<usize> = (0..rows.len()).collect();
        idx.sort_by(|&a, &b| key(&rows[b]).total_cmp(&key(&rows[a])));
        idx.iter().map(|i| i + 1).collect::<Vec<_>>()
    };
    let pairs: Vec<(usize, usize)> =
        (0..rows.len()).flat_map(|i| (i + 1..rows.len()).map(move |j| (i, j))).collect();
    let tied = |i: usize, j: usize| {
        let (a, b) = (&rows[i], &rows[j]);
        (a.measured / b.measured - 1.0).abs() < a.noise.max(b.noise)
    };
    let ties = pairs.iter().filter(|&&(i, j)| tied(i, j)).count();
    let inversions = |key: &dyn Fn(&Row) -> f64| {
        pairs
            .iter()
            .filter(|&&(i, j)| {
                !tied(i, j)
                    && (rows[i].measured - rows[j].measured).signum()
                        != (key(&rows[i]) - key(&rows[j])).signum()
            })
            .count()
    };
    println!(
        "# ranking, fastest first (grid rows 1-{}): measured {:?}, predicted {:?}; of {} pairs, {} tied within the \
         measured noise, {} of the rest in a different order",
        rows.len(),
        order(&|r| r.measured),
        order(&|r| r.predicted),
        pairs.len(),
        ties,
        inversions(&|r| r.predicted)
    );
}

fn main() {
    let steps: u64 = std::env::var("TRIDENT_BENCH_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(16);
    let repeats: usize =
        std::env::var("TRIDENT_BENCH_REPEATS").ok().and_then(|s| s.parse().ok()).unwrap_or(5).max(1);
    let verbose = std::env::var_os("TRIDENT_BENCH_VERBOSE").is_some();
    let config = GptConfig::new(SEQ, VOCAB, 4, 4, 128, 512).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "# trainer on Cpu: 4 layers, hidden 128, 4 heads, seq {SEQ}; {steps} timed steps a run, {repeats} runs a grid, \
         each calibrated just before it; global batch 16, micro-batch 4 (one rank: in {} row lanes); v: model chunks \
         per stage",
        trident::calibrate::local::trainer_lanes(1, 4)
    );
    println!("# {} ({cores} logical cores); load average at start {}", cpu_model(), load_average());
    println!(
        "# measured, predicted: medians over the runs; predicted by trident::calibrate::local, with the other sessions' \
         load counted around and during its calibration; noise: half the spread of the measured runs over their median"
    );
    println!(
        "# {:>3} {:>3} {:>3} {:>2} {:>10} {:>7} {:>10} {:>7} {:>10} {:>14} {:>14}",
        "tp",
        "pp",
        "dp",
        "v",
        "measured",
        "noise",
        "predicted",
        "error",
        "vs 1 rank",
        "MiB/rank max",
        "memory error"
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut base = None;
    for (tp, pp, dp, v) in [
        (1, 1, 1, 1),
        (2, 1, 1, 1),
        (1, 2, 1, 1),
        (1, 2, 1, 2),
        (1, 1, 2, 1),
        (2, 2, 1, 1),
        (2, 1, 2, 1),
        (1, 2, 2, 1),
        (2, 2, 2, 1),
    ] {
        if !wanted(tp, pp, dp, v) {
            continue;
        }
        // Same global batch (16 sequences) everywhere.
        let micro_batches = 16 / (4 * dp);
        let par =
            ParallelConfig { virtual_stages: v, ..ParallelConfig::from_world(tp * pp * dp, tp, pp).unwrap() };
        let local = LocalRun::new(config, par, 4, SEQ, 16, Default::default());
        // Each run is predicted from a calibration taken just before it, so that the two meet
        // the same load on a shared machine.
        let mut trials: Vec<(Outcome, LocalPrediction)> = Vec::new();
        for _ in 0..repeats {
            let costs = measure(&local, Budget::default()).unwrap();
            let predicted = predict(&local, &costs).unwrap();
            let o = run(config, par, 4, micro_batches, steps);
            if verbose {
                // The same costs under the competition counted during the run: whether the
                // load the run met explains its difference from the prediction.
                let at_run =
                    predict(&local, &LocalCosts { competition: o.competition, ..costs.clone() }).unwrap();
                print_costs(&costs, &predicted, &o, &at_run);
            }
            trials.push((o, predicted));
        }
        let measured: Vec<f64> = trials.iter().map(|(o, ..)| o.tokens_per_s).collect();
        let row = Row {
            measured: median(&measured),
            noise: 0.5 * (max(&measured) - min(&measured)) / median(&measured),
            predicted: median(&trials.iter().map(|(_, p)| p.tokens_per_s).collect::<Vec<_>>()),
        };
        // The run whose throughput is the median one shows the idle fractions.
        trials.sort_by(|a, b| a.0.tokens_per_s.total_cmp(&b.0.tokens_per_s));
        let (o, predicted) = &trials[trials.len() / 2];
        // Every rank's reported bytes against the plan's count for its place.
        let mut worst = 0.0f64;
        let mut largest = 0usize;
        for &((tp_rank, stage, dp_rank), m) in &o.memory {
            let plan = trident::calibrate::rank_memory::rank_bytes(&local, tp_rank, stage, dp_rank)
                .unwrap()
                .reported();
            let got = m.params + m.grads + m.optimizer + m.activations;
            largest = largest.max(got);
            worst = worst.max((plan as f64 / got as f64 - 1.0).abs());
        }
        let b = *base.get_or_insert(row.measured);
        println!(
            "  {tp:>3} {pp:>3} {dp:>3} {v:>2} {:>10.0} {:>6.1}% {:>10.0} {:>+6.1}% {:>10.2} {:>14.2} {:>13.2}%",
            row.measured,
            100.0 * row.noise,
            row.predicted,
            100.0 * (row.predicted / row.measured - 1.0),

            row.measured / b,
            largest as f64 / (1u64 << 20) as f64,
            100.0 * worst
        );
        if pp > 1 {
            let stages: Vec<String> = (0..pp)
                .map(|r| {
                    format!("{:.1}% / {:.1}%", 100.0 * predicted.times.idle_fraction(r), 100.0 * o.idle[r])
                })
                .collect();
            println!("        idle per stage, predicted / measured: {}", stages.join(", "));
        }
        rows.push(row);
    }
    print_ranking(&rows);
    let within = rows.iter().filter(|r| (r.predicted / r.measured - 1.0).abs() <= 0.2).count();
    println!("# {within} of {} grids predicted within 20% of their measured tokens/s", rows.len());
    println!("# load average at end {}", load_average());
    if std::env::var_os("TRIDENT_BENCH_GRIDS").is_some() {
        return;
    }
    println!();
    println!("# pipeline bubble: measured idle fraction per stage vs (p-1)/(m+p-1) and the simulated 1F1B");
    println!("# {:>2} {:>3} {:>9} {:>9} {:>24}", "p", "m", "formula", "simulated", "measured per stage");
    let small = GptConfig::new(SEQ, VOCAB, 4, 4, 64, 128).unwrap();
    for p in [2, 4] {
        for m in [4, 8, 16] {
            let schedule = Schedule::one_f_one_b(p, m);
            let sim = simulate(&schedule, 1.0, 2.0).unwrap().idle_fraction(0);
            let par = ParallelConfig::from_world(p, 1, p).unwrap();
            let o = run(small, par, 2, m, steps.min(2));
            let measured: Vec<String> = o.idle.iter().map(|x| format!("{:.1}%", 100.0 * x)).collect();
            println!(
                "  {p:>2} {m:>3} {:>8.1}% {:>8.1}% {:>24}",
                100.0 * schedule.bubble_fraction(),
                100.0 * sim,
                measured.join(" ")
            );
        }
    }
    println!("# measured idle includes transfer time and, with more ranks than cores, time a stage waits for a core");
}
