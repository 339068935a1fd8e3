//! What each rank passes to a collective kernel, and where its flags live.
//!
//! **The peer table.** Each rank passes a table of `4 * world` u64 words: for every rank `p`
//! (itself included), the address at which *this* rank reaches `p`'s data buffer (word `p`),
//! `p`'s f32 scratch buffer (`world + p`), `p`'s flag words (`2 * world + p`) and `p`'s output
//! buffer (`3 * world + p`; the ring kernels work in place and ignore it). On one GPU or in
//! the emulator the addresses are the same on every rank; across processes each maps the
//! others' memory at addresses of its own, hence one table per rank.
//!
//! **Flags** are `u32` words apart from any data (a flag never shares bytes with data: the
//! flag buffer is an allocation of its own). A flag is a counter: a collective numbered `seq`
//! (the host numbers a communicator's collectives 1, 2, ... and passes the number) writes
//! `seq`, and a wait is for a value `>= seq` (modulo 2^32), so a flag never needs a reset and a
//! late reader of collective `seq` is not confused by an earlier collective's value. Flags come
//! in two sets, used by collectives of odd and even `seq` in turn, so a flag a slow peer has
//! still to read for collective `seq` is never the one a fast peer writes for `seq + 1`.
//!
//! Each flag has one writer and one reader, so for every (set, block, peer, step) there is one
//! word:
//! - ring `recv[set][block][step]`, `2 * world - 2` steps: written (`st.release.sys`) by the
//!   previous rank after it stored the data of that step into this rank's buffers, polled
//!   (`ld.acquire.sys`) by this rank before it reads them;
//! - ring `ready[set][block]`: written by the next rank when its kernel starts (its buffers are
//!   free to be written: its previous collective has ended), polled by this rank before its
//!   first store into them;
//! - one/two-shot `start[set][peer][block]`: written by `peer` when it starts (its input may be
//!   read, its output written); `end[set][peer][block]`: written by `peer` when it has finished
//!   reading this rank's input and writing its output, so that when a kernel returns no peer
//!   touches its buffers any more (the buffers may be reused at once, as NCCL's may);
//! - send/receive `full[set][src][block]`: written by `src` after it stored block `block`'s
//!   slice into this rank's output buffer, polled by this rank (the receiver);
//!   `free[set][dst][block]`: written by `dst` when its receive kernel starts (its output
//!   buffer, and everything it read from it before, is done with), polled by this rank (the
//!   sender) before its first store into `dst`'s output (see [`super::send_recv`]);
//! - broadcast `cast_ready[set][peer][block]`: written by `peer` when its kernel starts (its
//!   data buffer may be written), polled by the root; `cast_full[set][root][block]`: written
//!   by `root` after it stored the slice into this rank's data, polled by this rank (see
//!   [`super::broadcast`]). Indexing by the peer and by the root keeps one writer per word
//!   whichever rank is the root.
//!
//! A send/receive pair numbers its transfers on its own (the link's count, 1, 2, ...), apart
//! from the group's collectives: its flags are words of their own, so the two counts never
//! meet in one word.
//!
//! The release/acquire pairs are at `.sys` scope because the two sides are different devices
//! (PTX ISA, "Memory Consistency Model": "Scope" and "Release and Acquire Patterns"); a
//! `sync_threads` before each release makes the whole block's stores part of it (the barrier
//! orders them before thread 0's release, "Causality Order"), and one after each wait gives
//! every thread what thread 0 acquired.

/// Words of the peer table per rank.
pub const TABLE_WORDS_PER_RANK: usize = 4;

/// Flag words each rank needs for `world` ranks and `blocks` blocks per kernel.
pub const fn flag_words(world: usize, blocks: usize) -> usize {
    let steps = ring_steps(world);
    2 * blocks * steps + 2 * blocks + 4 * world * blocks + P2P_WORDS_PER_PEER_BLOCK * world * blocks
}

/// Flag words of the send/receive and broadcast protocols per (peer, block): `full` and
/// `free`, `cast_ready` and `cast_full`, each in two sets.
const P2P_WORDS_PER_PEER_BLOCK: usize = 8;

/// The ring's flags per (set, block): one per step that hands data on.
pub const fn ring_steps(world: usize) -> usize {
    if world > 1 {
        2 * world - 2
    } else {
        0
    }
}

/// Index of the ring flag `recv[set][block][step]`.
#[inline(always)]
pub fn ring_recv(world: usize, blocks: usize, set: usize, block: usize, step: usize) -> usize {
    (set * blocks + block) * ring_steps(world) + step
}

/// Index of the ring flag `ready[set][block]`.
#[inline(always)]
pub fn ring_ready(world: usize, blocks: usize, set: usize, block: usize) -> usize {
    2 * blocks * ring_steps(world) + set * blocks + block
}

/// Index of the one/two-shot flag `start[set][peer][block]`.
#[inline(always)]
pub fn shot_start(world: usize, blocks: usize, set: usize, peer: usize, block: usize) -> usize {
    2 * blocks * ring_steps(world) + 2 * blocks + (set * world + peer) * blocks + block
}

/// Index of the one/two-shot flag `end[set][peer][block]`.
#[inline(always)]
pub fn shot_end(world: usize, blocks: usize, set: usize, peer: usize, block: usize) -> usize {
    shot_start(world, blocks, set, peer, block) + 2 * world * blocks
}

/// Index of the first flag after the one/two-shot flags: the send/receive and broadcast
/// flags follow, `2 * world * blocks` words per kind.
#[inline(always)]
fn p2p_base(world: usize, blocks: usize) -> usize {
    2 * blocks * ring_steps(world) + 2 * blocks + 4 * world * blocks
}

/// Index (`kind` 0..4, then set, peer, block) of a send/receive or broadcast flag.
#[inline(always)]
fn p2p_flag(world: usize, blocks: usize, kind: usize, set: usize, peer: usize, block: usize) -> usize {
    p2p_base(world, blocks) + ((kind * 2 + set) * world + peer) * blocks + block
}

/// Index of the send/receive flag `full[set][src][block]` (in the receiver's flags).
#[inline(always)]
pub fn p2p_full(world: usize, blocks: usize, set: usize, src: usize, block: usize) -> usize {
    p2p_flag(world, blocks, 0, set, src, block)
}

/// Index of the send/receive flag `free[set][dst][block]` (in the sender's flags).
#[inline(always)]
pub fn p2p_free(world: usize, blocks: usize, set: usize, dst: usize, block: usize) -> usize {
    p2p_flag(world, blocks, 1, set, dst, block)
}

/// Index of the broadcast flag `cast_ready[set][peer][block]` (in the root's flags).
#[inline(always)]
pub fn cast_ready(world: usize, blocks: usize, set: usize, peer: usize, block: usize) -> usize {
    p2p_flag(world, blocks, 2, set, peer, block)
}

/// Index of the broadcast flag `cast_full[set][root][block]` (in every other rank's flags).
#[inline(always)]
pub fn cast_full(world: usize, blocks: usize, set: usize, root: usize, block: usize) -> usize {
    p2p_flag(world, blocks, 3, set, root, block)
}

/// Element range `[start, end)` of part `i` of `parts` balanced parts of `[0, n)`: sizes differ
/// by at most one, for any `n` (0 and 1 included).
#[inline(always)]
pub fn part(n: usize, parts: usize, i: usize) -> (usize, usize) {
    let n64 = n as u64;
    let start = (n64 * i as u64 / parts as u64) as usize;
    let end = (n64 * (i as u64 + 1) / parts as u64) as usize;
    (start, end)
}

/// Slice of segment `segment` (of `world`) that block `block` (of `blocks`) moves.
#[inline(always)]
pub fn slice(n: usize, world: usize, segment: usize, blocks: usize, block: usize) -> (usize, usize) {
    let (s, e) = part(n, world, segment);
    let (a, b) = part(e - s, blocks, block);
    (s + a, s + b)
}

/// Words of the status buffer a kernel writes when a wait times out: four per block
/// (see [`crate::collective::wait`]).
pub const fn status_words(blocks: usize) -> usize {
    4 * blocks
}
