use std::path::PathBuf;

/// Everything that can go wrong while reading or generating training data.
///
/// As in the checkpoint errors, an I/O `cause` is part of the message, not the `source()`, so
/// that a chain printed with `{:#}` says it once.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("{path} is not an llm.c token shard: magic number {found}, expected 20240520")]
    ShardMagic { path: PathBuf, found: i32 },
    #[error("{path}: token shard version {found} is not supported (only version 1, u16 tokens)")]
    ShardVersion { path: PathBuf, found: i32 },
    #[error(
        "{path}: header says {header_tokens} tokens ({expected_bytes} bytes with the header) but \
         the file has {file_bytes} bytes; the shard is truncated or corrupt, regenerate it"
    )]
    ShardSize { path: PathBuf, header_tokens: u64, expected_bytes: u64, file_bytes: u64 },
    #[error("{what}: token {token} at position {position} is outside the vocabulary of {vocab_size} tokens; was it written with another tokenizer?")]
    TokenOutOfRange { what: String, position: usize, token: u32, vocab_size: usize },
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
    #[error("no llm.c token shards (*.bin) in {0}")]
    NoShards(PathBuf),
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
    #[error("the GPT-2 BPE tokenizer failed: {0}")]
    Bpe(String),
    #[error(
        "cannot encode {text:?} with the {tokenizer} tokenizer: character {ch:?} is not in its vocabulary"
    )]
    Unencodable { tokenizer: &'static str, text: String, ch: char },
}

impl DataError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), cause: source }
    }
}
