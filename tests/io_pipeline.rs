//! Data, checkpoints and model files working together: addition problems written as llm.c
//! shards, read back through `--data`, batched, checkpointed mid-epoch and resumed exactly.

use trident::checkpoint::{read_llmc_model, step_dir, write_llmc_model, AdamWMoments, Checkpoint};
use trident::data::{
    write_shard, AdditionTask, DataLoader, DataSpec, Split, SplitMix64, Tokenizer, TokenizerKind,
};
use trident::model::{GptConfig, ParamLayout};

/// Checks every complete `a+b=s\n` line inside a decoded window.
fn check_lines(task: &AdditionTask, text: &str) -> usize {
    let d = task.digits as usize;
    let mut checked = 0;
    // The first and last pieces may be cut by the window edges.
    let pieces: Vec<&str> = text.split('\n').collect();
    for line in &pieces[1..pieces.len() - 1] {
        let (a, rest) = line.split_once('+').expect("a plus sign");
        let (b, sum) = rest.split_once('=').expect("an equals sign");
        assert_eq!((a.len(), b.len(), sum.len()), (d, d, d + 1), "{line:?}");
        let sum: u64 = sum.chars().rev().collect::<String>().parse().unwrap();
        assert_eq!(a.parse::<u64>().unwrap() + b.parse::<u64>().unwrap(), sum, "{line:?}");
        checked += 1;
    }
    checked
}

#[test]
fn addition_shards_batch_checkpoint_and_resume() {
    let seed = 0x10_2024;
    let task = AdditionTask::new(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let train = task.generate(Split::Train, 3000, seed);
    let half = train.len() / 2;
    write_shard(&dir.path().join("add_train_000001.bin"), &train[..half]).unwrap();
    write_shard(&dir.path().join("add_train_000002.bin"), &train[half..]).unwrap();
    write_shard(&dir.path().join("add_val_000000.bin"), &task.generate(Split::Validation, 300, seed))
        .unwrap();

    let spec = DataSpec::parse(dir.path().to_str().unwrap(), Some(TokenizerKind::Addition)).unwrap();
    let data = spec.open(seed, 48).unwrap();
    assert_eq!(data.train.total_tokens(), train.len());
    assert_eq!(data.val.total_tokens(), 300 * task.line_len());
    let tok = Tokenizer::new(data.tokenizer).unwrap();

    let (b, t) = (4, 48);
    let mut loader = DataLoader::new(data.train.clone(), b, t, seed, true).unwrap();
    let mut lines = 0;
    for _ in 0..25 {
        let batch = loader.next_batch().unwrap();
        for row in 0..b {
            let inputs = &batch.inputs[row * t..(row + 1) * t];
            let targets = &batch.targets[row * t..(row + 1) * t];
            assert_eq!(&inputs[1..], &targets[..t - 1]);
            let mut window = inputs.to_vec();
            window.push(targets[t - 1]);
            lines += check_lines(&task, &tok.decode(&window));
        }
    }
    assert!(lines > 100, "only {lines} complete lines seen");

    // Checkpoint mid-epoch with the loader's position, then resume from disk.
    let config = GptConfig::new(t, task.vocab_size(), 2, 2, 16, 16).unwrap();
    let n = ParamLayout::new(config).len();
    let mut rng = SplitMix64::new(seed);
    let mut random = || (0..n).map(|_| rng.next_f32() - 0.5).collect::<Vec<f32>>();
    let ck = Checkpoint {
        config,
        step: 25,
        params: random(),
        optimizer: Some(AdamWMoments { m: random(), v: random() }),
        loader: Some(loader.state()),
        state: serde_json::json!({ "lr": 6e-4, "rng": SplitMix64::new(3) }),
    };
    let ck_dir = step_dir(&dir.path().join("out"), ck.step);
    ck.save(&ck_dir).unwrap();
    let back: Checkpoint = Checkpoint::load(&ck_dir).unwrap();
    assert_eq!(back, ck);

    let reopened = spec.open(seed, 48).unwrap();
    let mut resumed = DataLoader::new(reopened.train, b, t, 0, true).unwrap();
    resumed.restore(back.loader.unwrap()).unwrap();
    for i in 0..40 {
        assert_eq!(
            loader.next_batch().unwrap(),
            resumed.next_batch().unwrap(),
            "seed {seed}: batch {i} after resuming"
        );
    }

    // The same weights as an llm.c model file.
    let model = dir.path().join("model.bin");
    write_llmc_model(&model, &back.config, &back.params).unwrap();
    assert_eq!(read_llmc_model(&model).unwrap(), (config, ck.params));
}

#[test]
fn built_in_addition_data_scores_a_perfect_solver() {
    let data = DataSpec::parse("addition:4", None).unwrap().open(1, 64).unwrap();
    let task = data.addition.unwrap();
    assert_eq!(data.vocab_size(), 13);
    let tok = Tokenizer::new(data.tokenizer).unwrap();
    let acc = task.score(100, 9, |prompt| {
        let text = tok.decode(prompt);
        let (a, b) = text.trim_start_matches('\n').trim_end_matches('=').split_once('+').unwrap();
        let sum = a.parse::<u64>().unwrap() + b.parse::<u64>().unwrap();
        let digits: String = format!("{sum:05}").chars().rev().collect();
        tok.encode(&format!("{digits}\n")).unwrap()
    });
    assert_eq!((acc.correct, acc.total), (100, 100));
}
