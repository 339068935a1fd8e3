//! Processes on one host through shared memory. Each rank owns one segment (a file in
//! /dev/shm, mapped by all members and unlinked once they have) holding a control page and
//! one single-producer single-consumer byte ring per sender. A sender copies its message
//! into the receiver's ring and publishes the new head; the receiver reduces or copies
//! straight out of the ring and publishes the new tail. Both sides move in pieces, so a
//! large step streams through a small ring. Waiting spins, then yields, then naps.
//!
//! Where the kernel lets the ranks copy between each other's address spaces (cross-memory
//! attach, probed when the group forms), the transport also offers [`PeerMemory`], with
//! which large collectives move each byte once instead of through the rings.

use super::{cma, Fabric, Incoming, Outgoing, PeerMemory, SharedRegion, Transport};
use crate::error::{AbortReason, CommError, Result};
use crate::frame::{Header, HEADER_LEN};
use crate::store::{StoreClient, StoreServer};
use crate::token::{fnv64, JobToken};
use crate::wait::{Backoff, Deadline};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Ring capacity per sender, bytes (a multiple of 4096).
pub const ENV_CHANNEL_BYTES: &str = "TRIDENT_SHM_CHANNEL_BYTES";
/// `0` keeps a job off cross-memory attach, so that every collective goes through the rings.
pub const ENV_CMA: &str = "TRIDENT_SHM_CMA";
const DEFAULT_CHANNEL_BYTES: usize = 1 << 20;
/// Most bytes moved before checking the other direction, so send and receive interleave.
const PIECE: usize = 128 << 10;
const CONTROL: usize = 4096;
const CHANNEL_HEADER: usize = 256;
const MAGIC: u64 = 0x5452_4944_5348_4d31; // "TRIDSHM1"
const ALIVE: u32 = 1;
const DEPARTED: u32 = 2;
const LIVENESS_PERIOD: Duration = Duration::from_millis(50);

/// One mapped segment.
struct Segment {
    base: *mut u8,
    len: usize,
    cap: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics and the ring protocol.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    fn map(file: &std::fs::File, len: usize, cap: usize) -> std::io::Result<Segment> {
        // SAFETY: mapping a file we hold open, of at least `len` bytes, shared and writable.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Segment { base: base.cast(), len, cap })
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= self.len);
        // SAFETY: in bounds, 8-aligned (page-aligned base), and only ever accessed atomically.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: as for `atomic_u64`.
        unsafe { &*(self.base.add(offset) as *const AtomicU32) }
    }

    fn magic(&self) -> &AtomicU64 {
        self.atomic_u64(0)
    }
    fn pid(&self) -> &AtomicU32 {
        self.atomic_u32(8)
    }
    fn state(&self) -> &AtomicU32 {
        self.atomic_u32(64)
    }
    fn abort(&self) -> &AtomicU64 {
        self.atomic_u64(128)
    }
    /// Where the owner mapped this segment, in its own address space (for the probe).
    fn owner_base(&self) -> &AtomicU64 {
        self.atomic_u64(192)
    }
    /// 1 + the group rank the owner timed out waiting for; 0 while it has not.
    fn waiting_for(&self) -> &AtomicU64 {
        self.atomic_u64(256)
    }

    fn channel(&self, sender: usize) -> usize {
        CONTROL + sender * (CHANNEL_HEADER + self.cap)
    }
    /// Bytes ever written into the ring from `sender` (written by the sender).
    fn head(&self, sender: usize) -> &AtomicU64 {
        self.atomic_u64(self.channel(sender))
    }
    /// Bytes ever consumed from the ring from `sender` (written by the owner).
    fn tail(&self, sender: usize) -> &AtomicU64 {
        self.atomic_u64(self.channel(sender) + 128)
    }
    fn data(&self, sender: usize) -> *mut u8 {
        // SAFETY: the channel's data area lies inside the mapping.
        unsafe { self.base.add(self.channel(sender) + CHANNEL_HEADER) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn abort_word(culprit: usize, reporter: usize, reason: AbortReason) -> u64 {
    (culprit as u64 + 1) | ((reporter as u64 & 0xff_ffff) << 32) | ((reason as u64) << 56)
}

/// Whether process `pid` has exited (gone, or a zombie awaiting its parent).
fn process_gone(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state == 'Z' || state == 'X'),
        Err(_) => false,
    }
}

/// Builds shared-memory groups among processes of one host.
pub struct ShmFabric {
    store: Arc<Mutex<StoreClient>>,
    token: JobToken,
    _server: Option<StoreServer>,
}

impl ShmFabric {
    /// A fabric whose ranks exchange segment names through `store`, authenticated by
    /// `token`; `server` is kept alive with it where this process runs the store.
    pub fn new(store: Arc<Mutex<StoreClient>>, token: JobToken, server: Option<StoreServer>) -> Self {
        ShmFabric { store, token, _server: server }
    }

    /// Creates this rank's file of `len` bytes for `key`, with its memory reserved. `hint`
    /// says how to need less when /dev/shm is full.
    fn create_file(
        &self,
        key: &str,
        index: usize,
        len: usize,
        hint: &str,
    ) -> Result<(std::fs::File, String)> {
        let tag = fnv64(fnv64(0, &self.token.0), key.as_bytes());
        let name = format!("/dev/shm/trident-{tag:016x}-{index}-{}", std::process::id());
        // Only this user may open a job's segments (they hold its buffers and rings).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&name)
            .map_err(|e| CommError::io(format!("creating shared-memory file {name}"), e))?;
        let unlink = Unlink(&name);
        // Reserve the memory now, so a full /dev/shm is an error here and not a SIGBUS later.
        // SAFETY: plain syscall on a file descriptor we own.
        let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        if r != 0 {
            return Err(CommError::io(
                format!("reserving {len} bytes for {name} (is /dev/shm full? {hint})"),
                std::io::Error::from_raw_os_error(r),
            ));
        }
        std::mem::forget(unlink);
        Ok((file, name))
    }
}

/// Removes a file however setup ends; mappings outlive the name.
struct Unlink<'a>(&'a str);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// Opens the file a peer published under `key`, checking its name and that it has `len`
/// bytes.
fn open_peer_file(
    store: &mut StoreClient,
    key: &str,
    peer: usize,
    len: usize,
    timeout: Duration,
) -> Result<(std::fs::File, String)> {
    let path = store.get_string(key, timeout)?;
    if !path.starts_with("/dev/shm/trident-") || path.contains("..") || path.contains('\0') {
        return Err(CommError::Bootstrap(format!("rank {peer} published an unexpected file name {path:?}")));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| CommError::io(format!("opening rank {peer}'s shared memory {path}"), e))?;
    let actual = f.metadata().map_err(|e| CommError::io(format!("inspecting {path}"), e))?.len();
    if actual != len as u64 {
        return Err(CommError::Bootstrap(format!(
            "rank {peer}'s {path} has {actual} bytes, expected {len}: ranks disagree on the size ({ENV_CHANNEL_BYTES}, group size or buffer length)"
        )));
    }
    Ok((f, path))
}

fn channel_bytes() -> Result<usize> {
    match std::env::var(ENV_CHANNEL_BYTES) {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(b) if b >= 4096 && b % 4096 == 0 && b <= 1 << 30 => Ok(b),
            _ => Err(CommError::InvalidArgument(format!(
                "{ENV_CHANNEL_BYTES}={v:?}: expected a multiple of 4096 between 4096 and 1 GiB"
            ))),
        },
        Err(_) => Ok(DEFAULT_CHANNEL_BYTES),
    }
}

impl Fabric for ShmFabric {
    fn connect(
        &self,
        key: &str,
        members: &[usize],
        index: usize,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>> {
        let n = members.len();
        let cap = channel_bytes()?;
        let len = CONTROL + n * (CHANNEL_HEADER + cap);
        let (file, name) = self.create_file(key, index, len, "lower TRIDENT_SHM_CHANNEL_BYTES")?;
        let unlink = Unlink(&name);
        let own = Segment::map(&file, len, cap).map_err(|e| CommError::io(format!("mapping {name}"), e))?;
        own.pid().store(std::process::id(), Ordering::Relaxed);
        own.owner_base().store(own.base as u64, Ordering::Relaxed);
        own.state().store(ALIVE, Ordering::Relaxed);
        own.magic().store(MAGIC, Ordering::Release);

        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.set(&format!("{key}/shm/{index}"), name.as_bytes())?;
        let mut segments = Vec::with_capacity(n);
        for peer in 0..n {
            if peer == index {
                segments.push(None);
                continue;
            }
            let (f, path) = open_peer_file(&mut store, &format!("{key}/shm/{peer}"), peer, len, timeout)?;
            let seg = Segment::map(&f, len, cap).map_err(|e| CommError::io(format!("mapping {path}"), e))?;
            if seg.magic().load(Ordering::Acquire) != MAGIC {
                return Err(CommError::Bootstrap(format!("{path} is not a Trident segment")));
            }
            segments.push(Some(seg));
        }
        let pids: Vec<u32> = segments
            .iter()
            .map(|s| s.as_ref().map_or(std::process::id(), |s| s.pid().load(Ordering::Relaxed)))
            .collect();
        let cma_wanted = std::env::var(ENV_CMA).map_or(true, |v| v.trim() != "0");
        let cma_here = cma_wanted
            && segments.iter().zip(&pids).all(|(seg, &pid)| {
                seg.as_ref()
                    .is_none_or(|seg| cma::probe(pid, seg.owner_base().load(Ordering::Relaxed), MAGIC))
            });
        store.set(&format!("{key}/cma/{index}"), if cma_here { b"1" } else { b"0" })?;
        // Everyone has mapped everything: the names can go.
        store.barrier(&format!("{key}/shm-mapped"), index, n, timeout)?;
        drop(unlink);
        // Cross-memory attach is used only if it works between every pair.
        let mut cma_all = true;
        for peer in 0..n {
            cma_all &= store.get_string(&format!("{key}/cma/{peer}"), timeout)? == "1";
        }
        drop(store);
        let cma = cma_all.then(|| Arc::new(CmaAccess { pids: pids.clone() }));
        Ok(Box::new(ShmTransport { own, peers: segments, pids, rank: index, cma }))
    }

    fn name(&self) -> &'static str {
        "shm"
    }

    fn leave_note(&self, key: &str, value: &str) {
        crate::blame::leave_store_note(&self.store, key, value)
    }

    fn read_note(&self, key: &str, wait: Duration) -> Option<String> {
        crate::blame::read_store_note(&self.store, key, wait)
    }

    fn notes_in_reach(&self) -> bool {
        crate::blame::store_in_reach(&self.store)
    }

    fn share(
        &self,
        key: &str,
        members: &[usize],
        index: usize,
        bytes: usize,
        timeout: Duration,
    ) -> Result<Option<SharedRegion>> {
        let n = members.len();
        // Every part at least a page, so that no mapping is empty.
        let len = bytes.max(1).next_multiple_of(4096);
        let (file, name) = self.create_file(key, index, len, "use smaller buffers")?;
        let unlink = Unlink(&name);
        let map = |f: &std::fs::File, path: &str| {
            Segment::map(f, len, 0).map_err(|e| CommError::io(format!("mapping {path}"), e))
        };
        let mut maps = Vec::with_capacity(n);
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.set(&format!("{key}/part/{index}"), name.as_bytes())?;
        for peer in 0..n {
            if peer == index {
                maps.push(map(&file, &name)?);
            } else {
                let (f, path) =
                    open_peer_file(&mut store, &format!("{key}/part/{peer}"), peer, len, timeout)?;
                maps.push(map(&f, &path)?);
            }
        }
        store.barrier(&format!("{key}/parts-mapped"), index, n, timeout)?;
        drop(unlink);
        let parts = maps.iter().map(|m| m.base).collect();
        // SAFETY: each part is a page-aligned shared mapping of `len >= bytes` bytes, kept
        // alive by `maps`.
        Ok(Some(unsafe { SharedRegion::new(parts, bytes, Box::new(maps)) }))
    }
}

/// One rank's end of a shared-memory group: each rank owns a segment the others map, with a
/// ring per peer for messages.
pub struct ShmTransport {
    own: Segment,
    peers: Vec<Option<Segment>>,
    pids: Vec<u32>,
    rank: usize,
    cma: Option<Arc<CmaAccess>>,
}

/// [`PeerMemory`] through cross-memory attach.
struct CmaAccess {
    pids: Vec<u32>,
}

impl PeerMemory for CmaAccess {
    fn shares_address_space(&self) -> bool {
        false
    }

    unsafe fn read(&self, op: &Header, peer: usize, addr: u64, dst: &mut [u8]) -> Result<()> {
        let pid = self.pids[peer];
        // SAFETY: forwarded from the caller.
        unsafe { cma::read(pid, addr, dst) }.map_err(|e| cma::error(op, "reading from", peer, pid, e))
    }

    unsafe fn write(&self, op: &Header, peer: usize, addr: u64, src: &[u8]) -> Result<()> {
        let pid = self.pids[peer];
        // SAFETY: forwarded from the caller.
        unsafe { cma::write(pid, addr, src) }.map_err(|e| cma::error(op, "writing to", peer, pid, e))
    }
}

struct Sending<'a> {
    peer: usize,
    header: [u8; HEADER_LEN],
    payload: &'a [u8],
    /// Bytes of header + payload + padding written so far.
    done: usize,
    total: usize,
}

struct Receiving<'s> {
    incoming: Incoming<'s>,
    header: [u8; HEADER_LEN],
    /// Bytes of header + payload + padding consumed so far.
    done: usize,
    total: usize,
}

fn padded(len: usize) -> usize {
    len.div_ceil(8) * 8
}

impl ShmTransport {
    fn peer(&self, peer: usize, op: &Header) -> Result<&Segment> {
        self.peers.get(peer).and_then(|s| s.as_ref()).ok_or_else(|| {
            CommError::InvalidArgument(format!("{op}: rank {} has no channel to rank {peer}", self.rank))
        })
    }

    /// Copies the next part of the message into the peer's ring. Returns whether it moved
    /// any bytes.
    fn push(&self, s: &mut Sending<'_>, op: &Header) -> Result<bool> {
        let seg = self.peer(s.peer, op)?;
        let head_atomic = seg.head(self.rank);
        let head = head_atomic.load(Ordering::Relaxed) as usize;
        let tail = seg.tail(self.rank).load(Ordering::Acquire) as usize;
        let free = seg.cap - (head - tail);
        let k = free.min(s.total - s.done).min(PIECE);
        if k == 0 {
            return Ok(false);
        }
        let data = seg.data(self.rank);
        let mut written = 0;
        while written < k {
            let pos = (head + written) % seg.cap;
            let run = (k - written).min(seg.cap - pos);
            let at = s.done + written;
            // SAFETY: [pos, pos + run) lies in the ring and in its free part (the receiver
            // only reads below `head`), so nobody else touches it.
            let dst = unsafe { std::slice::from_raw_parts_mut(data.add(pos), run) };
            fill(dst, at, &s.header, s.payload);
            written += run;
        }
        s.done += k;
        head_atomic.store((head + k) as u64, Ordering::Release);
        Ok(true)
    }

    /// Consumes what has arrived from the peer. Returns whether it moved any bytes.
    fn pull(&self, r: &mut Receiving<'_>, op: &Header) -> Result<bool> {
        let peer = r.incoming.peer;
        let seg = &self.own;
        let tail_atomic = seg.tail(peer);
        let tail = tail_atomic.load(Ordering::Relaxed) as usize;
        let head = seg.head(peer).load(Ordering::Acquire) as usize;
        let avail = head - tail;
        if avail == 0 {
            return Ok(false);
        }
        let data = seg.data(peer);
        let payload_len = r.incoming.expect.payload_len as usize;
        let mut used = 0;
        while used < avail && r.done < r.total && used < PIECE {
            let pos = (tail + used) % seg.cap;
            let contiguous = (seg.cap - pos).min(avail - used);
            if r.done < HEADER_LEN {
                let run = (HEADER_LEN - r.done).min(contiguous);
                // SAFETY: [pos, pos + run) is below `head`: written and published by the
                // sender, who will not touch it until we advance the tail.
                let src = unsafe { std::slice::from_raw_parts(data.add(pos), run) };
                r.header[r.done..r.done + run].copy_from_slice(src);
                r.done += run;
                used += run;
                if r.done == HEADER_LEN {
                    let h = Header::decode(&r.header, peer, op)?;
                    h.check(&r.incoming.expect, peer)?;
                }
                continue;
            }
            let at = r.done - HEADER_LEN;
            let run = if at < payload_len {
                (payload_len - at).min(contiguous).min(PIECE)
            } else {
                (r.total - r.done).min(contiguous)
            };
            if at < payload_len {
                // SAFETY: as above.
                let src = unsafe { std::slice::from_raw_parts(data.add(pos), run) };
                r.incoming.sink.accept(at, src);
            }
            r.done += run;
            used += run;
        }
        tail_atomic.store((tail + used) as u64, Ordering::Release);
        Ok(true)
    }

    fn check_abort(&self, op: &Header) -> Result<()> {
        let word = self.own.abort().load(Ordering::Acquire);
        if word != 0 {
            return Err(CommError::PeerFailed {
                op: op.to_string(),
                culprit: ((word & 0xffff_ffff) - 1) as usize,
                reporter: ((word >> 32) & 0xff_ffff) as usize,
                reason: AbortReason::from_u8((word >> 56) as u8),
            });
        }
        Ok(())
    }

    /// The timeout error for a wait on `peer`, blaming the rank the wait was really stuck
    /// behind (see [`super::follow_wait_chain`]); records go in the segments' control pages.
    fn trace_timeout(&self, op: &Header, peer: usize, timeout: Duration, waited: Duration) -> CommError {
        self.own.waiting_for().store(peer as u64 + 1, Ordering::Release);
        let (culprit, chain) =
            super::follow_wait_chain(self.rank, peer, super::wait_chain_budget(timeout), |r, wait| {
                let seg = self.peers.get(r)?.as_ref()?;
                let until = Instant::now() + wait;
                loop {
                    let v = seg.waiting_for().load(Ordering::Acquire);
                    if v != 0 {
                        return Some(v as usize - 1);
                    }
                    if Instant::now() >= until {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        super::chained_timeout(&op.to_string(), self.rank, &chain, culprit, waited)
    }

    fn check_alive(&self, peer: usize, op: &Header) -> Result<()> {
        let seg = self.peer(peer, op)?;
        let detail = if seg.state().load(Ordering::Acquire) == DEPARTED {
            "it left the communicator before this operation completed (did it make fewer calls?)"
        } else if process_gone(self.pids[peer]) {
            "its process has exited"
        } else {
            return Ok(());
        };
        Err(CommError::PeerLost {
            op: op.to_string(),
            peer,
            detail: format!("{detail} (pid {})", self.pids[peer]),
        })
    }
}

/// Fills `dst` with the message stream (header, payload, zero padding) from offset `at`.
fn fill(dst: &mut [u8], at: usize, header: &[u8; HEADER_LEN], payload: &[u8]) {
    let mut off = 0;
    while off < dst.len() {
        let p = at + off;
        let n = if p < HEADER_LEN {
            let n = (HEADER_LEN - p).min(dst.len() - off);
            dst[off..off + n].copy_from_slice(&header[p..p + n]);
            n
        } else if p - HEADER_LEN < payload.len() {
            let q = p - HEADER_LEN;
            let n = (payload.len() - q).min(dst.len() - off);
            dst[off..off + n].copy_from_slice(&payload[q..q + n]);
            n
        } else {
            dst[off..].fill(0);
            dst.len() - off
        };
        off += n;
    }
}

impl Transport for ShmTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.peers.len()
    }

    fn exchange(
        &mut self,
        send: Option<Outgoing<'_>>,
        recv: Option<Incoming<'_>>,
        timeout: Duration,
    ) -> Result<()> {
        let op = match (&send, &recv) {
            (Some(s), _) => s.header,
            (None, Some(r)) => r.expect,
            (None, None) => return Ok(()),
        };
        let deadline = Deadline::after(timeout);
        let mut sending = send.map(|s| Sending {
            peer: s.peer,
            header: s.header.encode(),
            payload: s.payload,
            done: 0,
            total: HEADER_LEN + padded(s.payload.len()),
        });
        let mut receiving = recv.map(|incoming| Receiving {
            total: HEADER_LEN + padded(incoming.expect.payload_len as usize),
            incoming,
            header: [0; HEADER_LEN],
            done: 0,
        });
        let mut backoff = Backoff::new();
        let mut last_liveness = Instant::now();
        let mut failure = None;
        loop {
            let mut progressed = false;
            if let Some(s) = sending.as_mut() {
                progressed |= self.push(s, &op)?;
                if s.done == s.total {
                    sending = None;
                }
            }
            if let Some(r) = receiving.as_mut() {
                progressed |= self.pull(r, &op)?;
                if r.done == r.total {
                    receiving = None;
                }
            }
            if sending.is_none() && receiving.is_none() {
                return Ok(());
            }
            if progressed {
                backoff.reset();
                failure = None;
                continue;
            }
            // A peer may write its last bytes and leave between our look at the ring and our
            // look at its health: fail only if one more pass finds nothing.
            if let Some(err) = failure.take() {
                return Err(err);
            }
            let mut health = self.check_abort(&op);
            if health.is_ok() && backoff.is_sleeping() && last_liveness.elapsed() >= LIVENESS_PERIOD {
                last_liveness = Instant::now();
                if let Some(r) = &receiving {
                    health = self.check_alive(r.incoming.peer, &op);
                }
                if let (Ok(()), Some(s)) = (&health, &sending) {
                    health = self.check_alive(s.peer, &op);
                }
            }
            if let Err(err) = health {
                failure = Some(err);
                continue;
            }
            if deadline.expired() {
                let peer = receiving
                    .as_ref()
                    .map(|r| r.incoming.peer)
                    .or(sending.as_ref().map(|s| s.peer))
                    .unwrap_or(self.rank);
                return Err(self.trace_timeout(&op, peer, timeout, deadline.waited()));
            }
            backoff.snooze();
        }
    }

    fn peer_memory(&self) -> Option<Arc<dyn PeerMemory>> {
        self.cma.clone().map(|c| c as Arc<dyn PeerMemory>)
    }

    fn abort(&mut self, _op: &Header, culprit: usize, reason: AbortReason) {
        let word = abort_word(culprit, self.rank, reason);
        for seg in std::iter::once(&self.own).chain(self.peers.iter().flatten()) {
            let _ = seg.abort().compare_exchange(0, word, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        self.own.state().store(DEPARTED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn segments_are_readable_by_their_owner_only() {
        let token = JobToken::random().unwrap();
        let server = StoreServer::start("127.0.0.1:0".parse().unwrap(), token).unwrap();
        let store = StoreClient::connect(&server.addr().to_string(), &token, Duration::from_secs(5)).unwrap();
        let fabric = ShmFabric::new(Arc::new(Mutex::new(store)), token, None);
        let (file, name) = fabric.create_file("mode-test", 0, 4096, "").unwrap();
        let _unlink = Unlink(&name);
        // Whatever the umask (commonly 022, which left segments world-readable).
        assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o600, "{name}");
    }
}
