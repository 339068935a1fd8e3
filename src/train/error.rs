//! What can stop a training run, named by the flag, file or rank that causes it.

use trident_collectives::CommError;
use trident_runtime::RuntimeError;

use crate::data::DataError;
use crate::model::ModelError;
use crate::ops::OpsError;
use crate::parallel::{ParallelError, PeerEcho};

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The grid does not fit the model or the batch, or a collective failed.
    #[error(transparent)]
    Parallel(Box<ParallelError>),
    #[error(transparent)]
    Model(Box<ModelError>),
    #[error(transparent)]
    Ops(Box<OpsError>),
    #[error(transparent)]
    Data(Box<DataError>),
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
    #[error("--global-batch-size {global} is not a multiple of --micro-batch-size {micro}")]
    BatchSizes { global: usize, micro: usize },
    #[error("the data gave a {got_b} x {got_t} batch, the trainer expects {b} x {t}")]
    BatchShape { got_b: usize, got_t: usize, b: usize, t: usize },
    #[error("the loss became {loss} at iteration {iter}")]
    NonFinite { loss: f32, iter: u64 },
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

pub type Result<T> = std::result::Result<T, TrainError>;
