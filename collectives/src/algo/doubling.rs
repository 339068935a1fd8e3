//! Latency-optimal AllReduce for small buffers: recursive doubling, ceil(log2 n) steps of
//! whole-buffer exchanges (plus one step before and after when n is not a power of two,
//! folding the extra ranks into partners). Every pairwise combine is commutative, so all
//! ranks end with bitwise equal results.

use super::{bytes, bytes_mut, Link, Recv};
use crate::element::{Combine, Element, ReduceOp};
use crate::error::Result;
use crate::frame::Header;
use crate::sink::CopySink;

/// AllReduce of `buf` by recursive doubling (see the module docs), combining with `combine`.
pub fn all_reduce<T: Element>(
    link: &mut Link,
    op: &Header,
    buf: &mut [T],
    scratch: &mut [T],
    reduce: ReduceOp,
    combine: &dyn Combine<T>,
) -> Result<()> {
    let n = link.size;
    let rank = link.rank;
    let len = std::mem::size_of_val(buf);
    let pow2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let extra = n - pow2;
    let granule = std::mem::size_of::<T>();
    let mut step = 0u32;

    // Fold: among the first 2*extra ranks, each even rank hands its data to the odd one.
    let virt = if rank < 2 * extra {
        if rank % 2 == 0 {
            link.step(op, step, Some((rank + 1, bytes(buf))), None)?;
            None
        } else {
            let mut sink = CopySink { dst: bytes_mut(scratch), granule };
            let from = Recv { peer: rank - 1, len, sink: &mut sink };
            link.step(op, step, None, Some(from))?;
            combine.reduce(reduce, buf, scratch);
            Some(rank / 2)
        }
    } else {
        Some(rank - extra)
    };
    step += 1;

    if let Some(v) = virt {
        let real = |v: usize| if v < extra { 2 * v + 1 } else { v + extra };
        let mut mask = 1;
        while mask < pow2 {
            let peer = real(v ^ mask);
            let mut sink = CopySink { dst: bytes_mut(scratch), granule };
            let from = Recv { peer, len, sink: &mut sink };
            link.step(op, step, Some((peer, bytes(buf))), Some(from))?;
            combine.reduce(reduce, buf, scratch);
            mask <<= 1;
            step += 1;
        }
    }

    // Unfold: odd ranks return the result to the even rank they absorbed.
    let last = 64;
    if rank < 2 * extra {
        if rank % 2 == 1 {
            link.step(op, last, Some((rank - 1, bytes(buf))), None)?;
        } else {
            let mut sink = CopySink { dst: bytes_mut(buf), granule };
            let from = Recv { peer: rank + 1, len, sink: &mut sink };
            link.step(op, last, None, Some(from))?;
        }
    }
    Ok(())
}
