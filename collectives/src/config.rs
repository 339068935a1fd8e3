//! Tunables, read from the environment. Every rank of a job must use the same values, since
//! they choose algorithms.

use crate::error::{CommError, Result};
use std::time::Duration;

/// Timeout for every blocking call, in seconds.
pub const ENV_TIMEOUT: &str = "TRIDENT_TIMEOUT_S";
/// Largest AllReduce (bytes) that takes the latency-optimal path instead of the ring.
pub const ENV_SMALL_BYTES: &str = "TRIDENT_SMALL_BYTES";

#[derive(Clone, Debug)]
pub struct CommConfig {
    pub timeout: Duration,
    /// AllReduce and broadcast of at most this many bytes use recursive doubling / a tree.
    pub small_bytes: usize,
    /// Slice size of the pipelined broadcast chain.
    pub slice_bytes: usize,
}

impl Default for CommConfig {
    fn default() -> Self {
        CommConfig { timeout: Duration::from_secs(60), small_bytes: 64 << 10, slice_bytes: 256 << 10 }
    }
}

fn parse_env<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| CommError::InvalidArgument(format!("{name}={v:?} is not a valid number"))),
        Err(_) => Ok(None),
    }
}

impl CommConfig {
    /// Defaults, overridden by `TRIDENT_TIMEOUT_S` (seconds, may be fractional) and
    /// `TRIDENT_SMALL_BYTES`.
    pub fn from_env() -> Result<Self> {
        let mut c = CommConfig::default();
        if let Some(secs) = parse_env::<f64>(ENV_TIMEOUT)? {
            if !(secs > 0.0 && secs < 1e9) {
                return Err(CommError::InvalidArgument(format!(
                    "{ENV_TIMEOUT} must be a positive number of seconds, got {secs}"
                )));
            }
            c.timeout = Duration::from_secs_f64(secs);
        }
        if let Some(b) = parse_env::<usize>(ENV_SMALL_BYTES)? {
            c.small_bytes = b;
        }
        Ok(c)
    }
}
