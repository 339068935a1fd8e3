//! AllReduce for ranks that reach each other's buffers: threads of one process, processes
//! with cross-memory attach ([`PeerMemory`]), or buffers every rank has mapped
//! ([`SharedRegion`]). Rank `r` owns chunk `r` of every buffer: it sums that chunk over all
//! buffers into its own, in pieces that stay in cache, and copies each finished piece into
//! every peer's buffer. Each byte is read once and written once by its owner, where the
//! ring copies every byte through the transport twice and needs an all-gather besides.
//!
//! Messages on the transport frame the copies. First every rank sends every other the
//! address (or name) of its buffer; the headers carry the operation and its size, so a
//! mismatched call fails here, before anyone touches a peer's memory. Last comes a barrier
//! that a rank enters after its final write, so once it leaves no peer touches its buffer.

use super::{bytes, bytes_mut, chunk, scratch_as, Link, Recv};
use crate::element::{Combine, Element, ReduceOp};
use crate::error::{CommError, Result};
use crate::frame::Header;
use crate::sink::CopySink;
use crate::transport::{PeerMemory, SharedRegion};

/// Bytes reduced per round over the peers: the accumulating piece stays in L2 while every
/// peer's contribution is added, and is then copied out to every peer from there.
const PIECE_BYTES: usize = 256 << 10;

/// First step number of [`all_reduce_mapped`]'s messages: a rank that calls it while a peer
/// calls [`all_reduce`] (or the ring) then fails the header check at once.
const MAPPED_STEPS: u32 = 1 << 24;

/// Sends `word` to every other rank and fills `words` with theirs, by rank (this rank's is
/// `word`). Uses steps `first_step..first_step + n - 1`.
fn exchange_words(
    link: &mut Link,
    op: &Header,
    first_step: u32,
    word: u64,
    words: &mut Vec<u64>,
) -> Result<()> {
    let (n, rank) = (link.size, link.rank);
    words.clear();
    words.resize(n, 0);
    words[rank] = word;
    let payload = word.to_le_bytes();
    for k in 1..n {
        let (to, from) = ((rank + k) % n, (rank + n - k) % n);
        let mut got = [0u8; 8];
        let mut sink = CopySink { dst: &mut got, granule: 8 };
        let step = first_step + (k - 1) as u32;
        link.step(op, step, Some((to, &payload)), Some(Recv { peer: from, len: 8, sink: &mut sink }))?;
        words[from] = u64::from_le_bytes(got);
    }
    Ok(())
}

/// Dissemination barrier: after round `j` a rank has heard, directly or not, from the
/// `2^(j+1) - 1` ranks before it. Uses steps from `first_step`.
fn barrier(link: &mut Link, op: &Header, first_step: u32) -> Result<()> {
    let (n, rank) = (link.size, link.rank);
    let mut dist = 1;
    let mut step = first_step;
    while dist < n {
        let (to, from) = ((rank + dist) % n, (rank + n - dist) % n);
        let mut sink = CopySink { dst: &mut [], granule: 1 };
        link.step(op, step, Some((to, &[])), Some(Recv { peer: from, len: 0, sink: &mut sink }))?;
        dist *= 2;
        step += 1;
    }
    Ok(())
}

/// In place over all ranks' `buf`, through the transport's [`PeerMemory`]. `scratch` holds
/// one piece of a peer's data when peers' memory has to be copied to be read; `addrs`
/// receives the peers' buffer addresses. Both are kept by the caller, so that steady-state
/// calls do not allocate.
pub fn all_reduce<T: Element>(
    link: &mut Link,
    op: &Header,
    buf: &mut [T],
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
    scratch: &mut Vec<u64>,
    addrs: &mut Vec<u64>,
) -> Result<()> {
    let pm = link.transport.peer_memory().ok_or_else(|| {
        CommError::InvalidArgument("a direct AllReduce needs a transport with access to peers' memory".into())
    })?;
    // From here on this rank reaches its own buffer only through `base`, the same pointer its
    // peers were given, touching only its own chunk while they touch theirs.
    let base = buf.as_mut_ptr();
    exchange_words(link, op, 0, base as u64, addrs)?;
    let reach = if pm.shares_address_space() { Reach::Here } else { Reach::Copy(&*pm, scratch) };
    reduce_own_chunk(link, op, base, buf.len(), addrs, reach, reduce, combine)?;
    barrier(link, op, (link.size - 1) as u32)
}

/// In place over the buffers of `region` (one part per rank, `len` elements each), which
/// every rank has mapped. `id` names the buffer: ranks that pass different ones are told.
/// `addrs` is kept by the caller, as for [`all_reduce`].
#[allow(clippy::too_many_arguments)]
pub fn all_reduce_mapped<T: Element>(
    link: &mut Link,
    op: &Header,
    region: &SharedRegion,
    len: usize,
    id: u64,
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
    addrs: &mut Vec<u64>,
) -> Result<()> {
    debug_assert!(region.bytes() >= len * std::mem::size_of::<T>());
    exchange_words(link, op, MAPPED_STEPS, id, addrs)?;
    if let Some(peer) = addrs.iter().position(|&other| other != id) {
        let err = CommError::Mismatch {
            peer,
            local: format!("{op} on shared buffer #{id}"),
            remote: format!("shared buffer #{}", addrs[peer]),
        };
        return Err(link.fail(op, err));
    }
    addrs.clear();
    addrs.extend(region.parts().iter().map(|&p| p as u64));
    let base = region.part(link.rank).cast::<T>();
    reduce_own_chunk(link, op, base, len, addrs, Reach::Here, reduce, combine)?;
    barrier(link, op, MAPPED_STEPS + (link.size - 1) as u32)
}

/// How this rank reaches the addresses of its peers' buffers.
enum Reach<'a> {
    /// They are addresses in this process.
    Here,
    /// Through the transport, a piece at a time through a staging buffer.
    Copy(&'a dyn PeerMemory, &'a mut Vec<u64>),
}

/// The owner's work: sums chunk `rank` of the buffer at `base` (`len` elements) with the
/// same chunk of every peer's buffer (at `addrs`, by rank) and writes the result into
/// every peer's.
#[allow(clippy::too_many_arguments)]
fn reduce_own_chunk<T: Element>(
    link: &mut Link,
    op: &Header,
    base: *mut T,
    len: usize,
    addrs: &[u64],
    reach: Reach<'_>,
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
) -> Result<()> {
    let (n, rank) = (link.size, link.rank);
    let elem = std::mem::size_of::<T>();
    let piece = (PIECE_BYTES / elem).max(1);
    let mine = chunk(len, n, rank);
    let (copier, staging) = match reach {
        Reach::Here => (None, &mut [][..]),
        Reach::Copy(pm, scratch) => (Some(pm), scratch_as::<T>(scratch, piece.min(mine.len()))),
    };
    let mut start = mine.start;
    while start < mine.end {
        let count = piece.min(mine.end - start);
        let offset = (start * elem) as u64;
        // SAFETY: `start..start + count` lies in chunk `rank` of this rank's buffer, which
        // no peer touches (each touches only its own chunk of every buffer).
        let acc = unsafe { std::slice::from_raw_parts_mut(base.add(start), count) };
        for k in 1..n {
            let peer = (rank + k) % n;
            let addr = addrs[peer] + offset;
            match copier {
                None => {
                    // SAFETY: the peer's buffer is mapped here and lives until the closing
                    // barrier; only this rank touches its chunk `rank`.
                    let incoming = unsafe { std::slice::from_raw_parts(addr as usize as *const T, count) };
                    combine.reduce(reduce, acc, incoming);
                }
                Some(pm) => {
                    let stage = &mut staging[..count];
                    // SAFETY: as above, in the peer's process.
                    if let Err(err) = unsafe { pm.read(op, peer, addr, bytes_mut(stage)) } {
                        return Err(link.fail(op, err));
                    }
                    combine.reduce(reduce, acc, stage);
                }
            }
        }
        for k in 1..n {
            let peer = (rank + k) % n;
            let addr = addrs[peer] + offset;
            match copier {
                // SAFETY: as above; `acc` is this rank's memory, the target the peer's.
                None => unsafe {
                    std::ptr::copy_nonoverlapping(acc.as_ptr(), addr as usize as *mut T, count)
                },
                Some(pm) => {
                    // SAFETY: as above.
                    if let Err(err) = unsafe { pm.write(op, peer, addr, bytes(acc)) } {
                        return Err(link.fail(op, err));
                    }
                }
            }
        }
        start += count;
    }
    Ok(())
}
