//! A small TCP key-value store for rendezvous. Rank 0 hosts it at the master address; every
//! rank publishes what peers need (listening addresses, shared-memory names) and waits for
//! what it needs from them. Clients must present the job token; requests are bounded.
//!
//! Protocol: the client sends [`HELLO_LEN`] bytes (magic, version, token) and gets one byte
//! back (1 = accepted). Then requests: `SET` = op 1, key length u32, key, value length u32,
//! value -> status byte; `GET` = op 2, key length u32, key, timeout ms u32 -> status byte
//! (1 = found, 0 = timed out), and when found, value length u32 and value.

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
pub const HELLO_LEN: usize = 24;
pub const MAX_KEY: usize = 1024;
pub const MAX_VALUE: usize = 1 << 20;
const MAX_TOTAL: usize = 64 << 20;
const OP_SET: u8 = 1;
const OP_GET: u8 = 2;

#[derive(Default)]
struct Table {
    map: HashMap<String, Vec<u8>>,
    bytes: usize,
}

struct Shared {
    table: Mutex<Table>,
    changed: Condvar,
    stop: AtomicBool,
    token: JobToken,
    /// Authenticated connections still open.
    clients: AtomicUsize,
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
    pub fn start(bind: SocketAddr, token: JobToken) -> Result<Self> {
        let listener = TcpListener::bind(bind).map_err(|e| {
            CommError::io(format!("rank 0 hosting the rendezvous store on {bind} (is MASTER_PORT free?)"), e)
        })?;
        let addr = listener.local_addr().map_err(|e| CommError::io("store address", e))?;
        listener.set_nonblocking(true).map_err(|e| CommError::io("store listener", e))?;
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            token,
            clients: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let accept_thread = std::thread::Builder::new()
            .name("trident-store".into())
            .spawn(move || accept_loop(listener, s))
            .map_err(|e| CommError::io("spawning the store thread", e))?;
        Ok(StoreServer { shared, addr, accept_thread: Some(accept_thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
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

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, peer)) => {
                let s = shared.clone();
                let _ = std::thread::Builder::new().name("trident-store-conn".into()).spawn(move || {
                    if let Err(e) = serve(stream, &s) {
                        if !s.stop.load(Ordering::Acquire) {
                            eprintln!("trident store: dropped connection from {peer}: {e}");
                        }
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
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

fn serve(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut hello = [0u8; HELLO_LEN];
    stream.read_exact(&mut hello)?;
    let magic = u32::from_le_bytes(hello[0..4].try_into().unwrap());
    let version = u32::from_le_bytes(hello[4..8].try_into().unwrap());
    if magic != MAGIC || version != VERSION || !shared.token.matches(&hello[8..24]) {
        let _ = stream.write_all(&[0]);
        return Err(invalid("refused: not a Trident store client or wrong job token"));
    }
    stream.write_all(&[1])?;
    shared.clients.fetch_add(1, Ordering::AcqRel);
    let _connected = Disconnect(&shared.clients);
    // Idle clients are fine once authenticated; the job's own timeouts bound the waits.
    stream.set_read_timeout(None)?;
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

/// A connection to the store.
pub struct StoreClient {
    stream: TcpStream,
    addr: String,
}

/// The 24 bytes a client sends first.
pub fn hello(token: &JobToken) -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&VERSION.to_le_bytes());
    h[8..24].copy_from_slice(&token.0);
    h
}

impl StoreClient {
    /// Connects to the store at `addr`, retrying until `timeout` (rank 0 may start last).
    pub fn connect(addr: &str, token: &JobToken, timeout: Duration) -> Result<Self> {
        let deadline = Instant::now() + timeout;
        let mut last_err = None;
        while Instant::now() < deadline {
            let targets: Vec<SocketAddr> = match addr.to_socket_addrs() {
                Ok(a) => a.collect(),
                Err(e) => {
                    last_err = Some(e);
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            for target in targets {
                match TcpStream::connect_timeout(&target, Duration::from_secs(2)) {
                    // While nothing listens on a local port in the ephemeral range, a connection
                    // to it can pick that same port as its source and connect to itself (TCP
                    // simultaneous open); that is no store, so try again.
                    Ok(stream) if is_self_connected(&stream) => {
                        last_err = Some(std::io::Error::other("connected to itself: no store listening yet"))
                    }
                    Ok(stream) => return Self::handshake(stream, addr, token),
                    Err(e) => last_err = Some(e),
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(CommError::Bootstrap(format!(
            "could not reach the rendezvous store at {addr} within {timeout:?} (is rank 0 running and MASTER_ADDR/MASTER_PORT right?): {}",
            last_err.map_or("no address".into(), |e| e.to_string())
        )))
    }

    fn handshake(mut stream: TcpStream, addr: &str, token: &JobToken) -> Result<Self> {
        let io = |e| CommError::io(format!("store handshake with {addr}"), e);
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(io)?;
        stream.write_all(&hello(token)).map_err(io)?;
        let mut ok = [0u8; 1];
        match stream.read_exact(&mut ok) {
            Ok(()) if ok[0] == 1 => {}
            _ => {
                return Err(CommError::Refused(format!(
                    "the store at {addr} refused this process: wrong job token ({} differs between ranks?)",
                    crate::token::ENV_TOKEN
                )))
            }
        }
        stream.set_read_timeout(None).map_err(io)?;
        Ok(StoreClient { stream, addr: addr.to_string() })
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

    fn io(&self, e: std::io::Error) -> CommError {
        CommError::io(format!("talking to the rendezvous store at {}", self.addr), e)
    }

    pub fn set(&mut self, key: &str, value: &[u8]) -> Result<()> {
        if value.len() > MAX_VALUE {
            return Err(CommError::InvalidArgument(format!(
                "store value of {} bytes exceeds {MAX_VALUE}",
                value.len()
            )));
        }
        let mut req = self.send_key(OP_SET, key)?;
        req.extend_from_slice(&(value.len() as u32).to_le_bytes());
        req.extend_from_slice(value);
        self.stream.write_all(&req).map_err(|e| self.io(e))?;
        let mut status = [0u8; 1];
        self.stream.read_exact(&mut status).map_err(|e| self.io(e))?;
        if status[0] != 1 {
            return Err(CommError::Bootstrap(format!("the store refused to keep {key:?}: it is full")));
        }
        Ok(())
    }

    /// Waits up to `timeout` for `key` to be set and returns its value.
    pub fn get(&mut self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let mut req = self.send_key(OP_GET, key)?;
        let ms = timeout.as_millis().min(u32::MAX as u128) as u32;
        req.extend_from_slice(&ms.to_le_bytes());
        self.stream.write_all(&req).map_err(|e| self.io(e))?;
        let mut status = [0u8; 1];
        self.stream.read_exact(&mut status).map_err(|e| self.io(e))?;
        if status[0] != 1 {
            return Err(CommError::Bootstrap(format!(
                "timed out after {timeout:?} waiting for {key:?} in the rendezvous store: a rank did not start or crashed during setup"
            )));
        }
        read_bounded(&mut self.stream, MAX_VALUE, "value").map_err(|e| self.io(e))
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
}
