//! Ranks as threads of one process. A sender publishes a pointer to its payload in a
//! mailbox; the receiver reduces or copies straight out of the sender's memory and marks
//! the mailbox done. No staging copies: each byte is touched once, by the receiver. Small
//! payloads are copied into the mailbox instead, so the sender need not wait for the
//! receiver (one hand-off per message instead of a round trip).

use super::{Fabric, Incoming, Outgoing, PeerMemory, Transport};
use crate::error::{AbortReason, CommError, Result};
use crate::frame::Header;
use crate::wait::{Backoff, Deadline};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const EMPTY: u32 = 0;
const POSTED: u32 = 1;
const READING: u32 = 2;
const DONE: u32 = 3;
/// Payloads up to this size travel inside the mailbox.
const EAGER_BYTES: usize = 32 << 10;

#[derive(Clone, Copy)]
struct Posting {
    header: Header,
    /// The sender's payload, or null when it was copied into the mailbox.
    ptr: *const u8,
    len: usize,
}

/// One direction between two ranks. Only the sender writes `posting` and `inline`, and only
/// while the state is `EMPTY`; the receiver reads them only between claiming
/// (`POSTED` -> `READING`) and releasing (`DONE` for a pointer posting, which the sender
/// acknowledges by resetting to `EMPTY`; straight to `EMPTY` for an inline one).
#[repr(align(128))]
struct Mailbox {
    state: AtomicU32,
    posting: UnsafeCell<Option<Posting>>,
    inline: UnsafeCell<[u8; EAGER_BYTES]>,
}

// SAFETY: access to `posting` is serialised by `state` as described on `Mailbox`; the raw
// pointer inside is only dereferenced by the receiver while the sender keeps it alive.
unsafe impl Sync for Mailbox {}
// SAFETY: as above; the pointer is plain data until dereferenced under that protocol.
unsafe impl Send for Mailbox {}

struct Group {
    size: usize,
    mailboxes: Vec<Mailbox>,
    departed: Vec<AtomicBool>,
    /// 0 while healthy, else an [`abort_word`].
    abort: AtomicU64,
}

impl Group {
    fn mailbox(&self, from: usize, to: usize) -> &Mailbox {
        &self.mailboxes[from * self.size + to]
    }
}

/// Packs who failed, who noticed and why into one atomic word (never 0).
fn abort_word(culprit: usize, reporter: usize, reason: AbortReason) -> u64 {
    (culprit as u64 + 1) | ((reporter as u64 & 0xff_ffff) << 32) | ((reason as u64) << 56)
}

/// A group being joined, and how many members have joined it.
type Joining = (Arc<Group>, usize);

/// Creates in-process groups; clone it into every rank thread.
#[derive(Clone, Default)]
pub struct InprocFabric {
    groups: Arc<Mutex<HashMap<String, Joining>>>,
    /// The ranks' notes ([`Fabric::leave_note`]), and a signal for readers waiting on one.
    notes: Arc<(Mutex<HashMap<String, String>>, Condvar)>,
}

impl InprocFabric {
    /// A fabric with no groups yet.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Fabric for InprocFabric {
    fn connect(
        &self,
        key: &str,
        members: &[usize],
        index: usize,
        _timeout: Duration,
    ) -> Result<Box<dyn Transport>> {
        let size = members.len();
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let (group, joined) = groups.entry(key.to_string()).or_insert_with(|| {
            let group = Group {
                size,
                mailboxes: (0..size * size)
                    .map(|_| Mailbox {
                        state: AtomicU32::new(EMPTY),
                        posting: UnsafeCell::new(None),
                        inline: UnsafeCell::new([0; EAGER_BYTES]),
                    })
                    .collect(),
                departed: (0..size).map(|_| AtomicBool::new(false)).collect(),
                abort: AtomicU64::new(0),
            };
            (Arc::new(group), 0)
        });
        if group.size != size {
            return Err(CommError::InvalidArgument(format!(
                "group {key} joined with {size} members but was created with {}",
                group.size
            )));
        }
        let group = group.clone();
        *joined += 1;
        if *joined == size {
            // Every member holds its Arc now; forget the key so it can be reused.
            groups.remove(key);
        }
        Ok(Box::new(InprocTransport { group, rank: index, memory: Arc::new(SameProcess) }))
    }

    fn name(&self) -> &'static str {
        "inproc"
    }

    fn leave_note(&self, key: &str, value: &str) {
        let (notes, changed) = &*self.notes;
        notes.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), value.to_string());
        changed.notify_all();
    }

    fn read_note(&self, key: &str, wait: Duration) -> Option<String> {
        let (notes, changed) = &*self.notes;
        let deadline = std::time::Instant::now() + wait;
        let mut notes = notes.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = notes.get(key) {
                return Some(v.clone());
            }
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            notes = changed.wait_timeout(notes, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// One rank's end of an in-process group: messages are handed between threads through
/// shared queues, and ranks read each other's buffers directly.
pub struct InprocTransport {
    group: Arc<Group>,
    rank: usize,
    memory: Arc<dyn PeerMemory>,
}

impl InprocTransport {
    /// Fails if the group was aborted or `peer` left while this rank still needs it.
    fn check_health(&self, peer: usize, op: &Header) -> Result<()> {
        let abort = self.group.abort.load(Ordering::Acquire);
        if abort != 0 {
            return Err(CommError::PeerFailed {
                op: op.to_string(),
                culprit: ((abort & 0xffff_ffff) - 1) as usize,
                reporter: ((abort >> 32) & 0xff_ffff) as usize,
                reason: AbortReason::from_u8((abort >> 56) as u8),
            });
        }
        if self.group.departed[peer].load(Ordering::Acquire) {
            return Err(CommError::PeerLost {
                op: op.to_string(),
                peer,
                detail: "it left the communicator (dropped it or its thread ended) before this operation completed".into(),
            });
        }
        Ok(())
    }

    /// Withdraws a posting nobody consumed, or waits out a receiver already reading it, so
    /// the sender's buffer is never read after the exchange returns.
    fn retract(&self, peer: usize) {
        let mb = self.group.mailbox(self.rank, peer);
        if mb.state.compare_exchange(POSTED, EMPTY, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return;
        }
        while mb.state.load(Ordering::Acquire) == READING {
            std::hint::spin_loop();
        }
        mb.state.store(EMPTY, Ordering::Release);
    }
}

impl Transport for InprocTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.group.size
    }

    fn exchange(
        &mut self,
        send: Option<Outgoing<'_>>,
        recv: Option<Incoming<'_>>,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Deadline::after(timeout);
        let op = match (&send, &recv) {
            (Some(s), _) => s.header,
            (None, Some(r)) => r.expect,
            (None, None) => return Ok(()),
        };
        let mut sending = send.map(Sending::Unposted);
        let result = self.progress(&mut sending, recv, &op, &deadline);
        if result.is_err() {
            if let Some(Sending::Posted(peer)) = sending {
                self.retract(peer);
            }
        }
        result
    }

    fn peer_memory(&self) -> Option<Arc<dyn PeerMemory>> {
        Some(self.memory.clone())
    }

    fn abort(&mut self, _op: &Header, culprit: usize, reason: AbortReason) {
        let word = abort_word(culprit, self.rank, reason);
        let _ = self.group.abort.compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Where this rank's outgoing message stands.
enum Sending<'a> {
    /// Waiting for the mailbox to be free.
    Unposted(Outgoing<'a>),
    /// Payload pointer published; waiting for the receiver to finish with it.
    Posted(usize),
}

impl InprocTransport {
    /// Publishes `s` if the mailbox is free. Returns the new state (`None` once delivered).
    fn try_post<'a>(&self, s: Outgoing<'a>) -> Option<Sending<'a>> {
        let mb = self.group.mailbox(self.rank, s.peer);
        if mb.state.load(Ordering::Acquire) != EMPTY {
            return Some(Sending::Unposted(s));
        }
        let eager = s.payload.len() <= EAGER_BYTES;
        // SAFETY: the state is EMPTY, so the receiver does not look at the mailbox until the
        // Release store below, and no earlier reader still holds it.
        unsafe {
            if eager {
                (&mut *mb.inline.get())[..s.payload.len()].copy_from_slice(s.payload);
            }
            *mb.posting.get() = Some(Posting {
                header: s.header,
                ptr: if eager { std::ptr::null() } else { s.payload.as_ptr() },
                len: s.payload.len(),
            });
        }
        mb.state.store(POSTED, Ordering::Release);
        (!eager).then_some(Sending::Posted(s.peer))
    }

    /// Consumes the posting from `r.peer` if there is one; true when it did.
    fn try_take(&self, r: &mut Incoming<'_>) -> Result<bool> {
        let mb = self.group.mailbox(r.peer, self.rank);
        if mb.state.load(Ordering::Acquire) != POSTED
            || mb.state.compare_exchange(POSTED, READING, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return Ok(false);
        }
        // SAFETY: we own the mailbox between READING and the release below; the sender
        // wrote it before its Release store of POSTED.
        let posting = unsafe { (*mb.posting.get()).expect("posted mailbox") };
        let checked = posting.header.check(&r.expect, r.peer);
        let inline = posting.ptr.is_null();
        if checked.is_ok() {
            let bytes = if inline {
                // SAFETY: as above; the sender copied `len` (<= EAGER_BYTES) bytes in.
                unsafe { &(&*mb.inline.get())[..posting.len] }
            } else {
                // SAFETY: the sender keeps `len` bytes at `ptr` alive and unchanged until it
                // observes DONE (or retracts, which waits out READING).
                unsafe { std::slice::from_raw_parts(posting.ptr, posting.len) }
            };
            r.sink.accept(0, bytes);
        }
        mb.state.store(if inline { EMPTY } else { DONE }, Ordering::Release);
        checked.map(|_| true)
    }

    fn progress(
        &mut self,
        sending: &mut Option<Sending<'_>>,
        mut recv: Option<Incoming<'_>>,
        op: &Header,
        deadline: &Deadline,
    ) -> Result<()> {
        let mut backoff = Backoff::new();
        let mut failure = None;
        loop {
            let mut progressed = false;
            *sending = match sending.take() {
                Some(Sending::Unposted(s)) => {
                    let next = self.try_post(s);
                    progressed |= !matches!(next, Some(Sending::Unposted(_)));
                    next
                }
                Some(Sending::Posted(peer)) => {
                    let mb = self.group.mailbox(self.rank, peer);
                    if mb.state.load(Ordering::Acquire) == DONE {
                        mb.state.store(EMPTY, Ordering::Relaxed);
                        progressed = true;
                        None
                    } else {
                        Some(Sending::Posted(peer))
                    }
                }
                None => None,
            };
            if let Some(r) = recv.as_mut() {
                if self.try_take(r)? {
                    recv = None;
                    progressed = true;
                }
            }
            if sending.is_none() && recv.is_none() {
                return Ok(());
            }
            if progressed {
                backoff.reset();
                failure = None;
                continue;
            }
            // A peer may post its last message and leave between our look at the mailbox
            // and our look at its health: fail only if one more pass finds nothing.
            if let Some(err) = failure.take() {
                return Err(err);
            }
            let send_peer = match sending {
                Some(Sending::Unposted(s)) => Some(s.peer),
                Some(Sending::Posted(p)) => Some(*p),
                None => None,
            };
            let waiting_on = recv.as_ref().map(|r| r.peer).or(send_peer).unwrap_or(0);
            let health = self
                .check_health(waiting_on, op)
                .and_then(|_| send_peer.map_or(Ok(()), |p| self.check_health(p, op)));
            if let Err(err) = health {
                failure = Some(err);
                continue;
            }
            if deadline.expired() {
                return Err(CommError::Timeout {
                    op: op.to_string(),
                    peer: waiting_on,
                    waited: deadline.waited(),
                });
            }
            backoff.snooze();
        }
    }
}

impl Drop for InprocTransport {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let word = abort_word(self.rank, self.rank, AbortReason::Failed);
            let _ = self.group.abort.compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire);
        }
        self.group.departed[self.rank].store(true, Ordering::Release);
    }
}

/// [`PeerMemory`] between threads: peers' addresses are ours.
struct SameProcess;

impl PeerMemory for SameProcess {
    fn shares_address_space(&self) -> bool {
        true
    }

    unsafe fn read(&self, _op: &Header, _peer: usize, addr: u64, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller guarantees the source range is a live, unaliased peer buffer.
        unsafe { std::ptr::copy_nonoverlapping(addr as usize as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn write(&self, _op: &Header, _peer: usize, addr: u64, src: &[u8]) -> Result<()> {
        // SAFETY: the caller guarantees the target range is a live peer buffer nobody else uses.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as usize as *mut u8, src.len()) };
        Ok(())
    }
}
