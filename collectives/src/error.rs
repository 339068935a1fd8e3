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

/// How the members of a communicator are named in its errors: by world rank, with their
/// role in the group and, where the launcher's processes are known, the host and pid each
/// world rank runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerNames {
    /// World rank of each member, by index in the group.
    pub world: Vec<usize>,
    /// Role of each member, by index in the group ("tensor-parallel rank 1 of group [2, 3]");
    /// empty for the world, whose members need none.
    pub roles: Vec<String>,
    /// Where each world rank runs ("host gpu3 as pid 4242"), by world rank; empty where the
    /// ranks are threads of one process.
    pub places: std::sync::Arc<Vec<String>>,
}

impl PeerNames {
    /// The names of a world of `places.len()` ranks (or `size` when no place is known).
    pub fn world(size: usize, places: std::sync::Arc<Vec<String>>) -> Self {
        PeerNames { world: (0..size).collect(), roles: Vec::new(), places }
    }

    /// The world rank of member `index` (itself when out of range).
    pub fn world_rank(&self, index: usize) -> usize {
        self.world.get(index).copied().unwrap_or(index)
    }

    /// Where world rank `w` runs, when known.
    pub fn place(&self, w: usize) -> Option<&str> {
        self.places.get(w).map(String::as_str).filter(|p| !p.is_empty())
    }

    /// Rewrites `err`, whose ranks are indices in this group, to name world ranks.
    pub fn to_world(&self, err: CommError) -> CommError {
        let w = |p: usize| self.world_rank(p);
        match err {
            CommError::Timeout { op, peer, waited } => CommError::Timeout { op, peer: w(peer), waited },
            CommError::PeerLost { op, peer, detail } => CommError::PeerLost { op, peer: w(peer), detail },
            CommError::PeerFailed { op, culprit, reporter, reason } => {
                CommError::PeerFailed { op, culprit: w(culprit), reporter: w(reporter), reason }
            }
            CommError::Mismatch { peer, local, remote } => {
                CommError::Mismatch { peer: w(peer), local, remote }
            }
            CommError::Malformed { op, peer, detail } => CommError::Malformed { op, peer: w(peer), detail },
            other => other,
        }
    }

    /// Wraps `err`, whose ranks are world ranks, in [`CommError::InGroup`] saying who the
    /// blamed world rank is: its role in this group and where it runs. Errors that blame no
    /// peer, and world errors of threads-as-ranks (nothing to add), come back unchanged.
    pub fn describe(&self, err: CommError) -> CommError {
        let Some(blamed) = err.culprit() else {
            return err;
        };
        let role = self.world.iter().position(|&m| m == blamed).and_then(|i| self.roles.get(i));
        let role = match (role, self.place(blamed)) {
            (Some(role), Some(place)) => format!("world rank {blamed} is {role}, on {place}"),
            (Some(role), None) => format!("world rank {blamed} is {role}"),
            (None, Some(place)) => format!("world rank {blamed} runs on {place}"),
            (None, None) => return err,
        };
        CommError::InGroup { error: Box::new(err), role }
    }

    /// [`PeerNames::to_world`], then [`PeerNames::describe`].
    pub fn name(&self, err: CommError) -> CommError {
        self.describe(self.to_world(err))
    }
}

/// The crate's result type.
pub type Result<T, E = CommError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(peer: usize) -> CommError {
        CommError::PeerLost { op: "all_reduce".into(), peer, detail: "it closed the connection".into() }
    }

    /// Errors name the blamed peer by world rank, with its role and where it runs, in the
    /// world and in sub-groups; threads-as-ranks say what they have.
    #[test]
    fn peers_are_named_by_world_rank_role_host_and_pid() {
        let places = std::sync::Arc::new(
            (0..4).map(|r| format!("host n{} as pid {}", r / 2, 100 + r)).collect::<Vec<_>>(),
        );
        let world = PeerNames::world(4, places.clone());
        assert_eq!(
            world.name(lost(1)).to_string(),
            "all_reduce: lost rank 1: it closed the connection (world rank 1 runs on host n0 as pid 101)"
        );
        let stages = PeerNames {
            world: vec![1, 3],
            roles: vec!["pipeline stage 0 of group [1, 3]".into(), "pipeline stage 1 of group [1, 3]".into()],
            places,
        };
        let err = stages.name(lost(1));
        assert_eq!(err.culprit(), Some(3));
        assert_eq!(
            err.to_string(),
            "all_reduce: lost rank 3: it closed the connection (world rank 3 is pipeline stage 1 of group [1, 3], on host n1 as pid 103)"
        );
        // A culprit outside the group (found through the job's notes) is placed, not given a role.
        let failed =
            CommError::PeerFailed { op: "send".into(), culprit: 2, reporter: 3, reason: AbortReason::Lost };
        assert!(stages.describe(failed).to_string().ends_with("(world rank 2 runs on host n1 as pid 102)"));
        // Threads of one process: the world adds nothing, a sub-group its roles.
        let threads = PeerNames { places: Default::default(), ..stages };
        assert_eq!(PeerNames::world(4, Default::default()).name(lost(1)).to_string(), lost(1).to_string());
        assert!(threads
            .name(lost(0))
            .to_string()
            .ends_with("(world rank 1 is pipeline stage 0 of group [1, 3])"));
    }

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
