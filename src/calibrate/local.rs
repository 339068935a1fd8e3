//! `--calibrate` for Trident's own trainer on this machine: the costs that set the time of a
//! small CPU run, measured by running the trainer's real code at the run's shapes.
//!
//! At 128-wide layers and a few hundred tokens, FLOPs and bytes do not set the time; the
//! per-op costs do (rayon fork-join, the LayerNorms, attention's backward, the many small
//! tensors of the gradient norm and AdamW), and so does the fact that the ranks are threads
//! sharing a few cores. So, for each distinct model chunk (the first virtual pipeline stage,
//! one middle one standing for every middle one, the last; one chunk for a single stage):
//!
//! - its TP group (`tp` rank threads, a real tensor-parallel communicator) runs the chunk's
//!   [`Gpt`] forward and backward of one micro-batch, exactly as the trainer does (the
//!   embedding in the first chunk, the LM head and the loss in the last; the TP collectives
//!   inside); the mean time of each over the repetitions, and the cores the group kept busy
//!   meanwhile (process CPU time over wall time). A single rank on the Cpu runs its
//!   micro-batch as the trainer does, split into row lanes that each run a whole forward and
//!   backward side by side: that pass is timed whole;
//! - per distinct stage (first, a middle one, last), the step's tail on one rank: zeroing the
//!   gradients (with lanes: one lane's, then the lanes summed into the model's), their
//!   squared norm tensor by tensor, AdamW over the owned range, and under mixed precision the
//!   rounded copy of the weights the products read;
//! - one pipeline transfer (`ns c` floats between two rank threads) and the tied embedding's
//!   exchange between the first and last stage;
//! - the data-parallel reduction of the stage's gradients over `dp` rank threads: one
//!   all-reduce per layer bucket and one for the stage block, or under ZeRO-1 the
//!   reduce-scatter and the all-gather.
//!
//! Other processes on the machine take their share of the cores too: the other sessions (or,
//! without the kernel's autogroups, threads) with runnable threads are counted before, during
//! ([`Sampler`]) and after the measurements ([`Competition`]), each measurement (the mean
//! of its repetitions) is turned into what it would be on an idle machine ([`unloaded`]), and
//! the simulation shares the cores with the same competition (or with the one a run met, to
//! check the model against that run: the `parallel` bench).
//!
//! [`super::shared::simulate`] then runs the trainer's schedule ([`Interleaved`]) with these
//! costs, the ranks sharing the machine's cores.

use std::time::{Duration, Instant};

use rayon::prelude::*;
use trident_collectives::ReduceOp;
use trident_runtime::{Buffer, Device};

use crate::model::{
    gpt2_init, Gpt, GptConfig, GptOptions, MicroActs, ParamLayout, Precision, ShardLayout, Workspace,
};
use crate::ops::{self, OpsContext};
use crate::optim::{AdamW, AdamWConfig};
use crate::parallel::{run_ranks, Interleaved, ParallelConfig, ShardPlace, SplitDims, TpGroup};
use crate::train::checkpoint::owned_range;

/// One run of the trainer on `cpu` (`trident train` with its ranks as threads of this
/// process, the `parallel` bench): the model, the grid and the batch.
#[derive(Clone, Copy, Debug)]
pub struct LocalRun {
    /// The model, its vocabulary padded as the trainer pads it.
    pub config: GptConfig,
    /// TP, PP, DP, the model chunks per stage and the options (ZeRO-1, recomputation,
    /// sequence parallelism).
    pub par: ParallelConfig,
    /// Sequences per micro-batch, per rank.
    pub micro_batch: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Sequences per optimizer step, all of DP together.
    pub global_batch: usize,
    /// What activations and the weights the products read are stored in (fp32 master
    /// weights, state and gradients throughout).
    pub precision: Precision,
    /// Row lanes each micro-batch is split into (1: none): [`trainer_lanes`].
    pub lanes: usize,
}

/// The row lanes the trainer splits each micro-batch of `micro_batch` sequences into on the
/// Cpu device: one per thread of the rayon pool for a run of one rank, at most one per
/// sequence; none (1) on a grid of several ranks. As `Trainer::new` decides it.
pub fn trainer_lanes(world: usize, micro_batch: usize) -> usize {
    let lanes = rayon::current_num_threads().min(micro_batch);
    if world == 1 && lanes > 1 {
        lanes
    } else {
        1
    }
}

impl LocalRun {
    /// A run of `config` on the grid `par` on the Cpu device, with the lanes the trainer
    /// would split it into ([`trainer_lanes`]).
    pub fn new(
        config: GptConfig,
        par: ParallelConfig,
        micro_batch: usize,
        seq_len: usize,
        global_batch: usize,
        precision: Precision,
    ) -> Self {
        let lanes = trainer_lanes(par.world_size(), micro_batch);
        Self { config, par, micro_batch, seq_len, global_batch, precision, lanes }
    }

    /// Micro-batches per pipeline per step: `global_batch / (micro_batch dp)`.
    pub fn micro_batches(&self) -> usize {
        self.global_batch / (self.micro_batch * self.par.dp).max(1)
    }

    /// Ranks of the grid, all threads of this process.
    pub fn world(&self) -> usize {
        self.par.world_size()
    }

    /// Model chunks per stage (1 without interleaving).
    pub fn chunks(&self) -> usize {
        self.par.virtual_stages.max(1)
    }

    /// The schedule every stage runs ([`Interleaved`]; one chunk is plain 1F1B).
    pub fn schedule(&self) -> Result<Interleaved, String> {
        Interleaved::new(self.par.pp, self.micro_batches(), self.chunks())
    }

    /// Where stage `stage`'s TP rank `tp_rank` sits.
    pub fn place(&self, tp_rank: usize, stage: usize) -> ShardPlace {
        ShardPlace { tp_rank, tp: self.par.tp, stage, pp: self.par.pp, chunks: self.chunks() }
    }

    /// Checks the grid, batch and shapes as the trainer will.
    pub fn validate(&self) -> anyhow::Result<()> {
        let shape = SplitDims {
            heads: self.config.num_heads,
            layers: self.config.num_layers,
            padded_vocab: self.config.padded_vocab_size,
        };
        self.par.validate(shape, self.micro_batch, self.global_batch)?;
        if self.config.num_layers % (self.par.pp * self.chunks()) != 0 {
            anyhow::bail!(
                "{} layers do not split into {} stages of {} chunks",
                self.config.num_layers,
                self.par.pp,
                self.chunks()
            );
        }
        self.schedule().map_err(anyhow::Error::msg)?;
        if self.seq_len == 0 || self.seq_len > self.config.max_seq_len {
            anyhow::bail!("--seq-length {} must be 1 to {}", self.seq_len, self.config.max_seq_len);
        }
        if self.par.sequence_parallel && self.par.tp > 1 && self.seq_len % self.par.tp != 0 {
            anyhow::bail!(
                "--sequence-parallel needs --seq-length {} divisible by --tensor-model-parallel-size {}",
                self.seq_len,
                self.par.tp
            );
        }
        if self.lanes == 0 || self.lanes > self.micro_batch || (self.lanes > 1 && self.world() > 1) {
            anyhow::bail!(
                "{} row lanes for micro-batches of {} on {} ranks: lanes split a single rank's micro-batch",
                self.lanes,
                self.micro_batch,
                self.world()
            );
        }
        Ok(())
    }
}

/// A piece of work as measured alone on the machine: its seconds and the cores it kept busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Work {
    /// Seconds alone on the machine.
    pub seconds: f64,
    /// Process CPU seconds over wall seconds while it ran (at most the cores).
    pub cores: f64,
}

/// One model chunk's passes of a micro-batch (its TP group alone on the machine).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ChunkCost {
    /// The forward, TP collectives included (with lanes: the whole forward and backward).
    pub forward: Work,
    /// The backward (full recomputation: with the recomputed forward; with lanes: none, the
    /// forward's pass holds it).
    pub backward: Work,
}

/// One stage's measured costs, as on an idle machine ([`unloaded`]).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StageCost {
    /// Per model chunk of the stage, in the stage's chunk order.
    pub chunks: Vec<ChunkCost>,
    /// The step's tail on one rank: zero the gradients, their squared norm, AdamW.
    pub optimizer: Work,
    /// The stage's gradient reduction over DP (ZeRO-1: the reduce-scatter), one ring alone.
    pub dp_reduce: Work,
    /// ZeRO-1's all-gather of the updated parameters, one ring alone.
    pub dp_gather: Work,
}

impl StageCost {
    /// Seconds of one micro-batch's forwards through every chunk of the stage.
    pub fn forward_seconds(&self) -> f64 {
        self.chunks.iter().map(|c| c.forward.seconds).sum()
    }

    /// Seconds of one micro-batch's backwards through every chunk of the stage.
    pub fn backward_seconds(&self) -> f64 {
        self.chunks.iter().map(|c| c.backward.seconds).sum()
    }
}

/// Everything the prediction of a [`LocalRun`] needs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LocalCosts {
    /// Logical cores of the machine (`available_parallelism`): what the rank threads share.
    pub cores: usize,
    /// Per stage (middle stages and middle chunks share one measurement).
    pub stages: Vec<StageCost>,
    /// What competed for the cores while this was measured.
    pub competition: Competition,
    /// One pipeline transfer of a micro-batch's activation (or its gradient) that was
    /// waiting when its receiver came for it.
    pub pp_send: f64,
    /// From the post of a transfer its receiver was already waiting for to the end of the
    /// receive, while the sender goes on with its next pass: the link's send thread and the
    /// waiting receiver each woken, and each waiting for a core the sender's pass holds, then
    /// the copy. A receive ends at the later of its arrival plus [`Self::pp_send`] and the
    /// post plus this.
    pub pp_wake: f64,
    /// The tied embedding's gradient exchanged between the first and last stage.
    pub embedding_sync: f64,
}

/// How long to measure each piece.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Timed repetitions of each measurement per round (after one warm-up).
    pub reps: usize,
    /// Rounds over the distinct stages, one stage after the other in each: the mean is
    /// taken over every round's repetitions. A machine whose speed drifts (a virtual machine
    /// whose host is busy at moments no count inside it shows) then slows each stage's
    /// measurement alike, instead of the one stage measured during the slow moment, which
    /// would move the stages' balance and with it the pipeline's bubble.
    pub rounds: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { reps: 5, rounds: 3 }
    }
}

/// Process CPU time (user + system, every thread), from `getrusage`.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed struct we own; RUSAGE_SELF is
    // always a valid `who`.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The median of `xs` (not empty; the mean of the middle two for an even count): for the
/// transfers, microseconds to a few hundred each, whose mean one stall of a thread would set.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    }
}

/// A measurement on one rank: the per-repetition seconds, and the process CPU seconds and
/// wall seconds of the timed loops (taken on rank 0; the group runs in lockstep), summed over
/// the rounds merged into it.
#[derive(Clone, Debug, Default)]
struct Samples {
    times: Vec<f64>,
    cpu: f64,
    wall: f64,
}

impl Samples {
    /// Adds another round's repetitions.
    fn merge(&mut self, other: Samples) {
        self.times.extend(other.times);
        self.cpu += other.cpu;
        self.wall += other.wall;
    }

    /// The mean repetition and the cores busy meanwhile; nothing measured is no work.
    ///
    /// The mean, as a run's tokens/s is its steps' total time over their count. The times of
    /// repeated work on a shared machine are skewed to the slow side (the other work on the
    /// machine, or on a virtual machine's host, only ever takes time away), so the least
    /// repetition read 20% and more below the steps that followed under load, and even the
    /// median up to 11% below their mean on a quiet virtual machine.
    fn work(&self, cores: usize) -> Work {
        if self.times.is_empty() {
            return Work::default();
        }
        let busy = self.cpu / self.wall.max(1e-9);
        let mean = self.times.iter().sum::<f64>() / self.times.len() as f64;
        Work { seconds: mean, cores: busy.clamp(0.05, cores as f64) }
    }
}

/// Runs `f` once to warm up, then `reps` times; times each call.
fn timed<E>(reps: usize, mut f: impl FnMut() -> Result<(), E>) -> Result<Samples, E> {
    f()?;
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        f()?;
        times.push(t0.elapsed().as_secs_f64());
    }
    Ok(Samples { times, cpu: (cpu_time() - cpu0).as_secs_f64(), wall: wall0.elapsed().as_secs_f64() })
}

/// The stages whose costs differ: the first, one middle stage (standing for every middle
/// one) and the last. Returns, per stage, the index of the stage measured for it.
fn representatives(pp: usize) -> Vec<usize> {
    (0..pp).map(|r| if r == 0 || r + 1 == pp { r } else { 1 }).collect()
}

/// What the run's threads compete with for the cores: other sessions or threads that were
/// runnable while the calibration measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Competition {
    /// Whether the kernel shares the cores between sessions (`sched_autogroup_enabled`): then
    /// each session with runnable threads gets an equal share, however many threads it has.
    pub autogroups: bool,
    /// Other sessions with runnable threads (autogroups), or other runnable threads, on
    /// average.
    pub others: f64,
}

impl Competition {
    /// Cores work keeping `d` threads runnable gets on `cores` cores. Per session: the
    /// session's runnable threads spread over `min(d, cores)` cores and get `1 / (1 + others)`
    /// of each (the others assumed runnable everywhere); per thread: `d` of `d + others`
    /// equal shares once they oversubscribe the cores.
    pub fn cores_for(&self, d: f64, cores: f64) -> f64 {
        if self.autogroups {
            d.min(cores) / (1.0 + self.others)
        } else if d + self.others <= cores {
            d
        } else {
            d * cores / (d + self.others)
        }
    }

    /// The threads `d` that show `observed` cores busy ([`Self::cores_for`] inverted, at most
    /// `cores`).
    fn threads_for(&self, observed: f64, cores: f64) -> f64 {
        if self.autogroups {
            (observed * (1.0 + self.others)).clamp(observed, cores)
        } else if observed + self.others <= cores {
            observed
        } else if observed < cores {
            (observed * self.others / (cores - observed)).clamp(observed, cores)
        } else {
            cores
        }
    }

    /// Samples the machine now: 8 looks 3 ms apart while this process does nothing else, at
    /// the runnable tasks of `/proc` (grouped by `/proc/PID/autogroup` when autogroups are
    /// on, this process's own group left out); none where `/proc` cannot be read.
    pub fn sample() -> Self {
        let eye = Eye::new();
        let mut total = 0.0;
        let looks = 8;
        for _ in 0..looks {
            std::thread::sleep(Duration::from_millis(3));
            let Some(n) = eye.look() else { return Self::default() };
            total += n;
        }
        Self { autogroups: eye.autogroups, others: total / looks as f64 }
    }
}

/// What a look at the machine's runnable tasks needs: whether the kernel groups them by
/// session, and this process's own group and id (left out).
struct Eye {
    autogroups: bool,
    own: Option<String>,
    own_pid: String,
}

impl Eye {
    fn new() -> Self {
        Eye {
            autogroups: std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
                .is_ok_and(|s| s.trim() == "1"),
            own: std::fs::read_to_string("/proc/self/autogroup").ok(),
            own_pid: std::process::id().to_string(),
        }
    }

    /// The other sessions with runnable threads now (autogroups), or the other runnable
    /// threads; `None` where `/proc` cannot be read.
    fn look(&self) -> Option<f64> {
        let mut groups = std::collections::HashSet::new();
        let mut threads = 0usize;
        let procs = std::fs::read_dir("/proc").ok()?;
        for entry in procs.flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == self.own_pid {
                continue;
            }
            let Ok(tasks) = std::fs::read_dir(entry.path().join("task")) else { continue };
            let running = tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
                        // The state follows the command name's closing parenthesis.
                        stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('R'))
                    })
                })
                .count();
            if running == 0 {
                continue;
            }
            threads += running;
            if let Ok(group) = std::fs::read_to_string(entry.path().join("autogroup")) {
                if Some(&group) != self.own.as_ref() {
                    groups.insert(group.split_whitespace().next().unwrap_or("").to_owned());
                }
            }
        }
        Some(if self.autogroups { groups.len() as f64 } else { threads as f64 })
    }
}

/// The competition while some work runs: a thread that looks at the machine every
/// [`Sampler::PERIOD`] until stopped (a look reads the state of every task in `/proc`; its
/// CPU time counts in the process's, a few percent of a core).
pub struct Sampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<(f64, usize)>,
    autogroups: bool,
}

impl Sampler {
    /// Time between two looks.
    pub const PERIOD: Duration = Duration::from_millis(25);

    /// Starts looking.
    pub fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let eye = Eye::new();
        let autogroups = eye.autogroups;
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let (mut total, mut looks) = (0.0, 0usize);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(n) = eye.look() {
                    total += n;
                    looks += 1;
                }
                std::thread::sleep(Self::PERIOD);
            }
            (total, looks)
        });
        Sampler { stop, handle, autogroups }
    }

    /// Stops looking; the mean of the looks (none: an empty competition).
    pub fn stop(self) -> Competition {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (total, looks) = self.handle.join().unwrap_or((0.0, 0));
        Competition {
            autogroups: self.autogroups,
            others: if looks > 0 { total / looks as f64 } else { 0.0 },
        }
    }
}

/// `w` as it would run with nothing else on the machine: the measured `w.cores` give the
/// threads the work kept runnable under `competition` ([`Competition::cores_for`] inverted),
/// and its seconds shrink by the cores it would have had over the cores it got.
pub fn unloaded(w: Work, competition: Competition, cores: usize) -> Work {
    let c = cores as f64;
    if w.seconds <= 0.0 || competition.others <= 0.0 {
        return w;
    }
    let d = competition.threads_for(w.cores, c);
    let got = competition.cores_for(d, c);
    let alone = Competition { others: 0.0, ..competition }.cores_for(d, c).max(1e-9);
    Work { seconds: w.seconds * got / alone, cores: d }
}

/// Where a model chunk sits in the whole model: what its forward and backward run besides
/// its layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkKind {
    /// The first virtual stage: the embedding before the layers.
    First,
    /// Layers only.
    Middle,
    /// The last virtual stage: the LM head and the loss after the layers.
    Last,
    /// A single stage of one chunk: both.
    Whole,
}

fn chunk_kind(place: &ShardPlace, chunk: usize) -> ChunkKind {
    match (place.is_first_chunk(chunk), place.is_last_chunk(chunk)) {
        (true, true) => ChunkKind::Whole,
        (true, false) => ChunkKind::First,
        (false, true) => ChunkKind::Last,
        (false, false) => ChunkKind::Middle,
    }
}

/// Measures `run`'s costs on this machine.
pub fn measure(run: &LocalRun, budget: Budget) -> anyhow::Result<LocalCosts> {
    run.validate()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let before = Competition::sample();
    let sampler = Sampler::start();
    let full = gpt2_init(&ParamLayout::new(run.config), 1);
    let reps = representatives(run.par.pp);
    let mut distinct = reps.clone();
    distinct.dedup();
    let mut measured: std::collections::HashMap<usize, StageSamples> = std::collections::HashMap::new();
    for _round in 0..budget.rounds.max(1) {
        for &r in &distinct {
            let round = measure_stage(run, r, &full, budget)?;
            measured.entry(r).or_default().merge(round);
        }
    }
    let during = sampler.stop();
    let after = Competition::sample();
    let competition = Competition { others: (before.others + during.others + after.others) / 3.0, ..before };
    let u = |w: &Samples| unloaded(w.work(cores), competition, cores);
    let stages = reps
        .iter()
        .map(|r| {
            let c = &measured[r];
            StageCost {
                chunks: c.chunks.iter().map(|(f, b)| ChunkCost { forward: u(f), backward: u(b) }).collect(),
                optimizer: u(&c.optimizer),
                dp_reduce: u(&c.dp_reduce),
                dp_gather: u(&c.dp_gather),
            }
        })
        .collect();
    let c = run.config.channels;
    let n = run.micro_batch * run.seq_len;
    let sp = run.par.sequence_parallel && run.par.tp > 1;
    let act = if sp { n / run.par.tp } else { n } * c;
    let (pp_send, pp_wake, embedding_sync) = if run.par.pp > 1 {
        let wte = run.config.padded_vocab_size / run.par.tp * c;
        let send = exchange_seconds(act, false, budget)?;
        (send, wake_seconds(act, budget)?.max(send), exchange_seconds(wte, true, budget)?)
    } else {
        (0.0, 0.0, 0.0)
    };
    Ok(LocalCosts { cores, stages, competition, pp_send, pp_wake, embedding_sync })
}

/// [`LocalCosts::pp_wake`] for a transfer of `len` floats, on the trainer's own pipeline
/// links: stage 0 waits long enough that stage 1 sits in its receive as a waiting stage
/// does (past the spinning, sleeping in short naps), stamps the time, posts the activation
/// and goes on with rayon work on every core for as long as a short pass; stage 1 stamps the
/// end of its receive. The median of `budget.reps * budget.rounds` transfers.
fn wake_seconds(len: usize, budget: Budget) -> anyhow::Result<f64> {
    /// How long the receiver waits before each transfer, and the sender's pass after it.
    const WAIT: Duration = Duration::from_millis(2);
    const PASS: Duration = Duration::from_millis(2);
    let epoch = Instant::now();
    let n = budget.reps.max(1) * budget.rounds.max(1);
    let stamps = run_ranks(2, |mut world| {
        let mut links = crate::parallel::PipeLinks::new(&mut world, false)?;
        let mut buf = vec![0.0f32; len];
        let mut stamps = Vec::with_capacity(n);
        for _ in 0..=n {
            if world.rank() == 0 {
                std::thread::sleep(WAIT);
                stamps.push(epoch.elapsed().as_secs_f64());
                links.send_activation(vec![1.0f32; len])?;
                let t0 = Instant::now();
                while t0.elapsed() < PASS {
                    let x: f64 = (0..1u64 << 14).into_par_iter().map(|i| (i as f64).sqrt()).sum();
                    std::hint::black_box(x);
                }
            } else {
                links.recv_activation(&mut buf)?;
                stamps.push(epoch.elapsed().as_secs_f64());
            }
        }
        links.flush()?;
        Ok::<_, crate::parallel::ParallelError>(stamps)
    })?;
    // The first transfer is a warm-up.
    let waits = stamps[0].iter().zip(&stamps[1]).skip(1).map(|(sent, got)| (got - sent).max(0.0)).collect();
    Ok(median(waits))
}

/// Seconds of one transfer of `len` floats between two rank threads, as a pipeline link
/// moves it (the sender's copy of the output, the send, the receive into the stage's input),
/// alternating the direction as activations and gradients do; `both`: each sends to the
/// other at once, as the tied embedding's sum does. The median of `budget.reps`.
fn exchange_seconds(len: usize, both: bool, budget: Budget) -> anyhow::Result<f64> {
    let times = run_ranks(2, |mut world| {
        let me = world.rank();
        let peer = 1 - me;
        let out = vec![1.0f32; len];
        let mut inp = vec![0.0f32; len];
        let mut k = 0usize;
        let t = timed(budget.reps, || -> anyhow::Result<()> {
            k += 1;
            let sender = k % 2;
            if both {
                world.send_recv(Some((&out[..], peer)), Some((&mut inp[..], peer)), 7)?;
            } else if me == sender {
                world.send(&out.clone(), peer, 7)?;
            } else {
                world.recv(&mut inp[..], peer, 7)?;
            }
            Ok(())
        })
        .map_err(|e| crate::parallel::ParallelError::Unsupported(e.to_string()))?;
        Ok::<_, crate::parallel::ParallelError>(t.times)
    })?;
    Ok(median(times.into_iter().next().expect("two ranks")))
}

/// One row lane of a single rank's micro-batch, as the trainer keeps it.
struct Lane {
    rows: std::ops::Range<usize>,
    tp: TpGroup,
    ws: Workspace,
    acts: MicroActs,
    grads: Buffer<f32>,
}

/// One stage's measurements, over the rounds merged into it.
#[derive(Clone, Debug, Default)]
struct StageSamples {
    /// Per chunk: the forward's and the backward's.
    chunks: Vec<(Samples, Samples)>,
    optimizer: Samples,
    dp_reduce: Samples,
    dp_gather: Samples,
}

impl StageSamples {
    fn merge(&mut self, other: StageSamples) {
        if self.chunks.is_empty() {
            self.chunks = vec![Default::default(); other.chunks.len()];
        }
        for ((f, b), (of, ob)) in self.chunks.iter_mut().zip(other.chunks) {
            f.merge(of);
            b.merge(ob);
        }
        self.optimizer.merge(other.optimizer);
        self.dp_reduce.merge(other.dp_reduce);
        self.dp_gather.merge(other.dp_gather);
    }
}

/// One round of stage `stage`'s measurements: forward, backward and the step's tail on its
/// TP group, and its DP reduction; `full` is the whole model's initial parameters. As
/// measured, not unloaded.
fn measure_stage(run: &LocalRun, stage: usize, full: &[f32], budget: Budget) -> anyhow::Result<StageSamples> {
    let (t, b, s) = (run.par.tp, run.micro_batch, run.seq_len);
    let vocab = run.config.vocab_size as u64;
    let reps = budget.reps.max(1);
    let per_rank = run_ranks(t, |world| -> Result<_, crate::train::TrainError> {
        let device = Device::Cpu;
        let ctx = OpsContext::new(&device)?;
        let place = run.place(world.rank(), stage);
        let layout = ShardLayout::new(run.config, place);
        let options = GptOptions {
            recompute: run.par.recompute,
            sequence_parallel: run.par.sequence_parallel,
            precision: run.precision,
        };
        let mut model = Gpt::new(&device, layout.clone(), full, options)?;
        let mut tp = TpGroup::new(world);
        // Tokens and targets as a data loader gives them: any ids below the vocabulary.
        let tokens: Vec<u32> = (0..b * s).map(|i| ((i as u64 * 7919 + 13) % vocab) as u32).collect();
        let targets: Vec<u32> = (0..b * s).map(|i| ((i as u64 * 104729 + 5) % vocab) as u32).collect();
        let dloss = 1.0 / (b * s) as f32;
        // Per chunk: the forward's and the backward's times and the cores busy meanwhile.
        let mut chunks: Vec<(Samples, Samples)> = Vec::new();
        let mut lanes: Vec<Lane> = Vec::new();
        if run.lanes > 1 {
            for i in 0..run.lanes {
                let rows = i * b / run.lanes..(i + 1) * b / run.lanes;
                let ws = Workspace::new(&device, &model, rows.len(), s)?;
                let acts = MicroActs::new(&device, &model, &ws)?;
                let grads = Buffer::zeros(&device, model.num_params())?;
                lanes.push(Lane { rows, tp: TpGroup::single(), ws, acts, grads });
            }
            // The lanes side by side, each a whole forward and backward of its rows.
            let mut pass = || -> Result<(), crate::train::TrainError> {
                lanes
                    .par_iter_mut()
                    .map(|l| -> Result<(), crate::train::TrainError> {
                        let rows = l.rows.start * s..l.rows.end * s;
                        model.embed(&ctx, &mut l.tp, &mut l.ws, &mut l.acts, &tokens[rows.clone()])?;
                        model.forward(
                            &ctx,
                            &mut l.tp,
                            &mut l.ws,
                            &mut l.acts,
                            Some(&targets[rows]),
                            Some(dloss),
                        )?;
                        model.backward_into(
                            &ctx,
                            &mut l.tp,
                            &mut l.ws,
                            &mut l.acts,
                            None,
                            &mut l.grads,
                            &mut |_, _| Ok(()),
                        )?;
                        Ok(())
                    })
                    .collect::<Result<Vec<()>, _>>()?;
                Ok(())
            };
            let timed_pass = timed(reps, &mut pass)?;
            chunks.push((timed_pass, Samples::default()));
        } else {
            for c in 0..place.chunks {
                let kind = chunk_kind(&place, c);
                if let Some(q) = (0..c).find(|&q| chunk_kind(&place, q) == kind) {
                    // Same layers and the same ends as an earlier chunk: the same costs.
                    let same = chunks[q].clone();
                    chunks.push(same);
                    continue;
                }
                let mut ws = Workspace::new(&device, &model, b, s)?;
                let mut acts = MicroActs::for_chunk(&device, &model, &ws, c)?;
                // The received gradient, on the device as the pipeline's links leave it.
                let dout = Buffer::from_slice(&device, &vec![1e-3f32; ws.activation_len()])?;
                let (first, last) = (place.is_first_chunk(c), place.is_last_chunk(c));
                // A warm-up micro-batch, then the timed ones: the forward, then the backward
                // of what it saved.
                let (mut f_times, mut b_times) = (Vec::new(), Vec::new());
                let mut cpu_wall = (Duration::ZERO, Instant::now());
                for rep in 0..=reps {
                    if rep == 1 {
                        cpu_wall = (cpu_time(), Instant::now());
                    }
                    let t0 = Instant::now();
                    if first {
                        model.embed(&ctx, &mut tp, &mut ws, &mut acts, &tokens)?;
                    }
                    model.forward(&ctx, &mut tp, &mut ws, &mut acts, Some(&targets), Some(dloss))?;
                    let t1 = Instant::now();
                    let dout = if last { None } else { Some(dout.view(..)?) };
                    model.backward(&ctx, &mut tp, &mut ws, &mut acts, dout, &mut |_, _| Ok(()))?;
                    if rep > 0 {
                        f_times.push((t1 - t0).as_secs_f64());
                        b_times.push(t1.elapsed().as_secs_f64());
                    }
                }
                let (cpu0, wall0) = cpu_wall;
                let (cpu, wall) = ((cpu_time() - cpu0).as_secs_f64(), wall0.elapsed().as_secs_f64());
                chunks.push((Samples { times: f_times, cpu, wall }, Samples { times: b_times, cpu, wall }));
            }
        }
        // The step's tail on this rank alone (every rank runs its own).
        let (len, dp, zero) = (layout.len(), run.par.dp, run.par.distributed_optimizer);
        let owned = owned_range(len, dp, 0, zero);
        let mut opt = AdamW::new(&device, &layout, owned.clone(), AdamWConfig::default())?;
        let shard = Buffer::zeros(&device, if zero { len.div_ceil(dp) } else { 0 })?;
        let tail = timed(reps, || -> Result<(), crate::train::TrainError> {
            let sum = match lanes.split_first_mut() {
                Some((first, rest)) => {
                    // The lane that took the model's buffer last step is cleared, then every
                    // lane's gradients are summed into it with their squared norm.
                    let mut dst = first.grads.view_mut(..)?;
                    let dst = dst.host_mut().expect("Cpu buffers live in host memory");
                    dst.par_chunks_mut(1 << 16).for_each(|c| c.fill(0.0));
                    let mut views =
                        rest.iter_mut().map(|l| l.grads.view_mut(..)).collect::<Result<Vec<_>, _>>()?;
                    let mut parts: Vec<&mut [f32]> = views
                        .iter_mut()
                        .map(|v| v.host_mut().expect("Cpu buffers live in host memory"))
                        .collect();
                    ops::cpu::drain_into(dst, &mut parts)
                }
                None => {
                    model.zero_grads()?;
                    let grads = if zero { &shard } else { model.grads() };
                    let mut sum = 0.0;
                    for tensor in layout.tensors() {
                        let (start, end) =
                            (tensor.range.start.max(owned.start), tensor.range.end.min(owned.end));
                        if start < end && layout.counts_in_norm(tensor) {
                            sum += ops::sum_of_squares(
                                &ctx,
                                grads.view(start - owned.start..end - owned.start)?,
                            )?;
                        }
                    }
                    sum
                }
            };
            std::hint::black_box(sum);
            if zero {
                opt.step(&ctx, model.params_mut(), &shard, 0, 1e-4, 1.0)?;
            } else {
                let (params, grads) = model.params_and_grads();
                opt.step(&ctx, params, grads, 0, 1e-4, 1.0)?;
            }
            model.sync_compute_weights(&ctx)?;
            Ok(())
        })?;
        Ok((chunks, tail, layout))
    })?;
    let (chunks, optimizer, layout) = per_rank.into_iter().next().expect("a TP group");
    let (dp_reduce, dp_gather) = measure_dp(run, &layout, budget)?;
    Ok(StageSamples { chunks, optimizer, dp_reduce, dp_gather })
}

/// The stage's gradient reduction over `dp` rank threads, as the trainer's DP thread runs it:
/// one all-reduce per layer bucket, then the stage block; under ZeRO-1 the reduce-scatter of
/// the padded gradients and the all-gather of the updated parameters.
fn measure_dp(run: &LocalRun, layout: &ShardLayout, budget: Budget) -> anyhow::Result<(Samples, Samples)> {
    let dp = run.par.dp;
    if dp < 2 {
        return Ok(Default::default());
    }
    let len = layout.len();
    let mut buckets: Vec<usize> = layout.layers().map(|l| layout.layer_block(l).len()).collect();
    let stage_block = layout.stage_block().len();
    if stage_block > 0 {
        buckets.push(stage_block);
    }
    let zero = run.par.distributed_optimizer;
    let results = run_ranks(dp, |mut world| {
        let wrap = |e: anyhow::Error| crate::parallel::ParallelError::Unsupported(e.to_string());
        let padded = len.div_ceil(dp) * dp;
        let mut grads = vec![1e-3f32; if zero { padded } else { len }];
        let mut shard = vec![0.0f32; padded / dp];
        let mut gathered = vec![0.0f32; padded];
        let reduce = timed(budget.reps, || -> anyhow::Result<()> {
            if zero {
                world.reduce_scatter(&grads, &mut shard, ReduceOp::Sum)?;
            } else {
                let mut at = 0;
                for &n in &buckets {
                    world.all_reduce(&mut grads[at..at + n], ReduceOp::Sum)?;
                    at += n;
                }
            }
            Ok(())
        })
        .map_err(wrap)?;
        let gather = if zero {
            Some(
                timed(budget.reps, || -> anyhow::Result<()> { Ok(world.all_gather(&shard, &mut gathered)?) })
                    .map_err(wrap)?,
            )
        } else {
            None
        };
        Ok::<_, crate::parallel::ParallelError>((reduce, gather))
    })?;
    let (reduce, gather) = results.into_iter().next().expect("DP ranks");
    Ok((reduce, gather.unwrap_or_default()))
}

/// A local run's prediction: the simulated step and each stage's bytes per rank.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LocalPrediction {
    /// The simulated optimizer step.
    pub times: super::shared::LocalTimes,
    /// Per stage, the bytes of its TP rank 0, DP rank 0 ([`super::rank_memory::rank_bytes`]).
    pub memory: Vec<super::rank_memory::RankBytes>,
    /// Global batch tokens over the simulated iteration.
    pub tokens_per_s: f64,
}

/// Predicts `run` from `costs` (measured by [`measure`]).
pub fn predict(run: &LocalRun, costs: &LocalCosts) -> Result<LocalPrediction, String> {
    let times = super::shared::simulate(run, costs)?;
    let memory =
        (0..run.par.pp).map(|r| super::rank_memory::rank_bytes(run, 0, r, 0)).collect::<Result<_, _>>()?;
    let tokens_per_s = (run.global_batch * run.seq_len) as f64 / times.iteration.max(1e-12);
    Ok(LocalPrediction { times, memory, tokens_per_s })
}

/// Puts a local prediction into `plan` (evaluated for the same layout on `local-cpu`): the
/// time of the stage with the most busy time, split as the trainer's timing splits it
/// (compute, with the TP collectives inside it, measured together; transfers; the rest of the
/// schedule's span as the bubble; after the schedule; the step's tail), the largest stage's
/// bytes, and the throughput figures from the simulated iteration.
pub fn apply(plan: &mut trident_plan::Plan, run: &LocalRun, p: &LocalPrediction) {
    let t = &p.times;
    let r = (0..t.busy.len()).max_by(|&a, &b| t.busy[a].total_cmp(&t.busy[b])).unwrap_or(0);
    let old_total = plan.time.total;
    plan.time = trident_plan::IterTime {
        compute: t.busy[r],
        recompute: 0.0,
        tp_comm: 0.0,
        pp_comm: t.pp_comm[r],
        launch_idle: 0.0,
        bubble: (t.wall[r] - t.busy[r] - t.pp_comm[r]).max(0.0),
        dp_comm: t.dp_comm,
        dp_exposed: t.after_schedule,
        optimizer: t.optimizer,
        total: t.iteration,
    };
    let (big, bytes) =
        p.memory.iter().enumerate().max_by_key(|(_, b)| b.total()).map(|(i, b)| (i, *b)).unwrap_or_default();
    plan.memory = trident_plan::Memory {
        stage: big,
        params: (bytes.params + bytes.compute_weights) as f64,
        grads: bytes.grads as f64,
        optimizer: bytes.optimizer as f64,
        activations: bytes.activations as f64,
        comm_buffers: bytes.dp_buckets as f64,
        reserved: 0.0,
    };
    plan.fits = plan.memory.total() <= plan.memory_limit;
    let total = plan.time.total.max(1e-12);
    let world = run.world() as f64;
    // MFU and HFU scale inversely with the iteration time (same FLOPs, same peak).
    plan.mfu *= old_total / total;
    plan.hfu *= old_total / total;
    plan.model_tflops_per_gpu = plan.model_flops / total / world / 1e12;
    plan.hardware_tflops_per_gpu = plan.hardware_flops / total / world / 1e12;
    plan.tokens_per_s = p.tokens_per_s;
}
