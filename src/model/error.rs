use trident_runtime::RuntimeError;

use super::ConfigError;
use crate::ops::OpsError;
use crate::parallel::{ParallelError, PeerEcho};

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A collective of the tensor-parallel group failed.
    #[error(transparent)]
    Parallel(#[from] ParallelError),
    #[error("sequence length {seq} is longer than the model's {max} positions; lower --seq-length or use a model with more positions")]
    SeqTooLong { seq: usize, max: usize },
    #[error("a batch needs at least one sequence of at least one token (got {batch} x {seq})")]
    EmptyBatch { batch: usize, seq: usize },
    #[error("a batch of {batch} x {seq} tokens does not fit the workspace made for {cap_batch} x {cap_seq}")]
    BatchTooLarge { batch: usize, seq: usize, cap_batch: usize, cap_seq: usize },
    #[error("{what}: got {got} tokens for a {batch} x {seq} batch")]
    TokenCount { what: &'static str, got: usize, batch: usize, seq: usize },
    #[error("input token {token} at position {position} is outside the model's vocabulary of {vocab}; the data and the model disagree")]
    TokenOutOfRange { token: u32, position: usize, vocab: usize },
    #[error("backward() needs loss() with a gradient scale first, on a training workspace")]
    NoLossGradient,
    #[error("{what}")]
    State { what: String },
    #[error("the parameters have {got} elements, the model needs {expected}")]
    ParamCount { got: usize, expected: usize },
}

impl PeerEcho for ModelError {
    fn is_peer_echo(&self) -> bool {
        matches!(self, ModelError::Parallel(e) if e.is_peer_echo())
    }
}
