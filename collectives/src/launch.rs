//! Starting the local ranks of a job, the way torchrun does: one child per rank with
//! RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the job
//! token set; output forwarded line by line with a rank prefix; when a rank fails the others
//! are stopped and the first failure's exit code is returned.

use crate::error::{CommError, Result};
use crate::token::{JobToken, ENV_TOKEN};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to place this node's ranks in the job.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
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
    /// How long stopped ranks get between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            nnodes: 1,
            node_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: None,
            prefix_output: true,
            env: Vec::new(),
            grace: Duration::from_secs(5),
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

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: sending a signal to a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

/// Runs `command` as `nproc_per_node` local ranks and waits for them. Returns 0 when all
/// succeed, else the exit code of the first rank that failed (after stopping the others).
pub fn run(nproc_per_node: usize, command: &[String], opts: &LaunchOptions) -> Result<i32> {
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
            .envs(opts.env.iter().map(|(k, v)| (k, v)));
        if opts.prefix_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // SAFETY: the closure runs between fork and exec and only makes one
        // async-signal-safe system call.
        unsafe {
            cmd.pre_exec(|| {
                // A rank must not outlive its launcher (killed by a scheduler, say).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
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
    let code = supervise(children, opts.grace, opts.node_rank * nproc_per_node)?;
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

fn supervise(mut children: Vec<Child>, grace: Duration, first_rank: usize) -> Result<i32> {
    let mut running: Vec<bool> = vec![true; children.len()];
    let mut failure: Option<i32> = None;
    let mut stop_deadline: Option<Instant> = None;
    while running.iter().any(|&r| r) {
        for (i, child) in children.iter_mut().enumerate() {
            if !running[i] {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    running[i] = false;
                    let code = code_of(status);
                    if code != 0 && failure.is_none() {
                        eprintln!(
                            "trident launch: rank {} exited with code {code}; stopping the other ranks",
                            first_rank + i
                        );
                        failure = Some(code);
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(CommError::io("waiting for a rank", e)),
            }
        }
        if failure.is_some() {
            match stop_deadline {
                None => {
                    for (i, c) in children.iter().enumerate() {
                        if running[i] {
                            signal(c, libc::SIGTERM);
                            // A stopped rank (SIGSTOP, a debugger detached) acts on the
                            // SIGTERM only once it runs again.
                            signal(c, libc::SIGCONT);
                        }
                    }
                    stop_deadline = Some(Instant::now() + grace);
                }
                Some(d) if Instant::now() >= d => {
                    for (i, c) in children.iter_mut().enumerate() {
                        if running[i] {
                            let _ = c.kill();
                        }
                    }
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(failure.unwrap_or(0))
}
