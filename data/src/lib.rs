//! Training data: the built-in addition task, UTF-8 text files, llm.c token shards, and the
//! loader that cuts them into batches of `B x T` inputs and next-token targets.
//!
//! Feature `tokenizer` (on by default): GPT-2's BPE, from `tiktoken-rs`; without it, what needs
//! the BPE returns [`DataError::MissingFeature`] naming it.

pub mod addition;
pub mod dataset;
pub mod error;
pub mod llmc_order;
pub mod llmc_tokenizer;
pub mod loader;
pub mod mt19937;
pub mod rng;
pub mod shard;
pub mod spec;
pub mod tokenizer;

pub use addition::{Accuracy, AdditionTask};
pub use dataset::{Dataset, Split, TokenSet, DEFAULT_VAL_FRACTION};
pub use error::DataError;
pub use llmc_order::LlmcOrder;
pub use llmc_tokenizer::{read_llmc_tokenizer, write_llmc_tokenizer};
pub use loader::{Batch, DataLoader, DataOrder, LoaderState};
pub use mt19937::Mt19937;
pub use rng::SplitMix64;
pub use shard::{read_shard, read_shard_header, write_shard, write_shards, ShardHeader};
pub use spec::DataSpec;
pub use tokenizer::{Tokenizer, TokenizerKind};
