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

#[derive(Debug, thiserror::Error)]
pub enum LlmcError {
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error(transparent)]
    Ops(#[from] crate::ops::OpsError),
    #[error(transparent)]
    Train(#[from] crate::train::TrainError),
    #[error(
        "the work directory's text is byte-level: the model needs a vocabulary of {BYTE_VOCAB} (got {0})"
    )]
    Vocabulary(usize),
    #[error("creating {path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("reading llm.c's output: {0}")]
    Output(String),
}
