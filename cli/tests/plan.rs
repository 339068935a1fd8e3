//! `trident plan` and `trident train --dry-run` as a user runs them.

mod common;

use std::process::{Command, Output};

fn trident(args: &[&str]) -> Output {
    Command::new(common::trident_exe()).args(args).output().expect("running trident")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn png_size(path: &std::path::Path) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let reader = decoder.read_info().unwrap();
    let info = reader.info();
    (info.width, info.height)
}

#[test]
fn search_prints_a_ranked_explained_table_and_two_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let o = trident(&[
        "plan",
        "--model",
        "gpt3-175b",
        "--gpu",
        "a100-80gb",
        "--nodes",
        "128",
        "--gpus-per-node",
        "8",
        "--bf16",
        "--search",
        "--node-price",
        "dgx=200000",
        "self-built=120000",
        "--plots",
        plots.to_str().unwrap(),
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for needle in [
        "valid layouts",
        "fit in memory",
        "why tp",
        "other tensor parallelism",
        "other pipeline parallelism",
        "PP at most a quarter of the layers (24): yes",
        "TP = GPUs per node (8)",
        "days",
        "dgx nodes",
        "self-built nodes",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    // Ranks 1..=10 in the table.
    assert!(out.lines().any(|l| l.trim_start().starts_with("10 ")), "{out}");
    for name in ["memory.png", "timeline.png"] {
        let (w, h) = png_size(&plots.join(name));
        assert!(w >= 800 && h >= 100, "{name}: {w}x{h}");
    }
}

#[test]
fn json_has_the_components_and_the_layout_in_train_flag_names() {
    let o = trident(&[
        "plan",
        "--model",
        "megatron-1t",
        "--nodes",
        "64",
        "--bf16",
        "--tensor-model-parallel-size",
        "8",
        "--pipeline-model-parallel-size",
        "64",
        "--global-batch-size",
        "512",
        "--recompute-granularity",
        "selective",
        "--sequence-parallel",
        "--unfused-attention",
        "--no-plots",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let plan = &v["plans"][0];
    assert_eq!(plan["layout"]["tensor_model_parallel_size"], 8);
    assert_eq!(plan["layout"]["pipeline_model_parallel_size"], 64);
    assert_eq!(plan["layout"]["data_parallel_size"], 1);
    assert_eq!(plan["micro_batches"], 512);
    for key in ["params", "grads", "optimizer", "activations", "comm_buffers", "reserved"] {
        assert!(plan["memory"][key].as_f64().unwrap() > 0.0, "{key}");
    }
    for key in ["compute", "recompute", "tp_comm", "pp_comm", "bubble", "total"] {
        assert!(plan["time"][key].as_f64().unwrap() > 0.0, "{key}");
    }
    // Korthikanti et al. 2022 report 56.3% MFU for this run.
    let mfu = plan["mfu"].as_f64().unwrap();
    assert!((mfu / 0.563 - 1.0).abs() < 0.15, "{mfu}");
}

#[test]
fn bad_input_says_what_to_change() {
    let o = trident(&["plan", "--model", "gpt3-175b", "--gpu", "tpu-v5", "--no-plots"]);
    let out = text(&o);
    assert!(!o.status.success());
    assert!(out.contains("unknown GPU") && out.contains("h100-sxm") && out.contains("mi300x"), "{out}");

    let o = trident(&[
        "plan",
        "--model",
        "gpt3-175b",
        "--nodes",
        "2",
        "--tensor-model-parallel-size",
        "3",
        "--no-plots",
    ]);
    let out = text(&o);
    assert!(!o.status.success());
    assert!(out.contains("--tensor-model-parallel-size 3") && out.contains("16 GPUs"), "{out}");

    let o = trident(&["plan", "--model", "gpt3-175b", "--gpu", "v100", "--fp16", "--search", "--no-plots"]);
    let out = text(&o);
    assert!(!o.status.success());
    assert!(out.contains("fits no layout") && out.contains("GiB short"), "{out}");

    let o = trident(&["plan", "--model", "gpt-5", "--no-plots"]);
    let out = text(&o);
    assert!(!o.status.success() && out.contains("gpt3-175b") && out.contains("megatron-1t"), "{out}");
}

#[test]
fn a_user_hardware_file_overrides_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hw.toml");
    std::fs::write(&file, "[[gpu]]\nname = \"a100-80gb\"\ngemm_efficiency = 0.39\n").unwrap();
    let run = |extra: &[&str]| -> f64 {
        let mut args = vec![
            "plan",
            "--model",
            "gpt3-6.7b",
            "--bf16",
            "--tensor-model-parallel-size",
            "8",
            "--no-plots",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = trident(&args);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["plans"][0]["time"]["compute"].as_f64().unwrap()
    };
    let base = run(&[]);
    let slow = run(&["--hardware", file.to_str().unwrap()]);
    // Half the GEMM rate: the GEMM part of compute doubles, the rest stays.
    assert!(slow > 1.5 * base && slow < 2.0 * base, "{base} -> {slow}");
}

#[test]
fn train_dry_run_prints_the_plan_and_trains_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ck");
    let o = trident(&[
        "train",
        "--device",
        "cpu",
        "--model",
        "nano",
        "--world-size",
        "2",
        "--pipeline-model-parallel-size",
        "2",
        "--micro-batch-size",
        "4",
        "--global-batch-size",
        "16",
        "--save",
        save.to_str().unwrap(),
        "--dry-run",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("tp1 pp2 dp1 mb4") && out.contains("memory per GPU") && out.contains("bubble"),
        "{out}"
    );
    assert!(out.contains("measured here"), "{out}");
    assert!(!out.contains(" iterations in "), "{out}"); // no "trained N iterations in .. s" line
    assert!(!save.exists());
}

#[test]
fn a_cpu_run_prints_the_calibrated_plan_beside_its_measurement() {
    // Two pipeline stages: iteration time, bytes per rank and idle fraction, predicted and
    // measured, one line per stage.
    let o = trident(&[
        "train",
        "--device",
        "cpu",
        "--model",
        "nano",
        "--world-size",
        "2",
        "--pipeline-model-parallel-size",
        "2",
        "--micro-batch-size",
        "4",
        "--global-batch-size",
        "16",
        "--train-iters",
        "2",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let line = out.lines().find(|l| l.starts_with("plan beside this run")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("iteration") && line.contains("tokens/s"), "{line}");
    for stage in 0..2 {
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("stage {stage}: memory per rank")))
            .unwrap_or_else(|| panic!("stage {stage} in:\n{out}"));
        // The plan counts the trainer's buffers exactly.
        assert!(l.contains("(+0.0%)") && l.contains("pipeline idle"), "{l}");
    }
    // One rank (its micro-batches in row lanes), and an interleaved pipeline in bf16 (4
    // layers, one per chunk, two chunks per stage): the bytes exactly too.
    let one = ["--micro-batch-size", "4", "--global-batch-size", "8"];
    let interleaved = [
        "--num-layers",
        "4",
        "--world-size",
        "2",
        "--pipeline-model-parallel-size",
        "2",
        "--num-layers-per-virtual-pipeline-stage",
        "1",
        "--micro-batch-size",
        "2",
        "--global-batch-size",
        "8",
        "--bf16",
    ];
    for (flags, stages) in [(&one[..], 1), (&interleaved[..], 2)] {
        let mut args = vec!["train", "--device", "cpu", "--model", "nano", "--train-iters", "2"];
        args.extend_from_slice(flags);
        let o = trident(&args);
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        assert!(out.lines().any(|l| l.starts_with("plan beside this run") && l.contains("ms")), "{out}");
        for stage in 0..stages {
            let l = out
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("stage {stage}: memory per rank")))
                .unwrap_or_else(|| panic!("stage {stage} in:\n{out}"));
            assert!(l.contains("(+0.0%)"), "{l}");
        }
    }
}

#[test]
fn train_dry_run_plans_the_interleaved_schedule_in_the_runs_precision() {
    let o = trident(&[
        "train",
        "--device",
        "cpu",
        "--model",
        "nano",
        "--num-layers",
        "4",
        "--world-size",
        "2",
        "--pipeline-model-parallel-size",
        "2",
        "--num-layers-per-virtual-pipeline-stage",
        "1",
        "--micro-batch-size",
        "2",
        "--global-batch-size",
        "8",
        "--bf16",
        "--dry-run",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("timed here (bf16;") && out.contains("interleaved 1F1B step"), "{out}");
    assert!(out.contains("stage 1: forward") && !out.contains(" iterations in "), "{out}");
}

#[test]
fn a_calibrated_search_times_every_layout_and_ranks_by_the_simulated_step() {
    // Two rank threads of the nano model: each layout's real ops timed, its step simulated,
    // the table in the order of that simulated iteration.
    let o = trident(&[
        "plan",
        "--calibrate",
        "--model",
        "nano",
        "--gpus-per-node",
        "2",
        "--search",
        "--no-plots",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let said = out.lines().find(|l| l.starts_with("each of the ")).unwrap_or_else(|| panic!("{out}"));
    let timed: usize = said["each of the ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(timed >= 10 && said.contains("timed here"), "{said}");
    // The iteration column (the fourth field and its unit) of ranks 1..=10, in order.
    let iters: Vec<f64> = out
        .lines()
        .filter(|l| {
            l.trim_start()
                .split(' ')
                .next()
                .is_some_and(|r| r.parse::<usize>().is_ok_and(|r| (1..=10).contains(&r)))
        })
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let at = f.iter().position(|w| *w == "ms" || *w == "us")?;
            let v: f64 = f[at - 1].parse().ok()?;
            Some(if f[at] == "ms" { v * 1e-3 } else { v * 1e-6 })
        })
        .collect();
    assert_eq!(iters.len(), 10, "{out}");
    assert!(
        iters.windows(2).all(|w| w[0] <= w[1] * 1.0005),
        "not ranked by the simulated step: {iters:?}\n{out}"
    );
}

#[test]
fn calibrating_a_model_this_machine_cannot_hold_is_refused_before_it_runs() {
    let o = trident(&["plan", "--calibrate", "--model", "gpt3-175b", "--gpus-per-node", "2", "--no-plots"]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("--calibrate runs gpt3-175b on this machine") && out.contains("optimizer state"),
        "{out}"
    );
    // A model this machine holds, but not once per rank on 64 ranks: the trainer's own count
    // of its largest rank refuses the layout before its ops run.
    let o = trident(&[
        "plan",
        "--calibrate",
        "--num-layers",
        "24",
        "--hidden-size",
        "1536",
        "--num-attention-heads",
        "12",
        "--gpus-per-node",
        "64",
        "--no-plots",
    ]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("the trainer needs") && out.contains("on its largest rank"), "{out}");
}

#[test]
fn bad_sizes_and_figures_are_refused_naming_the_flag() {
    for (args, flag) in [
        (&["--reserve-gib=-5"][..], "--reserve-gib"),
        (&["--reserve-gib", "nan"], "--reserve-gib"),
        (&["--train-tokens", "inf"], "--train-tokens"),
        (&["--amortize-years", "0"], "--amortize-years"),
        (&["--global-batch-size", "0"], "--global-batch-size"),
        (&["--micro-batch-size", "18446744073709551615"], "--micro-batch-size"),
        (&["--vocab-size", "18446744073709551615"], "--vocab-size"),
        (&["--nodes", "18446744073709551615"], "--nodes"),
        (&["--nodes", "-1"], "--nodes"),
        (&["--nodes", "4096", "--gpus-per-node", "8192"], "--nodes"),
        (&["--reserve-gib", "inf"], "--reserve-gib"),
        (&["--calibrate", "--gpus-per-node", "100000"], "--gpus-per-node 100000"),
        (&["--price-per-gpu-hour=-2"], "--price-per-gpu-hour"),
        (&["--node-price", "dgx=-200000"], "--node-price"),
        (&["--node-price", "dgx=nan"], "--node-price"),
        (&["--seq-length", "0"], "--seq-length"),
        (&["--hidden-size", "99999999999"], "--hidden-size"),
        (&["--num-layers-per-virtual-pipeline-stage", "0"], "--num-layers-per-virtual-pipeline-stage"),
        (
            &["--tensor-model-parallel-size", "16777216", "--pipeline-model-parallel-size", "16777216"],
            "--tensor-model-parallel-size 16777216 x --pipeline-model-parallel-size 16777216",
        ),
        (
            &["--global-batch-size", "16777216", "--pipeline-model-parallel-size", "4"],
            "--global-batch-size 16777216",
        ),
    ] {
        let mut all = vec!["plan", "--model", "gpt2-124m"];
        all.extend_from_slice(args);
        let o = trident(&all);
        let t = text(&o);
        assert!(!o.status.success(), "{args:?} was accepted:\n{t}");
        assert!(t.contains(flag), "{args:?}: the refusal does not name {flag}:\n{t}");
        assert!(!t.contains("panicked"), "{args:?} panicked:\n{t}");
    }
}

#[test]
fn a_hardware_file_with_a_negative_peak_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hw.toml");
    std::fs::write(&file, "[[gpu]]\nname = \"a100-80gb\"\nbf16_tflops = -312.0\n").unwrap();
    let o = trident(&["plan", "--model", "gpt2-124m", "--hardware", file.to_str().unwrap()]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("bf16_tflops"), "{t}");
}

#[test]
fn hardware_files_with_figures_out_of_range_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (entry, field) in [
        ("[[gpu]]\nname = \"a100-80gb\"\nmemory_gib = nan\n", "memory_gib"),
        ("[[gpu]]\nname = \"a100-80gb\"\ngemm_efficiency = -0.5\n", "gemm_efficiency"),
        ("[[gpu]]\nname = \"a100-80gb\"\ngpu_link = \"nvlink9\"\n", "gpu_link"),
        ("[[link]]\nname = \"ib-hdr\"\ngb_s = inf\n", "gb_s"),
        ("[[link]]\nname = \"ib-hdr\"\nlatency_us = -3.0\n", "latency_us"),
    ] {
        let file = dir.path().join("hw.toml");
        std::fs::write(&file, entry).unwrap();
        let o =
            trident(&["plan", "--model", "gpt2-124m", "--no-plots", "--hardware", file.to_str().unwrap()]);
        let t = text(&o);
        assert!(!o.status.success() && t.contains(field) && t.contains("hw.toml"), "{entry}: {t}");
    }
}

/// A 2021-era stack searched as it was: sequence parallelism, the distributed optimizer and
/// interleaving held off, recomputation held full; no layout of the table has them.
#[test]
fn search_holds_the_settings_it_is_told_to() {
    let o = trident(&[
        "plan",
        "--model",
        "megatron-145b",
        "--nodes",
        "192",
        "--fp16",
        "--unfused-attention",
        "--recompute-granularity",
        "full",
        "--no-sequence-parallel",
        "--no-distributed-optimizer",
        "--no-interleaving",
        "--search",
        "--top",
        "20",
        "--no-plots",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    // The table's rows: a rank, then the layout.
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| {
            l.split_whitespace().next().is_some_and(|w| w.parse::<usize>().is_ok()) && l.contains(" pp")
        })
        .collect();
    assert!(rows.len() >= 10, "{out}");
    for row in rows {
        assert!(row.contains(" full "), "{row}");
        assert!(!row.contains(" sp ") && !row.contains(" zero1") && !row.contains(" v"), "{row}");
    }
    assert!(!out.contains("other sequence parallelism") && !out.contains("other ZeRO-1"), "{out}");
    assert!(!out.contains("other interleaving") && !out.contains("other recomputation"), "{out}");
    assert!(out.contains("other tensor parallelism"), "{out}");
    let o = trident(&["plan", "--model", "gpt2-124m", "--sequence-parallel", "--no-sequence-parallel"]);
    assert!(!o.status.success() && text(&o).contains("--no-sequence-parallel"), "{}", text(&o));
}

/// The plan prints both FLOP counts: Megatron-LM's model FLOPs and the hardware FLOPs with
/// recomputation, which full recomputation makes larger by one forward of the layers.
#[test]
fn the_plan_prints_model_and_hardware_flops() {
    let o = trident(&[
        "plan",
        "--model",
        "gpt3-175b",
        "--nodes",
        "128",
        "--bf16",
        "--tensor-model-parallel-size",
        "8",
        "--pipeline-model-parallel-size",
        "16",
        "--recompute-granularity",
        "full",
        "--no-plots",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("of model FLOPs (Megatron-LM's count)") && out.contains("of hardware FLOPs"),
        "{out}"
    );
    assert!(out.contains("HFU"), "{out}");
}

/// `trident train` takes Megatron-LM's overlap flags where the trainer overlaps, refuses the
/// others naming them, and its dry run says that the DP buckets overlap the backward.
#[test]
fn train_takes_the_overlap_it_does_and_refuses_the_rest() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--device",
            "cpu",
            "--model",
            "nano",
            "--world-size",
            "2",
            "--micro-batch-size",
            "2",
            "--global-batch-size",
            "8",
            "--dry-run",
        ];
        args.extend_from_slice(extra);
        trident(&args)
    };
    for (flags, needle) in [
        (&["--overlap-param-gather"][..], "--overlap-param-gather"),
        (&["--tp-comm-overlap"], "--tp-comm-overlap"),
        (&["--no-overlap-p2p-communication"], "--no-overlap-p2p-communication"),
        (
            &["--overlap-grad-reduce", "--use-distributed-optimizer"],
            "--overlap-grad-reduce with --use-distributed-optimizer",
        ),
    ] {
        let o = run(flags);
        let t = text(&o);
        assert!(!o.status.success() && t.contains(needle), "{flags:?}: {t}");
    }
    let o = run(&["--overlap-grad-reduce"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("overlapping the rest of the backward") && t.contains("--overlap-grad-reduce"), "{t}");
}

/// `--launch-blocking` (a run under `CUDA_LAUNCH_BLOCKING=1`) prints the GPU's idle between
/// kernels as a component of the step, and the step is slower by more than it; without the
/// flag there is no such line.
#[test]
fn launch_blocking_adds_the_idle_between_kernels() {
    let args = [
        "plan",
        "--cluster",
        "jean-zay-a100",
        "--nodes",
        "48",
        "--num-layers",
        "72",
        "--hidden-size",
        "14336",
        "--num-attention-heads",
        "64",
        "--seq-length",
        "2048",
        "--global-batch-size",
        "2048",
        "--micro-batch-size",
        "1",
        "--tensor-model-parallel-size",
        "8",
        "--pipeline-model-parallel-size",
        "12",
        "--recompute-granularity",
        "full",
        "--fp16",
        "--no-plots",
        "--json",
    ];
    let run = |extra: &[&str]| {
        let o = trident(&[&args[..], extra].concat());
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["plans"][0]["time"].clone()
    };
    let (free, blocking) = (run(&[]), run(&["--launch-blocking"]));
    assert_eq!(free["launch_idle"].as_f64(), Some(0.0));
    let idle = blocking["launch_idle"].as_f64().unwrap();
    assert!(idle > 1.0, "{blocking}");
    assert!(blocking["total"].as_f64().unwrap() - free["total"].as_f64().unwrap() > idle);
    let o = trident(&[&args[..args.len() - 1], &["--launch-blocking"]].concat());
    assert!(text(&o).contains("launch idle"), "{}", text(&o));
    let o = trident(&args[..args.len() - 1]);
    assert!(!text(&o).contains("launch idle"), "{}", text(&o));
}
