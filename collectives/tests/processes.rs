//! Real processes on loopback: every collective over TCP and shared memory, a rank killed
//! mid-AllReduce, mismatched calls, foreign connections and corrupt frames.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use trident_collectives::store::StoreClient;
use trident_collectives::token::JobToken;
use trident_collectives::transport::tcp::{group_id, Hello, HELLO_LEN};

/// The `trident-coll` binary: `$TRIDENT_BIN_DIR/trident-coll` when `TRIDENT_BIN_DIR` is set (a
/// test binary run away from its build tree, as in the bundle `scripts/gpu-check.sh` builds),
/// else the one cargo built beside this test.
fn bin() -> std::path::PathBuf {
    match std::env::var_os("TRIDENT_BIN_DIR") {
        Some(dir) => {
            assert!(!dir.is_empty(), "TRIDENT_BIN_DIR is set but empty: unset it or name a directory");
            let dir = std::path::Path::new(&dir);
            let exe = dir.join("trident-coll");
            assert!(exe.is_file(), "TRIDENT_BIN_DIR={}: no `trident-coll` binary there", dir.display());
            exe
        }
        None => env!("CARGO_BIN_EXE_trident-coll").into(),
    }
}

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
                Command::new(bin())
                    .args(args)
                    .env("RANK", rank.to_string())
                    .env("WORLD_SIZE", world.to_string())
                    .env("LOCAL_RANK", rank.to_string())
                    .env("LOCAL_WORLD_SIZE", world.to_string())
                    .env("MASTER_ADDR", "127.0.0.1")
                    .env("MASTER_PORT", self.port.to_string())
                    .env("TRIDENT_JOB_TOKEN", self.token.to_hex())
                    .env("TRIDENT_TRANSPORT", transport)
                    .env("TRIDENT_TIMEOUT_S", "30")
                    // Last, so a test can override the defaults above.
                    .envs(env.iter().copied())
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
        // The launcher shares no secret: the ranks key their token with a file only this
        // user can read, which the first of them creates.
        let dir = std::env::temp_dir().join(format!("trident-secret-{}-{port}", std::process::id()));
        let secret = dir.join("job-secret");
        let spawn = |rank: usize, secret: Option<&std::path::Path>| {
            let mut cmd = Command::new(bin());
            cmd.args(["check", "--lens", "1,1021"])
                .env_clear()
                .env(rank_var, rank.to_string())
                .env(size_var, "3")
                .env("MASTER_PORT", &port)
                .env("TRIDENT_TIMEOUT_S", "20")
                .envs(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if let Some(s) = secret {
                cmd.env("TRIDENT_JOB_SECRET_FILE", s);
            }
            cmd.spawn().unwrap()
        };
        let children: Vec<Child> = (0..3).map(|rank| spawn(rank, Some(&secret))).collect();
        for o in wait_all(children, Duration::from_secs(60)) {
            assert!(o.status.success(), "{rank_var}: {}", text(&o));
        }
        let _ = std::fs::remove_dir_all(&dir);
        // Without any secret (no token, no HOME, no secret file) a rank refuses to start
        // with a token anyone could compute, and says what to set.
        let out = wait_all(vec![spawn(0, None)], Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out[0].stderr);
        assert!(!out[0].status.success(), "{}", text(&out[0]));
        assert!(
            err.contains("TRIDENT_JOB_TOKEN") && err.contains("TRIDENT_ALLOW_INSECURE_TOKEN"),
            "{}",
            text(&out[0])
        );
    }
}

#[test]
fn launcher_returns_the_first_failure_and_stops_the_rest() {
    let script = "if [ \"$RANK\" = 1 ]; then exit 7; fi; exec sleep 30";
    let out = wait_all(
        vec![Command::new(bin())
            .args(["launch", "--nproc-per-node", "3", "--", "sh", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()],
        Duration::from_secs(25),
    );
    assert_eq!(out[0].status.code(), Some(7), "{}", text(&out[0]));
    assert!(String::from_utf8_lossy(&out[0].stderr).contains("rank 1 exited with code 7"));

    let ok = Command::new(bin())
        .args(["launch", "--nproc-per-node", "2", "--", "sh", "-c", "echo hello from $RANK of $WORLD_SIZE"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", text(&ok));
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(stdout.contains("[rank 1] hello from 1 of 2"), "{stdout}");
}

/// A rank that exits 0 while the others run is named when the job then fails; port 0 is
/// refused before any rank starts.
#[test]
fn launcher_names_a_rank_that_left_early_and_refuses_port_0() {
    let script = "if [ \"$RANK\" = 1 ]; then exit 0; fi; sleep 1; exit 3";
    let out = Command::new(bin())
        .args(["launch", "--nproc-per-node", "2", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rank 0 exited with code 3") && err.contains("rank 1 had already exited with code 0"),
        "{err}"
    );

    let out = Command::new(bin())
        .args(["launch", "--nproc-per-node", "2", "--master-port", "0", "--", "sh", "-c", "echo started"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let (err, stdout) = (String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("--master-port 0 names no port") && !stdout.contains("started"), "{err}");
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
    // Its claim on the rank, the same setup as rank 0 (published before anything else),
    // then the host.
    store.set("rank/1", format!("test pid {}", std::process::id()).as_bytes()).unwrap();
    let setup = store.get("setup/0", Duration::from_secs(20)).unwrap();
    store.set("setup/1", &setup).unwrap();
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

/// Reads `child`'s standard output until a line starting with `prefix`; the rest of the
/// output keeps flowing into a thread so the child never blocks on a full pipe.
fn wait_for_line(child: &mut Child, prefix: &str, limit: Duration) {
    use std::io::BufRead;
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let prefix = prefix.to_string();
    std::thread::spawn(move || {
        let mut told = false;
        for line in std::io::BufReader::new(out).lines().map_while(|l| l.ok()) {
            if !told && line.starts_with(&prefix) {
                let _ = tx.send(());
                told = true;
            }
        }
    });
    rx.recv_timeout(limit).expect("the rank never got going");
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Issue 17, item 1: rank 0 (the store host) frozen mid-run on TCP. Rank 1 must time out
/// naming rank 0, and then exit instead of blocking for good while reporting the failure to
/// the frozen store.
#[test]
fn tcp_frozen_rank_0_ends_the_job_naming_it() {
    let job = Job::new();
    let env = [("TRIDENT_TIMEOUT_S", "2")];
    let mut ranks = job.spawn_env(2, &[0, 1], "tcp", &["fault", "run", "--iters", "100000000"], &env);
    wait_for_line(&mut ranks[1], "step 3", Duration::from_secs(30));
    signal(&ranks[0], libc::SIGSTOP);
    let rank1 = ranks.pop().unwrap();
    let out = wait_all(vec![rank1], Duration::from_secs(20));
    signal(&ranks[0], libc::SIGKILL);
    let _ = ranks[0].wait();
    let err = String::from_utf8_lossy(&out[0].stderr);
    assert_eq!(out[0].status.code(), Some(3), "{}", text(&out[0]));
    assert!(err.contains("timed out") && err.contains("rank 0"), "{}", text(&out[0]));
}

/// Issue 17, item 9: a store host that accepts connections but never answers (stopped)
/// during start-up is a timeout that follows TRIDENT_TIMEOUT_S, not a "wrong job token".
#[test]
fn frozen_store_host_at_start_is_not_called_a_wrong_token() {
    let job = Job::new();
    // Plays a stopped rank 0: the kernel completes connections, nobody answers.
    let _frozen = std::net::TcpListener::bind(("127.0.0.1", job.port)).unwrap();
    let start = Instant::now();
    let out = wait_all(
        job.spawn_env(2, &[1], "tcp", &["check", "--lens", "1"], &[("TRIDENT_TIMEOUT_S", "1")]),
        Duration::from_secs(15),
    );
    let err = String::from_utf8_lossy(&out[0].stderr);
    assert!(!out[0].status.success(), "{}", text(&out[0]));
    assert!(err.contains("never answered") && !err.contains("wrong job token"), "{}", text(&out[0]));
    // Well under the old fixed 10 s (the limit is the rank's 1 s timeout).
    eprintln!("frozen store host reported after {:?}", start.elapsed());
}

/// Issue 17, item 9: ranks started with different transports or world sizes fail naming
/// the setting and both ranks, not "a rank did not start or crashed".
#[test]
fn setup_mismatches_name_the_setting_and_the_ranks() {
    let job = Job::new();
    let mut ranks = job.spawn(2, &[0], "tcp", &["check", "--lens", "1"]);
    ranks.extend(job.spawn(2, &[1], "shm", &["check", "--lens", "1"]));
    for (rank, o) in wait_all(ranks, Duration::from_secs(30)).iter().enumerate() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "rank {rank}: {}", text(o));
        assert!(
            err.contains("transport (TRIDENT_TRANSPORT) is \"tcp\" on rank 0 but \"shm\" on rank 1"),
            "rank {rank}: {}",
            text(o)
        );
    }
    // Ranks 0 and 1 count two ranks and form their world; rank 2, started later, counts
    // three and must be told so, not left waiting for a rank 3 that never comes.
    let job = Job::new();
    let mut pair = job.spawn(2, &[0, 1], "tcp", &["fault", "run", "--iters", "1000000000"]);
    wait_for_line(&mut pair[0], "step 1", Duration::from_secs(30));
    let outs = wait_all(job.spawn(3, &[2], "tcp", &["check", "--lens", "1"]), Duration::from_secs(30));
    for c in &pair {
        signal(c, libc::SIGKILL);
    }
    for mut c in pair {
        let _ = c.wait();
    }
    let err = String::from_utf8_lossy(&outs[0].stderr);
    assert!(!outs[0].status.success(), "{}", text(&outs[0]));
    assert!(
        err.contains("world size") && err.contains("\"2\" on rank 0 but \"3\" on rank 2"),
        "{}",
        text(&outs[0])
    );
}

/// Issue 17, item 9: a tensor-parallel size that differs between ranks is named.
#[test]
fn different_grids_across_processes_name_the_size() {
    let job = Job::new();
    let mut ranks = job.spawn(2, &[0], "tcp", &["check", "--lens", "1", "--grid", "2,1,1"]);
    ranks.extend(job.spawn(2, &[1], "tcp", &["check", "--lens", "1", "--grid", "1,1,2"]));
    for (rank, o) in wait_all(ranks, Duration::from_secs(30)).iter().enumerate() {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("tensor-parallel size is \"2\" on rank 0 but \"1\" on rank 1"),
            "rank {rank}: {}",
            text(o)
        );
    }
}

/// Whether `err` names world rank `victim` and its pid, as survivors' errors do: "(world
/// rank 1 is pipeline stage 1 of group [0, 1], on host h as pid 42)".
fn names_world_rank_and_pid(err: &str, victim: usize, pid: u32) -> bool {
    err.match_indices(&format!("world rank {victim} ")).any(|(at, _)| {
        let role = err[at..].split(')').next().unwrap_or("");
        role.ends_with(&format!(" as pid {pid}"))
    })
}

/// A stopped rank (not the store host) is named by every survivor, including those that
/// were waiting on another survivor stuck behind it (the wait chain), by world rank and
/// pid; with `grid` ("tp,pp,dp"), a training step's communication on that grid, where some
/// survivors share no group with the victim.
fn stopped_rank_is_named_by_every_survivor(transport: &str, grid: Option<&str>, victim: usize) {
    let job = Job::new();
    let env = [("TRIDENT_TIMEOUT_S", "2")];
    let mut args = vec!["fault", "run", "--iters", "1000000000"];
    args.extend(grid.iter().flat_map(|g| ["--grid", g]));
    let mut ranks = job.spawn_env(4, &[0, 1, 2, 3], transport, &args, &env);
    for r in &mut ranks {
        wait_for_line(r, "step 3", Duration::from_secs(30));
    }
    signal(&ranks[victim], libc::SIGSTOP);
    let mut stopped = ranks.remove(victim);
    let outs = wait_all(ranks, Duration::from_secs(20));
    signal(&stopped, libc::SIGKILL);
    let _ = stopped.wait();
    let survivors = (0..4).filter(|&r| r != victim);
    for (o, rank) in outs.iter().zip(survivors) {
        let err = String::from_utf8_lossy(&o.stderr);
        let what = format!("{transport} {grid:?} rank {rank}");
        assert_eq!(o.status.code(), Some(3), "{what}: {}", text(o));
        assert!(
            err.contains(&format!("waiting for rank {victim};"))
                || err.contains(&format!("because of rank {victim} ")),
            "{what} must blame rank {victim}: {}",
            text(o)
        );
        assert!(
            names_world_rank_and_pid(&err, victim, stopped.id()),
            "{what} must name world rank {victim} and its pid {}: {}",
            stopped.id(),
            text(o)
        );
    }
}

#[test]
fn tcp_stopped_rank_is_named_by_every_survivor() {
    stopped_rank_is_named_by_every_survivor("tcp", None, 2);
}

#[test]
fn shm_stopped_rank_is_named_by_every_survivor() {
    stopped_rank_is_named_by_every_survivor("shm", None, 2);
}

/// Issue 31: pipeline stage 1 of a PP 4 run stopped; every stage names world rank 1.
#[test]
fn tcp_stopped_pipeline_stage_is_named_by_every_stage() {
    stopped_rank_is_named_by_every_survivor("tcp", Some("1,4,1"), 1);
}

/// Issue 31: in TP 2 x PP 2, rank 0 shares no group with rank 3 and must still name it.
#[test]
fn shm_stopped_rank_of_tp_by_pp_is_named_across_groups() {
    stopped_rank_is_named_by_every_survivor("shm", Some("2,2,1"), 3);
}

#[test]
fn names_of_world_ranks_and_pids_are_read_exactly() {
    let line =
        "x: lost rank 1: closed (world rank 1 is pipeline stage 1 of group [0, 1], on host h as pid 42)";
    assert!(names_world_rank_and_pid(line, 1, 42));
    assert!(!names_world_rank_and_pid(line, 1, 4));
    assert!(!names_world_rank_and_pid(line, 0, 42));
    assert!(names_world_rank_and_pid("(world rank 3 runs on host h as pid 7)", 3, 7));
}

/// A stopped rank is ended by the launcher's SIGTERM (sent the ranks' timeout, here 1 s,
/// after the first failure, and followed by SIGCONT), not only by the SIGKILL at the end of
/// the 5 s grace period.
#[test]
fn launcher_ends_a_stopped_rank_without_waiting_out_the_grace() {
    let script = "if [ \"$RANK\" = 0 ]; then kill -STOP $$; sleep 30; fi; sleep 0.3; exit 7";
    let out = wait_all(
        vec![Command::new(bin())
            .args(["launch", "--nproc-per-node", "2", "--", "sh", "-c", script])
            .env("TRIDENT_TIMEOUT_S", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()],
        Duration::from_secs(5),
    );
    assert_eq!(out[0].status.code(), Some(7), "{}", text(&out[0]));
}
