//! Ranks as threads of one process, over the in-process transport.

use std::sync::Arc;

use trident_collectives::{CommConfig, CommError, Communicator, InprocFabric};

use super::ParallelError;

/// An error that may only echo another rank's failure (a peer that failed, vanished or stopped
/// answering), as opposed to a root cause.
pub trait PeerEcho {
    /// Whether this error only reports that a peer failed.
    fn is_peer_echo(&self) -> bool;
}

impl PeerEcho for ParallelError {
    fn is_peer_echo(&self) -> bool {
        matches!(self, ParallelError::PeerTimeout { .. })
            || matches!(self, ParallelError::Comm(c) if matches!(c.root(),
            CommError::PeerFailed { .. } | CommError::PeerLost { .. } | CommError::Timeout { .. } | CommError::Broken(_)))
    }
}

/// Runs `f` on `world` ranks, each a thread with its world communicator; returns their
/// results in rank order, or the first rank's error (a root cause is preferred over the
/// errors of peers that merely saw it fail).
pub fn run_ranks<T, E>(world: usize, f: impl Fn(Communicator) -> Result<T, E> + Sync) -> Result<Vec<T>, E>
where
    T: Send,
    E: Send + From<ParallelError> + PeerEcho,
{
    if world == 0 {
        return Err(ParallelError::Zero { what: "--world-size" }.into());
    }
    let fabric = Arc::new(InprocFabric::new());
    let config = CommConfig::from_env().map_err(|e| E::from(e.into()))?;
    let results: Vec<Result<T, E>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (fabric, config, f) = (fabric.clone(), config.clone(), &f);
                std::thread::Builder::new()
                    .name(format!("rank-{rank}"))
                    .spawn_scoped(s, move || {
                        let world = Communicator::world(fabric, rank, world, config)
                            .map_err(|e| E::from(e.into()))?;
                        f(world)
                    })
                    .expect("spawning a rank thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|e| {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(ParallelError::Panicked(msg).into())
                })
            })
            .collect()
    });
    // Ranks that only saw a peer fail (or stop answering) are echoes of the root cause.
    if let Some(i) = results.iter().position(|r| matches!(r, Err(e) if !e.is_peer_echo())) {
        return Err(results.into_iter().nth(i).and_then(|r| r.err()).expect("an error at i"));
    }
    results.into_iter().collect()
}
