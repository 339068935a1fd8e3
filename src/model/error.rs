//! The model's error type.

use trident_runtime::RuntimeError;

use super::ConfigError;
use crate::ops::OpsError;
use crate::parallel::{ParallelError, PeerEcho};

/// What can go wrong building a model or running a pass through it.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model's [`GptConfig`](super::GptConfig) is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A kernel or host operation refused its arguments or failed.
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// The device failed: an allocation, a copy or a launch.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A collective of the tensor-parallel group failed.
    #[error(transparent)]
    Parallel(#[from] ParallelError),
    /// A workspace was asked for sequences longer than the position table
    /// ([`Workspace::new`](super::Workspace::new) with `t > max_seq_len`).
    #[error("sequence length {seq} is longer than the model's {max} positions; lower --seq-length or use a model with more positions")]
    SeqTooLong {
        /// Tokens per sequence asked for (`t`).
        seq: usize,
        /// [`GptConfig::max_seq_len`](super::GptConfig::max_seq_len).
        max: usize,
    },
    /// A micro-batch of no tokens: `b == 0` or `t == 0` (or `b t` overflowing `usize`), or an
    /// empty prompt or zero window to [`generate`](super::generate) from.
    #[error("a batch needs at least one sequence of at least one token (got {batch} x {seq})")]
    EmptyBatch {
        /// Sequences per micro-batch (`b`).
        batch: usize,
        /// Tokens per sequence (`t`).
        seq: usize,
    },
    /// A token slice whose length is not the workspace's `b t`
    /// ([`Gpt::embed`](super::Gpt::embed)'s tokens, [`Gpt::forward`](super::Gpt::forward)'s
    /// targets).
    #[error("{what}: got {got} tokens for a {batch} x {seq} batch")]
    TokenCount {
        /// Which input: `"the embedding"` (input tokens) or `"loss targets"`.
        what: &'static str,
        /// Tokens given.
        got: usize,
        /// The workspace's sequences per micro-batch (`b`).
        batch: usize,
        /// The workspace's tokens per sequence (`t`).
        seq: usize,
    },
    /// An input token id at or past the real vocabulary (`token >= vocab_size`): the data
    /// was tokenized for another model.
    #[error("input token {token} at position {position} is outside the model's vocabulary of {vocab}; the data and the model disagree")]
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// Its index in the row-major `[b, t]` token slice.
        position: usize,
        /// [`GptConfig::vocab_size`](super::GptConfig::vocab_size).
        vocab: usize,
    },
    /// The last stage's backward ran without the logits' gradient: the forward pass before
    /// it had no targets or no `dloss`, or the gradient was already consumed.
    #[error("backward() needs loss() with a gradient scale first, on a training workspace")]
    NoLossGradient,
    /// A call that does not fit the model's place or the workspace's state: the embedding on
    /// a stage that is not the first, logits of a sharded or training pass, a chunk the stage
    /// does not hold, an inner stage's backward without its output gradient, or a sequence
    /// length that sequence parallelism cannot split.
    #[error("{what}")]
    State {
        /// What was asked and why the model or workspace cannot do it.
        what: String,
    },
    /// A parameter or gradient buffer of the wrong length ([`Gpt::new`](super::Gpt::new),
    /// [`Gpt::backward_into`](super::Gpt::backward_into)).
    #[error("the parameters have {got} elements, the model needs {expected}")]
    ParamCount {
        /// Elements given.
        got: usize,
        /// Elements the layout holds ([`ParamLayout`](super::ParamLayout) for a whole model,
        /// [`ShardLayout`](super::ShardLayout) for one rank's gradients).
        expected: usize,
    },
}

impl PeerEcho for ModelError {
    fn is_peer_echo(&self) -> bool {
        matches!(self, ModelError::Parallel(e) if e.is_peer_echo())
    }
}
