//! Broadcast: a binomial tree for small buffers (ceil(log2 n) steps), a pipelined chain for
//! large ones (each rank forwards slice k to its successor while receiving slice k+1, so
//! the time approaches one buffer transfer as slices shrink).

use super::{Link, Recv};
use crate::error::Result;
use crate::frame::Header;
use crate::sink::CopySink;

/// Broadcasts `buf` from `root` over a binomial tree: in step `s` every rank that has the
/// data sends it to the rank `2^s` further on (relative to the root). Ranks receive into
/// `buf` in `granule`-byte pieces.
pub fn binomial(link: &mut Link, op: &Header, buf: &mut [u8], root: usize, granule: usize) -> Result<()> {
    let n = link.size;
    let v = (link.rank + n - root) % n;
    let real = |v: usize| (v + root) % n;
    let len = buf.len();
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            let mut sink = CopySink { dst: &mut *buf, granule };
            let from = Recv { peer: real(v - mask), len, sink: &mut sink };
            link.step(op, mask.trailing_zeros(), None, Some(from))?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if v + mask < n {
            link.step(op, mask.trailing_zeros(), Some((real(v + mask), &*buf)), None)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Broadcasts `buf` from `root` down the chain root, root + 1, ...: each rank forwards slice
/// `k` (of `slice_bytes`) to its successor while it receives slice `k + 1`.
pub fn chain(
    link: &mut Link,
    op: &Header,
    buf: &mut [u8],
    root: usize,
    slice_bytes: usize,
    granule: usize,
) -> Result<()> {
    let n = link.size;
    let v = (link.rank + n - root) % n;
    let next = (link.rank + 1) % n;
    let prev = (link.rank + n - 1) % n;
    let slice_bytes = (slice_bytes / granule).max(1) * granule;
    let slices = buf.len().div_ceil(slice_bytes).max(1);
    let total = buf.len();
    let range = |k: usize| k * slice_bytes..((k + 1) * slice_bytes).min(total);
    // Iteration k receives slice k (unless root) and forwards slice k-1 (unless last).
    for k in 0..=slices {
        let recv = (v > 0 && k < slices).then(|| range(k));
        let send = (v + 1 < n && k >= 1).then(|| range(k - 1));
        if recv.is_none() && send.is_none() {
            continue;
        }
        let (send_part, recv_part): (Option<&[u8]>, Option<&mut [u8]>) = match (send, recv) {
            (Some(s), Some(r)) => {
                let (sp, rp) = super::split_pair(buf, s, r);
                (Some(sp), Some(rp))
            }
            (Some(s), None) => (Some(&buf[s]), None),
            (None, Some(r)) => (None, Some(&mut buf[r])),
            (None, None) => unreachable!(),
        };
        let mut sink = recv_part.map(|dst| CopySink { dst, granule });
        let from = sink.as_mut().map(|s| Recv { peer: prev, len: s.dst.len(), sink: s });
        let sent = send_part.map(|p| (next, p));
        link.step_split(op, k.saturating_sub(1) as u32, k as u32, sent, from)?;
    }
    Ok(())
}
