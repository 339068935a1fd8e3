//! Tunables, read from the environment. Every rank of a job must use the same values, since
//! they choose algorithms.

use crate::error::{CommError, Result};
use std::time::Duration;

/// Timeout for every blocking call, in seconds.
pub const ENV_TIMEOUT: &str = "TRIDENT_TIMEOUT_S";
/// Largest AllReduce (bytes) that takes the latency-optimal path instead of the ring.
pub const ENV_SMALL_BYTES: &str = "TRIDENT_SMALL_BYTES";
/// `ring` keeps large AllReduces on the ring even where ranks reach each other's memory.
pub const ENV_ALLREDUCE: &str = "TRIDENT_ALLREDUCE";

/// How an AllReduce larger than `small_bytes` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LargeAllReduce {
    /// Direct reduction in the peers' memory where the transport offers it, else the ring.
    Auto,
    /// Always the ring.
    Ring,
}

/// A communicator's tunables: [`CommConfig::default`], or from the environment.
#[derive(Clone, Debug)]
pub struct CommConfig {
    /// How long any blocking call waits for a peer (`TRIDENT_TIMEOUT_S`; 60 s by default).
    pub timeout: Duration,
    /// AllReduce and broadcast of at most this many bytes use recursive doubling / a tree.
    pub small_bytes: usize,
    /// Slice size of the pipelined broadcast chain.
    pub slice_bytes: usize,
    /// How AllReduces above `small_bytes` run (`TRIDENT_ALLREDUCE`).
    pub large_all_reduce: LargeAllReduce,
}

impl Default for CommConfig {
    fn default() -> Self {
        CommConfig {
            timeout: Duration::from_secs(60),
            small_bytes: 64 << 10,
            slice_bytes: 256 << 10,
            large_all_reduce: LargeAllReduce::Auto,
        }
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
    /// Defaults, overridden by `TRIDENT_TIMEOUT_S` (seconds, may be fractional),
    /// `TRIDENT_SMALL_BYTES` and `TRIDENT_ALLREDUCE`.
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
        if let Ok(v) = std::env::var(ENV_ALLREDUCE) {
            c.large_all_reduce = match v.trim() {
                "auto" => LargeAllReduce::Auto,
                "ring" => LargeAllReduce::Ring,
                _ => {
                    return Err(CommError::InvalidArgument(format!(
                        "{ENV_ALLREDUCE}={v:?}: expected auto or ring"
                    )))
                }
            };
        }
        Ok(c)
    }
}
