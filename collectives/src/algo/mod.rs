//! Collective algorithms, written once over [`Transport`].

pub mod broadcast;
pub mod direct;
pub mod doubling;
pub mod ring;

use crate::element::{DType, Element, ReduceOp};
use crate::error::{AbortReason, CommError, PeerNames, Result};
use crate::frame::{FrameType, Header, OpKind};
use crate::sink::Sink;
use crate::transport::{Incoming, Outgoing, Transport};
use std::ops::Range;
use std::time::Duration;

/// A transport plus what every message needs: this rank's identity, the timeout, and the
/// broken flag that makes a failed communicator refuse further work.
pub struct Link {
    /// How messages travel to the other ranks.
    pub transport: Box<dyn Transport>,
    /// This rank, `0..size`.
    pub rank: usize,
    /// Ranks in the communicator.
    pub size: usize,
    /// How long a step waits for a peer before [`CommError::Timeout`].
    pub timeout: Duration,
    /// Why the communicator broke, once it has: every later call fails with it.
    pub broken: Option<String>,
    /// The world ranks, roles and places its errors name peers by.
    pub names: std::sync::Arc<PeerNames>,
    /// Where failures are traced across groups and left for other groups' ranks to read
    /// (see [`crate::blame`]).
    pub fabric: std::sync::Arc<dyn crate::transport::Fabric>,
}

/// What one side of a step receives: from `peer`, `len` bytes, into `sink`.
pub struct Recv<'s> {
    /// The sending rank.
    pub peer: usize,
    /// Bytes to receive.
    pub len: usize,
    /// Where they go (copied, or combined into a buffer).
    pub sink: &'s mut dyn Sink,
}

impl Link {
    /// [`CommError::Broken`] once the communicator has failed, so no rank runs on alone.
    pub fn ensure_healthy(&self) -> Result<()> {
        match &self.broken {
            Some(why) => Err(CommError::Broken(why.clone())),
            None => Ok(()),
        }
    }

    /// One step of an algorithm: sends `send` to its peer and receives into `recv`, both
    /// framed with `op`'s identity and `step`. A failure breaks the communicator and tells
    /// the peers.
    pub fn step(
        &mut self,
        op: &Header,
        step: u32,
        send: Option<(usize, &[u8])>,
        recv: Option<Recv<'_>>,
    ) -> Result<()> {
        self.step_split(op, step, step, send, recv)
    }

    /// [`Link::step`] where the outgoing and incoming messages carry different step numbers.
    pub fn step_split(
        &mut self,
        op: &Header,
        send_step: u32,
        recv_step: u32,
        send: Option<(usize, &[u8])>,
        recv: Option<Recv<'_>>,
    ) -> Result<()> {
        let send = send.map(|(peer, payload)| {
            let h = Header { aux: send_step, ..*op };
            (peer, h, payload)
        });
        let recv = recv.map(|r| {
            let h = Header { aux: recv_step, ..*op };
            (h, r)
        });
        self.step_pair(op, send, recv)
    }

    /// The general step: each direction with its own operation identity (send/recv pairs
    /// count messages per peer). `op` names the operation in errors.
    pub fn step_pair(
        &mut self,
        op: &Header,
        send: Option<(usize, Header, &[u8])>,
        recv: Option<(Header, Recv<'_>)>,
    ) -> Result<()> {
        let outgoing = send.map(|(peer, header, payload)| Outgoing {
            peer,
            header: Header { payload_len: payload.len() as u64, from: self.rank as u32, ..header },
            payload,
        });
        let incoming = recv.map(|(header, r)| Incoming {
            peer: r.peer,
            expect: Header { payload_len: r.len as u64, from: r.peer as u32, ..header },
            sink: r.sink,
        });
        self.transport.exchange(outgoing, incoming, self.timeout).map_err(|err| self.fail(op, err))
    }

    /// Breaks the communicator over `err`, raised during `op`, and tells the peers: those of
    /// the group through the transport, those of other groups through the job's notes. The
    /// error comes back naming world ranks, the blamed peer's role and where it runs.
    pub fn fail(&mut self, op: &Header, err: CommError) -> CommError {
        let culprit = err.culprit().unwrap_or(self.rank);
        let reason = AbortReason::of(&err);
        let me = self.names.world_rank(self.rank);
        let err = crate::blame::trace(&*self.fabric, me, self.names.to_world(err), self.timeout);
        crate::blame::record(&*self.fabric, me, &err);
        self.transport.abort(op, culprit, reason);
        let err = self.names.describe(err);
        self.broken = Some(err.to_string());
        err
    }
}

/// Identity of one operation, shared by all its messages.
pub fn op_header(
    kind: OpKind,
    dtype: DType,
    seq: u64,
    count: usize,
    reduce: Option<ReduceOp>,
    tag: u32,
) -> Header {
    Header {
        frame: FrameType::Data,
        kind,
        dtype,
        reduce,
        seq,
        count: count as u64,
        payload_len: 0,
        tag,
        aux: 0,
        from: 0,
    }
}

/// Element range of chunk `i` when `len` elements are split into `parts` near-equal chunks.
pub fn chunk(len: usize, parts: usize, i: usize) -> Range<usize> {
    let base = len / parts;
    let extra = len % parts;
    let start = i * base + i.min(extra);
    start..start + base + usize::from(i < extra)
}

/// Borrows `read` and `write` of one buffer at once; the ranges must not overlap.
pub fn split_pair<T>(buf: &mut [T], read: Range<usize>, write: Range<usize>) -> (&[T], &mut [T]) {
    debug_assert!(read.end <= write.start || write.end <= read.start);
    if read.start < write.start {
        let (lo, hi) = buf.split_at_mut(write.start);
        (&lo[read], &mut hi[..write.end - write.start])
    } else {
        let (lo, hi) = buf.split_at_mut(read.start);
        (&hi[..read.end - read.start], &mut lo[write])
    }
}

/// Grows `scratch` (8-byte words) to hold `len` elements of `T` and views it as such.
pub fn scratch_as<T: Element>(scratch: &mut Vec<u64>, len: usize) -> &mut [T] {
    let bytes = len * std::mem::size_of::<T>();
    let words = bytes.div_ceil(8);
    if scratch.len() < words {
        scratch.resize(words, 0);
    }
    &mut bytemuck::cast_slice_mut::<u64, T>(&mut scratch[..words])[..len]
}

/// The bytes of a slice of elements.
pub fn bytes<T: Element>(s: &[T]) -> &[u8] {
    bytemuck::cast_slice(s)
}

/// The bytes of a mutable slice of elements.
pub fn bytes_mut<T: Element>(s: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(s)
}

#[cfg(test)]
mod tests {
    use super::chunk;

    #[test]
    fn chunks_tile_the_buffer() {
        for len in [0, 1, 7, 64, 1001] {
            for parts in 1..=9 {
                let mut next = 0;
                for i in 0..parts {
                    let c = chunk(len, parts, i);
                    assert_eq!(c.start, next);
                    assert!(c.len() <= len / parts + 1);
                    next = c.end;
                }
                assert_eq!(next, len);
            }
        }
    }
}
