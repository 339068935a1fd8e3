use clap::Parser;

use super::{run, Cli};

fn train(extra: &[&str]) -> anyhow::Result<()> {
    let mut argv = vec!["trident", "train", "--device", "cpu", "--micro-batch-size", "2"];
    if !extra.contains(&"--train-iters") {
        argv.extend(["--train-iters", "2"]);
    }
    argv.extend_from_slice(extra);
    run(Cli::try_parse_from(argv)?).map(|_| ())
}

const SMALL: [&str; 8] =
    ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "32"];

#[test]
fn unknown_flags_are_refused() {
    let err = Cli::try_parse_from(["trident", "train", "--num-layer", "2"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
}

#[test]
fn bad_model_shapes_and_data_are_refused() {
    let err = train(&["--hidden-size", "64", "--num-attention-heads", "3"]).unwrap_err();
    assert!(format!("{err:#}").contains("does not divide"), "{err:#}");
    let err = train(&["--seq-length", "512"]).unwrap_err();
    assert!(format!("{err:#}").contains("longer than the model's 256 positions"), "{err:#}");
    let err = train(&[&SMALL[..], &["--global-batch-size", "3"]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("not divisible by --micro-batch-size 2"), "{err:#}");
    let err = train(&["--data-order", "llmc"]).unwrap_err();
    assert!(format!("{err:#}").contains("one problem per sequence"), "{err:#}");

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let err = train(&[&SMALL[..], &["--data", missing.to_str().unwrap()]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("missing.txt"), "{err:#}");
    let corrupt = dir.path().join("corrupt.bin");
    std::fs::write(&corrupt, b"definitely not an llm.c shard").unwrap();
    let err = train(&[&SMALL[..], &["--data", corrupt.to_str().unwrap()]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("corrupt.bin"), "{err:#}");
}

#[test]
fn train_saves_a_checkpoint_that_sample_and_resume_read() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ck");
    let save = save.to_str().unwrap();
    train(&[&SMALL[..], &["--save", save, "--global-batch-size", "4"]].concat()).unwrap();
    assert!(dir.path().join("ck/step_00000002/trainer.json").is_file());
    // Resume to iteration 3 from the saved one.
    train(
        &[&SMALL[..], &["--load", save, "--save", save, "--train-iters", "3", "--global-batch-size", "4"]]
            .concat(),
    )
    .unwrap();
    assert!(dir.path().join("ck/step_00000003/trainer.json").is_file());
    let argv = [
        "trident",
        "sample",
        "--load",
        save,
        "--device",
        "cpu",
        "--max-new-tokens",
        "4",
        "--num-problems",
        "3",
    ];
    run(Cli::try_parse_from(argv).unwrap()).unwrap();
}

#[test]
fn launch_needs_a_command_and_passes_exit_codes_through() {
    let err = Cli::try_parse_from(["trident", "launch", "--nproc-per-node", "2"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    let ok = ["trident", "launch", "--nproc-per-node", "2", "--", "sh", "-c", "test -n \"$RANK\""];
    assert_eq!(run(Cli::try_parse_from(ok).unwrap()).unwrap(), 0);
    let fail = ["trident", "launch", "--nproc-per-node", "2", "--", "sh", "-c", "exit $((RANK + 3))"];
    let code = run(Cli::try_parse_from(fail).unwrap()).unwrap();
    assert!(code == 3 || code == 4, "exit code {code}");
}

#[test]
fn bench_collectives_runs_in_process_and_refuses_unknown_ops() {
    let argv = ["trident", "bench", "collectives", "--transport", "inproc", "--world-size", "2"];
    let small = ["--min-bytes", "4096", "--max-bytes", "8192", "--iters", "3"];
    assert_eq!(run(Cli::try_parse_from([&argv[..], &small[..]].concat()).unwrap()).unwrap(), 0);
    let bad = [&argv[..], &["--op", "all_to_all"]].concat();
    let err = run(Cli::try_parse_from(bad).unwrap()).unwrap_err();
    assert!(format!("{err:#}").contains("unknown collective"), "{err:#}");
}

#[test]
fn bench_collectives_on_emu_predicts_writes_the_table_and_refuses_bad_flags() {
    let base = ["trident", "bench", "collectives", "--device", "emu", "--gpu", "h100", "--world-size", "2"];
    let small = ["--min-bytes", "64", "--max-bytes", "512", "--emulate-max-bytes", "128"];
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table.tsv");
    let write = ["--write-table", table.to_str().unwrap()];
    assert_eq!(run(Cli::try_parse_from([&base[..], &small[..], &write[..]].concat()).unwrap()).unwrap(), 0);
    // The table the bench writes for h100 is the one the runtime reads.
    assert_eq!(std::fs::read_to_string(&table).unwrap(), trident::launch::ALL_REDUCE_TABLE_TSV);
    let emu = ["trident", "bench", "collectives", "--device", "emu"];
    let refused: [(&[&str], &str); 5] = [
        (&["--world-size", "1"], "--world-size 1"),
        (&["--world-size", "9"], "--world-size 9"),
        (&["--min-bytes", "1024", "--max-bytes", "512"], "--max-bytes 512: less than --min-bytes 1024"),
        (&["--gpu", "no-such-gpu"], "--gpu no-such-gpu"),
        (&["--max-bytes", "1099511627776000"], "--max-bytes 1099511627776000: the kernels take at most"),
    ];
    for (extra, want) in refused {
        let err = run(Cli::try_parse_from([&emu[..], extra].concat()).unwrap()).unwrap_err();
        assert!(format!("{err:#}").contains(want), "{extra:?}: {err:#}");
    }
    let cuda = ["trident", "bench", "collectives", "--device", "cuda"];
    let err = run(Cli::try_parse_from(cuda).unwrap()).unwrap_err();
    assert!(format!("{err:#}").contains("--device cuda: the runtime does not map"), "{err:#}");
    // A size past u64 is refused by the parser, naming the flag.
    let err =
        Cli::try_parse_from([&base[..], &["--max-bytes", "99999999999999999999999"]].concat()).unwrap_err();
    assert!(err.to_string().contains("--max-bytes"), "{err}");
}

#[test]
fn parallel_flags_are_validated_with_megatron_messages() {
    let cases: [(&[&str], &str); 4] = [
        (&["--world-size", "6", "--tensor-model-parallel-size", "4"], "not a multiple of 4"),
        (
            &["--world-size", "4", "--tensor-model-parallel-size", "4", "--num-attention-heads", "2"],
            "heads 2 is not divisible",
        ),
        (
            &["--world-size", "2", "--pipeline-model-parallel-size", "2", "--num-layers", "3"],
            "layers 3 is not divisible",
        ),
        (
            &["--world-size", "2", "--global-batch-size", "6"],
            "not divisible by --micro-batch-size 2 x data-parallel size 2",
        ),
    ];
    for (flags, message) in cases {
        let shape = ["--hidden-size", "32", "--seq-length", "16"];
        let err = train(&[&shape[..], flags].concat()).unwrap_err();
        assert!(format!("{err:#}").contains(message), "{flags:?}: {err:#}");
    }
    let sp = [
        "--hidden-size",
        "32",
        "--seq-length",
        "15",
        "--world-size",
        "2",
        "--tensor-model-parallel-size",
        "2",
    ];
    let err = train(&[&sp[..], &["--sequence-parallel"]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("--seq-length 15 is not divisible"), "{err:#}");
    let err = Cli::try_parse_from(["trident", "train", "--recompute-granularity", "some"]).unwrap_err();
    assert!(err.to_string().contains("full or selective"), "{err}");
}

#[test]
fn train_runs_tensor_pipeline_and_data_parallel_as_threads() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("m.jsonl");
    let flags = [
        "--world-size",
        "8",
        "--tensor-model-parallel-size",
        "2",
        "--pipeline-model-parallel-size",
        "2",
        "--global-batch-size",
        "8",
        "--use-distributed-optimizer",
        "--recompute-granularity",
        "selective",
        "--sequence-parallel",
        "--metrics-file",
        metrics.to_str().unwrap(),
    ];
    let small =
        ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16"];
    train(&[&small[..], &flags[..]].concat()).unwrap();
    let lines = std::fs::read_to_string(&metrics).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
}

#[test]
fn an_llmc_model_file_trains_like_the_reference_run() {
    let dir = tempfile::tempdir().unwrap();
    let files = trident::llmc::write_workdir(dir.path(), &trident::llmc::WorkdirSpec::default()).unwrap();
    let data = format!("{},{}", files.train.display(), files.val.display());
    let metrics = dir.path().join("metrics.jsonl");
    let model = files.model.to_str().unwrap();
    let argv = |load: &str, extra: &[&str]| {
        let mut argv = vec!["trident", "train", "--device", "cpu", "--load", load, "--data", &data];
        argv.extend_from_slice(&[
            "--tokenizer",
            "bytes",
            "--data-order",
            "llmc",
            "--micro-batch-size",
            "4",
            "--seq-length",
            "64",
            "--lr",
            "1e-4",
            "--lr-decay-style",
            "constant",
            "--weight-decay",
            "0",
            "--clip-grad",
            "0",
            "--adam-beta2",
            "0.999",
            "--train-iters",
            "3",
        ]);
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap()
    };
    run(argv(model, &["--metrics-file", metrics.to_str().unwrap()])).unwrap();
    let cli_losses: Vec<f64> = std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap())
        .collect();
    let reference = trident::llmc::train_like_llmc(&files, &trident_runtime::Device::Cpu).unwrap();
    assert_eq!(cli_losses.len(), 3);
    for (step, (&cli, &lib)) in cli_losses.iter().zip(&reference.train).enumerate() {
        let rel = (cli - lib as f64).abs() / lib as f64;
        assert!(rel < 1e-6, "step {step}: the CLI with llm.c's flags gives {cli}, the reference run {lib}");
    }

    let err = run(argv(model, &["--num-layers", "2"])).unwrap_err();
    assert!(format!("{err:#}").contains("--num-layers 2 disagrees with the llm.c model"), "{err:#}");
    let shard = files.train.to_str().unwrap();
    let err = run(argv(shard, &[])).unwrap_err();
    assert!(format!("{err:#}").contains("not an llm.c model"), "{err:#}");
}

#[test]
fn builtin_data_trains_on_one_problem_per_sequence_by_default() {
    use super::common::Preset;
    use super::train::{batch_shape, DataDefaults};
    use trident_data::AdditionTask;
    let args = |flags: &[&str]| {
        let argv = [&["trident", "train"][..], flags].concat();
        match Cli::try_parse_from(argv).unwrap().command {
            super::Command::Train(args) => args,
            other => panic!("parsed {other:?}"),
        }
    };
    let three = AdditionTask::new(3).ok();
    let two = AdditionTask::new(2).ok();
    // One problem line per sequence, about 2,048 tokens per micro-batch.
    assert_eq!(batch_shape(&args(&[]), three, 256).unwrap(), (13, 158));
    assert_eq!(batch_shape(&args(&[]), two, 256).unwrap(), (10, 205));
    assert_eq!(batch_shape(&args(&[]), three, 8).unwrap(), (8, 256));
    // Text and shards: the model's positions, 8 sequences.
    assert_eq!(batch_shape(&args(&[]), None, 256).unwrap(), (256, 8));
    // The flags win everywhere.
    let flags = args(&["--seq-length", "64", "--micro-batch-size", "3"]);
    assert_eq!(batch_shape(&flags, three, 256).unwrap(), (64, 3));
    assert_eq!(batch_shape(&flags, None, 256).unwrap(), (64, 3));
    let err = batch_shape(&args(&["--seq-length", "300"]), three, 256).unwrap_err();
    assert!(err.to_string().contains("longer than the model's 256 positions"), "{err}");

    // A smaller model, a larger step and more of them on the built-in task only.
    let builtin = DataDefaults::of(three);
    assert_eq!((builtin.model, builtin.train_iters), (Preset::Nano, 2000));
    let text = DataDefaults::of(None);
    assert_eq!((text.model, text.train_iters), (Preset::Tiny, 200));
    assert!(builtin.lr > text.lr && text.lr == 1e-3, "{builtin:?} {text:?}");
    let flags = args(&["--model", "tiny", "--lr", "5e-4", "--train-iters", "7"]);
    assert_eq!((flags.model, flags.lr, flags.train_iters), (Some(Preset::Tiny), Some(5e-4), Some(7)));
}

#[test]
fn parallel_runs_save_checkpoints_that_other_grids_resume_and_sample_reads() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ck");
    let save = save.to_str().unwrap();
    let metrics = dir.path().join("m.jsonl");
    let metrics = metrics.to_str().unwrap();
    let small =
        ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16"];
    let common =
        [&small[..], &["--global-batch-size", "8", "--save", save, "--metrics-file", metrics]].concat();
    let tp2_dp2 = ["--world-size", "4", "--tensor-model-parallel-size", "2", "--eval-interval", "1"];
    train(&[&common[..], &tp2_dp2[..], &["--train-iters", "2"]].concat()).unwrap();
    assert!(dir.path().join("ck/step_00000002/trainer.json").is_file());
    assert!(dir.path().join("ck/loss.png").is_file(), "the loss picture is drawn beside the checkpoints");
    let lines = std::fs::read_to_string(metrics).unwrap();
    assert!(lines.lines().all(|l| l.contains("\"val_loss\":")) && lines.lines().count() == 2, "{lines}");
    assert!(!lines.contains("\"val_loss\":null"), "every iteration evaluated: {lines}");

    // Resumed on another grid (PP 2 with ZeRO-1 over DP 2), and on one rank.
    let pp2 = ["--world-size", "4", "--pipeline-model-parallel-size", "2", "--use-distributed-optimizer"];
    train(&[&common[..], &pp2[..], &["--load", save, "--train-iters", "3"]].concat()).unwrap();
    assert!(dir.path().join("ck/step_00000003/trainer.json").is_file());
    train(&[&common[..], &["--load", save, "--train-iters", "4"]].concat()).unwrap();
    assert!(dir.path().join("ck/step_00000004/trainer.json").is_file());
    let lines = std::fs::read_to_string(metrics).unwrap();
    let iters: Vec<u64> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["iter"].as_u64().unwrap())
        .collect();
    assert_eq!(iters, [1, 2, 3, 4], "the metrics file continues across resumes: {lines}");
    let argv = [
        "trident",
        "sample",
        "--load",
        save,
        "--device",
        "cpu",
        "--max-new-tokens",
        "4",
        "--num-problems",
        "2",
    ];
    run(Cli::try_parse_from(argv).unwrap()).unwrap();
}

/// The `loss` of each line of a metrics file.
fn metric_losses(path: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"].as_f64().unwrap())
        .collect()
}

#[test]
fn exit_interval_saves_and_stops_and_the_resumed_run_is_exact() {
    let small =
        ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16"];
    for grid in [&[][..], &["--world-size", "2", "--tensor-model-parallel-size", "2"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let (save, m1, m2) =
            (dir.path().join("ck"), dir.path().join("whole.jsonl"), dir.path().join("parts.jsonl"));
        let (save, m1, m2) = (save.to_str().unwrap(), m1.to_str().unwrap(), m2.to_str().unwrap());
        let base = [&small[..], grid, &["--global-batch-size", "4"]].concat();
        train(&[&base[..], &["--train-iters", "5", "--metrics-file", m1]].concat()).unwrap();
        let stopping = [&base[..], &["--train-iters", "5", "--save", save, "--metrics-file", m2]].concat();
        train(&[&stopping[..], &["--exit-interval", "2"]].concat()).unwrap();
        let ck = dir.path().join("ck");
        assert!(ck.join("step_00000002/trainer.json").is_file(), "{grid:?}: saved before stopping");
        assert!(!ck.join("step_00000003").exists(), "{grid:?}: stopped after iteration 2");
        // Resumed, it stops again at 4, then runs to the end.
        for _ in 0..2 {
            train(&[&stopping[..], &["--load", save, "--exit-interval", "2"]].concat()).unwrap();
        }
        assert!(
            ck.join("step_00000004/trainer.json").is_file()
                && ck.join("step_00000005/trainer.json").is_file()
        );
        assert_eq!(
            metric_losses(dir.path().join("parts.jsonl").as_path()),
            metric_losses(dir.path().join("whole.jsonl").as_path()),
            "{grid:?}"
        );
    }
    let err = Cli::try_parse_from(["trident", "train", "--exit-interval", "0"]).unwrap_err();
    assert!(err.to_string().contains("--exit-interval"), "{err}");
}

#[test]
fn sequential_data_order_is_accepted_and_resumes() {
    let small =
        ["--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16"];
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("t.txt");
    std::fs::write(&text, "the quick brown fox jumps over the lazy dog. ".repeat(80)).unwrap();
    let save = dir.path().join("ck");
    let flags = [
        &small[..],
        &["--data", text.to_str().unwrap(), "--data-order", "sequential", "--save", save.to_str().unwrap()],
    ]
    .concat();
    train(&flags).unwrap();
    train(&[&flags[..], &["--load", save.to_str().unwrap(), "--train-iters", "3"]].concat()).unwrap();
    let err = train(
        &[&flags[..], &["--load", save.to_str().unwrap(), "--train-iters", "4"]].concat()[..]
            .iter()
            .map(|f| if *f == "sequential" { "trident" } else { f })
            .collect::<Vec<_>>(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("--data-order sequential"), "{err:#}");
}

#[test]
fn bad_flag_values_are_refused_at_parse_time_naming_the_flag() {
    let cases: [(&[&str], &str); 14] = [
        (&["--lr=-1"], "--lr"),
        (&["--lr", "NaN"], "--lr"),
        (&["--lr", "inf"], "--lr"),
        (&["--lr", "0"], "--lr"),
        (&["--adam-beta1", "1.0"], "--adam-beta1"),
        (&["--adam-beta2", "2.0"], "--adam-beta2"),
        (&["--adam-eps", "0"], "--adam-eps"),
        (&["--clip-grad=-1"], "--clip-grad"),
        (&["--clip-grad", "-1"], "--clip-grad"),
        (&["--weight-decay", "nan"], "--weight-decay"),
        (&["--min-lr=-0.5"], "--min-lr"),
        (&["--micro-batch-size", "0"], "--micro-batch-size"),
        (&["--max-position-embeddings", "0"], "--max-position-embeddings"),
        (&["--tensor-model-parallel-size", "0"], "--tensor-model-parallel-size"),
    ];
    for (flags, flag) in cases {
        let argv = [&["trident", "train"][..], flags].concat();
        let err = Cli::try_parse_from(&argv).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{flags:?}: {err}");
        assert!(err.to_string().contains(&format!("'{flag} <")), "{flags:?}: {err}");
    }
    let err = Cli::try_parse_from(["trident", "sample", "--load", "x", "--temperature", "-1"]).unwrap_err();
    assert!(err.to_string().contains("--temperature"), "{err}");
    // In range, they parse.
    let ok =
        ["trident", "train", "--lr", "3e-4", "--adam-beta2", "0.999", "--clip-grad", "0", "--min-lr", "0"];
    Cli::try_parse_from(ok).unwrap();
}

#[test]
fn flags_that_contradict_each_other_are_refused_before_training() {
    let err = train(&[&SMALL[..], &["--lr", "1e-3", "--min-lr", "2e-3"]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("--min-lr 0.002 is above the peak learning rate 0.001"), "{err:#}");
    // Against the default --lr too.
    let err = train(&[&SMALL[..], &["--min-lr", "1"]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("the default --lr"), "{err:#}");
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ck");
    train(&[&SMALL[..], &["--save", save.to_str().unwrap()]].concat()).unwrap();
    let err =
        train(&[&SMALL[..], &["--load", save.to_str().unwrap(), "--model", "tiny"]].concat()).unwrap_err();
    assert!(format!("{err:#}").contains("--model tiny and --load"), "{err:#}");
}

#[test]
fn an_unusable_save_path_fails_before_the_first_step() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let metrics = dir.path().join("m.jsonl");
    for (save, grid) in [
        (file.clone(), &[][..]),
        (file.join("ck"), &[][..]),
        (file.clone(), &["--world-size", "2", "--tensor-model-parallel-size", "2"][..]),
    ] {
        // The check must come before the first step: no metrics line may be written. (Without
        // it, the step runs, its metrics line is written, and the save fails after it.)
        let flags = ["--train-iters", "2", "--save", save.to_str().unwrap()];
        let flags = [&flags[..], &["--metrics-file", metrics.to_str().unwrap()], grid].concat();
        let err = train(&[&SMALL[..], &flags[..]].concat()).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains(&format!("--save {}", save.display())), "{msg}");
        assert!(msg.contains("pass a writable directory"), "{msg}");
        assert!(!metrics.exists(), "a step ran before the check");
    }
}

#[test]
fn zero_train_iters_with_save_writes_the_initial_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("ck");
    train(&[&SMALL[..], &["--train-iters", "0", "--save", save.to_str().unwrap()]].concat()).unwrap();
    let ck = trident::checkpoint::Checkpoint::<serde_json::Value>::load(&save.join("step_00000000")).unwrap();
    assert_eq!(ck.step, 0);
    assert!(ck.params.iter().any(|&p| p != 0.0));
}

#[test]
fn io_errors_name_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.bin");
    let err = train(&[&SMALL[..], &["--data", missing.to_str().unwrap()]].concat()).unwrap_err();
    let msg = format!("{err:#}");
    let cause = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
    let os_cause = "No such file or directory";
    assert_eq!(msg.matches(os_cause).count(), 1, "{msg} ({cause})");
    let err =
        train(&[&SMALL[..], &["--load", dir.path().join("nothing").to_str().unwrap()]].concat()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.matches(os_cause).count() <= 1, "{msg}");
}

#[test]
fn runs_larger_than_memory_are_refused_before_allocating() {
    // 12 x 2^40 x 64 parameters: petabytes, well past any machine; without the check the first
    // allocation aborts the process.
    let shape =
        ["--num-layers", "64", "--hidden-size", "1048576", "--num-attention-heads", "4", "--seq-length", "8"];
    let err = train(&shape).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("this run needs about") && msg.contains("GiB of memory"), "{msg}");
    assert!(msg.contains("is available (") && msg.contains("lower --hidden-size or --num-layers"), "{msg}");
    // Activations only: a small model with a batch that cannot fit.
    let batch =
        ["trident", "train", "--device", "cpu", "--micro-batch-size", "100000000", "--train-iters", "1"];
    let msg =
        format!("{:#}", run(Cli::try_parse_from([&batch[..], &SMALL[..]].concat()).unwrap()).unwrap_err());
    assert!(msg.contains("lower --micro-batch-size or --seq-length"), "{msg}");
    // On parallel runs, per rank, and the ranks of this process add up.
    let par = [&shape[..], &["--world-size", "2", "--tensor-model-parallel-size", "2"]].concat();
    let msg = format!("{:#}", train(&par).unwrap_err());
    assert!(msg.contains("2 ranks on this machine"), "{msg}");
    // Shapes whose sizes overflow are errors, not wraps or panics.
    let absurd = ["--num-layers", "1048576", "--hidden-size", "4294967296", "--num-attention-heads", "4"];
    let msg = format!("{:#}", train(&absurd).unwrap_err());
    assert!(msg.contains("more parameters than this machine can count"), "{msg}");
}

/// Losses of a metrics file agree within `tol` (relative) with the tail of `whole`'s.
fn assert_tail_close(what: &str, resumed: &[f64], whole: &[f64], tol: f64) {
    assert!(!resumed.is_empty() && resumed.len() <= whole.len(), "{what}: {resumed:?} vs {whole:?}");
    for (i, (a, b)) in resumed.iter().zip(&whole[whole.len() - resumed.len()..]).enumerate() {
        assert!((a - b).abs() <= tol * b.abs(), "{what}, resumed step {i}: {a} vs uninterrupted {b}");
    }
}

/// A TP 2 x PP 2 x DP 2 checkpoint resumes at TP 4, at TP 1 x PP 4 x DP 2 with ZeRO-1 and on one
/// rank (its vocabulary padded again for each before the shape is checked), and the TP 4 run's
/// own checkpoint resumes back at TP 2: each equal to its grid's uninterrupted run.
#[test]
fn checkpoints_grow_and_shrink_the_tensor_parallel_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let base = [
        "--num-layers",
        "4",
        "--hidden-size",
        "32",
        "--num-attention-heads",
        "4",
        "--seq-length",
        "16",
        "--global-batch-size",
        "8",
        "--lr-decay-style",
        "constant",
    ];
    let tp2_pp2_dp2 =
        ["--world-size", "8", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"];
    let (saved, tp4_saved) = (path("saved"), path("tp4"));
    train(&[&base[..], &tp2_pp2_dp2[..], &["--save", saved.as_str(), "--train-iters", "2"]].concat())
        .unwrap();
    let tp4 = ["--world-size", "4", "--tensor-model-parallel-size", "4"];
    let pp4_zero =
        ["--world-size", "8", "--pipeline-model-parallel-size", "4", "--use-distributed-optimizer"];
    let tp2 = ["--world-size", "2", "--tensor-model-parallel-size", "2"];
    // (what, the grid, --load, more flags, --train-iters)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, &'a [&'a str], &'a str);
    let cases: [Case; 4] = [
        ("TP 4", &tp4, saved.as_str(), &["--save", tp4_saved.as_str()], "3"),
        ("TP 1 x PP 4 x DP 2, ZeRO-1", &pp4_zero, saved.as_str(), &[], "3"),
        ("one rank", &[], saved.as_str(), &[], "3"),
        ("TP 2 from TP 4", &tp2, tp4_saved.as_str(), &[], "4"),
    ];
    for (i, (what, grid, load, extra, iters)) in cases.into_iter().enumerate() {
        let (whole, resumed) = (path(&format!("whole{i}.jsonl")), path(&format!("resumed{i}.jsonl")));
        let run = [&base[..], grid, &["--train-iters", iters]].concat();
        train(&[&run[..], &["--metrics-file", whole.as_str()]].concat()).unwrap();
        let resume = [&run[..], &["--load", load, "--metrics-file", resumed.as_str()], extra].concat();
        train(&resume).unwrap_or_else(|e| panic!("{what}: {e:#}"));
        let (whole, resumed) = (metric_losses(whole.as_ref()), metric_losses(resumed.as_ref()));
        assert_eq!(resumed.len(), 1, "{what}: one step after the checkpoint");
        assert_tail_close(what, &resumed, &whole, 1e-5);
    }
}

/// An llm.c model file whose vocabulary is padded to 384 (not a multiple of 256 or 512) starts
/// runs at TP 2 and TP 4 with the losses of the one-rank run.
#[test]
fn an_llmc_model_file_starts_runs_on_any_tensor_parallel_size() {
    let dir = tempfile::tempdir().unwrap();
    let spec = trident::llmc::WorkdirSpec {
        config: trident::model::GptConfig::new(64, 256, 2, 4, 32, 384).unwrap(),
        train_problems: 40,
        val_problems: 16,
        ..Default::default()
    };
    let files = trident::llmc::write_workdir(dir.path(), &spec).unwrap();
    let data = format!("{},{}", files.train.display(), files.val.display());
    let model = files.model.to_str().unwrap();
    let mut losses = Vec::new();
    for (i, grid) in [
        &[][..],
        &["--world-size", "2", "--tensor-model-parallel-size", "2"],
        &["--world-size", "4", "--tensor-model-parallel-size", "4"],
    ]
    .into_iter()
    .enumerate()
    {
        let metrics = dir.path().join(format!("m{i}.jsonl"));
        let flags = ["--load", model, "--data", &data, "--tokenizer", "bytes", "--seq-length", "32"];
        let m = ["--global-batch-size", "4", "--metrics-file", metrics.to_str().unwrap()];
        train(&[&flags[..], &m[..], grid].concat()).unwrap_or_else(|e| panic!("{grid:?}: {e:#}"));
        losses.push(metric_losses(&metrics));
    }
    assert_eq!(losses[0].len(), 2);
    assert_tail_close("TP 2", &losses[1], &losses[0], 1e-5);
    assert_tail_close("TP 4", &losses[2], &losses[0], 1e-5);
}

/// `--load` of a path that is not there says so; a damaged latest checkpoint names the intact
/// earlier one, to `train` and to `sample`; `--eval-iters 0` evaluates nothing.
#[test]
fn load_names_missing_paths_and_the_intact_earlier_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let msg =
        format!("{:#}", train(&[&SMALL[..], &["--load", missing.to_str().unwrap()]].concat()).unwrap_err());
    assert!(msg.contains("nowhere does not exist") && !msg.contains("holds no checkpoint"), "{msg}");

    let save = dir.path().join("ck");
    let metrics = dir.path().join("m.jsonl");
    let flags = ["--save", save.to_str().unwrap(), "--save-interval", "1", "--eval-iters", "0"];
    let m = ["--eval-interval", "1", "--metrics-file", metrics.to_str().unwrap()];
    train(&[&SMALL[..], &flags[..], &m[..]].concat()).unwrap();
    let lines = std::fs::read_to_string(&metrics).unwrap();
    let evaluated = lines
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["val_loss"].is_number())
        .count();
    assert_eq!(evaluated, 0, "--eval-iters 0 evaluates nothing: {lines}");

    // Step 2's model file damaged: step 1 is named as the one to resume.
    let model = save.join("step_00000002/model.safetensors");
    let mut bytes = std::fs::read(&model).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&model, bytes).unwrap();
    let msg =
        format!("{:#}", train(&[&SMALL[..], &["--load", save.to_str().unwrap()]].concat()).unwrap_err());
    let earlier = save.join("step_00000001");
    assert!(msg.contains(&format!("--load {} resumes from it", earlier.display())), "{msg}");
    // `trident sample --load` names it too.
    let argv = ["trident", "sample", "--load", save.to_str().unwrap(), "--device", "cpu"];
    let msg = format!("{:#}", run(Cli::try_parse_from(argv).unwrap()).unwrap_err());
    assert!(msg.contains(&format!("--load {} resumes from it", earlier.display())), "sample: {msg}");
}
