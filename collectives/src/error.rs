//! The one error type of the crate.

use std::time::Duration;

/// Everything a collective, a transport, the store or the launcher can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// A peer sent nothing for the communicator's timeout.
    #[error("{op}: timed out after {waited:?} waiting for rank {peer}; it may be stuck, dead or calling a different collective (raise TRIDENT_TIMEOUT_S if it is just slow)")]
    Timeout {
        /// The collective or step that waited.
        op: String,
        /// The rank waited for.
        peer: usize,
        /// How long.
        waited: Duration,
    },
    /// A peer's connection closed or its process died.
    #[error("{op}: lost rank {peer}: {detail}")]
    PeerLost {
        /// The collective or step under way.
        op: String,
        /// The rank lost.
        peer: usize,
        /// What the transport saw.
        detail: String,
    },
    /// Another rank aborted the communicator and told this one.
    #[error("{op}: rank {reporter} gave up because of rank {culprit} ({reason}); this rank stops too")]
    PeerFailed {
        /// The collective or step under way.
        op: String,
        /// The rank the reporter blames.
        culprit: usize,
        /// The rank that aborted.
        reporter: usize,
        /// Why it aborted.
        reason: AbortReason,
    },
    /// A peer's message belongs to a different collective, sequence number or size.
    #[error("ranks called different collectives: this rank is in {local} but rank {peer} sent {remote}; every rank of a communicator must make the same calls in the same order with the same sizes")]
    Mismatch {
        /// The sending rank.
        peer: usize,
        /// This rank's call.
        local: String,
        /// What the peer's message was for.
        remote: String,
    },
    /// A message that does not decode (bad header, length or checksum).
    #[error("malformed message from rank {peer} during {op}: {detail}")]
    Malformed {
        /// The collective or step under way.
        op: String,
        /// The sending rank.
        peer: usize,
        /// What does not decode.
        detail: String,
    },
    /// Ranks were configured differently (world size, transport, a setting).
    #[error("ranks disagree on {what}: {name} is {value_a:?} on rank {rank_a} but {value_b:?} on rank {rank_b}; give every rank the same {name}")]
    Disagreement {
        /// What was being agreed on.
        what: String,
        /// The setting that differs.
        name: String,
        /// One rank.
        rank_a: usize,
        /// Its value.
        value_a: String,
        /// A rank with another value.
        rank_b: usize,
        /// That value.
        value_b: String,
    },
    /// A connection was refused (a wrong job token, say).
    #[error("connection refused: {0}")]
    Refused(String),
    /// A call's arguments are invalid (lengths, ranks, a grid that does not divide the world).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Rendezvous failed: the store, the environment or the exchange of addresses.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// The communicator failed before; every later call fails with this.
    #[error("this communicator is broken by an earlier failure ({0}); create a new one")]
    Broken(String),
    /// An error of a sub-group (tensor-parallel, pipeline, data-parallel, ...) whose peers
    /// are named by world rank, with the blamed peer's role in the group.
    #[error("{error} ({role})")]
    InGroup {
        /// The error, its ranks world ranks.
        error: Box<CommError>,
        /// Who the blamed peer is: "world rank 3 is tensor-parallel rank 1 of group [2, 3]".
        role: String,
    },
    /// An operating-system call failed.
    #[error("{context}: {cause}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error (in the message, not also as a source, so that it is printed once).
        cause: std::io::Error,
    },
}

impl CommError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CommError::Io { context: context.into(), cause: source }
    }

    /// The error without the group context of [`CommError::InGroup`]: the one to match on.
    pub fn root(&self) -> &CommError {
        match self {
            CommError::InGroup { error, .. } => error.root(),
            e => e,
        }
    }

    /// The rank this error blames, if it blames one (a world rank for [`CommError::InGroup`],
    /// else a rank of the communicator that failed).
    pub fn culprit(&self) -> Option<usize> {
        match self {
            CommError::InGroup { error, .. } => error.culprit(),
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
    /// The reason an error gives peers.
    pub fn of(err: &CommError) -> Self {
        match err {
            CommError::PeerLost { .. } => AbortReason::Lost,
            CommError::Mismatch { .. } => AbortReason::Mismatch,
            CommError::Timeout { .. } => AbortReason::Timeout,
            CommError::Malformed { .. } => AbortReason::Malformed,
            CommError::PeerFailed { reason, .. } => *reason,
            CommError::InGroup { error, .. } => AbortReason::of(error),
            _ => AbortReason::Failed,
        }
    }

    /// The reason a wire byte encodes (`Failed` for unknown values).
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

/// How the members of a sub-group are named in its errors: by world rank, with their role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerNames {
    /// World rank of each member, by index in the group.
    pub world: Vec<usize>,
    /// Role of each member, by index in the group ("tensor-parallel rank 1 of group [2, 3]").
    pub roles: Vec<String>,
}

impl PeerNames {
    /// Rewrites `err`, whose ranks are indices in this group, to name world ranks, and wraps
    /// it in [`CommError::InGroup`] with the blamed peer's role. Errors that name no peer
    /// come back unchanged.
    pub fn name(&self, err: CommError) -> CommError {
        let w = |p: usize| self.world.get(p).copied().unwrap_or(p);
        let (named, blamed) = match err {
            CommError::Timeout { op, peer, waited } => {
                (CommError::Timeout { op, peer: w(peer), waited }, peer)
            }
            CommError::PeerLost { op, peer, detail } => {
                (CommError::PeerLost { op, peer: w(peer), detail }, peer)
            }
            CommError::PeerFailed { op, culprit, reporter, reason } => {
                (CommError::PeerFailed { op, culprit: w(culprit), reporter: w(reporter), reason }, culprit)
            }
            CommError::Mismatch { peer, local, remote } => {
                (CommError::Mismatch { peer: w(peer), local, remote }, peer)
            }
            CommError::Malformed { op, peer, detail } => {
                (CommError::Malformed { op, peer: w(peer), detail }, peer)
            }
            other => return other,
        };
        let role = match self.roles.get(blamed) {
            Some(role) => format!("world rank {} is {role}", w(blamed)),
            None => format!("rank {blamed} of a group of {}", self.world.len()),
        };
        CommError::InGroup { error: Box::new(named), role }
    }
}

/// The crate's result type.
pub type Result<T, E = CommError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// An I/O failure says its cause once: in the message, not again as a source that error
    /// reporters print after it.
    #[test]
    fn an_io_cause_is_printed_once() {
        let e = CommError::io("binding the store", std::io::Error::from(std::io::ErrorKind::AddrInUse));
        let cause = std::io::Error::from(std::io::ErrorKind::AddrInUse).to_string();
        assert_eq!(e.to_string(), format!("binding the store: {cause}"));
        assert!(std::error::Error::source(&e).is_none());
    }
}
