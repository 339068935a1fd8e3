//! Starting the local ranks of a job, the way torchrun does: one child per rank with
//! RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the job
//! token set; output forwarded line by line with a rank prefix; when a rank fails the others
//! are stopped and the first failure's exit code is returned.
//!
//! A SIGTERM or SIGINT to the launcher (a scheduler's stop, Ctrl-C) is forwarded to every rank
//! once, and the launcher waits for the ranks up to [`LauncherOptions::signal_grace`] before it
//! sends SIGKILL; a second signal to the launcher sends SIGKILL at once. A rank that stops
//! cleanly on the signal (`trident train --exit-signal-handler`) exits 0, and so does the
//! launcher when every rank does. Each rank runs in its own process group, so a terminal's
//! Ctrl-C reaches the ranks once, through the launcher, and dies with the launcher only when
//! the launcher itself is killed (`PR_SET_PDEATHSIG`).

use crate::error::{CommError, Result};
use crate::token::{JobToken, ENV_TOKEN};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Set in each rank's environment to the launcher's pid: a rank whose parent has this pid
/// knows the launcher forwards signals and escalates to SIGKILL itself, so the rank need not
/// treat a second SIGTERM (sent both to the whole job by a scheduler and forwarded by the
/// launcher) as a demand to die at once.
pub const ENV_LAUNCHER_PID: &str = "TRIDENT_LAUNCHER_PID";

/// Whether this process's parent is a `trident launch` that forwards signals to its ranks
/// ([`ENV_LAUNCHER_PID`] names the parent's pid).
pub fn parent_is_launcher() -> bool {
    // SAFETY: `getppid` has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() };
    std::env::var(ENV_LAUNCHER_PID).ok().and_then(|p| p.parse::<libc::pid_t>().ok()) == Some(parent)
}

/// How to place this node's ranks in the job.
#[derive(Clone, Debug)]
pub struct LauncherOptions {
    /// Nodes in the job.
    pub nnodes: usize,
    /// This node's index, `0..nnodes`; its ranks are `node_rank * nproc_per_node ..`.
    pub node_rank: usize,
    /// Host of rank 0's store, as every rank reaches it.
    pub master_addr: String,
    /// `None` picks a free port (single node only).
    pub master_port: Option<u16>,
    /// Prefix each output line with `[rank N] `.
    pub prefix_output: bool,
    /// Extra environment for every rank.
    pub env: Vec<(String, String)>,
    /// How long stopped ranks get between SIGTERM and SIGKILL after one of them failed.
    pub grace: Duration,
    /// Forward SIGTERM and SIGINT sent to this process to the ranks (the handler is
    /// installed for the length of [`run`] and the previous one restored after it).
    pub forward_signals: bool,
    /// After forwarding a signal, how long the ranks get to stop (save a checkpoint, say)
    /// before SIGKILL; `--signal-grace-s`, 30 s by default like Slurm's KillWait.
    pub signal_grace: Duration,
}

impl Default for LauncherOptions {
    fn default() -> Self {
        LauncherOptions {
            nnodes: 1,
            node_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: None,
            prefix_output: true,
            env: Vec::new(),
            grace: Duration::from_secs(5),
            forward_signals: true,
            signal_grace: Duration::from_secs(30),
        }
    }
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| CommError::io("finding a free port", e))?;
    l.local_addr().map(|a| a.port()).map_err(|e| CommError::io("finding a free port", e))
}

fn forward(
    stream: impl std::io::Read + Send + 'static,
    prefix: String,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).split(b'\n').map_while(|l| l.ok()) {
            let mut out: Box<dyn Write> = if to_stderr {
                Box::new(std::io::stderr().lock())
            } else {
                Box::new(std::io::stdout().lock())
            };
            let _ = out.write_all(prefix.as_bytes());
            let _ = out.write_all(&line);
            let _ = out.write_all(b"\n");
        }
    })
}

/// Exit code of a finished child: its code, or 128 + signal like a shell.
fn code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Sends `sig` to a rank's process group (the rank and whatever it started), which has the
/// rank's pid as its id.
fn signal(child: &Child, sig: libc::c_int) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: signalling a child we spawned and have not reaped (so its pid, and the id of the
    // group it leads, cannot have been reused); if it has no group yet, the rank itself.
    unsafe {
        if libc::kill(-pid, sig) != 0 {
            libc::kill(pid, sig);
        }
    }
}

/// SIGTERMs and SIGINTs received while a launch forwards signals.
static SIGNALS_RECEIVED: AtomicUsize = AtomicUsize::new(0);
/// The last of them.
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(sig: libc::c_int) {
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    SIGNALS_RECEIVED.fetch_add(1, Ordering::SeqCst);
}

/// Launches forwarding signals now, and the handlers they replaced (saved by the first).
static FORWARDING: Mutex<(usize, Vec<(libc::c_int, libc::sigaction)>)> = Mutex::new((0, Vec::new()));

/// Counts SIGTERM and SIGINT while it lives, instead of dying of them; the handlers it
/// replaced come back when the last guard goes.
struct SignalGuard;

impl SignalGuard {
    fn install() -> Result<SignalGuard> {
        let mut state = FORWARDING.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 == 0 {
            let mut saved = Vec::new();
            for sig in [libc::SIGTERM, libc::SIGINT] {
                // SAFETY: `sigaction` gets a zeroed, then filled, struct and a place for the
                // old one, both outliving the call; the handler only touches atomics, which is
                // async-signal-safe.
                let rc = unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as usize;
                    action.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut action.sa_mask);
                    let mut old: libc::sigaction = std::mem::zeroed();
                    let rc = libc::sigaction(sig, &action, &mut old);
                    if rc == 0 {
                        saved.push((sig, old));
                    }
                    rc
                };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    restore(&saved);
                    return Err(CommError::io("installing the launcher's SIGTERM/SIGINT handler", e));
                }
            }
            state.1 = saved;
        }
        state.0 += 1;
        Ok(SignalGuard)
    }
}

fn restore(saved: &[(libc::c_int, libc::sigaction)]) {
    for (sig, old) in saved {
        // SAFETY: putting back a handler `sigaction` gave us; the struct outlives the call.
        unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        let mut state = FORWARDING.lock().unwrap_or_else(|e| e.into_inner());
        state.0 -= 1;
        if state.0 == 0 {
            let saved = std::mem::take(&mut state.1);
            restore(&saved);
        }
    }
}

fn signal_name(sig: libc::c_int) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        s => format!("signal {s}"),
    }
}

/// Runs `command` as `nproc_per_node` local ranks and waits for them. Returns 0 when all
/// succeed, else the exit code of the first rank that failed (after stopping the others).
pub fn run(nproc_per_node: usize, command: &[String], opts: &LauncherOptions) -> Result<i32> {
    if nproc_per_node == 0 || command.is_empty() {
        return Err(CommError::InvalidArgument(
            "launch needs at least one process per node and a command".into(),
        ));
    }
    if opts.node_rank >= opts.nnodes {
        return Err(CommError::InvalidArgument(format!(
            "node rank {} is not below the node count {}",
            opts.node_rank, opts.nnodes
        )));
    }
    let port = match opts.master_port {
        Some(0) => {
            return Err(CommError::InvalidArgument(
                "--master-port 0 names no port the ranks can meet at: give a port from 1 to 65535, \
                 or leave the flag out (one node) to have a free one picked"
                    .into(),
            ))
        }
        Some(p) => p,
        None if opts.nnodes == 1 => free_port()?,
        None => {
            return Err(CommError::InvalidArgument(
                "a multi-node launch needs an explicit master port".into(),
            ))
        }
    };
    let token = match std::env::var(ENV_TOKEN) {
        Ok(t) => JobToken::from_hex(&t)?,
        Err(_) if opts.nnodes == 1 => JobToken::random()?,
        Err(_) => {
            return Err(CommError::InvalidArgument(format!(
                "a multi-node launch needs the same {ENV_TOKEN} (32 hex digits) exported on every node"
            )))
        }
    };
    let world = nproc_per_node * opts.nnodes;
    // Before the first rank starts, so that no signal finds the ranks without a forwarder.
    let guard = opts.forward_signals.then(SignalGuard::install).transpose()?;
    let signals_before = SIGNALS_RECEIVED.load(Ordering::SeqCst);
    let launcher_pid = std::process::id();
    let mut children: Vec<Child> = Vec::with_capacity(nproc_per_node);
    let mut forwarders = Vec::new();
    for local in 0..nproc_per_node {
        let rank = opts.node_rank * nproc_per_node + local;
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_RANK", local.to_string())
            .env("LOCAL_WORLD_SIZE", nproc_per_node.to_string())
            .env("GROUP_RANK", opts.node_rank.to_string())
            .env("MASTER_ADDR", &opts.master_addr)
            .env("MASTER_PORT", port.to_string())
            .env(ENV_TOKEN, token.to_hex())
            .env(ENV_LAUNCHER_PID, launcher_pid.to_string())
            .envs(opts.env.iter().map(|(k, v)| (k, v)));
        if opts.prefix_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls.
        unsafe {
            cmd.pre_exec(move || {
                // Its own process group: a terminal's Ctrl-C reaches the launcher, which
                // forwards it once, instead of every rank directly and then again.
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // A rank must not outlive its launcher (SIGKILLed by a scheduler, say).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The launcher died before the line above: the death signal never comes.
                if libc::getppid() != launcher_pid as libc::pid_t {
                    return Err(std::io::Error::other("the launcher exited while starting a rank"));
                }
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                for c in &mut children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(CommError::io(format!("starting {:?}", command[0]), e));
            }
        };
        if opts.prefix_output {
            let prefix = format!("[rank {rank}] ");
            if let Some(out) = child.stdout.take() {
                forwarders.push(forward(out, prefix.clone(), false));
            }
            if let Some(err) = child.stderr.take() {
                forwarders.push(forward(err, prefix, true));
            }
        }
        children.push(child);
    }
    let stop = Stopping {
        report: report_window(&opts.env),
        grace: opts.grace,
        signal_grace: opts.signal_grace,
        signals_before: guard.as_ref().map(|_| signals_before),
    };
    let code = supervise(children, &stop, opts.node_rank * nproc_per_node);
    drop(guard);
    let code = code?;
    // Drain what the ranks wrote last; a grandchild holding the pipe open must not hang us.
    let drain_until = Instant::now() + Duration::from_secs(2);
    for f in forwarders {
        while !f.is_finished() && Instant::now() < drain_until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if f.is_finished() {
            let _ = f.join();
        }
    }
    Ok(code)
}

/// When and how the ranks are stopped.
struct Stopping {
    /// After a rank failed: how long the others get to end on their own ([`report_window`]).
    report: Duration,
    /// After a rank failed: between SIGTERM and SIGKILL.
    grace: Duration,
    /// After a forwarded signal: between it and SIGKILL.
    signal_grace: Duration,
    /// The count of signals received before the launch, when signals are forwarded.
    signals_before: Option<usize>,
}

/// After the first rank fails, how long the others get to end on their own before SIGTERM:
/// they usually fail on the same fault soon after, each naming the rank it blames (a rank
/// stopped in a PP 4 run is named by all three survivors, not by the first alone). A
/// survivor may reach its own timeout up to about one timeout later than the first (a
/// pipeline send that started later), so: the ranks' `TRIDENT_TIMEOUT_S`, at most 10 s.
fn report_window(env: &[(String, String)]) -> Duration {
    let set = env.iter().rev().find(|(k, _)| k == crate::config::ENV_TIMEOUT).map(|(_, v)| v.clone());
    let secs = set.or_else(|| std::env::var(crate::config::ENV_TIMEOUT).ok());
    let timeout = secs
        .and_then(|s| s.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(Duration::from_secs(60));
    timeout.min(Duration::from_secs(10))
}

fn supervise(mut children: Vec<Child>, stop: &Stopping, first_rank: usize) -> Result<i32> {
    let mut running: Vec<bool> = vec![true; children.len()];
    let mut failure: Option<i32> = None;
    let mut failed_at: Option<Instant> = None;
    let mut stop_deadline: Option<Instant> = None;
    let mut signals_seen = stop.signals_before;
    // Ranks that exited 0 while others still ran: named if the job then fails, since a rank
    // that leaves before joining makes the others wait for it until they time out.
    let mut left_early: Vec<usize> = Vec::new();
    let kill_all = |children: &mut [Child], running: &[bool]| {
        for (i, c) in children.iter_mut().enumerate() {
            if running[i] {
                signal(c, libc::SIGKILL);
                let _ = c.kill();
            }
        }
    };
    while running.iter().any(|&r| r) {
        if let Some(seen) = signals_seen.as_mut() {
            let now = SIGNALS_RECEIVED.load(Ordering::SeqCst);
            if now > *seen {
                let name = signal_name(LAST_SIGNAL.load(Ordering::SeqCst));
                if stop_deadline.is_none() && now == *seen + 1 {
                    eprintln!(
                        "trident launch: got {name}; forwarded it to the ranks, which get {} s to \
                         exit before SIGKILL (a second signal kills them at once)",
                        stop.signal_grace.as_secs_f64()
                    );
                    for (i, c) in children.iter().enumerate() {
                        if running[i] {
                            signal(c, LAST_SIGNAL.load(Ordering::SeqCst));
                            signal(c, libc::SIGCONT);
                        }
                    }
                    stop_deadline = Some(Instant::now() + stop.signal_grace);
                } else {
                    eprintln!("trident launch: got {name} while the ranks were stopping; killing them");
                    kill_all(&mut children, &running);
                }
                *seen = now;
            }
        }
        for (i, child) in children.iter_mut().enumerate() {
            if !running[i] {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    running[i] = false;
                    let code = code_of(status);
                    if code == 0 && failure.is_none() && stop_deadline.is_none() && running.iter().any(|&r| r)
                    {
                        left_early.push(first_rank + i);
                    }
                    if code != 0 && failure.is_none() {
                        let early = match left_early.as_slice() {
                            [] => String::new(),
                            ranks => format!(
                                " (rank{} {} had already exited with code 0 while the others ran: a rank that \
                                 ends before joining the job leaves the others waiting for it)",
                                if ranks.len() > 1 { "s" } else { "" },
                                ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
                            ),
                        };
                        eprintln!(
                            "trident launch: rank {} exited with code {code}; stopping the other ranks \
                             (those still running {:.0?} later){early}",
                            first_rank + i,
                            stop.report
                        );
                        failure = Some(code);
                        failed_at = Some(Instant::now());
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(CommError::io("waiting for a rank", e)),
            }
        }
        // Already stopping (on a forwarded signal, say): the ranks have their signal.
        if stop_deadline.is_none() && failed_at.is_some_and(|t| t.elapsed() >= stop.report) {
            for (i, c) in children.iter().enumerate() {
                if running[i] {
                    signal(c, libc::SIGTERM);
                    // A stopped rank (SIGSTOP, a debugger detached) acts on the SIGTERM only
                    // once it runs again.
                    signal(c, libc::SIGCONT);
                }
            }
            stop_deadline = Some(Instant::now() + stop.grace);
        }
        if let Some(d) = stop_deadline {
            if Instant::now() >= d {
                kill_all(&mut children, &running);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(failure.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The survivors' reporting window follows the ranks' timeout, capped at 10 s.
    #[test]
    fn the_report_window_is_the_ranks_timeout_at_most_10_s() {
        let env = |v: &str| vec![(crate::config::ENV_TIMEOUT.to_string(), v.to_string())];
        assert_eq!(report_window(&env("3")), Duration::from_secs(3));
        assert_eq!(report_window(&env("0.5")), Duration::from_millis(500));
        assert_eq!(report_window(&env("120")), Duration::from_secs(10));
    }
}
