use std::path::PathBuf;

use crate::model::ConfigError;

/// Everything that can go wrong while writing or reading checkpoints and model files.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid safetensors file ({source}); the checkpoint is corrupt or was cut short")]
    SafeTensors {
        path: PathBuf,
        source: safetensors::SafeTensorError,
    },
    #[error("{path}: invalid JSON ({source})")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} has no tensor `{name}`")]
    MissingTensor { path: PathBuf, name: String },
    #[error(
        "{path} has a tensor `{name}` this model does not have; was it saved from another model?"
    )]
    UnexpectedTensor { path: PathBuf, name: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, but the config gives {expected:?}")]
    WrongShape {
        path: PathBuf,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{path}: tensor `{name}` is {found}, expected F32")]
    WrongDtype {
        path: PathBuf,
        name: String,
        found: String,
    },
    #[error("{path}: {source}")]
    Config { path: PathBuf, source: ConfigError },
    #[error("{path}: magic number {found}, expected {expected}; this is not {what}")]
    BadMagic {
        path: PathBuf,
        found: i32,
        expected: i32,
        what: &'static str,
    },
    #[error("{path}: {what} version {found} is not supported ({hint})")]
    BadVersion {
        path: PathBuf,
        what: &'static str,
        found: i32,
        hint: &'static str,
    },
    #[error("{path}: expected {expected} bytes for this model, found {found}; the file is truncated or has trailing data")]
    WrongSize {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    #[error("dimension {value} does not fit the i32 fields of an llm.c header")]
    DimensionTooLarge { value: usize },
    #[error("{what} has {found} values but the model has {expected} parameters")]
    WrongLength {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("{path} is from step {found} but {dir}/trainer.json says step {expected}; the checkpoint mixes files of different saves")]
    StepMismatch {
        path: PathBuf,
        dir: PathBuf,
        expected: u64,
        found: u64,
    },
}

impl CheckpointError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
