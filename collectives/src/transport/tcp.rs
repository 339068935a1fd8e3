//! TCP across hosts: one connection per pair of group members, set up through the store
//! (the higher rank connects, both present the job token), then non-blocking sockets driven
//! by `poll`. Incoming payloads stream through a fixed staging buffer into the sink, so
//! memory stays bounded whatever the peer claims.

use super::{Fabric, Incoming, Outgoing, Transport};
use crate::error::{AbortReason, CommError, Result};
use crate::frame::{Header, HEADER_LEN};
use crate::store::{read_exact_by, RefusalLog, StoreClient, StoreServer};
use crate::token::{fnv64, JobToken};
use crate::wait::Deadline;
use std::io::{IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STAGE_BYTES: usize = 256 << 10;
const HELLO_MAGIC: u32 = 0x4844_5254; // "TRDH"
/// Bytes of an encoded [`Hello`].
pub const HELLO_LEN: usize = 40;

/// The handshake both ends of a data connection send: who they are, in which group, and
/// the job token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The job token.
    pub token: [u8; 16],
    /// The group's identifier (a digest of its name and members).
    pub group: u64,
    /// The connecting rank, within the group.
    pub from: u32,
    /// The rank it means to reach.
    pub to: u32,
    /// The group's size.
    pub size: u32,
}

impl Hello {
    /// The [`HELLO_LEN`] bytes on the wire: magic, token, group, from, to, size (little-endian).
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        b[4..20].copy_from_slice(&self.token);
        b[20..28].copy_from_slice(&self.group.to_le_bytes());
        b[28..32].copy_from_slice(&self.from.to_le_bytes());
        b[32..36].copy_from_slice(&self.to.to_le_bytes());
        b[36..40].copy_from_slice(&self.size.to_le_bytes());
        b
    }

    /// The hello `b` encodes; `None` where the magic is wrong.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Option<Hello> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        (u32_at(0) == HELLO_MAGIC).then(|| Hello {
            token: b[4..20].try_into().unwrap(),
            group: u64::from_le_bytes(b[20..28].try_into().unwrap()),
            from: u32_at(28),
            to: u32_at(32),
            size: u32_at(36),
        })
    }
}

/// Hash identifying a group in handshakes.
pub fn group_id(key: &str) -> u64 {
    fnv64(0x0067_726f_7570, key.as_bytes())
}

/// Builds TCP groups; shares the rendezvous store connection between them.
pub struct TcpFabric {
    store: Arc<Mutex<StoreClient>>,
    token: JobToken,
    /// Address peers reach this process at.
    advertise: IpAddr,
    /// Address listeners bind to.
    bind: IpAddr,
    /// Rank 0 hosts the store for as long as any of its communicators lives.
    _server: Option<StoreServer>,
}

impl TcpFabric {
    /// A fabric whose ranks listen on `bind`, publish `advertise` as their address through
    /// `store`, and authenticate with `token`; `server` is kept alive with it where this
    /// process runs the store.
    pub fn new(
        store: Arc<Mutex<StoreClient>>,
        token: JobToken,
        advertise: IpAddr,
        bind: IpAddr,
        server: Option<StoreServer>,
    ) -> Self {
        TcpFabric { store, token, advertise, bind, _server: server }
    }
}

struct Conn {
    stream: TcpStream,
    /// False when a message was cut off mid-way, so nothing more may be written.
    at_boundary: bool,
}

fn expect_hello(
    stream: &mut TcpStream,
    token: &JobToken,
    group: u64,
    from: Option<u32>,
    to: u32,
    size: u32,
    deadline: Instant,
) -> std::result::Result<Hello, String> {
    let mut b = [0u8; HELLO_LEN];
    read_exact_by(stream, &mut b, deadline).map_err(|e| format!("no complete handshake: {e}"))?;
    check_hello(&b, token, group, from, to, size)
}

/// Checks the handshake bytes `b` a connection sent: the job token, this group, this rank
/// `to` of `size`, and the rank `from` where one is expected.
fn check_hello(
    b: &[u8; HELLO_LEN],
    token: &JobToken,
    group: u64,
    from: Option<u32>,
    to: u32,
    size: u32,
) -> std::result::Result<Hello, String> {
    let h = Hello::decode(b).ok_or("not a Trident handshake")?;
    if !token.matches(&h.token) {
        return Err("wrong job token".into());
    }
    if h.group != group || h.to != to || h.size != size || h.from >= size {
        return Err(format!("handshake for another group or rank ({h:?})"));
    }
    if from.is_some_and(|f| f != h.from) {
        return Err(format!("expected rank {}, got rank {}", from.unwrap_or(0), h.from));
    }
    Ok(h)
}

/// Time an accepted connection gets to present its whole handshake (not per read); a
/// foreign client trickling bytes is dropped after it.
const ACCEPT_HANDSHAKE: Duration = Duration::from_secs(2);

/// Handshakes a listener reads at once. Past it the oldest is dropped for the newcomer: a
/// rank of the job presents its handshake as soon as it connects, so however many strangers
/// connect, only this many newer connections in the few milliseconds its handshake takes
/// could push it out.
const MAX_HANDSHAKES: usize = 256;

/// A connection still presenting its handshake: read as its bytes arrive, beside every other
/// one, so no connection holds up the rest.
struct Handshake {
    stream: TcpStream,
    from: SocketAddr,
    bytes: [u8; HELLO_LEN],
    got: usize,
    by: Instant,
}

impl Handshake {
    /// Reads what has arrived: `None` while incomplete, else the whole handshake or why the
    /// connection is dropped.
    fn progress(&mut self, now: Instant) -> Option<std::result::Result<(), String>> {
        loop {
            match self.stream.read(&mut self.bytes[self.got..]) {
                Ok(0) => return Some(Err("closed before its handshake".into())),
                Ok(k) => {
                    self.got += k;
                    if self.got == HELLO_LEN {
                        return Some(Ok(()));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if would_block(&e) => {
                    return (now >= self.by)
                        .then(|| Err(format!("no complete handshake within {ACCEPT_HANDSHAKE:?}")));
                }
                Err(e) => return Some(Err(format!("no complete handshake: {e}"))),
            }
        }
    }
}

/// Waits for the store lock at most `wait`: a thread of this process stuck in a store call
/// must not hold up an abort (store calls are bounded too, this only shortens the wait).
pub(crate) fn lock_within(
    store: &Mutex<StoreClient>,
    wait: Duration,
) -> Option<std::sync::MutexGuard<'_, StoreClient>> {
    let deadline = Instant::now() + wait;
    loop {
        match store.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// Runs `f` on the store with its timeout lowered to `limit`, so a failing rank's last
/// words cannot block on a store host that stopped answering.
pub(crate) fn with_short_timeout<T>(
    store: &mut StoreClient,
    limit: Duration,
    f: impl FnOnce(&mut StoreClient) -> T,
) -> T {
    let saved = store.timeout();
    store.set_timeout(limit.min(saved));
    let r = f(store);
    store.set_timeout(saved);
    r
}

/// How long a failing rank spends, at most, leaving its reason in the store.
pub(crate) const ABORT_STORE_LIMIT: Duration = Duration::from_secs(1);

impl Fabric for TcpFabric {
    fn connect(
        &self,
        key: &str,
        members: &[usize],
        index: usize,
        timeout: Duration,
    ) -> Result<Box<dyn Transport>> {
        let n = members.len();
        let deadline = Deadline::after(timeout);
        let gid = group_id(key);
        let listener = TcpListener::bind((self.bind, 0))
            .map_err(|e| CommError::io(format!("binding a TCP listener on {}", self.bind), e))?;
        crate::store::deepen_backlog(&listener);
        let port = listener.local_addr().map_err(|e| CommError::io("listener address", e))?.port();
        let me = SocketAddr::new(self.advertise, port).to_string();
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        store.set(&format!("{key}/tcp/{index}"), me.as_bytes())?;
        let mut conns: Vec<Option<Conn>> = (0..n).map(|_| None).collect();
        let hello = |to: usize| Hello {
            token: self.token.0,
            group: gid,
            from: index as u32,
            to: to as u32,
            size: n as u32,
        };

        // Connect to every lower rank.
        for (peer, conn) in conns.iter_mut().enumerate().take(index) {
            let addr = store.get_string(&format!("{key}/tcp/{peer}"), deadline.remaining())?;
            let target: SocketAddr = addr
                .parse()
                .map_err(|_| CommError::Bootstrap(format!("rank {peer} published a bad address {addr:?}")))?;
            let mut stream = loop {
                let attempt = deadline.remaining().clamp(Duration::from_millis(1), Duration::from_secs(2));
                match TcpStream::connect_timeout(&target, attempt) {
                    Ok(s) => break s,
                    Err(e) if deadline.expired() => {
                        return Err(CommError::io(format!("connecting to rank {peer} at {target}"), e))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            let io = |e| CommError::io(format!("handshake with rank {peer} at {target}"), e);
            stream.set_nodelay(true).map_err(io)?;
            stream.set_write_timeout(Some(deadline.remaining().max(Duration::from_millis(1)))).map_err(io)?;
            stream.write_all(&hello(peer).encode()).map_err(io)?;
            let by = Instant::now() + deadline.remaining();
            expect_hello(&mut stream, &self.token, gid, Some(peer as u32), index as u32, n as u32, by)
                .map_err(|why| CommError::Refused(format!("rank {peer} at {target}: {why}")))?;
            *conn = Some(Conn { stream, at_boundary: true });
        }
        drop(store);

        // Accept every higher rank; anything else that connects is turned away. Handshakes
        // are read side by side as their bytes arrive, so silent or slow strangers cannot
        // delay a rank's.
        let refusals = RefusalLog::new("trident tcp");
        listener.set_nonblocking(true).map_err(|e| CommError::io("listener", e))?;
        let mut missing = n - 1 - index;
        let mut pending: std::collections::VecDeque<Handshake> = std::collections::VecDeque::new();
        while missing > 0 {
            let mut progressed = false;
            loop {
                match listener.accept() {
                    Ok((stream, from)) => {
                        progressed = true;
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        if pending.len() >= MAX_HANDSHAKES {
                            if let Some(old) = pending.pop_front() {
                                refusals.refused(
                                    &old.from,
                                    &format_args!(
                                        "dropped for a newer connection: {MAX_HANDSHAKES} handshakes in progress \
                                         (is someone flooding this port?)"
                                    ),
                                );
                            }
                        }
                        let by = Instant::now() + ACCEPT_HANDSHAKE;
                        pending.push_back(Handshake { stream, from, bytes: [0; HELLO_LEN], got: 0, by });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(CommError::io("accepting a peer", e)),
                }
            }
            let now = Instant::now();
            let mut i = 0;
            while i < pending.len() {
                let Some(done) = pending[i].progress(now) else {
                    i += 1;
                    continue;
                };
                progressed = true;
                let Some(mut h) = pending.remove(i) else { break };
                let checked =
                    done.and_then(|()| check_hello(&h.bytes, &self.token, gid, None, index as u32, n as u32));
                match checked {
                    Ok(hello_in)
                        if (hello_in.from as usize) > index && conns[hello_in.from as usize].is_none() =>
                    {
                        let from = hello_in.from as usize;
                        let answered = h
                            .stream
                            .set_nonblocking(false)
                            .and_then(|_| h.stream.set_nodelay(true))
                            .and_then(|_| h.stream.set_write_timeout(Some(ACCEPT_HANDSHAKE)))
                            .and_then(|_| h.stream.write_all(&hello(from).encode()));
                        if answered.is_ok() {
                            conns[from] = Some(Conn { stream: h.stream, at_boundary: true });
                            missing -= 1;
                        }
                    }
                    Ok(hello_in) => {
                        refusals.refused(
                            &h.from,
                            &format_args!("a duplicate or unexpected rank {}", hello_in.from),
                        );
                    }
                    Err(why) => {
                        refusals.refused(&h.from, &why);
                    }
                }
            }
            if missing > 0 && deadline.expired() {
                let peer = (index + 1..n).find(|&p| conns[p].is_none()).unwrap_or(index);
                return Err(CommError::Timeout {
                    op: format!("connecting group {key}"),
                    peer,
                    waited: deadline.waited(),
                });
            }
            if missing > 0 && !progressed {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        for conn in conns.iter_mut().flatten() {
            let io = |e| CommError::io("configuring a data connection", e);
            conn.stream.set_read_timeout(None).map_err(io)?;
            conn.stream.set_write_timeout(None).map_err(io)?;
            conn.stream.set_nonblocking(true).map_err(io)?;
        }
        Ok(Box::new(TcpTransport {
            conns,
            rank: index,
            stage: vec![0u64; STAGE_BYTES / 8],
            store: self.store.clone(),
            key: key.to_string(),
        }))
    }

    fn name(&self) -> &'static str {
        "tcp"
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
}

/// One rank's end of a TCP group: a connection per peer, each message a [`Header`] and its
/// payload.
pub struct TcpTransport {
    conns: Vec<Option<Conn>>,
    rank: usize,
    stage: Vec<u64>,
    /// Where a failing rank leaves the reason, for peers that only see its connection drop.
    store: Arc<Mutex<StoreClient>>,
    key: String,
}

/// How long a rank that lost a peer waits for the peer's own account of why it left.
const EXPLAIN_WAIT: Duration = Duration::from_millis(300);

struct Sending<'a> {
    peer: usize,
    header: [u8; HEADER_LEN],
    payload: &'a [u8],
    done: usize,
}

struct Receiving<'s> {
    incoming: Incoming<'s>,
    header: [u8; HEADER_LEN],
    header_got: usize,
    /// Payload bytes given to the sink.
    delivered: usize,
    /// Bytes in the staging buffer not yet given to the sink (less than one granule).
    staged: usize,
}

fn lost(op: &Header, peer: usize, detail: String) -> CommError {
    CommError::PeerLost { op: op.to_string(), peer, detail }
}

fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted)
}

impl TcpTransport {
    fn stream(&mut self, peer: usize, op: &Header) -> Result<&mut Conn> {
        if peer == self.rank || peer >= self.conns.len() {
            return Err(CommError::InvalidArgument(format!(
                "{op}: no connection from rank {} to rank {peer}",
                self.rank
            )));
        }
        self.conns[peer].as_mut().ok_or_else(|| lost(op, peer, "connection already closed".into()))
    }

    /// Writes as much as the socket takes; true once the whole message is out.
    fn push(&mut self, s: &mut Sending<'_>, op: &Header) -> Result<bool> {
        let total = HEADER_LEN + s.payload.len();
        let conn = self.stream(s.peer, op)?;
        conn.at_boundary = false;
        while s.done < total {
            let slices = if s.done < HEADER_LEN {
                [IoSlice::new(&s.header[s.done..]), IoSlice::new(s.payload)]
            } else {
                [IoSlice::new(&s.payload[s.done - HEADER_LEN..]), IoSlice::new(&[])]
            };
            match conn.stream.write_vectored(&slices) {
                Ok(0) => return Err(lost(op, s.peer, "connection closed while sending".into())),
                Ok(k) => s.done += k,
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(lost(op, s.peer, format!("sending failed: {e}"))),
            }
        }
        conn.at_boundary = true;
        Ok(true)
    }

    /// Reads what has arrived; true once the whole message went to the sink.
    fn pull(&mut self, r: &mut Receiving<'_>, op: &Header) -> Result<bool> {
        let peer = r.incoming.peer;
        let granule = r.incoming.sink.granule().max(1);
        let want = r.incoming.expect.payload_len as usize;
        let stage: &mut [u8] = bytemuck::cast_slice_mut(&mut self.stage[..]);
        let conn =
            self.conns[peer].as_mut().ok_or_else(|| lost(op, peer, "connection already closed".into()))?;
        let closed = |got: usize| {
            lost(
                op,
                peer,
                format!("it closed the connection ({got} bytes into the message); it probably failed, see its output"),
            )
        };
        while r.header_got < HEADER_LEN {
            match conn.stream.read(&mut r.header[r.header_got..]) {
                Ok(0) => return Err(closed(r.header_got)),
                Ok(k) => r.header_got += k,
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(lost(op, peer, format!("receiving failed: {e}"))),
            }
            if r.header_got == HEADER_LEN {
                let h = Header::decode(&r.header, peer, op)?;
                h.check(&r.incoming.expect, peer)?;
            }
        }
        if let Some(dst) = r.incoming.sink.direct().filter(|d| d.len() >= want) {
            while r.delivered < want {
                match conn.stream.read(&mut dst[r.delivered..want]) {
                    Ok(0) => return Err(closed(HEADER_LEN + r.delivered)),
                    Ok(k) => r.delivered += k,
                    Err(e) if would_block(&e) => return Ok(false),
                    Err(e) => return Err(lost(op, peer, format!("receiving failed: {e}"))),
                }
            }
            return Ok(true);
        }
        while r.delivered + r.staged < want {
            let room = (stage.len() - r.staged).min(want - r.delivered - r.staged);
            match conn.stream.read(&mut stage[r.staged..r.staged + room]) {
                Ok(0) => return Err(closed(HEADER_LEN + r.delivered + r.staged)),
                Ok(k) => {
                    r.staged += k;
                    let whole = r.staged / granule * granule;
                    if whole > 0 {
                        r.incoming.sink.accept(r.delivered, &stage[..whole]);
                        r.delivered += whole;
                        stage.copy_within(whole..r.staged, 0);
                        r.staged -= whole;
                    }
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(lost(op, peer, format!("receiving failed: {e}"))),
            }
        }
        Ok(true)
    }
}

impl TcpTransport {
    fn abort_key(&self, reporter: usize) -> String {
        format!("{}/abort/{reporter}", self.key)
    }

    /// A peer whose connection dropped may have given up because of another rank; if it
    /// left word in the store, name the rank it blamed.
    fn explain(&self, err: CommError, op: &Header, timeout: Duration) -> CommError {
        if let CommError::Timeout { peer, waited, .. } = err {
            return self.trace_timeout(op, peer, timeout, waited);
        }
        let CommError::PeerLost { peer, .. } = err else {
            return err;
        };
        let Some(mut store) = lock_within(&self.store, ABORT_STORE_LIMIT) else {
            return err;
        };
        let key = self.abort_key(peer);
        let Ok(record) =
            with_short_timeout(&mut store, ABORT_STORE_LIMIT, |s| s.get_string(&key, EXPLAIN_WAIT))
        else {
            return err;
        };
        let mut fields = record.split(',').map(|f| f.parse::<usize>());
        match (fields.next(), fields.next()) {
            (Some(Ok(culprit)), Some(Ok(reason))) => CommError::PeerFailed {
                op: op.to_string(),
                culprit,
                reporter: peer,
                reason: AbortReason::from_u8(reason.min(255) as u8),
            },
            _ => err,
        }
    }

    /// The timeout error for a wait on `peer`, blaming the rank the wait was really stuck
    /// behind (see [`super::follow_wait_chain`]); records go in the store, so this needs a
    /// store that answers (it gives up within [`ABORT_STORE_LIMIT`] per call otherwise).
    fn trace_timeout(&self, op: &Header, peer: usize, timeout: Duration, waited: Duration) -> CommError {
        let direct = || super::chained_timeout(&op.to_string(), self.rank, &[], peer, waited);
        let Some(mut store) = lock_within(&self.store, ABORT_STORE_LIMIT) else {
            return direct();
        };
        let key = |r: usize| format!("{}/waiting/{r}", self.key);
        let published = with_short_timeout(&mut store, ABORT_STORE_LIMIT, |s| {
            s.set(&key(self.rank), peer.to_string().as_bytes())
        });
        // Where the store does not answer, the wait is left as it is: whether its host is
        // to blame is for the caller, who knows the world ranks (see `crate::blame`).
        if published.is_err() {
            return direct();
        }
        let (culprit, chain) =
            super::follow_wait_chain(self.rank, peer, super::wait_chain_budget(timeout), |r, wait| {
                with_short_timeout(&mut store, ABORT_STORE_LIMIT, |s| s.get_string(&key(r), wait))
                    .ok()?
                    .parse()
                    .ok()
                    .filter(|&q: &usize| q < self.conns.len())
            });
        super::chained_timeout(&op.to_string(), self.rank, &chain, culprit, waited)
    }

    fn exchange_inner(
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
        let mut sending =
            send.map(|s| Sending { peer: s.peer, header: s.header.encode(), payload: s.payload, done: 0 });
        let mut receiving = recv.map(|incoming| Receiving {
            incoming,
            header: [0; HEADER_LEN],
            header_got: 0,
            delivered: 0,
            staged: 0,
        });
        loop {
            if let Some(s) = sending.as_mut() {
                if self.push(s, &op)? {
                    sending = None;
                }
            }
            if let Some(r) = receiving.as_mut() {
                if self.pull(r, &op)? {
                    receiving = None;
                }
            }
            if sending.is_none() && receiving.is_none() {
                return Ok(());
            }
            // Sleep in poll until a socket is ready.
            let mut fds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 2];
            if let Some(s) = &sending {
                fds[0].fd = self.stream(s.peer, &op)?.stream.as_raw_fd();
                fds[0].events = libc::POLLOUT;
            }
            if let Some(r) = &receiving {
                let fd = self.stream(r.incoming.peer, &op)?.stream.as_raw_fd();
                if fd == fds[0].fd {
                    fds[0].events |= libc::POLLIN;
                } else {
                    fds[1].fd = fd;
                    fds[1].events = libc::POLLIN;
                }
            }
            let wait_ms = deadline.remaining().as_millis().min(1000) as i32;
            // SAFETY: `fds` is a valid array of two pollfd; negative fds are ignored.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait_ms) };
            if ready < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(CommError::io("poll", e));
                }
            }
            if deadline.expired() {
                let peer = receiving
                    .as_ref()
                    .map(|r| r.incoming.peer)
                    .or(sending.as_ref().map(|s| s.peer))
                    .unwrap_or(self.rank);
                return Err(CommError::Timeout { op: op.to_string(), peer, waited: deadline.waited() });
            }
        }
    }
}

impl Transport for TcpTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.conns.len()
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
        self.exchange_inner(send, recv, timeout).map_err(|e| self.explain(e, &op, timeout))
    }

    fn abort(&mut self, op: &Header, culprit: usize, reason: AbortReason) {
        // Leave the reason first, so peers that see the connection drop can find it.
        let record = format!("{culprit},{}", reason as u8);
        let key = self.abort_key(self.rank);
        if let Some(mut store) = lock_within(&self.store, ABORT_STORE_LIMIT) {
            let _ = with_short_timeout(&mut store, ABORT_STORE_LIMIT, |s| s.set(&key, record.as_bytes()));
        }
        let frame = Header::abort(op, culprit, self.rank, reason).encode();
        for conn in self.conns.iter_mut().flatten() {
            if conn.at_boundary {
                let _ = conn.stream.set_nonblocking(false);
                let _ = conn.stream.set_write_timeout(Some(Duration::from_millis(200)));
                let _ = conn.stream.write_all(&frame);
            }
            // Half-close: peers read everything queued, then see the end of the stream.
            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// A stranger opening silent connection after connection to a rank's data listener while
    /// the group forms: the ranks still connect, well within their timeout.
    #[test]
    fn strangers_flooding_a_data_listener_do_not_keep_a_rank_out() {
        let token = JobToken::random().unwrap();
        let server = StoreServer::start("127.0.0.1:0".parse().unwrap(), token).unwrap();
        let addr = server.addr().to_string();
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let client =
            || Arc::new(Mutex::new(StoreClient::connect(&addr, &token, Duration::from_secs(10)).unwrap()));
        let (f0, f1) = (
            TcpFabric::new(client(), token, lo, lo, Some(server)),
            TcpFabric::new(client(), token, lo, lo, None),
        );
        let mut flood_store = StoreClient::connect(&addr, &token, Duration::from_secs(10)).unwrap();
        let (r0, r1, held) = std::thread::scope(|s| {
            let r0 = s.spawn(|| f0.connect("g", &[0, 1], 0, Duration::from_secs(10)).map(drop));
            let listener = flood_store.get_string("g/tcp/0", Duration::from_secs(10)).unwrap();
            let (started, flooding) = std::sync::mpsc::channel();
            let flood = s.spawn(move || {
                // Fifty silent connections queued ahead of the rank, then more while it joins
                // (until the listener closes, its group formed).
                let mut held: Vec<TcpStream> =
                    (0..50).filter_map(|_| TcpStream::connect(&listener).ok()).collect();
                let _ = started.send(());
                for _ in 0..250 {
                    match TcpStream::connect(&listener) {
                        Ok(c) => held.push(c),
                        Err(_) => break,
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                held
            });
            flooding.recv().unwrap();
            let r1 = f1.connect("g", &[0, 1], 1, Duration::from_secs(3)).map(drop);
            (r0.join().unwrap(), r1, flood.join().unwrap())
        });
        assert!(held.len() >= 50, "the flood connected {} times", held.len());
        r1.unwrap();
        r0.unwrap();
    }
}
