//! Stopping a run cleanly at a step boundary, as Megatron-LM's `--exit-interval` and
//! `--exit-signal-handler` do: the run saves a checkpoint (with `--save`) and exits with status
//! 0, and `--load` resumes it exactly.
//!
//! The signal handler only records which signal came (an atomic store, which is
//! async-signal-safe); the training loop looks at the record after each step. It is installed
//! with `SA_RESETHAND`, so a second Ctrl-C ends the process at once, as without the handler;
//! except under `trident launch`, which forwards one signal, may deliver a copy of one the
//! whole job got, and sends SIGKILL itself on a second signal or after its grace period.

use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal received since [`install_signal_handler`], or 0.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
}

/// Makes SIGTERM and SIGINT ask the run to stop at the next step boundary.
pub fn install_signal_handler() -> std::io::Result<()> {
    let under_launcher = trident_collectives::launcher::parent_is_launcher();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `sigaction` is given a zeroed, then filled, struct that outlives the call;
        // the handler only stores to an atomic, which is async-signal-safe.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record as extern "C" fn(libc::c_int) as usize;
            // Under `trident launch` a second signal is often the same stop twice (a
            // scheduler signals the whole job and the launcher forwards its copy); the
            // launcher sends SIGKILL when the stop must be hurried.
            action.sa_flags = if under_launcher { 0 } else { libc::SA_RESETHAND };
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The signal that asked the run to stop, if one did.
pub fn signal_received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// When a run stops before its last iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitPolicy {
    /// `--exit-interval N`: after every iteration divisible by N.
    pub interval: Option<u64>,
    /// `--exit-signal-handler`: after a SIGTERM or SIGINT.
    pub on_signal: bool,
}

/// Why a run stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// `--exit-interval N` (the `N`): the iteration just finished is divisible by it.
    Interval(u64),
    /// `--exit-signal-handler`: this signal number (SIGTERM or SIGINT) arrived.
    Signal(i32),
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ExitReason::Interval(n) => write!(f, "--exit-interval {n}"),
            ExitReason::Signal(s) if s == libc::SIGTERM => write!(f, "SIGTERM"),
            ExitReason::Signal(s) if s == libc::SIGINT => write!(f, "SIGINT"),
            ExitReason::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

impl ExitPolicy {
    /// Why the run stops after iteration `iter`, given whether a stop signal was seen (on a
    /// parallel run, by any rank: the ranks agree on it first).
    pub fn reason(&self, iter: u64, signal: Option<i32>) -> Option<ExitReason> {
        if let Some(s) = signal.filter(|_| self.on_signal) {
            return Some(ExitReason::Signal(s));
        }
        self.interval.filter(|&n| n > 0 && iter % n == 0).map(ExitReason::Interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_and_a_signal_stop_the_run_only_when_asked_for() {
        let never = ExitPolicy::default();
        assert_eq!(never.reason(10, Some(libc::SIGTERM)), None, "no handler: the signal is not ours");
        let every4 = ExitPolicy { interval: Some(4), on_signal: false };
        assert_eq!(every4.reason(3, None), None);
        assert_eq!(every4.reason(8, None), Some(ExitReason::Interval(4)));
        let on_signal = ExitPolicy { interval: None, on_signal: true };
        assert_eq!(on_signal.reason(3, None), None);
        assert_eq!(on_signal.reason(3, Some(libc::SIGTERM)), Some(ExitReason::Signal(libc::SIGTERM)));
        assert_eq!(ExitReason::Signal(libc::SIGTERM).to_string(), "SIGTERM");
    }
}
