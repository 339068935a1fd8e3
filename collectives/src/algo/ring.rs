//! Ring reduce-scatter and all-gather, and AllReduce as one then the other: n-1 steps each,
//! every rank sending one chunk to its right neighbour and receiving one from its left per
//! step. Each step's payload streams through the transport in pieces, so the receiver
//! reduces the front of a chunk while its back is still in flight.

use super::{bytes, bytes_mut, chunk, split_pair, Link, Recv};
use crate::element::{Combine, Element, ReduceOp};
use crate::error::Result;
use crate::frame::Header;
use crate::sink::{CopySink, ReduceSink};

fn neighbours(link: &Link) -> (usize, usize) {
    let n = link.size;
    ((link.rank + 1) % n, (link.rank + n - 1) % n)
}

/// In place: afterwards chunk `rank` of `buf` (see [`chunk`]) holds the reduction over all
/// ranks; other chunks hold partial sums.
pub fn reduce_scatter_in_place<T: Element>(
    link: &mut Link,
    op: &Header,
    buf: &mut [T],
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
) -> Result<()> {
    let n = link.size;
    let (right, left) = neighbours(link);
    for s in 0..n - 1 {
        let send = chunk(buf.len(), n, (link.rank + 2 * n - s - 1) % n);
        let recv = chunk(buf.len(), n, (link.rank + 2 * n - s - 2) % n);
        let recv_len = recv.len() * std::mem::size_of::<T>();
        let (send_part, recv_part) = split_pair(buf, send, recv);
        let mut sink = ReduceSink { out: recv_part, local: None, op: reduce, combine };
        link.step(
            op,
            s as u32,
            Some((right, bytes(send_part))),
            Some(Recv { peer: left, len: recv_len, sink: &mut sink }),
        )?;
    }
    Ok(())
}

/// In place: chunk `rank` of `buf` is this rank's contribution; afterwards every chunk holds
/// its owner's. Steps are numbered from `first_step`.
pub fn all_gather_in_place<T: Element>(
    link: &mut Link,
    op: &Header,
    buf: &mut [T],
    first_step: u32,
) -> Result<()> {
    let n = link.size;
    let (right, left) = neighbours(link);
    for s in 0..n - 1 {
        let send = chunk(buf.len(), n, (link.rank + n - s) % n);
        let recv = chunk(buf.len(), n, (link.rank + 2 * n - s - 1) % n);
        let recv_len = recv.len() * std::mem::size_of::<T>();
        let (send_part, recv_part) = split_pair(buf, send, recv);
        let mut sink = CopySink { dst: bytes_mut(recv_part), granule: std::mem::size_of::<T>() };
        link.step(
            op,
            first_step + s as u32,
            Some((right, bytes(send_part))),
            Some(Recv { peer: left, len: recv_len, sink: &mut sink }),
        )?;
    }
    Ok(())
}

/// AllReduce of `buf` on the ring: a reduce-scatter of `size` chunks, then an all-gather of
/// the reduced chunks, `2 (size - 1)` steps each moving one chunk per rank.
pub fn all_reduce<T: Element>(
    link: &mut Link,
    op: &Header,
    buf: &mut [T],
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
) -> Result<()> {
    reduce_scatter_in_place(link, op, buf, reduce, combine)?;
    all_gather_in_place(link, op, buf, (link.size - 1) as u32)
}

/// Out of place: `output` (len m) receives the reduction of chunk `rank` of `input`
/// (len n*m). Partial sums alternate between `output` and `scratch` (len m) so that the last
/// one lands in `output` and no step reads the buffer it writes.
pub fn reduce_scatter<T: Element>(
    link: &mut Link,
    op: &Header,
    input: &[T],
    output: &mut [T],
    scratch: &mut [T],
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
) -> Result<()> {
    let n = link.size;
    let m = output.len();
    let chunk_bytes = std::mem::size_of_val(output);
    let (right, left) = neighbours(link);
    let part = |i: usize| &input[i * m..(i + 1) * m];
    for s in 0..n - 1 {
        let recv_chunk = (link.rank + 2 * n - s - 2) % n;
        let into_output = (n - 2 - s) % 2 == 0;
        let (dst, prev): (&mut [T], &[T]) =
            if into_output { (&mut *output, &*scratch) } else { (&mut *scratch, &*output) };
        let send: &[T] = if s == 0 { part((link.rank + 2 * n - 1) % n) } else { prev };
        let mut sink = ReduceSink { out: dst, local: Some(part(recv_chunk)), op: reduce, combine };
        link.step(
            op,
            s as u32,
            Some((right, bytes(send))),
            Some(Recv { peer: left, len: chunk_bytes, sink: &mut sink }),
        )?;
    }
    Ok(())
}
