use trident_runtime::{DeviceKind, RuntimeError};

/// Why an op refused to run or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// An argument's length differs from what the shape implies.
    #[error("{op}: `{arg}` has {got} elements, expected {expected} ({shape})")]
    Length {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: &'static str,
        /// Its length, elements.
        got: usize,
        /// The length the shape implies.
        expected: usize,
        /// The shape, as `b x t x c`.
        shape: String,
    },
    /// The shape itself is invalid (a head count that does not divide the channels, say).
    #[error("{op}: {what}")]
    Shape {
        /// The op.
        op: &'static str,
        /// What is wrong.
        what: String,
    },
    /// An argument lives on another device than the context.
    #[error("{op}: `{arg}` lives on {got}, but the op runs on {expected}; copy it to that device first")]
    WrongDevice {
        /// The op.
        op: &'static str,
        /// The argument.
        arg: &'static str,
        /// Its device.
        got: DeviceKind,
        /// The context's device.
        expected: DeviceKind,
    },
    /// A token id at or past the vocabulary size.
    #[error("{op}: token {token} at position {position} is outside the vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        /// The op.
        op: &'static str,
        /// The id.
        token: u32,
        /// Its position in the token array.
        position: usize,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The op has no implementation for the device (or needs host memory it lacks).
    #[error("{op} is not implemented on {device} yet")]
    Unsupported {
        /// The op.
        op: &'static str,
        /// The device.
        device: DeviceKind,
    },
    /// A buffer or copy failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A launch wrapper refused the arguments, or the kernel failed.
    #[error(transparent)]
    Launch(Box<crate::launch::LaunchError>),
}

/// The ops' result type.
pub type Result<T, E = OpsError> = std::result::Result<T, E>;

impl From<crate::launch::LaunchError> for OpsError {
    fn from(e: crate::launch::LaunchError) -> Self {
        OpsError::Launch(Box::new(e))
    }
}
