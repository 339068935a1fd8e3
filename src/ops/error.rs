use trident_runtime::{DeviceKind, RuntimeError};

/// Why an op refused to run or failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("{op}: `{arg}` has {got} elements, expected {expected} ({shape})")]
    Length { op: &'static str, arg: &'static str, got: usize, expected: usize, shape: String },
    #[error("{op}: {what}")]
    Shape { op: &'static str, what: String },
    #[error("{op}: `{arg}` lives on {got}, but the op runs on {expected}; copy it to that device first")]
    WrongDevice { op: &'static str, arg: &'static str, got: DeviceKind, expected: DeviceKind },
    #[error("{op}: token {token} at position {position} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange { op: &'static str, token: u32, position: usize, vocab: usize },
    #[error("{op} is not implemented on {device} yet")]
    Unsupported { op: &'static str, device: DeviceKind },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Launch(Box<crate::launch::LaunchError>),
}

pub type Result<T, E = OpsError> = std::result::Result<T, E>;

impl From<crate::launch::LaunchError> for OpsError {
    fn from(e: crate::launch::LaunchError) -> Self {
        OpsError::Launch(Box::new(e))
    }
}
