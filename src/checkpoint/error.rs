use std::path::PathBuf;

use crate::model::ConfigError;

/// Everything that can go wrong while writing or reading checkpoints and model files.
///
/// A variant's underlying error (`cause`) is part of its message and deliberately not its
/// `source()`: a report that prints the chain (`{:#}`) would otherwise say it twice.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Another live run holds the `--save` directory's lock.
    #[error("--save {dir}: another run is saving checkpoints there ({holder}); give this run its own directory, or stop that one first")]
    SaveDirInUse {
        /// The `--save` directory.
        dir: PathBuf,
        /// The holder as its lock file names it: "pid 1234 on host".
        holder: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A tensor file that does not parse as safetensors.
    #[error("{path} is not a valid safetensors file ({cause}); the checkpoint is corrupt or was cut short")]
    SafeTensors {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: safetensors::SafeTensorError,
    },
    /// A JSON file (`trainer.json`, a config) that does not parse.
    #[error("{path}: invalid JSON ({cause})")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: serde_json::Error,
    },
    /// A tensor the model needs is not in the file.
    #[error("{path} has no tensor `{name}`")]
    MissingTensor {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
    },
    /// The file has a tensor the model lacks.
    #[error("{path} has a tensor `{name}` this model does not have; was it saved from another model?")]
    UnexpectedTensor {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
    },
    /// A tensor's shape differs from the model config's.
    #[error("{path}: tensor `{name}` has shape {found:?}, but the config gives {expected:?}")]
    WrongShape {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
        /// What was expected.
        expected: Vec<usize>,
        /// What the file holds.
        found: Vec<usize>,
    },
    /// A tensor is not F32.
    #[error("{path}: tensor `{name}` is {found}, expected F32")]
    WrongDtype {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
        /// What the file holds.
        found: String,
    },
    /// The saved model config is invalid (said in the file's own field names).
    #[error("{path}: the model it describes is impossible: {}", cause.in_file_words())]
    Config {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: ConfigError,
    },
    /// An llm.c file with the wrong magic number.
    #[error("{path}: magic number {found}, expected {expected}; this is not {what}")]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// What the file holds.
        found: i32,
        /// What was expected.
        expected: i32,
        /// Which kind of file or array.
        what: &'static str,
    },
    /// An llm.c file of an unsupported version.
    #[error("{path}: {what} version {found} is not supported ({hint})")]
    BadVersion {
        /// The file.
        path: PathBuf,
        /// Which kind of file or array.
        what: &'static str,
        /// What the file holds.
        found: i32,
        /// What is supported.
        hint: &'static str,
    },
    /// An llm.c file whose size differs from what its header implies.
    #[error("{path}: expected {expected} bytes for this model, found {found}; the file is truncated or has trailing data")]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// What was expected.
        expected: u64,
        /// What the file holds.
        found: u64,
    },
    /// A model dimension past the `i32` fields of an llm.c header.
    #[error("dimension {value} does not fit the i32 fields of an llm.c header")]
    DimensionTooLarge {
        /// The value.
        value: usize,
    },
    /// A parameter array of the wrong length.
    #[error("{what} has {found} values but the model has {expected} parameters")]
    WrongLength {
        /// Which kind of file or array.
        what: &'static str,
        /// What was expected.
        expected: usize,
        /// What the file holds.
        found: usize,
    },
    /// Files of one checkpoint from different steps.
    #[error("{path} is from step {found} but {dir}/trainer.json says step {expected}; the checkpoint mixes files of different saves")]
    StepMismatch {
        /// The file.
        path: PathBuf,
        /// The checkpoint directory.
        dir: PathBuf,
        /// What was expected.
        expected: u64,
        /// What the file holds.
        found: u64,
    },
    /// A tensor whose CRC-32 differs from the one the save recorded.
    #[error(
        "{path}: tensor `{name}` does not match its checksum (CRC-32 {found:08x}, the save recorded \
         {recorded:08x}); the file is corrupt: resume from an earlier checkpoint"
    )]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
        /// The checksum the save recorded.
        recorded: u32,
        /// What the file holds.
        found: u32,
    },
    /// A tensor without a recorded checksum.
    #[error("{path}: the checkpoint records no checksum for tensor `{name}`; trainer.json is corrupt")]
    NoChecksum {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
    },
    /// A tensor holding a NaN or infinity.
    #[error(
        "{path}: tensor `{name}` holds {value} at element {index}; the run diverged before this save \
         or the file is corrupt: resume from an earlier checkpoint"
    )]
    NonFinite {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
        /// The element's index.
        index: usize,
        /// The value.
        value: f32,
    },
    /// A model file (llm.c's) whose weights hold a NaN or infinity: nothing can train from it.
    #[error(
        "{path}: tensor `{name}` holds {value} at element {index}; the model file is damaged or was \
         written by a run that had diverged, and no run can start from it"
    )]
    NonFiniteWeights {
        /// The file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
        /// The element's index in the tensor.
        index: usize,
        /// The value.
        value: f32,
    },
    /// `trainer.json` does not belong to the tensors beside it.
    #[error(
        "{trainer} does not match {tensors}: its checksum is {found:08x}, the tensors were saved beside one \
         of {recorded:08x}; trainer.json was edited or is corrupt, or the files come from different saves \
         (restore them, or resume from an earlier checkpoint)"
    )]
    MetadataMismatch {
        /// The checkpoint's `trainer.json`.
        trainer: PathBuf,
        /// The tensor file.
        tensors: PathBuf,
        /// The checksum the save recorded.
        recorded: u32,
        /// What the file holds.
        found: u32,
    },
    /// A checkpoint of a format without checksums.
    #[error(
        "{path} was written by an older Trident without checksums (format {found}); this build resumes only \
         checkpoints it can verify (format {supported}): resume it with the build that wrote it, or start afresh"
    )]
    NoChecksums {
        /// The file.
        path: PathBuf,
        /// What the file holds.
        found: u32,
        /// The format this build reads.
        supported: u32,
    },
    /// A file `trainer.json` does not list.
    #[error("{path} is there, but {trainer} says the checkpoint has no {what}; trainer.json was edited or is corrupt")]
    Unexpected {
        /// The file.
        path: PathBuf,
        /// The checkpoint's `trainer.json`.
        trainer: PathBuf,
        /// Which kind of file or array.
        what: &'static str,
    },
    /// The file system is full; the save left earlier checkpoints intact.
    #[error(
        "{path}: no space left on the file system; nothing was replaced (earlier checkpoints are intact): \
         free space there or save elsewhere"
    )]
    DiskFull {
        /// The file.
        path: PathBuf,
    },
    /// The file's contents do not fit in memory.
    #[error(
        "{path}: cannot allocate the {bytes} bytes it needs; free memory or load it on a larger machine"
    )]
    OutOfMemory {
        /// The file.
        path: PathBuf,
        /// Bytes needed.
        bytes: u64,
    },
    /// A safetensors header whose metadata a save does not write.
    #[error(
        "{path}: the header's metadata is {found}, not what a save writes (format, step, {}); the file is \
         corrupt: resume from an earlier checkpoint",
        "trainer_json_crc32"
    )]
    BadMetadata {
        /// The file.
        path: PathBuf,
        /// What the file holds.
        found: String,
    },
    /// A checkpoint path that is not a directory.
    #[error("{path} is not a directory; checkpoints go in a directory (pass another path)")]
    NotADirectory {
        /// The file.
        path: PathBuf,
    },
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
