//! The one error type of the crate.

use std::time::Duration;

/// Everything a collective, a transport, the store or the launcher can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("{op}: timed out after {waited:?} waiting for rank {peer}; it may be stuck, dead or calling a different collective (raise TRIDENT_TIMEOUT_S if it is just slow)")]
    Timeout { op: String, peer: usize, waited: Duration },
    #[error("{op}: lost rank {peer}: {detail}")]
    PeerLost { op: String, peer: usize, detail: String },
    #[error("{op}: rank {reporter} gave up because of rank {culprit} ({reason}); this rank stops too")]
    PeerFailed { op: String, culprit: usize, reporter: usize, reason: AbortReason },
    #[error("ranks called different collectives: this rank is in {local} but rank {peer} sent {remote}; every rank of a communicator must make the same calls in the same order with the same sizes")]
    Mismatch { peer: usize, local: String, remote: String },
    #[error("malformed message from rank {peer} during {op}: {detail}")]
    Malformed { op: String, peer: usize, detail: String },
    #[error("ranks disagree on {what}: {name} is {value_a:?} on rank {rank_a} but {value_b:?} on rank {rank_b}; start every rank with the same {what}")]
    Disagreement {
        what: String,
        name: String,
        rank_a: usize,
        value_a: String,
        rank_b: usize,
        value_b: String,
    },
    #[error("connection refused: {0}")]
    Refused(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    #[error("this communicator is broken by an earlier failure ({0}); create a new one")]
    Broken(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl CommError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CommError::Io { context: context.into(), source }
    }

    /// The rank this error blames, if it blames one.
    pub fn culprit(&self) -> Option<usize> {
        match self {
            CommError::Timeout { peer, .. }
            | CommError::PeerLost { peer, .. }
            | CommError::Mismatch { peer, .. }
            | CommError::Malformed { peer, .. } => Some(*peer),
            CommError::PeerFailed { culprit, .. } => Some(*culprit),
            CommError::Disagreement { rank_b, .. } => Some(*rank_b),
            _ => None,
        }
    }
}

/// Why a rank aborted a communicator, as told to its peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AbortReason {
    /// The culprit died or disconnected.
    Lost = 1,
    /// The culprit called a different collective, or the same with a different size.
    Mismatch = 2,
    /// The culprit did not answer in time.
    Timeout = 3,
    /// The culprit sent a malformed message.
    Malformed = 4,
    /// Anything else (a local error on the reporting rank).
    Failed = 5,
}

impl AbortReason {
    pub fn of(err: &CommError) -> Self {
        match err {
            CommError::PeerLost { .. } => AbortReason::Lost,
            CommError::Mismatch { .. } => AbortReason::Mismatch,
            CommError::Timeout { .. } => AbortReason::Timeout,
            CommError::Malformed { .. } => AbortReason::Malformed,
            CommError::PeerFailed { reason, .. } => *reason,
            _ => AbortReason::Failed,
        }
    }

    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => AbortReason::Lost,
            2 => AbortReason::Mismatch,
            3 => AbortReason::Timeout,
            4 => AbortReason::Malformed,
            _ => AbortReason::Failed,
        }
    }
}

impl std::fmt::Display for AbortReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AbortReason::Lost => "it died or disconnected",
            AbortReason::Mismatch => "ranks called different collectives or sizes",
            AbortReason::Timeout => "it did not answer in time",
            AbortReason::Malformed => "it sent a malformed message",
            AbortReason::Failed => "an error on the reporting rank",
        })
    }
}

pub type Result<T, E = CommError> = std::result::Result<T, E>;
