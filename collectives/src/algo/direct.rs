//! AllReduce for ranks that reach each other's memory ([`PeerMemory`]: threads of one
//! process, or processes of one host with cross-memory attach). Rank `r` owns chunk `r` of
//! every rank's buffer: it reduces that chunk over all buffers into its own and writes the
//! result into every peer's. Each byte is read once and written once by its owner, with no
//! staging ring in between, where the ring algorithm copies twice per step.
//!
//! Two rounds of messages frame the copies. First every rank sends every other the address
//! of its buffer; the headers of these messages carry the operation's identity and size,
//! so a mismatched call fails here, before anyone touches a peer's memory. Last comes a
//! barrier: a rank enters it after its final write, so once it leaves no peer will touch
//! its buffer again.

use super::{bytes, bytes_mut, chunk, scratch_as, Link, Recv};
use crate::element::{Combine, Element, ReduceOp};
use crate::error::{CommError, Result};
use crate::frame::Header;
use crate::sink::CopySink;

/// Bytes reduced per round over the peers: the accumulating piece stays in L2 while every
/// peer's contribution is added, and is then copied out to every peer from there.
const PIECE_BYTES: usize = 256 << 10;

/// Fills `addrs` with every rank's buffer address, indexed by rank (this rank's is `own`).
fn exchange_addresses(link: &mut Link, op: &Header, own: u64, addrs: &mut Vec<u64>) -> Result<()> {
    let (n, rank) = (link.size, link.rank);
    addrs.clear();
    addrs.resize(n, 0);
    addrs[rank] = own;
    let payload = own.to_le_bytes();
    for k in 1..n {
        let (to, from) = ((rank + k) % n, (rank + n - k) % n);
        let mut got = [0u8; 8];
        let mut sink = CopySink { dst: &mut got, granule: 8 };
        link.step(
            op,
            (k - 1) as u32,
            Some((to, &payload)),
            Some(Recv { peer: from, len: 8, sink: &mut sink }),
        )?;
        addrs[from] = u64::from_le_bytes(got);
    }
    Ok(())
}

/// Dissemination barrier: after round `j` a rank has heard, directly or not, from the
/// `2^(j+1) - 1` ranks before it.
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

fn no_peer_memory() -> CommError {
    CommError::InvalidArgument("the direct AllReduce needs a transport with access to peers' memory".into())
}

/// In place over all ranks. `scratch` holds one piece of a peer's data when the peers'
/// memory has to be copied to be read; `addrs` receives the peers' buffer addresses. Both
/// are kept by the caller, so that steady-state calls do not allocate.
pub fn all_reduce<T: Element>(
    link: &mut Link,
    op: &Header,
    buf: &mut [T],
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
    scratch: &mut Vec<u64>,
    addrs: &mut Vec<u64>,
) -> Result<()> {
    let (n, rank) = (link.size, link.rank);
    link.transport.peer_memory().ok_or_else(no_peer_memory)?;
    let len = buf.len();
    // From here on this rank reaches its own buffer only through `base`, the same pointer its
    // peers were given, touching only its own chunk while they touch theirs.
    let base = buf.as_mut_ptr();
    exchange_addresses(link, op, base as u64, addrs)?;
    let elem = std::mem::size_of::<T>();
    let piece = (PIECE_BYTES / elem).max(1);
    let mine = chunk(len, n, rank);
    let shared = link.transport.peer_memory().is_some_and(|pm| pm.shares_address_space());
    let staging = if shared { &mut [][..] } else { scratch_as::<T>(scratch, piece.min(mine.len())) };
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
            let pm = link.transport.peer_memory().ok_or_else(no_peer_memory)?;
            if shared {
                // SAFETY: threads share the address space; the peer's buffer lives until the
                // closing barrier and only this rank touches its chunk `rank`.
                let incoming = unsafe { std::slice::from_raw_parts(addr as usize as *const T, count) };
                combine.reduce(reduce, acc, incoming);
            } else {
                let stage = &mut staging[..count];
                // SAFETY: as above, in the peer's process.
                let copied = unsafe { pm.read(op, peer, addr, bytes_mut(stage)) };
                if let Err(err) = copied {
                    return Err(link.fail(op, err));
                }
                combine.reduce(reduce, acc, stage);
            }
        }
        for k in 1..n {
            let peer = (rank + k) % n;
            let pm = link.transport.peer_memory().ok_or_else(no_peer_memory)?;
            // SAFETY: as above.
            let copied = unsafe { pm.write(op, peer, addrs[peer] + offset, bytes(acc)) };
            if let Err(err) = copied {
                return Err(link.fail(op, err));
            }
        }
        start += count;
    }
    barrier(link, op, (n - 1) as u32)
}
