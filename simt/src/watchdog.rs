//! Watchdog for an emulated thread that never reaches a barrier, a warp collective or its end
//! (an endless loop in a kernel). A running coroutine cannot be stopped from outside, so after
//! `TRIDENT_EMU_WATCHDOG_SECS` seconds (default 120; 0 turns the watchdog off) inside one
//! thread the watchdog names kernel, block and thread and aborts the process rather than let
//! it hang.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread;
use std::time::Duration;

/// Seconds an emulated thread may run between two suspensions when the variable is unset.
const DEFAULT_LIMIT_SECS: u64 = 120;

/// What one worker is running, as the watchdog sees it.
pub(crate) struct Heartbeat {
    kernel: &'static str,
    grid: [u32; 3],
    block_dim: [u32; 3],
    block: AtomicU64,
    thread: AtomicU32,
    resumes: AtomicU64,
    running: AtomicBool,
    // Kept by the watchdog thread only.
    last_resumes: AtomicU64,
    stalled_secs: AtomicU64,
}

impl Heartbeat {
    /// A heartbeat for a worker of this launch, watched while the returned value lives.
    pub fn register(kernel: &'static str, grid: [u32; 3], block_dim: [u32; 3]) -> Arc<Heartbeat> {
        let heartbeat = Arc::new(Heartbeat {
            kernel,
            grid,
            block_dim,
            block: AtomicU64::new(0),
            thread: AtomicU32::new(0),
            resumes: AtomicU64::new(0),
            running: AtomicBool::new(false),
            last_resumes: AtomicU64::new(0),
            stalled_secs: AtomicU64::new(0),
        });
        if let Some(watched) = watched() {
            watched.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&heartbeat));
        }
        heartbeat
    }

    /// The worker is about to resume `thread` of block number `block`.
    pub fn enter(&self, block: u64, thread: u32) {
        self.block.store(block, Ordering::Relaxed);
        self.thread.store(thread, Ordering::Relaxed);
        self.resumes.fetch_add(1, Ordering::Relaxed);
        self.running.store(true, Ordering::Relaxed);
    }

    /// The thread suspended or finished.
    pub fn leave(&self) {
        self.running.store(false, Ordering::Relaxed);
    }

    /// One watchdog tick: whether the same thread has now run for `limit` seconds.
    fn stalled_for(&self, limit: u64) -> bool {
        let resumes = self.resumes.load(Ordering::Relaxed);
        if !self.running.load(Ordering::Relaxed)
            || resumes != self.last_resumes.swap(resumes, Ordering::Relaxed)
        {
            self.stalled_secs.store(0, Ordering::Relaxed);
            return false;
        }
        self.stalled_secs.fetch_add(1, Ordering::Relaxed) + 1 >= limit
    }

    fn describe(&self, limit: u64) -> String {
        let (b, t) = (self.block.load(Ordering::Relaxed), self.thread.load(Ordering::Relaxed));
        let [gx, gy, _] = self.grid.map(u64::from);
        let [bx, by, _] = self.block_dim;
        format!(
            "SIMT emulator: kernel `{}`, block ({}, {}, {}), thread ({}, {}, {}) has run for {limit} s \
             without reaching a barrier, a warp collective or its end (an endless loop?); aborting. \
             Set TRIDENT_EMU_WATCHDOG_SECS to change the limit (0: no limit).",
            self.kernel,
            b % gx,
            (b / gx) % gy,
            b / (gx * gy),
            t % bx,
            (t / bx) % by,
            t / (bx * by),
        )
    }
}

fn limit_secs() -> u64 {
    static LIMIT: OnceLock<u64> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("TRIDENT_EMU_WATCHDOG_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_LIMIT_SECS)
    })
}

/// The watched heartbeats, with the watchdog thread started on first use; None when the
/// watchdog is off or its thread cannot start.
fn watched() -> Option<&'static Mutex<Vec<Weak<Heartbeat>>>> {
    static WATCHED: OnceLock<Option<Mutex<Vec<Weak<Heartbeat>>>>> = OnceLock::new();
    WATCHED
        .get_or_init(|| {
            let limit = limit_secs();
            if limit == 0 {
                return None;
            }
            let spawned = thread::Builder::new().name("simt-watchdog".into()).spawn(move || loop {
                thread::sleep(Duration::from_secs(1));
                let Some(watched) = watched() else { return };
                let mut watched = watched.lock().unwrap_or_else(|e| e.into_inner());
                watched.retain(|w| w.strong_count() > 0);
                for heartbeat in watched.iter().filter_map(Weak::upgrade) {
                    if heartbeat.stalled_for(limit) {
                        eprintln!("{}", heartbeat.describe(limit));
                        std::process::abort();
                    }
                }
            });
            spawned.ok().map(|_| Mutex::new(Vec::new()))
        })
        .as_ref()
}
