//! Naming the rank to blame across groups. Each group's transport finds whom its own
//! members stopped for; this adds what only the job as a whole knows: a rank that fails
//! leaves, in notes every rank can read ([`Fabric::leave_note`]), the world rank it blamed,
//! and a rank that times out leaves the world rank it waited for. A survivor whose own
//! groups never held the culprit (in TP 2 x PP 2, the rank diagonal to a stopped one) then
//! follows those notes to it instead of blaming the neighbour that gave up first.

use crate::error::{AbortReason, CommError};
use crate::store::StoreClient;
use crate::transport::tcp::{lock_within, with_short_timeout, ABORT_STORE_LIMIT};
use crate::transport::{chained_timeout, follow_wait_chain, wait_chain_budget, Fabric};
use std::sync::Mutex;
use std::time::Duration;

/// How long a rank that lost a peer waits for the peer's note saying whom it blamed.
const NOTE_WAIT: Duration = Duration::from_millis(300);

fn failed_key(world: usize) -> String {
    format!("blame/failed/{world}")
}

fn waiting_key(world: usize) -> String {
    format!("blame/waiting/{world}")
}

/// [`Fabric::leave_note`] through the rendezvous store, bounded so that a store host that
/// stopped answering cannot hold up a failing rank.
pub(crate) fn leave_store_note(store: &Mutex<StoreClient>, key: &str, value: &str) {
    if let Some(mut store) = lock_within(store, ABORT_STORE_LIMIT) {
        let _ = with_short_timeout(&mut store, ABORT_STORE_LIMIT, |s| s.set(key, value.as_bytes()));
    }
}

/// [`Fabric::read_note`] through the rendezvous store.
pub(crate) fn read_store_note(store: &Mutex<StoreClient>, key: &str, wait: Duration) -> Option<String> {
    let mut store = lock_within(store, ABORT_STORE_LIMIT)?;
    with_short_timeout(&mut store, ABORT_STORE_LIMIT, |s| s.get_string(key, wait)).ok()
}

/// Whether the store still answers (a client that another thread holds busy counts as
/// answering).
pub(crate) fn store_in_reach(store: &Mutex<StoreClient>) -> bool {
    lock_within(store, ABORT_STORE_LIMIT).is_none_or(|s| !s.is_broken())
}

/// The note of world rank `reporter`'s failure: whom it blamed and why.
fn failure_of(fabric: &dyn Fabric, reporter: usize, wait: Duration) -> Option<(usize, AbortReason)> {
    let note = fabric.read_note(&failed_key(reporter), wait)?;
    let (culprit, reason) = note.split_once(',')?;
    Some((culprit.parse().ok()?, AbortReason::from_u8(reason.parse().ok()?)))
}

/// Follows the job's notes from `err` (its ranks world ranks, raised on world rank `me`)
/// to the rank really to blame: a lost peer that gave up because of another rank is
/// reported as [`CommError::PeerFailed`] naming that rank, and a wait is traced through
/// the ranks each waited for, whatever their groups. `timeout` is the communicator's.
pub(crate) fn trace(fabric: &dyn Fabric, me: usize, err: CommError, timeout: Duration) -> CommError {
    match err {
        CommError::Timeout { op, peer, waited } => {
            fabric.leave_note(&waiting_key(me), &peer.to_string());
            let (culprit, chain) = follow_wait_chain(me, peer, wait_chain_budget(timeout), |r, wait| {
                fabric.read_note(&waiting_key(r), wait)?.parse().ok()
            });
            if culprit == peer {
                // The store host does not answer either: with every other rank's record out
                // of reach, the likeliest culprit is the store host itself.
                if peer != 0 && me != 0 && !fabric.notes_in_reach() {
                    let op = op.split(" (wait chain:").next().unwrap_or(&op);
                    return CommError::Timeout {
                        op: format!(
                            "{op} (waiting for rank {peer}; the rendezvous store on rank 0 does not answer either)"
                        ),
                        peer: 0,
                        waited,
                    };
                }
                return CommError::Timeout { op, peer, waited };
            }
            // The group's own trace counted members by group index; this one counts world
            // ranks and replaces it.
            let op = op.split(" (wait chain:").next().unwrap_or(&op).to_string();
            chained_timeout(&op, me, &chain, culprit, waited)
        }
        CommError::PeerLost { op, peer, detail } => match failure_of(fabric, peer, NOTE_WAIT) {
            Some((culprit, reason)) if culprit != peer && culprit != me => {
                CommError::PeerFailed { op, culprit, reporter: peer, reason }
            }
            // Rank 0 hosts the store, and the store is gone too: a rank that lost a peer
            // because of rank 0 could leave no word, and rank 0 is the likelier culprit.
            None if peer != 0 && me != 0 && !fabric.notes_in_reach() => CommError::PeerLost {
                op: format!(
                    "{op} (rank {peer} left: {detail}; the rendezvous store on rank 0 does not answer either)"
                ),
                peer: 0,
                detail: "the store it hosts is gone".into(),
            },
            _ => CommError::PeerLost { op, peer, detail },
        },
        CommError::PeerFailed { op, culprit, reporter, reason } => {
            match failure_of(fabric, reporter, NOTE_WAIT) {
                Some((c, r)) if c != culprit && c != reporter && c != me => {
                    CommError::PeerFailed { op, culprit: c, reporter, reason: r }
                }
                _ => CommError::PeerFailed { op, culprit, reporter, reason },
            }
        }
        other => other,
    }
}

/// Leaves world rank `me`'s failure over `err` (its ranks world ranks) in the job's notes,
/// for peers in other groups that see only this rank's connections drop.
pub(crate) fn record(fabric: &dyn Fabric, me: usize, err: &CommError) {
    let culprit = err.culprit().unwrap_or(me);
    fabric.leave_note(&failed_key(me), &format!("{culprit},{}", AbortReason::of(err) as u8));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::inproc::InprocFabric;

    fn lost(peer: usize) -> CommError {
        CommError::PeerLost { op: "all_reduce".into(), peer, detail: "closed".into() }
    }

    /// A rank that lost a peer which gave up because of a third rank names the third.
    #[test]
    fn a_lost_peer_that_blamed_another_rank_passes_the_blame_on() {
        let fabric = InprocFabric::new();
        // World rank 1 lost rank 3 and left word; rank 0 then loses rank 1.
        record(&fabric, 1, &lost(3));
        let err = trace(&fabric, 0, lost(1), Duration::from_secs(1));
        assert_eq!(err.culprit(), Some(3), "{err}");
        assert!(err.to_string().contains("rank 1 gave up because of rank 3"), "{err}");
        // A peer that left no word is blamed itself.
        let err = trace(&fabric, 0, lost(2), Duration::from_secs(1));
        assert_eq!(err.culprit(), Some(2), "{err}");
    }

    /// A fabric whose store host is gone: no notes, none in reach.
    struct StoreGone;

    impl Fabric for StoreGone {
        fn connect(
            &self,
            _key: &str,
            _members: &[usize],
            _index: usize,
            _timeout: Duration,
        ) -> crate::error::Result<Box<dyn crate::transport::Transport>> {
            Err(CommError::InvalidArgument("no groups".into()))
        }

        fn name(&self) -> &'static str {
            "gone"
        }

        fn notes_in_reach(&self) -> bool {
            false
        }
    }

    /// A peer lost while the store on rank 0 is gone too: rank 0 is blamed, saying why.
    #[test]
    fn a_lost_peer_with_the_store_gone_blames_the_store_host() {
        let err = trace(&StoreGone, 3, lost(2), Duration::from_secs(1));
        assert_eq!(err.culprit(), Some(0), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("rank 2 left: closed; the rendezvous store on rank 0 does not answer"),
            "{text}"
        );
        // A wait likewise.
        let wait = CommError::Timeout { op: "send".into(), peer: 2, waited: Duration::from_secs(3) };
        let err = trace(&StoreGone, 3, wait, Duration::from_millis(100));
        assert_eq!(err.culprit(), Some(0), "{err}");
        assert!(err.to_string().contains("waiting for rank 2; the rendezvous store on rank 0"), "{err}");
        // Losing rank 0 itself needs no such guess.
        assert_eq!(trace(&StoreGone, 3, lost(0), Duration::from_secs(1)).to_string(), lost(0).to_string());
    }

    /// A wait is traced through the ranks each waited for, across groups, to the stuck one.
    #[test]
    fn a_wait_is_traced_across_groups_by_world_rank() {
        let fabric = InprocFabric::new();
        fabric.leave_note(&waiting_key(1), "3");
        let timeout = CommError::Timeout {
            op: "all_reduce (wait chain: rank 0 -> 1; each was waiting for the next)".into(),
            peer: 1,
            waited: Duration::from_secs(3),
        };
        let err = trace(&fabric, 0, timeout, Duration::from_millis(400));
        assert_eq!(err.culprit(), Some(3), "{err}");
        let text = err.to_string();
        assert!(text.contains("rank 0 -> 1 -> 3"), "{text}");
        assert_eq!(text.matches("wait chain").count(), 1, "{text}");
        assert_eq!(fabric.read_note(&waiting_key(0), Duration::ZERO).as_deref(), Some("1"));
    }
}
