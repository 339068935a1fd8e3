use std::path::PathBuf;

use crate::model::ConfigError;

/// Everything that can go wrong while writing or reading checkpoints and model files.
///
/// A variant's underlying error (`cause`) is part of its message and deliberately not its
/// `source()`: a report that prints the chain (`{:#}`) would otherwise say it twice.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("{path} is not a valid safetensors file ({cause}); the checkpoint is corrupt or was cut short")]
    SafeTensors { path: PathBuf, cause: safetensors::SafeTensorError },
    #[error("{path}: invalid JSON ({cause})")]
    Json { path: PathBuf, cause: serde_json::Error },
    #[error("{path} has no tensor `{name}`")]
    MissingTensor { path: PathBuf, name: String },
    #[error("{path} has a tensor `{name}` this model does not have; was it saved from another model?")]
    UnexpectedTensor { path: PathBuf, name: String },
    #[error("{path}: tensor `{name}` has shape {found:?}, but the config gives {expected:?}")]
    WrongShape { path: PathBuf, name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("{path}: tensor `{name}` is {found}, expected F32")]
    WrongDtype { path: PathBuf, name: String, found: String },
    #[error("{path}: {cause}")]
    Config { path: PathBuf, cause: ConfigError },
    #[error("{path}: magic number {found}, expected {expected}; this is not {what}")]
    BadMagic { path: PathBuf, found: i32, expected: i32, what: &'static str },
    #[error("{path}: {what} version {found} is not supported ({hint})")]
    BadVersion { path: PathBuf, what: &'static str, found: i32, hint: &'static str },
    #[error("{path}: expected {expected} bytes for this model, found {found}; the file is truncated or has trailing data")]
    WrongSize { path: PathBuf, expected: u64, found: u64 },
    #[error("dimension {value} does not fit the i32 fields of an llm.c header")]
    DimensionTooLarge { value: usize },
    #[error("{what} has {found} values but the model has {expected} parameters")]
    WrongLength { what: &'static str, expected: usize, found: usize },
    #[error("{path} is from step {found} but {dir}/trainer.json says step {expected}; the checkpoint mixes files of different saves")]
    StepMismatch { path: PathBuf, dir: PathBuf, expected: u64, found: u64 },
    #[error(
        "{path}: tensor `{name}` does not match its checksum (CRC-32 {found:08x}, the save recorded \
         {recorded:08x}); the file is corrupt: resume from an earlier checkpoint"
    )]
    Checksum { path: PathBuf, name: String, recorded: u32, found: u32 },
    #[error("{path}: the checkpoint records no checksum for tensor `{name}`; trainer.json is corrupt")]
    NoChecksum { path: PathBuf, name: String },
    #[error(
        "{path}: tensor `{name}` holds {value} at element {index}; the run diverged before this save \
         or the file is corrupt: resume from an earlier checkpoint"
    )]
    NonFinite { path: PathBuf, name: String, index: usize, value: f32 },
    #[error(
        "{trainer} does not match {tensors}: its checksum is {found:08x}, the tensors were saved beside one \
         of {recorded:08x}; trainer.json was edited or is corrupt, or the files come from different saves \
         (restore them, or resume from an earlier checkpoint)"
    )]
    MetadataMismatch { trainer: PathBuf, tensors: PathBuf, recorded: u32, found: u32 },
    #[error(
        "{path} was written by an older Trident without checksums (format {found}); this build resumes only \
         checkpoints it can verify (format {supported}): resume it with the build that wrote it, or start afresh"
    )]
    NoChecksums { path: PathBuf, found: u32, supported: u32 },
    #[error("{path} is there, but {trainer} says the checkpoint has no {what}; trainer.json was edited or is corrupt")]
    Unexpected { path: PathBuf, trainer: PathBuf, what: &'static str },
    #[error(
        "{path}: no space left on the file system; nothing was replaced (earlier checkpoints are intact): \
         free space there or save elsewhere"
    )]
    DiskFull { path: PathBuf },
    #[error(
        "{path}: cannot allocate the {bytes} bytes it needs; free memory or load it on a larger machine"
    )]
    OutOfMemory { path: PathBuf, bytes: u64 },
    #[error(
        "{path}: the header's metadata is {found}, not what a save writes (format, step, {}); the file is \
         corrupt: resume from an earlier checkpoint",
        "trainer_json_crc32"
    )]
    BadMetadata { path: PathBuf, found: String },
    #[error("{path} is not a directory; checkpoints go in a directory (pass another path)")]
    NotADirectory { path: PathBuf },
}

impl CheckpointError {
    /// An I/O error on `path`; a full file system (or an exhausted quota) is [`Self::DiskFull`].
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let full = source.kind() == std::io::ErrorKind::StorageFull
            || matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
        if full {
            return Self::DiskFull { path: path.into() };
        }
        Self::Io { path: path.into(), cause: source }
    }

    /// Whether this is [`Self::DiskFull`], also under a context.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Self::DiskFull { .. })
    }
}
