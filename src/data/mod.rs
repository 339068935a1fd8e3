//! Training data: the built-in addition task, UTF-8 text files, llm.c token shards, and the
//! loader that cuts them into batches of `B x T` inputs and next-token targets.

pub mod addition;
pub mod dataset;
pub mod error;
pub mod loader;
pub mod rng;
pub mod shard;
pub mod spec;
pub mod tokenizer;

pub use addition::{Accuracy, AdditionTask};
pub use dataset::{Dataset, Split, TokenSet};
pub use error::DataError;
pub use loader::{Batch, DataLoader, LoaderState};
pub use rng::SplitMix64;
pub use shard::{read_shard, read_shard_header, write_shard, write_shards, ShardHeader};
pub use spec::DataSpec;
pub use tokenizer::{Tokenizer, TokenizerKind};
