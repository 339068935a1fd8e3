//! Spin-then-sleep waiting, so that more ranks than cores still make progress quickly.

use std::time::{Duration, Instant};

const SPIN_ROUNDS: u32 = 64;
const YIELD_ROUNDS: u32 = 256;
const MAX_SLEEP: Duration = Duration::from_micros(200);

/// Backoff for a polling loop: spins briefly (the common case, a peer a few microseconds
/// behind), then yields the core (more ranks than cores), then sleeps in short naps.
pub struct Backoff {
    round: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// A backoff that starts by spinning.
    pub fn new() -> Self {
        Backoff { round: 0 }
    }

    /// Call after progress was made.
    pub fn reset(&mut self) {
        self.round = 0;
    }

    /// Whether the loop has waited long enough that slow checks (peer liveness) are due.
    pub fn is_sleeping(&self) -> bool {
        self.round >= SPIN_ROUNDS + YIELD_ROUNDS
    }

    /// Waits once: a spin, a yield or a nap, by how long the loop has waited.
    pub fn snooze(&mut self) {
        if self.round < SPIN_ROUNDS {
            for _ in 0..(1u32 << (self.round / 8).min(4)) {
                std::hint::spin_loop();
            }
        } else if self.round < SPIN_ROUNDS + YIELD_ROUNDS {
            std::thread::yield_now();
        } else {
            let naps = (self.round - SPIN_ROUNDS - YIELD_ROUNDS).min(8);
            std::thread::sleep((Duration::from_micros(10) * (naps + 1)).min(MAX_SLEEP));
        }
        self.round = self.round.saturating_add(1);
    }
}

/// A point in time after which a blocking call gives up.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    start: Instant,
    end: Instant,
}

impl Deadline {
    /// The deadline `timeout` from now.
    pub fn after(timeout: Duration) -> Self {
        let start = Instant::now();
        Deadline { start, end: start + timeout }
    }

    /// Whether it has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.end
    }

    /// Time left, zero once expired.
    pub fn remaining(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    /// Time since it was set.
    pub fn waited(&self) -> Duration {
        self.start.elapsed()
    }
}
