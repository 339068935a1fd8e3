//! A small TCP key-value store for rendezvous. Rank 0 hosts it at the master address; every
//! rank publishes what peers need (listening addresses, shared-memory names) and waits for
//! what it needs from them. Clients must present the job token; requests are bounded.
//!
//! Protocol: the client sends [`HELLO_LEN`] bytes (magic, version, token) and gets one byte
//! back (1 = accepted, 0 = refused, 2 = busy: too many handshakes in progress, try again). Then requests: `SET` = op 1, key length u32, key, value length u32,
//! value -> status byte; `GET` = op 2, key length u32, key, timeout ms u32 -> status byte
//! (1 = found, 0 = timed out), and when found, value length u32 and value; `CLAIM` = op 3,
//! key and value as for `SET` -> status byte (1 = set, the key was free; 2 = held already,
//! followed by the holder's value length u32 and value; 0 = the store is full).

use crate::error::{CommError, Result};
use crate::token::JobToken;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const MAGIC: u32 = 0x5344_5254; // "TRDS"
const VERSION: u32 = 1;
/// Bytes of a client's greeting (magic, version, job token).
pub const HELLO_LEN: usize = 24;
/// Longest key, bytes.
pub const MAX_KEY: usize = 1024;
/// Largest value, bytes.
pub const MAX_VALUE: usize = 1 << 20;
const MAX_TOTAL: usize = 64 << 20;
const OP_SET: u8 = 1;
const OP_GET: u8 = 2;
const OP_CLAIM: u8 = 3;

#[derive(Default)]
struct Table {
    map: HashMap<String, Vec<u8>>,
    bytes: usize,
}

/// Handshake answers: the first byte the server sends.
const ACCEPTED: u8 = 1;
const REFUSED: u8 = 0;
/// Too many handshakes in progress: the client should try again shortly.
const BUSY: u8 = 2;

/// Bounds on what unauthenticated connections may cost the store host.
#[derive(Clone, Copy, Debug)]
pub struct StoreLimits {
    /// Time a connection gets to present its whole hello (not per read: a client trickling
    /// one byte at a time is cut off at this deadline).
    pub handshake: Duration,
    /// Connections in their handshake at once; past it the oldest is dropped for the
    /// newcomer, so that strangers holding connections open cannot keep a rank out (a rank
    /// presents its hello as soon as it connects).
    pub max_pending: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits { handshake: Duration::from_secs(5), max_pending: 128 }
    }
}

/// Counters of a running store, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Connections turned away: wrong hello, handshake deadline passed, or over the cap.
    pub refused: usize,
    /// Of those, the ones dropped for a newer connection because `max_pending` handshakes
    /// were in progress.
    pub busy: usize,
    /// Most handshakes in progress at once.
    pub pending_peak: usize,
    /// Lines the store wrote to stderr about refused connections.
    pub logged: usize,
}

struct Shared {
    table: Mutex<Table>,
    changed: Condvar,
    stop: AtomicBool,
    token: JobToken,
    limits: StoreLimits,
    /// Authenticated connections still open.
    clients: AtomicUsize,
    /// Connections in their handshake.
    pending: AtomicUsize,
    /// The connections in their handshake, oldest first, by id: the oldest is dropped when
    /// `max_pending` are.
    handshakes: Mutex<std::collections::VecDeque<(u64, TcpStream)>>,
    stats: Mutex<StoreStats>,
    log: RefusalLog,
}

/// Rate-limited reporting of refused connections: the first few are logged one per line,
/// then at most one summary line per period, so a flood of foreign connections cannot fill
/// the job's log.
pub(crate) struct RefusalLog {
    what: &'static str,
    state: Mutex<LogState>,
}

struct LogState {
    lines: usize,
    suppressed: usize,
    last_summary: Option<Instant>,
}

/// Refusals logged individually before summaries take over.
const LOG_FIRST: usize = 5;
const LOG_PERIOD: Duration = Duration::from_secs(10);

impl RefusalLog {
    pub(crate) fn new(what: &'static str) -> Self {
        RefusalLog { what, state: Mutex::new(LogState { lines: 0, suppressed: 0, last_summary: None }) }
    }

    /// Records one refusal; returns whether a line was written.
    pub(crate) fn refused(&self, peer: &dyn std::fmt::Display, why: &dyn std::fmt::Display) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.lines < LOG_FIRST {
            s.lines += 1;
            eprintln!("{}: refused a connection from {peer}: {why}", self.what);
            return true;
        }
        s.suppressed += 1;
        let now = Instant::now();
        if s.last_summary.is_none_or(|t| now.duration_since(t) >= LOG_PERIOD) {
            eprintln!(
                "{}: refused {} more connections (latest from {peer}: {why}); further refusals are summarised every {}s",
                self.what,
                s.suppressed,
                LOG_PERIOD.as_secs()
            );
            s.suppressed = 0;
            s.last_summary = Some(now);
            s.lines += 1;
            return true;
        }
        false
    }

    pub(crate) fn lines(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).lines
    }
}

/// How long a dropped server keeps serving clients that are still connected: a rank that
/// finishes first must not take the store away from one still making its last requests.
const LINGER: Duration = Duration::from_secs(3);

/// The server side, hosted by rank 0; stops when dropped.
pub struct StoreServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept_thread: Option<std::thread::JoinHandle<()>>,
}

impl StoreServer {
    /// Serves a store on `bind` (port 0 picks one; see [`StoreServer::addr`]) to clients that
    /// present `token`, with the default limits.
    pub fn start(bind: SocketAddr, token: JobToken) -> Result<Self> {
        Self::start_with(bind, token, StoreLimits::default())
    }

    /// [`StoreServer::start`] with explicit bounds on unauthenticated connections.
    pub fn start_with(bind: SocketAddr, token: JobToken, limits: StoreLimits) -> Result<Self> {
        let listener = TcpListener::bind(bind).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::AddrNotAvailable {
                "MASTER_ADDR must be an address of rank 0's host"
            } else {
                "is MASTER_PORT free?"
            };
            let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                "the port is taken: by another job, or by a second process started as rank 0 \
                 (every process of a job needs its own RANK); pick another MASTER_PORT"
            } else {
                hint
            };
            CommError::io(format!("rank 0 hosting the rendezvous store on {bind} ({hint})"), e)
        })?;
        deepen_backlog(&listener);
        let addr = listener.local_addr().map_err(|e| CommError::io("store address", e))?;
        listener.set_nonblocking(true).map_err(|e| CommError::io("store listener", e))?;
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            token,
            limits,
            clients: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            handshakes: Mutex::new(std::collections::VecDeque::new()),
            stats: Mutex::new(StoreStats::default()),
            log: RefusalLog::new("trident store"),
        });
        let s = shared.clone();
        let accept_thread = std::thread::Builder::new()
            .name("trident-store".into())
            .spawn(move || accept_loop(listener, s))
            .map_err(|e| CommError::io("spawning the store thread", e))?;
        Ok(StoreServer { shared, addr, accept_thread: Some(accept_thread) })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the server has served and refused so far.
    pub fn stats(&self) -> StoreStats {
        let mut s = *self.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.logged = self.shared.log.lines();
        s
    }

    /// Connections now in their handshake.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Acquire)
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        let deadline = Instant::now() + LINGER;
        while self.shared.clients.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.shared.stop.store(true, Ordering::Release);
        self.shared.changed.notify_all();
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn count(&self, f: impl FnOnce(&mut StoreStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Takes connection `id` off the handshakes in progress.
    fn handshake_over(&self, id: u64) {
        let mut q = self.handshakes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = q.iter().position(|(i, _)| *i == id) {
            q.remove(at);
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut next_id = 0u64;
    while !shared.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, peer)) => {
                let id = next_id;
                next_id += 1;
                let Ok(handle) = stream.try_clone() else { continue };
                // Room for the newcomer: the oldest handshake goes (its thread sees the
                // connection shut and ends, counting the refusal).
                let pending = {
                    let mut q = shared.handshakes.lock().unwrap_or_else(|e| e.into_inner());
                    if q.len() >= shared.limits.max_pending.max(1) {
                        if let Some((_, oldest)) = q.pop_front() {
                            let _ = oldest.shutdown(std::net::Shutdown::Both);
                            shared.count(|s| s.busy += 1);
                        }
                    }
                    q.push_back((id, handle));
                    q.len()
                };
                shared.pending.fetch_add(1, Ordering::AcqRel);
                shared.count(|s| s.pending_peak = s.pending_peak.max(pending));
                let s = shared.clone();
                let spawned =
                    std::thread::Builder::new().name("trident-store-conn".into()).spawn(move || {
                        let mut slot = Some(Pending(&s.pending));
                        let served = serve(stream, &s, &mut slot, id);
                        s.handshake_over(id);
                        if let Err(e) = served {
                            if slot.is_some() {
                                // Still in the handshake: a foreign or broken client, or one
                                // dropped for a newer connection.
                                s.count(|st| st.refused += 1);
                                if !s.stop.load(Ordering::Acquire) {
                                    s.log.refused(&peer, &e);
                                }
                            } else if !s.stop.load(Ordering::Acquire) {
                                eprintln!("trident store: dropped the connection of a rank at {peer}: {e}");
                            }
                        }
                    });
                if spawned.is_err() {
                    shared.pending.fetch_sub(1, Ordering::AcqRel);
                    shared.handshake_over(id);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Connections the kernel queues for a listener before `accept`: deeper than the default
/// 128, so that a burst of strangers does not leave a rank's connection unanswered (its
/// retry would come a second later).
const BACKLOG: libc::c_int = 4096;

/// Raises `listener`'s queue of unaccepted connections to [`BACKLOG`] (best effort: the
/// kernel caps it at `net.core.somaxconn`).
pub(crate) fn deepen_backlog(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    // SAFETY: `listen` on a socket this listener owns and that already listens only changes
    // its backlog; a failure leaves the old one, which is fine.
    unsafe {
        libc::listen(listener.as_raw_fd(), BACKLOG);
    }
}

/// Releases a handshake slot when dropped.
struct Pending<'a>(&'a AtomicUsize);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn timed_out(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_string())
}

/// `read_exact` that gives up at `deadline` however the bytes trickle in.
pub(crate) fn read_exact_by(
    stream: &mut TcpStream,
    mut buf: &mut [u8],
    deadline: Instant,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out("no complete answer before the deadline"));
        }
        stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match stream.read(buf) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => buf = &mut buf[k..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(timed_out("no complete answer before the deadline"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `write_all` that gives up at `deadline`.
fn write_all_by(stream: &mut TcpStream, mut buf: &[u8], deadline: Instant) -> std::io::Result<()> {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out("could not send before the deadline"));
        }
        stream.set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
        match stream.write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(k) => buf = &buf[k..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(timed_out("could not send before the deadline"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_u32(r: &mut impl Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_bounded(r: &mut impl Read, limit: usize, what: &str) -> std::io::Result<Vec<u8>> {
    let len = read_u32(r)? as usize;
    if len > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{what} of {len} bytes exceeds the limit of {limit}"),
        ));
    }
    let mut v = vec![0u8; len];
    r.read_exact(&mut v)?;
    Ok(v)
}

fn invalid(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_string())
}

/// Counts a connection closed when dropped.
struct Disconnect<'a>(&'a AtomicUsize);

impl Drop for Disconnect<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long the server waits for an authenticated client to take a reply.
const REPLY_WAIT: Duration = Duration::from_secs(30);

fn serve(
    mut stream: TcpStream,
    shared: &Shared,
    slot: &mut Option<Pending<'_>>,
    id: u64,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    let deadline = Instant::now() + shared.limits.handshake;
    let mut hello = [0u8; HELLO_LEN];
    read_exact_by(&mut stream, &mut hello, deadline).map_err(|e| {
        if e.kind() == std::io::ErrorKind::TimedOut {
            timed_out(&format!("no complete hello within {:?}", shared.limits.handshake))
        } else {
            e
        }
    })?;
    let magic = u32::from_le_bytes(hello[0..4].try_into().unwrap());
    let version = u32::from_le_bytes(hello[4..8].try_into().unwrap());
    if magic != MAGIC || version != VERSION || !shared.token.matches(&hello[8..24]) {
        let _ = write_all_by(&mut stream, &[REFUSED], deadline);
        return Err(invalid("not a Trident store client, or a wrong job token"));
    }
    write_all_by(&mut stream, &[ACCEPTED], deadline)?;
    shared.clients.fetch_add(1, Ordering::AcqRel);
    let _connected = Disconnect(&shared.clients);
    *slot = None;
    shared.handshake_over(id);
    // Idle clients are fine once authenticated (their own timeouts bound their waits);
    // replies must not block this thread for good on a client that stopped reading.
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(Some(REPLY_WAIT))?;
    loop {
        let mut op = [0u8; 1];
        if stream.read(&mut op)? == 0 {
            return Ok(());
        }
        let key = read_bounded(&mut stream, MAX_KEY, "key")?;
        let key = String::from_utf8(key).map_err(|_| invalid("key is not UTF-8"))?;
        match op[0] {
            OP_SET => {
                let value = read_bounded(&mut stream, MAX_VALUE, "value")?;
                let mut t = shared.table.lock().unwrap_or_else(|e| e.into_inner());
                let old = t.map.get(&key).map_or(0, |v| v.len() + key.len());
                if t.bytes - old + value.len() + key.len() > MAX_TOTAL {
                    drop(t);
                    stream.write_all(&[0])?;
                    continue;
                }
                t.bytes = t.bytes - old + value.len() + key.len();
                t.map.insert(key, value);
                drop(t);
                shared.changed.notify_all();
                stream.write_all(&[1])?;
            }
            OP_CLAIM => {
                let value = read_bounded(&mut stream, MAX_VALUE, "value")?;
                let mut t = shared.table.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(holder) = t.map.get(&key) {
                    let mut reply = Vec::with_capacity(5 + holder.len());
                    reply.push(2);
                    reply.extend_from_slice(&(holder.len() as u32).to_le_bytes());
                    reply.extend_from_slice(holder);
                    drop(t);
                    stream.write_all(&reply)?;
                    continue;
                }
                if t.bytes + value.len() + key.len() > MAX_TOTAL {
                    drop(t);
                    stream.write_all(&[0])?;
                    continue;
                }
                t.bytes += value.len() + key.len();
                t.map.insert(key, value);
                drop(t);
                shared.changed.notify_all();
                stream.write_all(&[1])?;
            }
            OP_GET => {
                let timeout = Duration::from_millis(read_u32(&mut stream)? as u64);
                let deadline = Instant::now() + timeout;
                let mut t = shared.table.lock().unwrap_or_else(|e| e.into_inner());
                let value = loop {
                    if let Some(v) = t.map.get(&key) {
                        break Some(v.clone());
                    }
                    let now = Instant::now();
                    if now >= deadline || shared.stop.load(Ordering::Acquire) {
                        break None;
                    }
                    t = shared
                        .changed
                        .wait_timeout(t, (deadline - now).min(Duration::from_millis(200)))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                };
                drop(t);
                match value {
                    Some(v) => {
                        let mut reply = Vec::with_capacity(5 + v.len());
                        reply.push(1);
                        reply.extend_from_slice(&(v.len() as u32).to_le_bytes());
                        reply.extend_from_slice(&v);
                        stream.write_all(&reply)?;
                    }
                    None => stream.write_all(&[0])?,
                }
            }
            other => return Err(invalid(&format!("unknown store request {other}"))),
        }
    }
}

/// A connection to the store. Every call is bounded in time: requests and replies by the
/// client's timeout (the job's `TRIDENT_TIMEOUT_S`, see [`StoreClient::set_timeout`]), a
/// `get` by its own wait plus at most [`GET_GRACE`] for the answer to arrive. After a failed
/// call the connection is out of step with the server and refuses further calls.
pub struct StoreClient {
    stream: TcpStream,
    addr: String,
    timeout: Duration,
    broken: Option<String>,
}

/// Most time a `get` allows, past its own wait, for the store's answer to arrive.
pub const GET_GRACE: Duration = Duration::from_secs(5);

/// The 24 bytes a client sends first.
pub fn hello(token: &JobToken) -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&VERSION.to_le_bytes());
    h[8..24].copy_from_slice(&token.0);
    h
}

/// How one handshake attempt ended, when it did not succeed.
enum Attempt {
    /// Worth another try before the deadline (the store is busy or restarting).
    Retry(String),
    /// Final.
    Fail(CommError),
}

impl StoreClient {
    /// Connects to the store at `addr`, retrying until `timeout` (rank 0 may start last).
    /// `timeout` also bounds every later call (see [`StoreClient::set_timeout`]).
    pub fn connect(addr: &str, token: &JobToken, timeout: Duration) -> Result<Self> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut last_err: Option<String> = None;
        while Instant::now() < deadline {
            let targets: Vec<SocketAddr> = match addr.to_socket_addrs() {
                Ok(a) => a.collect(),
                Err(e) => {
                    last_err = Some(e.to_string());
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            for target in targets {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match TcpStream::connect_timeout(&target, left.min(Duration::from_secs(2))) {
                    // While nothing listens on a local port in the ephemeral range, a connection
                    // to it can pick that same port as its source and connect to itself (TCP
                    // simultaneous open); that is no store, so try again.
                    Ok(stream) if is_self_connected(&stream) => {
                        last_err = Some("connected to itself: no store listening yet".into())
                    }
                    Ok(stream) => match Self::handshake(stream, addr, token, deadline, timeout) {
                        Ok(client) => return Ok(client),
                        Err(Attempt::Fail(e)) => return Err(e),
                        Err(Attempt::Retry(why)) => last_err = Some(why),
                    },
                    Err(e) => last_err = Some(e.to_string()),
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(CommError::Bootstrap(format!(
            "could not join the rendezvous store at {addr} within {timeout:?} (is rank 0 running, and MASTER_ADDR/MASTER_PORT right? raise TRIDENT_TIMEOUT_S if rank 0 starts late): {}",
            last_err.unwrap_or_else(|| "no address".into())
        )))
    }

    fn handshake(
        mut stream: TcpStream,
        addr: &str,
        token: &JobToken,
        deadline: Instant,
        timeout: Duration,
    ) -> std::result::Result<Self, Attempt> {
        let fail = |e| Attempt::Fail(CommError::io(format!("store handshake with {addr}"), e));
        stream.set_nodelay(true).map_err(fail)?;
        write_all_by(&mut stream, &hello(token), deadline).map_err(|e| Attempt::Retry(e.to_string()))?;
        let mut answer = [0u8; 1];
        match read_exact_by(&mut stream, &mut answer, deadline) {
            Ok(()) if answer[0] == ACCEPTED => {}
            Ok(()) if answer[0] == BUSY => {
                return Err(Attempt::Retry("the store was busy with other handshakes".into()))
            }
            Ok(()) => {
                return Err(Attempt::Fail(CommError::Refused(format!(
                    "the store at {addr} refused this process: wrong job token ({}, the launcher's job id or the job secret file {} differs between ranks?)",
                    crate::token::ENV_TOKEN,
                    crate::token::ENV_SECRET_FILE
                ))))
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                return Err(Attempt::Fail(CommError::Timeout {
                    op: format!(
                        "joining the rendezvous store at {addr}: the store host accepted the connection but never answered the handshake (stopped or overloaded?)"
                    ),
                    peer: 0,
                    waited: timeout,
                }))
            }
            Err(e) => return Err(Attempt::Retry(format!("the store closed the connection during the handshake: {e}"))),
        }
        Ok(StoreClient { stream, addr: addr.to_string(), timeout, broken: None })
    }

    /// Changes how long later calls wait for the store (see the type's documentation).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(Duration::from_millis(1));
    }

    /// How long calls wait for the store.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn send_key(&mut self, op: u8, key: &str) -> Result<Vec<u8>> {
        if key.len() > MAX_KEY {
            return Err(CommError::InvalidArgument(format!(
                "store key of {} bytes exceeds {MAX_KEY}",
                key.len()
            )));
        }
        let mut req = Vec::with_capacity(5 + key.len());
        req.push(op);
        req.extend_from_slice(&(key.len() as u32).to_le_bytes());
        req.extend_from_slice(key.as_bytes());
        Ok(req)
    }

    /// Sends `req` and reads the reply with `read`, all before `answer_within` has passed.
    /// Any failure leaves the connection unusable.
    fn call<T>(
        &mut self,
        key: &str,
        req: &[u8],
        answer_within: Duration,
        read: impl FnOnce(&mut TcpStream, Instant) -> std::io::Result<T>,
    ) -> Result<T> {
        if let Some(why) = &self.broken {
            return Err(CommError::Bootstrap(format!(
                "the connection to the rendezvous store at {} failed earlier ({why}); this rank cannot use the store any more",
                self.addr
            )));
        }
        let deadline = Instant::now() + answer_within;
        let result =
            write_all_by(&mut self.stream, req, deadline).and_then(|_| read(&mut self.stream, deadline));
        result.map_err(|e| {
            self.broken = Some(e.to_string());
            match e.kind() {
                std::io::ErrorKind::TimedOut => CommError::Timeout {
                    op: format!(
                        "store request for {key:?} at {} (rank 0 hosts the store; it did not answer: stopped, hung or unreachable?)",
                        self.addr
                    ),
                    peer: 0,
                    waited: answer_within,
                },
                std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe => CommError::PeerLost {
                    op: format!("store request for {key:?} at {}", self.addr),
                    peer: 0,
                    detail: format!("the store closed the connection ({e}); rank 0, which hosts it, probably exited or crashed, see its output"),
                },
                _ => CommError::io(format!("talking to the rendezvous store at {}", self.addr), e),
            }
        })
    }

    /// The request of `op` carrying `key` and `value` (at most [`MAX_VALUE`] bytes): the key's
    /// request, then the value's length and bytes.
    fn value_request(&mut self, op: u8, key: &str, value: &[u8]) -> Result<Vec<u8>> {
        if value.len() > MAX_VALUE {
            return Err(CommError::InvalidArgument(format!(
                "store value of {} bytes exceeds {MAX_VALUE}",
                value.len()
            )));
        }
        let mut req = self.send_key(op, key)?;
        req.extend_from_slice(&(value.len() as u32).to_le_bytes());
        req.extend_from_slice(value);
        Ok(req)
    }

    /// Sets `key` to `value` (at most [`MAX_VALUE`] bytes, a key of at most [`MAX_KEY`]),
    /// waking the clients that wait for it.
    pub fn set(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let req = self.value_request(OP_SET, key, value)?;
        let within = self.timeout;
        let status = self.call(key, &req, within, |s, deadline| {
            let mut status = [0u8; 1];
            read_exact_by(s, &mut status, deadline).map(|_| status[0])
        })?;
        if status != 1 {
            return Err(CommError::Bootstrap(format!("the store refused to keep {key:?}: it is full")));
        }
        Ok(())
    }

    /// Sets `key` to `value` unless it is set already: `None` when this call set it, else
    /// the value that holds it (for claims only one client may make, such as a rank).
    pub fn claim(&mut self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>> {
        let req = self.value_request(OP_CLAIM, key, value)?;
        let within = self.timeout;
        let answer = self.call(key, &req, within, |s, deadline| {
            let mut status = [0u8; 1];
            read_exact_by(s, &mut status, deadline)?;
            if status[0] != 2 {
                return Ok((status[0], None));
            }
            let mut len = [0u8; 4];
            read_exact_by(s, &mut len, deadline)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_VALUE {
                return Err(invalid(&format!("store value of {len} bytes exceeds the limit of {MAX_VALUE}")));
            }
            let mut v = vec![0u8; len];
            read_exact_by(s, &mut v, deadline)?;
            Ok((2, Some(v)))
        })?;
        match answer {
            (1, _) => Ok(None),
            (2, holder) => Ok(holder),
            _ => Err(CommError::Bootstrap(format!("the store refused to keep {key:?}: it is full"))),
        }
    }

    /// Waits up to `timeout` for `key` to be set and returns its value.
    pub fn get(&mut self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let mut req = self.send_key(OP_GET, key)?;
        let ms = timeout.as_millis().min(u32::MAX as u128) as u32;
        req.extend_from_slice(&ms.to_le_bytes());
        let within = timeout + self.timeout.min(GET_GRACE);
        let value = self.call(key, &req, within, |s, deadline| {
            let mut status = [0u8; 1];
            read_exact_by(s, &mut status, deadline)?;
            if status[0] != 1 {
                return Ok(None);
            }
            let mut len = [0u8; 4];
            read_exact_by(s, &mut len, deadline)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_VALUE {
                return Err(invalid(&format!("store value of {len} bytes exceeds the limit of {MAX_VALUE}")));
            }
            let mut v = vec![0u8; len];
            read_exact_by(s, &mut v, deadline)?;
            Ok(Some(v))
        })?;
        value.ok_or_else(|| {
            CommError::Bootstrap(format!(
                "timed out after {timeout:?} waiting for {key:?} in the rendezvous store: a rank did not start or crashed during setup"
            ))
        })
    }

    /// Whether a call failed on the connection itself (the store stopped answering or went
    /// away), so that every later call fails at once.
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// `get` as UTF-8.
    pub fn get_string(&mut self, key: &str, timeout: Duration) -> Result<String> {
        String::from_utf8(self.get(key, timeout)?)
            .map_err(|_| CommError::Bootstrap(format!("store value of {key:?} is not UTF-8")))
    }

    /// Publishes this member's arrival under `key` and waits for all `n` members.
    pub fn barrier(&mut self, key: &str, index: usize, n: usize, timeout: Duration) -> Result<()> {
        self.set(&format!("{key}/{index}"), b"1")?;
        let deadline = Instant::now() + timeout;
        for i in 0..n {
            let left = deadline.saturating_duration_since(Instant::now());
            self.get(&format!("{key}/{i}"), left)?;
        }
        Ok(())
    }
}

fn is_self_connected(stream: &TcpStream) -> bool {
    matches!((stream.local_addr(), stream.peer_addr()), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket bound to a local port and connected to that same port: what a store client
    /// gets when it dials a port nobody listens on and the kernel picks that port as source.
    fn self_connected_stream() -> TcpStream {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket calls on a descriptor this function owns; the addresses are
        // initialised `sockaddr_in`s of the size passed; the descriptor moves into the stream.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            assert_eq!(libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len), 0);
            let mut bound: libc::sockaddr_in = std::mem::zeroed();
            let mut blen = len;
            assert_eq!(libc::getsockname(fd, &mut bound as *mut _ as *mut libc::sockaddr, &mut blen), 0);
            assert_eq!(libc::connect(fd, &bound as *const _ as *const libc::sockaddr, len), 0);
            TcpStream::from_raw_fd(fd)
        }
    }

    #[test]
    fn a_connection_to_itself_is_told_from_one_to_a_listener() {
        assert!(is_self_connected(&self_connected_stream()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(!is_self_connected(&stream));
    }

    #[test]
    fn a_claim_is_granted_once_and_names_its_holder() {
        let token = JobToken::random().unwrap();
        let server = StoreServer::start("127.0.0.1:0".parse().unwrap(), token).unwrap();
        let addr = server.addr().to_string();
        let mut a = StoreClient::connect(&addr, &token, Duration::from_secs(5)).unwrap();
        let mut b = StoreClient::connect(&addr, &token, Duration::from_secs(5)).unwrap();
        assert_eq!(a.claim("rank/1", b"first").unwrap(), None);
        assert_eq!(b.claim("rank/1", b"second").unwrap().as_deref(), Some(&b"first"[..]));
        assert_eq!(b.get("rank/1", Duration::from_millis(50)).unwrap(), b"first", "the holder is kept");
        assert_eq!(b.claim("rank/2", b"second").unwrap(), None);
    }

    #[test]
    fn set_get_and_refusals() {
        let token = JobToken::random().unwrap();
        let server = StoreServer::start("127.0.0.1:0".parse().unwrap(), token).unwrap();
        let addr = server.addr().to_string();
        let mut a = StoreClient::connect(&addr, &token, Duration::from_secs(5)).unwrap();
        let mut b = StoreClient::connect(&addr, &token, Duration::from_secs(5)).unwrap();
        let waiter = std::thread::spawn(move || b.get("k", Duration::from_secs(5)).unwrap());
        a.set("k", b"value").unwrap();
        assert_eq!(waiter.join().unwrap(), b"value");
        assert!(a.get("missing", Duration::from_millis(50)).is_err());

        let wrong = JobToken::random().unwrap();
        let err = StoreClient::connect(&addr, &wrong, Duration::from_secs(5)).err().unwrap();
        assert!(matches!(err, CommError::Refused(_)), "{err}");

        // An oversized request is refused without the server allocating it.
        let mut raw = TcpStream::connect(&addr).unwrap();
        raw.write_all(&hello(&token)).unwrap();
        let mut ok = [0u8; 1];
        raw.read_exact(&mut ok).unwrap();
        raw.write_all(&[OP_SET, 1, 0, 0, 0, b'x', 0xff, 0xff, 0xff, 0x7f]).unwrap();
        let mut rest = Vec::new();
        let _ = raw.read_to_end(&mut rest);
        assert!(rest.is_empty());
        // The store still serves well-behaved clients.
        a.set("k2", b"v2").unwrap();
        assert_eq!(a.get("k2", Duration::from_secs(1)).unwrap(), b"v2");
    }

    /// A listener that accepts connections and never says a word: a store host that is
    /// stopped (SIGSTOP), as the kernel still completes connections to it.
    fn silent_host() -> (TcpListener, String) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        (l, addr)
    }

    #[test]
    fn a_silent_store_host_is_a_timeout_naming_rank_0_not_a_wrong_token() {
        let (_host, addr) = silent_host();
        let token = JobToken::random().unwrap();
        let err = StoreClient::connect(&addr, &token, Duration::from_millis(300)).err().unwrap();
        assert!(matches!(err, CommError::Timeout { peer: 0, .. }), "{err}");
        assert!(!err.to_string().contains("token"), "{err}");
    }

    #[test]
    fn calls_to_a_store_that_stops_answering_time_out_and_then_refuse() {
        // A store that completes the handshake and then goes quiet (its host froze).
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let host = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut h = [0u8; HELLO_LEN];
            s.read_exact(&mut h).unwrap();
            s.write_all(&[ACCEPTED]).unwrap();
            // Hold the connection open, answering nothing, until the client hangs up.
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        });
        let token = JobToken::random().unwrap();
        let mut c = StoreClient::connect(&addr, &token, Duration::from_secs(5)).unwrap();
        c.set_timeout(Duration::from_millis(200));
        let err = c.set("abort/1", b"0,3").unwrap_err();
        assert!(matches!(err, CommError::Timeout { peer: 0, .. }), "{err}");
        let err = c.get("k", Duration::from_millis(10)).unwrap_err();
        assert!(err.to_string().contains("failed earlier"), "{err}");
        drop(c);
        host.join().unwrap();
    }

    #[test]
    fn handshakes_have_a_deadline_and_a_cap() {
        let token = JobToken::random().unwrap();
        let limits = StoreLimits { handshake: Duration::from_millis(400), max_pending: 4 };
        let server = StoreServer::start_with("127.0.0.1:0".parse().unwrap(), token, limits).unwrap();
        let addr = server.addr().to_string();
        // Silent connections: four hold the slots, and each newer one pushes the oldest out;
        // none gets an answer.
        let mut silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(&addr).unwrap()).collect();
        for s in &mut silent {
            let mut reply = Vec::new();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = s.read_to_end(&mut reply);
            assert!(reply.is_empty(), "a silent connection got {reply:?}");
        }
        // A client trickling its hello a byte at a time is cut off at the deadline, not
        // allowed a fresh timeout per byte.
        let mut trickle = TcpStream::connect(&addr).unwrap();
        let h = hello(&token);
        let sent = (0..HELLO_LEN)
            .take_while(|&i| {
                std::thread::sleep(Duration::from_millis(60));
                trickle.write_all(&h[i..i + 1]).is_ok()
            })
            .count();
        assert!(sent < HELLO_LEN, "a trickled hello must not complete ({sent} bytes went through)");
        let until = Instant::now() + Duration::from_secs(10);
        while server.stats().refused < 11 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = server.stats();
        assert!(stats.pending_peak <= 4, "{stats:?}");
        assert!(stats.busy >= 1 && stats.refused >= 10, "the cap must push some out: {stats:?}");
        // Well-behaved clients still get in.
        let mut c = StoreClient::connect(&addr, &token, Duration::from_secs(5)).unwrap();
        c.set("k", b"v").unwrap();
        assert_eq!(server.pending(), 0);
    }

    /// Strangers opening connection after connection and holding them silent: the store's
    /// handshakes stay within the cap, and a rank connecting meanwhile still gets in.
    #[test]
    fn strangers_holding_connections_open_do_not_keep_a_rank_out() {
        let token = JobToken::random().unwrap();
        let limits = StoreLimits { handshake: Duration::from_secs(5), max_pending: 8 };
        let server = StoreServer::start_with("127.0.0.1:0".parse().unwrap(), token, limits).unwrap();
        let addr = server.addr().to_string();
        let flood_addr = addr.clone();
        let flood = std::thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..150 {
                if let Ok(s) = TcpStream::connect(&flood_addr) {
                    held.push(s);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            held
        });
        std::thread::sleep(Duration::from_millis(100));
        let mut c = StoreClient::connect(&addr, &token, Duration::from_secs(3)).unwrap();
        c.set("k", b"v").unwrap();
        let held = flood.join().unwrap();
        assert!(held.len() > 100);
        let stats = server.stats();
        assert!(stats.pending_peak <= 8 && stats.busy > 0, "{stats:?}");
    }

    #[test]
    fn a_flood_of_foreign_connections_logs_a_bounded_number_of_lines() {
        let token = JobToken::random().unwrap();
        let server = StoreServer::start("127.0.0.1:0".parse().unwrap(), token).unwrap();
        let addr = server.addr().to_string();
        for _ in 0..60 {
            let mut raw = TcpStream::connect(&addr).unwrap();
            raw.write_all(&[0x42; HELLO_LEN]).unwrap();
            let mut reply = Vec::new();
            let _ = raw.read_to_end(&mut reply);
            assert_eq!(reply, [REFUSED]);
        }
        // The server counts a refusal just after hanging up.
        let until = Instant::now() + Duration::from_secs(10);
        while server.stats().refused < 60 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stats = server.stats();
        assert!(stats.refused >= 60, "{stats:?}");
        assert!(stats.logged <= LOG_FIRST + 1, "{stats:?}");
    }
}
