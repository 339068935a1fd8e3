//! The point-to-point layer every algorithm is written against, and its implementations.

pub mod cma;
pub mod inproc;
pub mod shm;
pub mod tcp;

use crate::error::{AbortReason, Result};
use crate::frame::Header;
use crate::sink::Sink;
use std::sync::Arc;
use std::time::Duration;

/// After a timeout waiting for `first`, finds the rank the wait was really stuck behind.
///
/// When one rank stops, every rank blocked on it directly or through others times out at
/// about the same moment, each blaming the peer it waited on. So a rank that times out
/// first publishes whom it waited for (before looking at anyone else's record), then
/// follows the published records: `first` waited for q, q for r, ... until a rank that
/// published nothing within the budget (the stuck one), a cycle, or this rank. Returns
/// that rank and the chain of ranks walked through before it (empty when `first` itself
/// published nothing).
pub(crate) fn follow_wait_chain(
    me: usize,
    first: usize,
    budget: Duration,
    mut waited_for: impl FnMut(usize, Duration) -> Option<usize>,
) -> (usize, Vec<usize>) {
    let deadline = std::time::Instant::now() + budget;
    let mut chain = Vec::new();
    let mut cur = first;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match waited_for(cur, left) {
            Some(next) if next != me && next != cur && !chain.contains(&next) => {
                chain.push(cur);
                cur = next;
            }
            _ => return (cur, chain),
        }
    }
}

/// The timeout error for a wait that [`follow_wait_chain`] traced to `culprit` through
/// `chain`.
pub(crate) fn chained_timeout(
    op: &str,
    me: usize,
    chain: &[usize],
    culprit: usize,
    waited: Duration,
) -> crate::error::CommError {
    let op = if chain.is_empty() {
        op.to_string()
    } else {
        let hops: Vec<String> = chain.iter().chain([&culprit]).map(|r| r.to_string()).collect();
        format!("{op} (wait chain: rank {me} -> {}; each was waiting for the next)", hops.join(" -> "))
    };
    crate::error::CommError::Timeout { op, peer: culprit, waited }
}

/// How long a rank that timed out spends, at most, tracing whom it was stuck behind.
pub(crate) fn wait_chain_budget(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// A message to send: its header and payload.
pub struct Outgoing<'a> {
    /// The receiving rank.
    pub peer: usize,
    /// The message's header.
    pub header: Header,
    /// Its payload (`header.payload_len` bytes).
    pub payload: &'a [u8],
}

/// A message to receive: the header this rank expects, and where the payload goes.
pub struct Incoming<'a> {
    /// The sending rank.
    pub peer: usize,
    /// The header the message must carry; another is [`CommError::Mismatch`](crate::CommError::Mismatch).
    pub expect: Header,
    /// Where the payload goes.
    pub sink: &'a mut dyn Sink,
}

/// Moves messages between the ranks of one group (ranks are indices within the group).
/// Messages between a pair of ranks arrive in the order they were sent.
pub trait Transport: Send {
    /// This rank within the group.
    fn rank(&self) -> usize;
    /// Ranks in the group.
    fn size(&self) -> usize;

    /// Sends one message and receives one, concurrently, so that two ranks sending to each
    /// other never deadlock and large payloads stream through bounded buffers. Returns when
    /// the payload was handed over (the send buffer may be reused) and the incoming payload
    /// was fully given to its sink.
    fn exchange(
        &mut self,
        send: Option<Outgoing<'_>>,
        recv: Option<Incoming<'_>>,
        timeout: Duration,
    ) -> Result<()>;

    /// Best-effort notice to every peer that this rank gives up because `culprit` failed
    /// during `op`, so that they stop within moments instead of waiting for a timeout.
    fn abort(&mut self, op: &Header, culprit: usize, reason: AbortReason);

    /// Direct access to the peers' memory, when every rank of the group can read and write
    /// every other's (threads of one process, or processes of one host with cross-memory
    /// attach). The answer is the same on every member, since algorithms are chosen by it.
    fn peer_memory(&self) -> Option<Arc<dyn PeerMemory>> {
        None
    }
}

/// Copies between this rank's memory and a peer's, at addresses the peer published in an
/// earlier message. Algorithms that use it agree on exclusive ownership of every byte they
/// touch, and on when the peer's buffer stays valid, through messages on the transport.
pub trait PeerMemory: Send + Sync {
    /// Whether peers' addresses can be dereferenced here (ranks are threads of this
    /// process), so that an algorithm may reduce straight out of them instead of copying.
    fn shares_address_space(&self) -> bool;

    /// Copies `dst.len()` bytes from address `addr` of `peer` into `dst`, for `op`.
    ///
    /// # Safety
    /// `[addr, addr + dst.len())` must lie in a buffer `peer` published for the current
    /// operation, that no other rank writes until this rank is done with it.
    unsafe fn read(&self, op: &Header, peer: usize, addr: u64, dst: &mut [u8]) -> Result<()>;

    /// Copies `src` to address `addr` of `peer`, for `op`.
    ///
    /// # Safety
    /// `[addr, addr + src.len())` must lie in a buffer `peer` published for the current
    /// operation, that no other rank reads or writes until this rank is done with it.
    unsafe fn write(&self, op: &Header, peer: usize, addr: u64, src: &[u8]) -> Result<()>;
}

/// Creates the transport of a group of ranks. One per job; the communicator uses it for the
/// world and for every sub-group it carves out.
pub trait Fabric: Send + Sync {
    /// `key` names the group uniquely in the job; `members` are the world ranks in group
    /// order and `index` is this rank's position among them. Every member calls it.
    fn connect(
        &self,
        key: &str,
        members: &[usize],
        index: usize,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>>;

    /// Short name for messages and benchmarks.
    fn name(&self) -> &'static str;

    /// Leaves `value` under `key` in notes every rank of the job can read (the rendezvous
    /// store, for processes): best effort and bounded in time, since it carries a failing
    /// rank's last words (see [`crate::blame`]).
    fn leave_note(&self, _key: &str, _value: &str) {}

    /// The note left under `key`, waiting for it at most `wait`; `None` when none came.
    fn read_note(&self, _key: &str, _wait: Duration) -> Option<String> {
        None
    }

    /// Whether the notes can still be read: false once the rendezvous store stopped
    /// answering (its host, rank 0, died or froze).
    fn notes_in_reach(&self) -> bool {
        true
    }

    /// Memory of `bytes` per member that every member of the group maps, for collectives
    /// that read and write peers' buffers in place ([`SharedRegion`]). `key` names this
    /// allocation uniquely in the job; every member calls it with the same `bytes`. `None`
    /// where the transport has no such memory (threads need none: they share everything).
    fn share(
        &self,
        _key: &str,
        _members: &[usize],
        _index: usize,
        _bytes: usize,
        _timeout: Duration,
    ) -> Result<Option<SharedRegion>> {
        Ok(None)
    }
}

/// Memory shared by the members of a group: one part per member, each mapped into every
/// member's address space. The mappings stay valid as long as this value lives, whatever
/// the other members do.
pub struct SharedRegion {
    /// Where each member's part lies in this process, by group rank.
    parts: Vec<*mut u8>,
    bytes: usize,
    _mappings: Box<dyn Send + Sync>,
}

// SAFETY: the pointers address shared mappings owned by `_mappings`, which is Send + Sync;
// who may touch which bytes when is decided by the collectives that use the region.
unsafe impl Send for SharedRegion {}
// SAFETY: as above.
unsafe impl Sync for SharedRegion {}

impl SharedRegion {
    /// # Safety
    /// Each of `parts` must point at `bytes` bytes of a writable mapping that `mappings`
    /// keeps alive, aligned to at least 64 bytes.
    pub unsafe fn new(parts: Vec<*mut u8>, bytes: usize, mappings: Box<dyn Send + Sync>) -> Self {
        SharedRegion { parts, bytes, _mappings: mappings }
    }

    /// Where member `rank`'s part lies in this process.
    pub fn part(&self, rank: usize) -> *mut u8 {
        self.parts[rank]
    }

    /// Every member's part, by rank.
    pub fn parts(&self) -> &[*mut u8] {
        &self.parts
    }

    /// Bytes in each part.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_chain_ends_at_the_rank_that_published_nothing() {
        // Rank 0 waited for 2, 2 for 3; 3 (stopped) published nothing.
        let records = [None, Some(3), Some(3), None];
        let f = |r: usize, _: Duration| records[r];
        assert_eq!(follow_wait_chain(0, 2, Duration::ZERO, f), (3, vec![2]));
        assert_eq!(follow_wait_chain(1, 3, Duration::ZERO, f), (3, vec![]));
        // A cycle back to this rank stops at the last rank before it.
        let cycle = [Some(1), Some(0)];
        assert_eq!(follow_wait_chain(0, 1, Duration::ZERO, |r, _| cycle[r]), (1, vec![]));
        let err = chained_timeout("all_reduce", 0, &[2], 3, Duration::from_secs(1)).to_string();
        assert!(err.contains("rank 0 -> 2 -> 3") && err.contains("waiting for rank 3"), "{err}");
    }
}
