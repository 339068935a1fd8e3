//! What can stop a training run, named by the flag, file or rank that causes it.

use trident_collectives::CommError;
use trident_runtime::RuntimeError;

use crate::model::ModelError;
use crate::ops::OpsError;
use crate::parallel::{ParallelError, PeerEcho};
use trident_data::DataError;

/// Why a step, an evaluation or a checkpoint of the trainer failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The grid does not fit the model or the batch, or a collective failed.
    #[error(transparent)]
    Parallel(Box<ParallelError>),
    /// The model refused a pass (its shape, a token, its state) or its device failed.
    #[error(transparent)]
    Model(Box<ModelError>),
    /// A kernel or host operation outside the model failed (the optimizer, the norms).
    #[error(transparent)]
    Ops(Box<OpsError>),
    /// The batch source failed to give a batch.
    #[error(transparent)]
    Data(Box<DataError>),
    /// The device failed: an allocation, a copy or a synchronisation.
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
    /// A micro- or global batch of 0, or a global batch that is not a whole number of
    /// micro-batches ([`TrainSettings::accumulation_steps`](super::TrainSettings::accumulation_steps)).
    #[error("--global-batch-size {global} is not a multiple of --micro-batch-size {micro}")]
    BatchSizes {
        /// Sequences per step (`--global-batch-size`).
        global: usize,
        /// Sequences per micro-batch (`--micro-batch-size`).
        micro: usize,
    },
    /// The [`BatchSource`](super::BatchSource) gave a batch of another shape than the
    /// micro-batch the trainer was built for.
    #[error("the data gave a {got_b} x {got_t} batch, the trainer expects {b} x {t}")]
    BatchShape {
        /// Sequences of the batch given.
        got_b: usize,
        /// Tokens per sequence of the batch given.
        got_t: usize,
        /// Sequences per micro-batch expected (`--micro-batch-size`).
        b: usize,
        /// Tokens per sequence expected (`--seq-length`).
        t: usize,
    },
    /// The step's mean loss is infinite or NaN (training diverged; under fp16 an overflowing
    /// step is skipped instead, unless the loss itself overflowed).
    #[error("the loss became {loss} at iteration {iter}")]
    NonFinite {
        /// The step's mean loss over all ranks.
        loss: f32,
        /// The 0-based iteration of the step.
        iter: u64,
    },
    /// A checkpoint that does not fit this run, or a save that failed.
    #[error("{0}")]
    Checkpoint(String),
}

/// The wrapped errors are large; boxing keeps every `Result` of the trainer small.
macro_rules! boxed_from {
    ($($variant:ident($t:ty)),*) => {$(
        impl From<$t> for TrainError {
            fn from(e: $t) -> Self {
                TrainError::$variant(Box::new(e))
            }
        }
    )*};
}

boxed_from!(
    Parallel(ParallelError),
    Model(ModelError),
    Ops(OpsError),
    Data(DataError),
    Runtime(RuntimeError)
);

impl From<CommError> for TrainError {
    fn from(e: CommError) -> Self {
        ParallelError::from(e).into()
    }
}

impl PeerEcho for TrainError {
    fn is_peer_echo(&self) -> bool {
        match self {
            TrainError::Parallel(e) => e.is_peer_echo(),
            TrainError::Model(e) => e.is_peer_echo(),
            _ => false,
        }
    }
}

/// The result of the trainer's operations.
pub type Result<T> = std::result::Result<T, TrainError>;
