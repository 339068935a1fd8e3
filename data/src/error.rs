//! [`DataError`]: what can go wrong while reading or generating training data.

use std::path::PathBuf;

/// Everything that can go wrong while reading or generating training data.
///
/// As in the checkpoint errors, an I/O `cause` is part of the message, not the `source()`, so
/// that a chain printed with `{:#}` says it once.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file could not be read.
    #[error("cannot read {path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A file that is not an llm.c token shard.
    #[error("{path} is not an llm.c token shard: magic number {found}, expected 20240520")]
    ShardMagic {
        /// The file.
        path: PathBuf,
        /// What the header holds.
        found: i32,
    },
    /// A token shard of an unsupported version.
    #[error("{path}: token shard version {found} is not supported (only version 1, u16 tokens)")]
    ShardVersion {
        /// The file.
        path: PathBuf,
        /// What the header holds.
        found: i32,
    },
    /// A token shard whose size differs from what its header says.
    #[error(
        "{path}: header says {header_tokens} tokens ({expected_bytes} bytes with the header) but \
         the file has {file_bytes} bytes; the shard is truncated or corrupt, regenerate it"
    )]
    ShardSize {
        /// The file.
        path: PathBuf,
        /// Tokens the header claims.
        header_tokens: u64,
        /// The file size those imply, header included.
        expected_bytes: u64,
        /// The file's size.
        file_bytes: u64,
    },
    /// A token id at or past the vocabulary size.
    #[error("{what}: token {token} at position {position} is outside the vocabulary of {vocab_size} tokens; was it written with another tokenizer?")]
    TokenOutOfRange {
        /// The data set or file.
        what: String,
        /// The token's position.
        position: usize,
        /// The id.
        token: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// The data cannot fill one sequence and its next-token target.
    #[error("{what} has {tokens} tokens, fewer than the {needed} needed for one sequence of {seq_len} tokens plus its target")]
    TooFewTokens {
        /// The data set, as its name reads.
        what: String,
        /// Its tokens.
        tokens: usize,
        /// Tokens one sequence and its target need (`seq_len + 1`).
        needed: usize,
        /// The sequence length, in tokens.
        seq_len: usize,
    },
    /// A directory without token shards.
    #[error("no llm.c token shards (*.bin) in {0}")]
    NoShards(PathBuf),
    /// Arguments that describe no valid data set or loader (sizes, ranks, files).
    #[error("{0}")]
    InvalidArgument(String),
    /// A saved loader state that cannot continue this loader.
    #[error("cannot resume the data loader: {0}")]
    BadState(String),
    /// A saved loader state made with another value of a setting that must stay the same.
    #[error("cannot resume the data loader: it was saved with {setting} {saved}, this run uses {now}")]
    ResumeMismatch {
        /// The setting: `"sequence length"` or `"data order"`.
        setting: &'static str,
        /// Its value when the state was saved.
        saved: String,
        /// Its value in this run.
        now: String,
    },
    /// A data specification that names no data set.
    #[error("data `{spec}`: {problem}")]
    InvalidSpec {
        /// The specification as given.
        spec: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A tokenizer was named for the addition task, which has its own vocabulary.
    #[error("the addition task has its own 13-token vocabulary and takes no other tokenizer")]
    AdditionTokenizer,
    /// The GPT-2 BPE tokenizer failed.
    #[error("the GPT-2 BPE tokenizer failed: {0}")]
    Bpe(String),
    /// What was asked for needs a feature Trident was built without.
    #[error("trident was built without its `{feature}` feature, which {what} needs; rebuild with `--features {feature}`")]
    MissingFeature {
        /// The Cargo feature.
        feature: &'static str,
        /// What needs it.
        what: &'static str,
    },
    /// Text with a character the tokenizer cannot encode.
    #[error(
        "cannot encode {text:?} with the {tokenizer} tokenizer: character {ch:?} is not in its vocabulary"
    )]
    Unencodable {
        /// The tokenizer's name.
        tokenizer: &'static str,
        /// The text.
        text: String,
        /// The character.
        ch: char,
    },
}

impl DataError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), cause: source }
    }
}
