//! The files llm.c's `train_gpt2` reads from its working directory, written by Trident: the
//! model (`gpt2_124M.bin`, here a small GPT-2 with Trident's seeded initialisation), the
//! training and validation token shards at the paths it looks for first
//! (`dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin`), and a tokenizer
//! (`gpt2_tokenizer.bin`) for the byte-level vocabulary, so that the text llm.c samples
//! decodes. The text is the built-in addition task written out as ASCII lines.

use std::path::{Path, PathBuf};

use super::LlmcError;
use crate::checkpoint::{write_llmc_model, CheckpointError};
use crate::model::{init::gpt2_init, GptConfig, ParamLayout};
use trident_data::addition::ADDITION_ALPHABET;
use trident_data::{write_llmc_tokenizer, write_shard, AdditionTask, Split};

/// The byte-level vocabulary: one token per byte value.
pub const BYTE_VOCAB: usize = 256;

/// What to write: the model's shape and seed, and how many addition problems make the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkdirSpec {
    /// The model's shape.
    pub config: GptConfig,
    /// Seeds the initialisation and the text.
    pub seed: u64,
    /// Addition problems in the training text.
    pub train_problems: usize,
    /// Addition problems in the validation text.
    pub val_problems: usize,
}

impl Default for WorkdirSpec {
    /// 3 layers, 128 wide, 4 heads, 128 positions, the 256 byte tokens padded to 384 (so the
    /// padded logits are exercised); 400 training problems (5,200 tokens: 20 batches of
    /// 4 x 64, so llm.c's 41 steps run through two reshuffles) and 160 held out (2,080 tokens).
    fn default() -> Self {
        Self {
            config: GptConfig {
                max_seq_len: 128,
                vocab_size: BYTE_VOCAB,
                padded_vocab_size: 384,
                num_layers: 3,
                num_heads: 4,
                channels: 128,
            },
            seed: 1234,
            train_problems: 400,
            val_problems: 160,
        }
    }
}

/// The paths written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workdir {
    /// llm.c's model file (`gpt2_124M.bin`).
    pub model: PathBuf,
    /// llm.c's tokenizer file.
    pub tokenizer: PathBuf,
    /// The training token shard.
    pub train: PathBuf,
    /// The validation token shard.
    pub val: PathBuf,
}

impl Workdir {
    /// The paths under `dir`, where llm.c's `train_gpt2.c` looks for them.
    pub fn in_dir(dir: &Path) -> Self {
        let data = dir.join("dev/data/tinyshakespeare");
        Self {
            model: dir.join("gpt2_124M.bin"),
            tokenizer: dir.join("gpt2_tokenizer.bin"),
            train: data.join("tiny_shakespeare_train.bin"),
            val: data.join("tiny_shakespeare_val.bin"),
        }
    }
}

/// Writes the four files into `dir` (created if missing); the same spec always gives the same
/// bytes.
pub fn write_workdir(dir: &Path, spec: &WorkdirSpec) -> Result<Workdir, LlmcError> {
    if spec.config.vocab_size != BYTE_VOCAB {
        return Err(LlmcError::Vocabulary(spec.config.vocab_size));
    }
    spec.config.validate().map_err(|source| CheckpointError::Config { path: dir.into(), cause: source })?;
    let files = Workdir::in_dir(dir);
    let data_dir = files.train.parent().expect("the shards sit in a directory");
    std::fs::create_dir_all(data_dir)
        .map_err(|source| LlmcError::Io { path: data_dir.into(), cause: source })?;

    write_llmc_model(&files.model, &spec.config, &gpt2_init(&ParamLayout::new(spec.config), spec.seed))?;
    let task = AdditionTask::new(3)?;
    let text = |split, problems| -> Vec<u16> {
        task.generate(split, problems, spec.seed)
            .iter()
            .map(|&t| u16::from(ADDITION_ALPHABET[t as usize]))
            .collect()
    };
    write_shard(&files.train, &text(Split::Train, spec.train_problems))?;
    write_shard(&files.val, &text(Split::Validation, spec.val_problems))?;
    let bytes: Vec<Vec<u8>> = (0..=u8::MAX).map(|b| vec![b]).collect();
    write_llmc_tokenizer(&files.tokenizer, &bytes, u32::from(b'\n'))?;
    Ok(files)
}
