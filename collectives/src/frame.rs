//! The fixed 48-byte header in front of every message, and its validation.
//!
//! Layout (little-endian): magic u32, frame u8, kind u8, dtype u8, reduce u8, seq u64,
//! count u64, payload_len u64, tag u32, aux u32, from u32, checksum u32.

use crate::element::{DType, ReduceOp};
use crate::error::{AbortReason, CommError};
use std::fmt;

/// Bytes of an encoded [`Header`].
pub const HEADER_LEN: usize = 48;
const MAGIC: u32 = 0x4e44_5254; // "TRDN"

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    /// A collective's payload.
    Data = 1,
    /// The sender failed; `aux` names the rank that caused it.
    Abort = 2,
}

/// The operation a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum OpKind {
    /// AllReduce.
    AllReduce = 1,
    /// ReduceScatter.
    ReduceScatter = 2,
    /// AllGather.
    AllGather = 3,
    /// Broadcast.
    Broadcast = 4,
    /// Point-to-point send and receive.
    SendRecv = 5,
    /// Barrier.
    Barrier = 6,
}

impl OpKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => OpKind::AllReduce,
            2 => OpKind::ReduceScatter,
            3 => OpKind::AllGather,
            4 => OpKind::Broadcast,
            5 => OpKind::SendRecv,
            6 => OpKind::Barrier,
            _ => return None,
        })
    }

    /// The operation's name (`all_reduce`, ...), as errors name it.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::AllReduce => "all_reduce",
            OpKind::ReduceScatter => "reduce_scatter",
            OpKind::AllGather => "all_gather",
            OpKind::Broadcast => "broadcast",
            OpKind::SendRecv => "send/recv",
            OpKind::Barrier => "barrier",
        }
    }
}

/// Header of one message. `seq` and `count` identify the operation (the per-communicator
/// sequence number and the operation's total element count); `payload_len` is this
/// message's byte length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Data or abort.
    pub frame: FrameType,
    /// The collective.
    pub kind: OpKind,
    /// The element type.
    pub dtype: DType,
    /// The reduction, for reducing collectives.
    pub reduce: Option<ReduceOp>,
    /// The communicator's sequence number of the collective.
    pub seq: u64,
    /// The collective's total element count.
    pub count: u64,
    /// This message's payload, bytes.
    pub payload_len: u64,
    /// User tag for send/recv, root for broadcast, zero otherwise.
    pub tag: u32,
    /// Step of the algorithm for data frames; the failed rank for abort frames.
    pub aux: u32,
    /// Sender's rank in the communicator.
    pub from: u32,
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} #{} of {} {}", self.kind.name(), self.seq, self.count, self.dtype.name())?;
        if let Some(op) = self.reduce {
            write!(f, " ({op:?})")?;
        }
        match self.kind {
            OpKind::SendRecv => write!(f, " tag {}", self.tag)?,
            OpKind::Broadcast => write!(f, " root {}", self.tag)?,
            _ => {}
        }
        Ok(())
    }
}

fn checksum(bytes: &[u8]) -> u32 {
    // FNV-1a: catches corrupted or misaligned headers; not a defence against forgery.
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

impl Header {
    /// The header's [`HEADER_LEN`] bytes, in the layout of the module docs, checksum last.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = self.frame as u8;
        b[5] = self.kind as u8;
        b[6] = self.dtype as u8;
        b[7] = self.reduce.map_or(0, |r| r as u8);
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.count.to_le_bytes());
        b[24..32].copy_from_slice(&self.payload_len.to_le_bytes());
        b[32..36].copy_from_slice(&self.tag.to_le_bytes());
        b[36..40].copy_from_slice(&self.aux.to_le_bytes());
        b[40..44].copy_from_slice(&self.from.to_le_bytes());
        let c = checksum(&b[..44]);
        b[44..48].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Parses a header received from `peer` while this rank runs `op`; any inconsistency is
    /// a [`CommError::Malformed`].
    pub fn decode(b: &[u8; HEADER_LEN], peer: usize, op: &Header) -> Result<Header, CommError> {
        let bad = |detail: String| CommError::Malformed { op: op.to_string(), peer, detail };
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if u32_at(0) != MAGIC {
            return Err(bad(format!("bad magic {:#010x} (not a Trident frame)", u32_at(0))));
        }
        if u32_at(44) != checksum(&b[..44]) {
            return Err(bad("header checksum mismatch (corrupted frame)".into()));
        }
        let frame = match b[4] {
            1 => FrameType::Data,
            2 => FrameType::Abort,
            v => return Err(bad(format!("unknown frame type {v}"))),
        };
        let kind = OpKind::from_u8(b[5]).ok_or_else(|| bad(format!("unknown op {}", b[5])))?;
        let dtype = DType::from_u8(b[6]).ok_or_else(|| bad(format!("unknown dtype {}", b[6])))?;
        let reduce = match b[7] {
            0 => None,
            v => Some(ReduceOp::from_u8(v).ok_or_else(|| bad(format!("unknown reduce op {v}")))?),
        };
        Ok(Header {
            frame,
            kind,
            dtype,
            reduce,
            seq: u64_at(8),
            count: u64_at(16),
            payload_len: u64_at(24),
            tag: u32_at(32),
            aux: u32_at(36),
            from: u32_at(40),
        })
    }

    /// An abort frame telling peers that `culprit` failed during `op`. Abort frames carry
    /// no payload; their `payload_len` holds the [`AbortReason`].
    pub fn abort(op: &Header, culprit: usize, from: usize, reason: AbortReason) -> Header {
        Header {
            frame: FrameType::Abort,
            payload_len: reason as u64,
            aux: culprit as u32,
            from: from as u32,
            ..*op
        }
    }

    /// Checks a received header against the one this rank expects from `peer`. Abort
    /// frames become [`CommError::PeerFailed`], any other difference a
    /// [`CommError::Mismatch`].
    pub fn check(&self, expected: &Header, peer: usize) -> Result<(), CommError> {
        if self.frame == FrameType::Abort {
            return Err(CommError::PeerFailed {
                op: expected.to_string(),
                culprit: self.aux as usize,
                reporter: peer,
                reason: AbortReason::from_u8(self.payload_len.min(255) as u8),
            });
        }
        if self.from as usize != peer {
            return Err(CommError::Malformed {
                op: expected.to_string(),
                peer,
                detail: format!("frame claims to come from rank {}", self.from),
            });
        }
        let same_op = self.kind == expected.kind
            && self.seq == expected.seq
            && self.count == expected.count
            && self.dtype == expected.dtype
            && self.reduce == expected.reduce
            && self.tag == expected.tag;
        if !same_op {
            return Err(CommError::Mismatch { peer, local: expected.to_string(), remote: self.to_string() });
        }
        if self.payload_len != expected.payload_len || self.aux != expected.aux {
            return Err(CommError::Malformed {
                op: expected.to_string(),
                peer,
                detail: format!(
                    "step {} carries {} bytes, expected step {} with {} bytes",
                    self.aux, self.payload_len, expected.aux, expected.payload_len
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            frame: FrameType::Data,
            kind: OpKind::AllReduce,
            dtype: DType::F32,
            reduce: Some(ReduceOp::Sum),
            seq: 7,
            count: 1000,
            payload_len: 1000,
            tag: 0,
            aux: 3,
            from: 1,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode(), 1, &h).unwrap(), h);
    }

    #[test]
    fn corruption_is_malformed() {
        let h = sample();
        for i in 0..HEADER_LEN {
            let mut b = h.encode();
            b[i] ^= 0x10;
            let err = Header::decode(&b, 1, &h).unwrap_err();
            assert!(matches!(err, CommError::Malformed { peer: 1, .. }), "{err}");
        }
    }

    #[test]
    fn different_op_is_mismatch() {
        let h = sample();
        let other = Header { kind: OpKind::AllGather, ..h };
        let err = other.check(&h, 1).unwrap_err();
        assert!(matches!(err, CommError::Mismatch { peer: 1, .. }), "{err}");
        let bigger = Header { count: 1001, ..h };
        assert!(matches!(bigger.check(&h, 1), Err(CommError::Mismatch { .. })));
    }
}
