//! Throughput of the parallel trainer (the code `trident train --world-size N` runs) on Cpu
//! for several (TP, PP, DP), and each pipeline stage's measured idle fraction beside the 1F1B
//! bubble (p-1)/(m+p-1) and the schedule's simulated one.
//!
//! `cargo bench -p trident --bench parallel` (`TRIDENT_BENCH_STEPS` steps per run, default 4).

use std::time::Instant;

use trident::data::{DataOrder, TokenSet};
use trident::model::{gpt2_init, init::NormalRng, GptConfig, ParamLayout};
use trident::optim::AdamWConfig;
use trident::parallel::{run_ranks, simulate, ParallelConfig, Schedule};
use trident::runtime::Device;
use trident::train::run::{train_rank, RankData, RunSpec};
use trident::train::{DecayStyle, LrSchedule, TrainSettings};

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
    idle: Vec<f64>,
}

fn run(
    config: GptConfig,
    tp: usize,
    pp: usize,
    dp: usize,
    micro: usize,
    micro_batches: usize,
    steps: u64,
) -> Outcome {
    let par = ParallelConfig::from_world(tp * pp * dp, tp, pp).unwrap();
    let settings = TrainSettings {
        micro_batch: micro,
        global_batch: micro * dp * micro_batches,
        seq_len: SEQ,
        schedule: LrSchedule {
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
    };
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
    let results = run_ranks(par.world_size(), |mut world| {
        let mut t0 = None;
        let mut on_step = |t: &trident::train::Trainer, _: &trident::train::StepStats, _: Option<f32>| {
            if t.iter == 1 {
                t0 = Some(Instant::now());
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
    let secs = results.iter().filter_map(|(_, s)| *s).fold(0.0, f64::max);
    let tokens = (settings.global_batch * SEQ) as f64 * steps as f64;
    let mut idle = vec![0.0; pp];
    for (r, _) in results.iter().filter(|(r, _)| r.place.tp_rank == 0 && r.dp_rank == 0) {
        idle[r.place.stage] = r.timing.idle_fraction();
    }
    Outcome { tokens_per_s: tokens / secs, idle }
}

fn main() {
    let steps: u64 = std::env::var("TRIDENT_BENCH_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(4);
    let config = GptConfig::new(SEQ, VOCAB, 4, 4, 128, 512).unwrap();
    println!("# parallel trainer on Cpu: 4 layers, hidden 128, 4 heads, seq {SEQ}; {steps} timed steps; global batch 16");
    println!("# {:>3} {:>3} {:>3} {:>12} {:>10}", "tp", "pp", "dp", "tokens/s", "vs 1 rank");
    let mut base = None;
    for (tp, pp, dp) in
        [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (2, 1, 2), (1, 2, 2), (2, 2, 2)]
    {
        // Same global batch (16 sequences) everywhere.
        let micro_batches = 16 / (4 * dp);
        let o = run(config, tp, pp, dp, 4, micro_batches, steps);
        let b = *base.get_or_insert(o.tokens_per_s);
        println!("  {tp:>3} {pp:>3} {dp:>3} {:>12.0} {:>10.2}", o.tokens_per_s, o.tokens_per_s / b);
    }
    println!();
    println!("# pipeline bubble: measured idle fraction per stage vs (p-1)/(m+p-1) and the simulated 1F1B");
    println!("# {:>2} {:>3} {:>9} {:>9} {:>24}", "p", "m", "formula", "simulated", "measured per stage");
    let small = GptConfig::new(SEQ, VOCAB, 4, 4, 64, 128).unwrap();
    for p in [2, 4] {
        for m in [4, 8, 16] {
            let schedule = Schedule::one_f_one_b(p, m);
            let sim = simulate(&schedule, 1.0, 2.0).unwrap().idle_fraction(0);
            let o = run(small, 1, p, 1, 2, m, steps.min(2));
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
