//! `trident bench`: benchmarks that run from the command line.

use clap::{Args, Subcommand};
use trident_collectives::bench::{self, BenchOp, BenchOptions};

/// `trident bench`: the benchmark to run.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The benchmark.
    #[command(subcommand)]
    pub what: BenchCommand,
}

/// What `trident bench` measures.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Collective bandwidth (algbw and busbw as nccl-tests reports them).
    Collectives(CollectivesArgs),
    /// Kernels at GEMM, attention and memory-bound sizes: timed on `--device cuda`; counted
    /// on `--device emu` and PREDICTED for `--gpu` by the kernel time model.
    Kernels(KernelsArgs),
}

/// `trident bench kernels`: the GEMM, attention and memory-bound kernels at training
/// sizes, timed on cuda, or counted on emu and their time predicted for `--gpu`.
#[derive(Args, Debug)]
pub struct KernelsArgs {
    /// cuda (time the kernels) or emu (count them and predict their time on --gpu).
    #[arg(long, default_value = "emu")]
    pub device: String,
    /// The GPUs predictions are for (emu), comma-separated: h100, h200, a100, a6000 or
    /// hardware-table names.
    #[arg(long, default_value = "h100")]
    pub gpu: String,
    /// Only the cases whose name contains this text (repeatable).
    #[arg(long)]
    pub filter: Vec<String>,
    /// Write the rows as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// With --device cuda: a JSON file an emu run wrote (`--json`), whose predictions are
    /// printed beside the measurements.
    #[arg(long)]
    pub predictions: Option<std::path::PathBuf>,
    /// With --device cuda: time each case for at least this many milliseconds.
    #[arg(long, default_value_t = 200)]
    pub min_time_ms: u64,
    /// Print the cases and exit.
    #[arg(long)]
    pub list: bool,
}

/// `trident bench collectives`: algorithm and bus bandwidth of one collective over a range
/// of message sizes (doubling from `--min-bytes` to `--max-bytes`): over a host transport
/// (`--device host`, measured), or the device kernels over peer memory counted on emulated
/// devices and their time PREDICTED for a node of `--gpu` (`--device emu`).
#[derive(Args, Debug)]
pub struct CollectivesArgs {
    /// host (the transports of trident-collectives, measured), emu (the peer-memory kernels on
    /// emulated devices, PREDICTED for --gpu) or cuda (not available yet: refused).
    #[arg(long, default_value = "host")]
    pub device: String,
    /// With --device emu: the GPU of the node the times are predicted for (h100, h200 or a
    /// hardware-table name).
    #[arg(long, default_value = "h100")]
    pub gpu: String,
    /// With --device host: inproc (threads), shm (processes on this host) or tcp.
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Ranks taking part (--device emu: 2 to 8, the GPUs of one node; default 8 there).
    #[arg(long)]
    pub world_size: Option<usize>,
    /// all_reduce, all_gather, reduce_scatter or broadcast.
    #[arg(long, default_value = "all_reduce")]
    pub op: String,
    /// Smallest message, in bytes (default: 1 MiB on host, 8 B on emu).
    #[arg(long)]
    pub min_bytes: Option<u64>,
    /// Largest message, in bytes (default: 256 MiB on host, 8 GiB on emu).
    #[arg(long)]
    pub max_bytes: Option<u64>,
    /// With --device emu: the largest message run on the emulator; larger ones are predicted
    /// from its counters scaled linearly (256 KiB: about half a minute on two cores).
    #[arg(long, default_value_t = 256 << 10)]
    pub emulate_max_bytes: u64,
    /// With --device emu: write the all-reduce algorithm table (per world size 2 to 8, the
    /// one-shot and two-shot cut-offs the model finds for --gpu) to this file.
    #[arg(long)]
    pub write_table: Option<std::path::PathBuf>,
    /// Most timed iterations per size.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// AllReduce on buffers from `Communicator::shared_buffer` (registered buffers: mapped by
    /// every rank where the transport shares memory) instead of ordinary memory.
    #[arg(long)]
    pub registered: bool,
}

/// Runs the benchmark; returns the process exit code.
pub fn run(args: BenchArgs) -> anyhow::Result<i32> {
    match args.what {
        BenchCommand::Collectives(a) if a.device == "emu" => collectives_emu(a),
        BenchCommand::Collectives(a) if a.device == "cuda" => anyhow::bail!(
            "--device cuda: the runtime does not map one GPU's memory into another's yet (CUDA peer \
             access between the ranks' GPUs is not set up or checked), so the peer-memory kernels \
             cannot run on GPUs; use --device emu to count them and predict their time, or \
             --device host to measure the host transports"
        ),
        BenchCommand::Collectives(a) if a.device != "host" => {
            anyhow::bail!("--device {}: use host (the transports), emu (predicted) or cuda", a.device)
        }
        BenchCommand::Collectives(a) => {
            let size = |flag: &str, v: Option<u64>, default: usize| {
                v.map_or(Ok(default), |v| {
                    usize::try_from(v).map_err(|_| anyhow::anyhow!("{flag} {v}: too large for this machine"))
                })
            };
            anyhow::ensure!(
                a.write_table.is_none(),
                "--write-table: only with --device emu (the table is found by the time model)"
            );
            let opts = BenchOptions {
                op: BenchOp::parse(&a.op)?,
                min_bytes: size("--min-bytes", a.min_bytes, 1 << 20)?,
                max_bytes: size("--max-bytes", a.max_bytes, 256 << 20)?,
                iters: a.iters,
                registered: a.registered,
                ..BenchOptions::default()
            };
            // For shm and tcp outside a launched job, bench::main starts the ranks by
            // running this same command line again under the launcher.
            let self_command: Vec<String> = std::env::args().collect();
            Ok(bench::main(&a.transport, a.world_size.unwrap_or(2), &opts, &self_command)?)
        }
        BenchCommand::Kernels(a) => kernels(a),
    }
}

/// `trident bench collectives --device emu`: the peer-memory kernels on emulated devices,
/// their time PREDICTED for a node of `--gpu`.
fn collectives_emu(a: CollectivesArgs) -> anyhow::Result<i32> {
    use anyhow::Context;
    use trident_bench::collectives::{self as cb, EmuOptions};

    anyhow::ensure!(
        a.op == "all_reduce",
        "--op {}: with --device emu every collective of the peer-memory kernels runs (all_reduce by \
         each algorithm, reduce_scatter, all_gather); leave --op out",
        a.op
    );
    let opts = EmuOptions {
        gpu: a.gpu.clone(),
        world: a.world_size.unwrap_or(8),
        min_bytes: a.min_bytes.unwrap_or(8),
        max_bytes: a.max_bytes.unwrap_or(8 << 30),
        emulate_max_bytes: a.emulate_max_bytes,
    };
    let node = opts.check()?;
    let report = cb::run(&opts, |what| eprintln!("emulating {what}"))?;
    print!("{}", cb::format(&report));
    if let Some(path) = &a.write_table {
        let table = trident_perfmodel::collective::all_reduce_table(&node);
        std::fs::write(path, table).with_context(|| format!("--write-table {}", path.display()))?;
        println!("# wrote the all-reduce table for {} to {}", node.gpu, path.display());
    }
    let wrong: u64 = report.rows.iter().flat_map(|(_, rows)| rows).filter_map(|r| r.wrong).sum();
    Ok(if wrong == 0 { 0 } else { 1 })
}

fn kernels(a: KernelsArgs) -> anyhow::Result<i32> {
    use anyhow::Context;
    use trident::runtime::Device;
    use trident_bench::{self as kb, Ceilings, Row};
    use trident_perfmodel::Target;

    let cases: Vec<kb::Case> = kb::suite()
        .into_iter()
        .filter(|c| a.filter.is_empty() || a.filter.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    let want_step = a.filter.is_empty() || a.filter.iter().any(|f| kb::step::STEP_NAME.contains(f.as_str()));
    if a.list || (cases.is_empty() && !want_step) {
        for c in &cases {
            println!("{}", c.name);
        }
        if want_step {
            println!("{}", kb::step::STEP_NAME);
        }
        anyhow::ensure!(
            !cases.is_empty() || want_step,
            "no case matches --filter {:?}; `trident bench kernels --list` names them",
            a.filter
        );
        return Ok(0);
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut steps: Vec<serde_json::Value> = Vec::new();
    let (device_label, gpu_label, ceilings) = match a.device.as_str() {
        "emu" => {
            let targets = a
                .gpu
                .split(',')
                .map(|g| Target::named(g.trim()).with_context(|| format!("--gpu {g}")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let bench = kb::Bench::load(&Device::Emu)?;
            let mut tables: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
            for case in &cases {
                let works = bench
                    .count_launches(case)
                    .with_context(|| format!("counting `{}` on the emulator", case.name))?;
                let work = &works[0];
                for (target, lines) in targets.iter().zip(&mut tables).filter(|(t, _)| case.runs_on(t)) {
                    let pred = kb::predict_launches(target, &works)
                        .with_context(|| format!("predicting `{}`", case.name))?;
                    let mut r = kb::row(case, &Ceilings::from_table(target), None, Some((&pred, work)));
                    r.gpu = Some(target.gpu.name.clone());
                    let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
                    lines.push(format!(
                        "| {} | {} | {} | {} | {:.2} | {:.2} | {:.3} | {:.1} {} | {:.1}% | {} |",
                        r.case,
                        work.blocks,
                        pred.occupancy.blocks_per_sm,
                        work.warp.fma,
                        per(work.smem_wavefronts, work.warp.shared),
                        per(work.global_sectors, work.warp.global_load + work.warp.global_store),
                        pred.seconds * 1e3,
                        r.rate,
                        r.rate_unit,
                        100.0 * r.fraction_of_ceiling,
                        pred.bound
                    ));
                    rows.push(r);
                }
            }
            for (target, lines) in targets.iter().zip(&tables).filter(|_| !cases.is_empty()) {
                println!(
                    "PREDICTED for {} by the time model from exact emulator counters (sampled grids); \
                     not measured. Ceilings: bf16 tensor peak for gemm/attention, fp32 peak for the \
                     designs, table HBM bandwidth x achievable fraction for memory.",
                    target.gpu.name
                );
                println!(
                    "| case | blocks | blocks/SM | FMA (warp) | smem wavefronts/req | sectors/req | predicted ms | predicted rate | of ceiling | bound |"
                );
                println!("|---|---|---|---|---|---|---|---|---|---|");
                for l in lines {
                    println!("{l}");
                }
                println!();
            }
            if want_step {
                let shape = kb::step::StepShape::gpt2_124m();
                for target in &targets {
                    let p = kb::step::predict_step(&bench, target, &shape)
                        .with_context(|| format!("predicting the {}", kb::step::STEP_NAME))?;
                    for line in p.report(kb::step::STEP_NAME) {
                        println!("{line}");
                    }
                    println!();
                    steps.push(serde_json::json!({
                        "case": kb::step::STEP_NAME,
                        "gpu": p.gpu,
                        "predicted_s": p.seconds,
                        "launches": p.launches,
                        "model_flops": p.model_flops,
                        "mfu": p.mfu,
                    }));
                }
            }
            let names: Vec<String> = targets.iter().map(|t| t.gpu.name.clone()).collect();
            ("emu", names.join(","), Ceilings::from_table(&targets[0]))
        }
        "cuda" => {
            let device = Device::cuda(0).context("--device cuda")?;
            let name = match &device {
                Device::Cuda(d) => d.name().to_string(),
                _ => unreachable!("Device::cuda returns a CUDA device"),
            };
            let gpu = kb::gpu_for_device_name(&name).with_context(|| {
                format!("`{name}` is not in the hardware table: its tensor peak is unknown")
            })?;
            let target = Target::named(gpu)?;
            let bench = kb::Bench::load(&device)?;
            let mut ceil = Ceilings::from_table(&target);
            ceil.memory_bytes_per_s = bench.copy_bandwidth()?;
            ceil.memory_source = "measured copy";
            let predictions: Vec<Row> = match &a.predictions {
                Some(p) => {
                    let text = std::fs::read_to_string(p)
                        .with_context(|| format!("--predictions {}", p.display()))?;
                    let v: serde_json::Value = serde_json::from_str(&text)
                        .with_context(|| format!("--predictions {}: not JSON", p.display()))?;
                    serde_json::from_value(v["rows"].clone())
                        .with_context(|| format!("--predictions {}: no rows", p.display()))?
                }
                None => Vec::new(),
            };
            println!(
                "MEASURED on {name} ({gpu}); tensor peak {:.0} TFLOP/s (table), copy {:.0} GB/s (measured)",
                ceil.tensor_flops / 1e12,
                ceil.memory_bytes_per_s / 1e9
            );
            println!("| case | measured ms | rate | of ceiling | predicted ms | predicted/measured | predicted bound |");
            println!("|---|---|---|---|---|---|---|");
            for case in &cases {
                let s = bench
                    .time(case, a.min_time_ms as f64 / 1e3)
                    .with_context(|| format!("timing `{}`", case.name))?;
                let mut r = kb::row(case, &ceil, Some(s), None);
                let pred = predictions
                    .iter()
                    .find(|p| p.case == r.case && p.gpu.as_deref().is_none_or(|g| g == gpu));
                if let Some(p) = pred {
                    r.predicted_s = p.predicted_s;
                    r.predicted_bound = p.predicted_bound.clone();
                }
                println!(
                    "| {} | {:.3} | {:.1} {} | {:.1}% | {} | {} | {} |",
                    r.case,
                    s * 1e3,
                    r.rate,
                    r.rate_unit,
                    100.0 * r.fraction_of_ceiling,
                    r.predicted_s.map_or("-".into(), |p| format!("{:.3}", p * 1e3)),
                    r.predicted_s.map_or("-".into(), |p| format!("{:.2}", p / s)),
                    r.predicted_bound.as_deref().unwrap_or("-")
                );
                rows.push(r);
            }
            ("cuda", format!("{gpu} ({name})"), ceil)
        }
        other => anyhow::bail!("--device {other}: use cuda (measure) or emu (count and predict)"),
    };
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "device": device_label,
            "gpu": gpu_label,
            "ceilings": ceilings,
            "rows": rows,
            "steps": steps,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("--json {}", path.display()))?;
    }
    Ok(0)
}
