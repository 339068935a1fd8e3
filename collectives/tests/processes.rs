//! Real processes on loopback: every collective over TCP and shared memory, a rank killed
//! mid-AllReduce, mismatched calls, foreign connections and corrupt frames.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use trident_collectives::store::StoreClient;
use trident_collectives::token::JobToken;
use trident_collectives::transport::tcp::{group_id, Hello, HELLO_LEN};

const BIN: &str = env!("CARGO_BIN_EXE_trident-coll");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Job {
    port: u16,
    token: JobToken,
}

impl Job {
    fn new() -> Self {
        Job { port: free_port(), token: JobToken::random().unwrap() }
    }

    /// Starts `ranks` of a `world`-rank job running `trident-coll args`.
    fn spawn(&self, world: usize, ranks: &[usize], transport: &str, args: &[&str]) -> Vec<Child> {
        self.spawn_env(world, ranks, transport, args, &[])
    }

    /// [`Job::spawn`] with extra environment variables.
    fn spawn_env(
        &self,
        world: usize,
        ranks: &[usize],
        transport: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Vec<Child> {
        ranks
            .iter()
            .map(|&rank| {
                Command::new(BIN)
                    .args(args)
                    .envs(env.iter().copied())
                    .env("RANK", rank.to_string())
                    .env("WORLD_SIZE", world.to_string())
                    .env("LOCAL_RANK", rank.to_string())
                    .env("LOCAL_WORLD_SIZE", world.to_string())
                    .env("MASTER_ADDR", "127.0.0.1")
                    .env("MASTER_PORT", self.port.to_string())
                    .env("TRIDENT_JOB_TOKEN", self.token.to_hex())
                    .env("TRIDENT_TRANSPORT", transport)
                    .env("TRIDENT_TIMEOUT_S", "30")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn trident-coll")
            })
            .collect()
    }
}

/// Waits for every child; kills them all and fails if they take longer than `limit`.
fn wait_all(children: Vec<Child>, limit: Duration) -> Vec<Output> {
    let start = Instant::now();
    let mut children: Vec<Option<Child>> = children.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<Output>> = children.iter().map(|_| None).collect();
    while outputs.iter().any(|o| o.is_none()) {
        for (i, slot) in children.iter_mut().enumerate() {
            if let Some(child) = slot {
                if child.try_wait().unwrap().is_some() {
                    outputs[i] = Some(slot.take().unwrap().wait_with_output().unwrap());
                }
            }
        }
        if start.elapsed() > limit {
            for c in children.iter_mut().flatten() {
                let _ = c.kill();
            }
            panic!("ranks still running after {limit:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    outputs.into_iter().map(|o| o.unwrap()).collect()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn check(transport: &str, world: usize, lens: &str) {
    check_with(transport, world, &["check", "--lens", lens]);
}

/// The large-AllReduce path each rank reported.
fn paths(stdouts: &[String]) -> Vec<&str> {
    stdouts.iter().map(|s| if s.contains("all_reduce: direct") { "direct" } else { "ring" }).collect()
}

fn check_with(transport: &str, world: usize, args: &[&str]) -> Vec<String> {
    check_env(transport, world, args, &[])
}

/// Runs `trident-coll args` on `world` ranks and returns each rank's standard output.
fn check_env(transport: &str, world: usize, args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let job = Job::new();
    let ranks: Vec<usize> = (0..world).collect();
    let outs = wait_all(job.spawn_env(world, &ranks, transport, args, env), Duration::from_secs(120));
    for (rank, o) in outs.iter().enumerate() {
        assert!(o.status.success(), "{transport} world {world} rank {rank}: {}", text(o));
    }
    outs.iter().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).collect()
}

#[test]
fn tcp_every_collective() {
    for world in 1..=8 {
        check("tcp", world, "0,1,7,1021,16411");
    }
    // Registered buffers are private memory over TCP; the check ran them through all_reduce.
    let outs = check_with("tcp", 4, &["check", "--lens", "786433"]);
    assert!(outs.iter().all(|o| o.contains("shared buffers: private")), "{outs:?}");
    check_with("tcp", 8, &["check", "--lens", "61", "--grid", "2,2,2"]);
}

#[test]
fn shm_every_collective() {
    for world in 1..=8 {
        check("shm", world, "0,1,7,1021,16411");
    }
    check_with("shm", 8, &["check", "--lens", "61", "--grid", "2,2,2"]);
}

#[test]
fn shm_large_all_reduce_direct_and_ring() {
    // Cross-memory attach where the kernel allows it (the ranks agree), and the rings when
    // it is switched off: both must match the reference.
    let direct = check_env("shm", 3, &["check", "--lens", "786433"], &[]);
    let agreed = paths(&direct);
    assert!(agreed.iter().all(|p| *p == agreed[0]), "ranks disagree on the path: {direct:?}");
    eprintln!("shm with cross-memory attach allowed: large AllReduce takes the {} path", agreed[0]);
    // Registered buffers are mapped by every rank whatever the kernel allows, so the check's
    // all_reduce_shared ran in place in the peers' memory.
    assert!(direct.iter().all(|o| o.contains("shared buffers: mapped")), "{direct:?}");
    let ring = check_env("shm", 3, &["check", "--lens", "786433"], &[("TRIDENT_SHM_CMA", "0")]);
    assert_eq!(paths(&ring), ["ring"; 3], "{ring:?}");
    let forced = check_env("shm", 2, &["check", "--lens", "786433"], &[("TRIDENT_ALLREDUCE", "ring")]);
    assert_eq!(paths(&forced), ["ring"; 2], "{forced:?}");
}

/// Ranks started with only a launcher's own variables (no token of ours): Open MPI's and
/// Slurm's, as `mpirun` and `srun` set them.
#[test]
fn foreign_launcher_environments() {
    for (rank_var, size_var, extra) in [
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            [("OMPI_COMM_WORLD_LOCAL_SIZE", "3"), ("OMPI_MCA_ess_base_jobid", "4242")],
        ),
        ("SLURM_PROCID", "SLURM_NTASKS", [("SLURM_JOB_NODELIST", "127.0.0.1"), ("SLURM_JOB_ID", "99")]),
    ] {
        let port = free_port().to_string();
        let children: Vec<Child> = (0..3)
            .map(|rank| {
                Command::new(BIN)
                    .args(["check", "--lens", "1,1021"])
                    .env_clear()
                    .env(rank_var, rank.to_string())
                    .env(size_var, "3")
                    .env("MASTER_PORT", &port)
                    .envs(extra)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for o in wait_all(children, Duration::from_secs(60)) {
            assert!(o.status.success(), "{rank_var}: {}", text(&o));
        }
    }
}

#[test]
fn launcher_returns_the_first_failure_and_stops_the_rest() {
    let script = "if [ \"$RANK\" = 1 ]; then exit 7; fi; exec sleep 30";
    let out = wait_all(
        vec![Command::new(BIN)
            .args(["launch", "--nproc-per-node", "3", "--", "sh", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()],
        Duration::from_secs(25),
    );
    assert_eq!(out[0].status.code(), Some(7), "{}", text(&out[0]));
    assert!(String::from_utf8_lossy(&out[0].stderr).contains("rank 1 exited with code 7"));

    let ok = Command::new(BIN)
        .args(["launch", "--nproc-per-node", "2", "--", "sh", "-c", "echo hello from $RANK of $WORLD_SIZE"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", text(&ok));
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(stdout.contains("[rank 1] hello from 1 of 2"), "{stdout}");
}

fn killed_rank(transport: &str) {
    let job = Job::new();
    let outs = wait_all(
        job.spawn(4, &[0, 1, 2, 3], transport, &["fault", "die", "--victim", "1", "--at", "2"]),
        Duration::from_secs(60),
    );
    assert!(!outs[1].status.success(), "victim: {}", text(&outs[1]));
    for rank in [0, 2, 3] {
        let o = &outs[rank];
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{transport} rank {rank}: {}", text(o));
        assert!(
            err.contains("rank 1") && err.contains("all_reduce"),
            "{transport} rank {rank} must name rank 1 and the operation: {}",
            text(o)
        );
    }
}

#[test]
fn tcp_killed_rank_fails_the_others() {
    killed_rank("tcp");
}

#[test]
fn shm_killed_rank_fails_the_others() {
    killed_rank("shm");
}

#[test]
fn mismatched_sizes_are_reported_across_processes() {
    for transport in ["tcp", "shm"] {
        let job = Job::new();
        let outs =
            wait_all(job.spawn(3, &[0, 1, 2], transport, &["fault", "mismatch"]), Duration::from_secs(60));
        for (rank, o) in outs.iter().enumerate() {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(3), "{transport} rank {rank}: {}", text(o));
            assert!(err.contains("different collectives"), "{}", text(o));
        }
    }
}

#[test]
fn foreign_store_connections_are_refused_while_the_job_runs() {
    let job = Job::new();
    // Large enough that the job (and rank 0's store) outlives the foreign connections below
    // even on an idle machine: the store closes when the job is done.
    let children = job.spawn(2, &[0, 1], "tcp", &["check", "--lens", "1021,262147,8388593"]);
    let addr = format!("127.0.0.1:{}", job.port);
    let wrong = JobToken::random().unwrap();
    // Wrong token: refused.
    let err = StoreClient::connect(&addr, &wrong, Duration::from_secs(20))
        .err()
        .expect("a wrong token must be refused");
    assert!(err.to_string().contains("refused"), "{err}");
    // Garbage instead of a handshake: dropped.
    let mut raw = TcpStream::connect(&addr).unwrap();
    raw.write_all(&[0xde; 64]).unwrap();
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    assert_eq!(rest, [0u8], "the store answers garbage with a refusal and hangs up");
    for o in wait_all(children, Duration::from_secs(120)) {
        assert!(o.status.success(), "the job must carry on: {}", text(&o));
    }
}

#[test]
fn corrupt_data_frame_and_foreign_peer_are_refused() {
    // This test plays rank 1 of a two-rank TCP job by hand.
    let job = Job::new();
    let rank0 = job.spawn(2, &[0], "tcp", &["check", "--lens", "1021"]);
    let addr = format!("127.0.0.1:{}", job.port);
    let mut store = StoreClient::connect(&addr, &job.token, Duration::from_secs(20)).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    store.set("host/1", host.trim().as_bytes()).unwrap();
    let target = store.get_string("world/tcp/0", Duration::from_secs(20)).unwrap();
    let hello = |token: JobToken| Hello { token: token.0, group: group_id("world"), from: 1, to: 0, size: 2 };
    // A peer with the wrong token is turned away; rank 0 keeps waiting for the real one.
    let mut foreign = TcpStream::connect(&target).unwrap();
    foreign.write_all(&hello(JobToken::random().unwrap()).encode()).unwrap();
    let mut reply = Vec::new();
    let _ = foreign.read_to_end(&mut reply);
    assert!(reply.is_empty(), "a foreign peer must get no handshake back");

    let mut conn = TcpStream::connect(&target).unwrap();
    conn.write_all(&hello(job.token).encode()).unwrap();
    let mut back = [0u8; HELLO_LEN];
    conn.read_exact(&mut back).unwrap();
    assert_eq!(Hello::decode(&back).unwrap().from, 0);
    // A frame with a corrupted header: rank 0 must fail cleanly, naming rank 1.
    conn.write_all(&[0x5a; 48]).unwrap();
    let outs = wait_all(rank0, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&outs[0].stderr);
    assert!(!outs[0].status.success(), "{}", text(&outs[0]));
    assert!(err.contains("malformed message from rank 1"), "{}", text(&outs[0]));
}
