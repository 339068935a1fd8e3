//! Training side by side with llm.c: the settings of its reference CPU trainer
//! (`train_gpt2.c`), a work directory holding the files that trainer reads, Trident's run of the
//! same training on them, and a reader for the losses llm.c prints.

mod reference;
mod run;
mod workdir;

use std::path::PathBuf;

pub use reference::{
    reference_settings, REFERENCE_BATCH, REFERENCE_EVAL_BATCHES, REFERENCE_EVAL_INTERVAL, REFERENCE_SEQ_LEN,
    REFERENCE_STEPS,
};
pub use run::{parse_llmc_output, train_like_llmc, Losses};
pub use workdir::{write_workdir, Workdir, WorkdirSpec, BYTE_VOCAB};

/// Why a side-by-side run with llm.c failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmcError {
    /// Writing or reading llm.c's model file.
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
    /// Writing or reading its token shards.
    #[error(transparent)]
    Data(#[from] trident_data::DataError),
    /// Building the model.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// An op of Trident's run.
    #[error(transparent)]
    Ops(#[from] crate::ops::OpsError),
    /// Trident's training run.
    #[error(transparent)]
    Train(#[from] crate::train::TrainError),
    /// A model whose vocabulary is not the byte-level one the work directory's text uses.
    #[error(
        "the work directory's text is byte-level: the model needs a vocabulary of {BYTE_VOCAB} (got {0})"
    )]
    Vocabulary(usize),
    /// Creating the work directory or a file in it.
    #[error("creating {path}: {cause}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// llm.c's printed output does not hold the losses expected.
    #[error("reading llm.c's output: {0}")]
    Output(String),
}
