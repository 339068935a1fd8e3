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

/// A message to send: its header and payload.
pub struct Outgoing<'a> {
    pub peer: usize,
    pub header: Header,
    pub payload: &'a [u8],
}

/// A message to receive: the header this rank expects, and where the payload goes.
pub struct Incoming<'a> {
    pub peer: usize,
    pub expect: Header,
    pub sink: &'a mut dyn Sink,
}

/// Moves messages between the ranks of one group (ranks are indices within the group).
/// Messages between a pair of ranks arrive in the order they were sent.
pub trait Transport: Send {
    fn rank(&self) -> usize;
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

    pub fn parts(&self) -> &[*mut u8] {
        &self.parts
    }

    /// Bytes in each part.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}
