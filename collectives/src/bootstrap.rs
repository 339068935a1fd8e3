//! Building the world communicator from what a launcher put in the environment: torchrun
//! (and our own [`crate::launcher`]), Slurm and Open MPI. Rank 0 hosts the rendezvous store at
//! `MASTER_ADDR:MASTER_PORT`.

use crate::communicator::Communicator;
use crate::config::CommConfig;
use crate::error::{CommError, Result};
use crate::store::{StoreClient, StoreServer};
use crate::token::{load_or_create_secret, secret_path, JobToken, ENV_INSECURE, ENV_SECRET_FILE, ENV_TOKEN};
use crate::transport::shm::ShmFabric;
use crate::transport::tcp::TcpFabric;
use crate::transport::Fabric;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::{Arc, Mutex};

/// Which transport processes use: `tcp`, `shm` or `auto` (shared memory when every rank is
/// on this host, TCP otherwise).
pub const ENV_TRANSPORT: &str = "TRIDENT_TRANSPORT";
/// MASTER_PORT where the launcher sets none (torchrun's default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;
/// Port of the rendezvous store on the master host, when it must differ from MASTER_PORT.
pub const ENV_STORE_PORT: &str = "TRIDENT_STORE_PORT";

/// Where this process sits in the job, as its launcher described it.
#[derive(Clone, Debug)]
pub struct LaunchEnv {
    /// This process's rank in the job (`RANK`, `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`).
    pub rank: usize,
    /// Ranks in the job.
    pub world_size: usize,
    /// This process's rank among those of its node.
    pub local_rank: usize,
    /// Ranks on this node, where the launcher says.
    pub local_world_size: Option<usize>,
    /// Host of rank 0 (`MASTER_ADDR`).
    pub master_addr: String,
    /// `MASTER_PORT`, or [`DEFAULT_MASTER_PORT`].
    pub master_port: u16,
    /// Where rank 0 hosts the rendezvous store: MASTER_PORT, except under a torchrun whose
    /// agent already serves its own store there (`TORCHELASTIC_USE_AGENT_STORE=True`), where
    /// it is MASTER_PORT + 1. [`ENV_STORE_PORT`] overrides both.
    pub store_port: u16,
    /// The job token every connection presents.
    pub token: JobToken,
    /// "torchrun", "slurm" or "openmpi".
    pub launcher: &'static str,
}

fn parse<T: std::str::FromStr>(name: &str, value: String) -> Result<T> {
    value.trim().parse().map_err(|_| CommError::Bootstrap(format!("{name}={value:?} is not a valid number")))
}

/// First host of a Slurm node list such as `gpu[03-05,07],login1` -> `gpu03`.
pub fn first_slurm_host(list: &str) -> Option<String> {
    let list = list.trim();
    let end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..end];
    if list[end..].starts_with('[') {
        let inner = &list[end + 1..];
        let first = inner.split([',', '-', ']']).next()?;
        Some(format!("{prefix}{first}"))
    } else if prefix.is_empty() {
        None
    } else {
        Some(prefix.to_string())
    }
}

impl LaunchEnv {
    /// Reads the launcher's variables; [`CommError::Bootstrap`] where they are missing or
    /// inconsistent (a rank outside the world size, no token).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads the launcher variables through `var` (testable without touching the process
    /// environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let num = |name: &str| -> Result<Option<usize>> { var(name).map(|v| parse(name, v)).transpose() };
        let (rank, world_size, local_rank, local_world_size, launcher) = if let (Some(r), Some(w)) =
            (num("RANK")?, num("WORLD_SIZE")?)
        {
            (r, w, num("LOCAL_RANK")?.unwrap_or(0), num("LOCAL_WORLD_SIZE")?, "torchrun")
        } else if let (Some(r), Some(w)) = (num("OMPI_COMM_WORLD_RANK")?, num("OMPI_COMM_WORLD_SIZE")?) {
            let lr = num("OMPI_COMM_WORLD_LOCAL_RANK")?.unwrap_or(0);
            (r, w, lr, num("OMPI_COMM_WORLD_LOCAL_SIZE")?, "openmpi")
        } else if let (Some(r), Some(w)) = (num("SLURM_PROCID")?, num("SLURM_NTASKS")?) {
            (r, w, num("SLURM_LOCALID")?.unwrap_or(0), None, "slurm")
        } else {
            return Err(CommError::Bootstrap(
                    "no launcher environment found: start this program with `trident launch`, torchrun (RANK/WORLD_SIZE), Slurm srun (SLURM_PROCID/SLURM_NTASKS) or Open MPI mpirun (OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE)".into(),
                ));
        };
        if world_size == 0 || rank >= world_size {
            return Err(CommError::Bootstrap(format!(
                "rank {rank} is outside a world of {world_size} ranks"
            )));
        }
        let single_host = local_world_size == Some(world_size);
        let master_addr = match var("MASTER_ADDR") {
            Some(a) => a,
            // Rank 0 runs on the first node of the step (block distribution, the default).
            None if launcher == "slurm" => var("SLURM_STEP_NODELIST")
                .or(var("SLURM_JOB_NODELIST"))
                .or(var("SLURM_NODELIST"))
                .and_then(|l| first_slurm_host(&l))
                .ok_or_else(|| {
                    CommError::Bootstrap("Slurm job without MASTER_ADDR or SLURM_JOB_NODELIST".into())
                })?,
            None if single_host || world_size == 1 => "127.0.0.1".into(),
            None => {
                return Err(CommError::Bootstrap(format!(
                    "MASTER_ADDR is not set and the {world_size} ranks span several hosts: export MASTER_ADDR (the host of rank 0) to every rank"
                )))
            }
        };
        let master_port = match var("MASTER_PORT") {
            Some(p) => parse("MASTER_PORT", p)?,
            None => DEFAULT_MASTER_PORT,
        };
        let store_port = match var(ENV_STORE_PORT) {
            Some(p) => parse(ENV_STORE_PORT, p)?,
            None if var("TORCHELASTIC_USE_AGENT_STORE").as_deref() == Some("True") => {
                master_port.checked_add(1).ok_or_else(|| {
                    CommError::Bootstrap(format!(
                        "MASTER_PORT {master_port} leaves no port for the store: set {ENV_STORE_PORT}"
                    ))
                })?
            }
            None => master_port,
        };
        let token = match var(ENV_TOKEN) {
            Some(t) => JobToken::from_hex(&t)?,
            None => {
                // What every rank of this job shares and other jobs likely do not.
                let job = var("TORCHELASTIC_RUN_ID")
                    .or(var("SLURM_JOB_ID")
                        .map(|j| format!("{j}.{}", var("SLURM_STEP_ID").unwrap_or_default())))
                    .or(var("OMPI_MCA_ess_base_jobid"))
                    .or(var("PMIX_NAMESPACE"))
                    .unwrap_or_default();
                let port = master_port.to_string();
                let size = world_size.to_string();
                let parts = [launcher, job.as_str(), master_addr.as_str(), port.as_str(), size.as_str()];
                if var(ENV_INSECURE).is_some_and(|v| v.trim() == "1") {
                    JobToken::derive(&parts)
                } else {
                    let path = secret_path(&var).ok_or_else(|| {
                        CommError::Bootstrap(format!(
                            "no job token: {launcher} shares no secret between ranks, {ENV_TOKEN} is not set and there is no HOME for the job secret; export {ENV_TOKEN} (32 hex digits, the same on every rank, e.g. from `openssl rand -hex 16`) or {ENV_SECRET_FILE} (a file only you can read, the same on every host), or {ENV_INSECURE}=1 to accept a token anyone who sees the job can compute"
                        ))
                    })?;
                    let secret = load_or_create_secret(&path).map_err(|e| {
                        CommError::Bootstrap(format!(
                            "no job token: {e}; alternatively export {ENV_TOKEN} (32 hex digits, the same on every rank) or {ENV_INSECURE}=1 to accept a token anyone who sees the job can compute"
                        ))
                    })?;
                    JobToken::derive_keyed(&secret, &parts)
                }
            }
        };
        Ok(LaunchEnv {
            rank,
            world_size,
            local_rank,
            local_world_size,
            master_addr,
            master_port,
            store_port,
            token,
            launcher,
        })
    }

    fn master_socket(&self) -> Result<SocketAddr> {
        (self.master_addr.as_str(), self.store_port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.find(|a| a.is_ipv4()).or_else(|| a.next()))
            .ok_or_else(|| CommError::Bootstrap(format!("cannot resolve MASTER_ADDR {:?}", self.master_addr)))
    }
}

/// The address this host uses to reach `master` (no packet is sent).
fn route_to(master: &SocketAddr) -> IpAddr {
    if master.ip().is_loopback() {
        return master.ip();
    }
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect(master).map(|_| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// Joins the job described by `env`: rank 0 starts the store, every rank connects to it,
/// and the transport is chosen by [`ENV_TRANSPORT`].
pub fn init(env: &LaunchEnv, config: CommConfig) -> Result<Communicator> {
    let kind = std::env::var(ENV_TRANSPORT).unwrap_or_else(|_| "auto".into());
    init_with_transport(env, config, &kind)
}

/// [`init`] with the transport named by the caller (`tcp`, `shm` or `auto`); a different
/// choice in [`ENV_TRANSPORT`] is refused rather than silently overridden.
pub fn init_with_transport(env: &LaunchEnv, config: CommConfig, kind: &str) -> Result<Communicator> {
    init_checked(env, config, kind, "")
}

/// What every rank must agree on before any group forms, as (name, value) pairs: world
/// size, transport and the tunables that choose algorithms, and the caller's `digest`.
pub fn setup_description(
    env: &LaunchEnv,
    config: &CommConfig,
    kind: &str,
    digest: &str,
) -> Vec<(String, String)> {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| "default".into());
    [
        ("world size (WORLD_SIZE or the launcher's)", env.world_size.to_string()),
        (&format!("transport ({ENV_TRANSPORT})") as &str, kind.to_string()),
        (crate::config::ENV_SMALL_BYTES, config.small_bytes.to_string()),
        (crate::config::ENV_ALLREDUCE, format!("{:?}", config.large_all_reduce)),
        (crate::transport::shm::ENV_CHANNEL_BYTES, var(crate::transport::shm::ENV_CHANNEL_BYTES)),
        (crate::transport::shm::ENV_CMA, var(crate::transport::shm::ENV_CMA)),
        ("configuration digest", digest.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Publishes this rank's setup in the store and compares it with every other rank's, so a
/// rank started differently fails naming the setting instead of waiting for groups the
/// others never form. Ranks that never publish are named too.
fn check_setup(
    store: &mut StoreClient,
    env: &LaunchEnv,
    mine: &[(String, String)],
    timeout: std::time::Duration,
) -> Result<()> {
    store.set(&format!("setup/{}", env.rank), &crate::agree::encode(mine)?)?;
    let deadline = std::time::Instant::now() + timeout;
    // Compared one record at a time, as they arrive: a rank that counts more ranks than
    // exist must find the world-size difference before it waits for a rank that never comes.
    for r in 0..env.world_size {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let raw = match store.get(&format!("setup/{r}"), left) {
            Ok(raw) => raw,
            Err(CommError::Bootstrap(_)) => {
                return Err(CommError::Bootstrap(format!(
                    "rank {r} did not join the rendezvous at {}:{} within {timeout:?} (rank {} waited): it did not start, crashed, or was started with another MASTER_ADDR/MASTER_PORT or job token; raise {} if it is just slow to start",
                    env.master_addr,
                    env.store_port,
                    env.rank,
                    crate::config::ENV_TIMEOUT
                )))
            }
            Err(e) => return Err(e),
        };
        let theirs = crate::agree::decode(&raw)
            .ok_or_else(|| CommError::Bootstrap(format!("rank {r} published a malformed setup record")))?;
        // In rank order, so both ranks of a pair report it alike.
        let (low, high) = (r.min(env.rank), r.max(env.rank));
        let pair = if r < env.rank { [theirs, mine.to_vec()] } else { [mine.to_vec(), theirs] };
        if let Some(d) = crate::agree::first_difference(&pair) {
            return Err(crate::agree::disagreement("the job setup", d, |i| if i == 0 { low } else { high }));
        }
    }
    Ok(())
}

/// [`init_with_transport`], with `digest` (any string the caller derives from its own
/// configuration; empty for none) compared across ranks along with the setup.
pub fn init_checked(env: &LaunchEnv, config: CommConfig, kind: &str, digest: &str) -> Result<Communicator> {
    if let Ok(set) = std::env::var(ENV_TRANSPORT) {
        if set != kind {
            return Err(CommError::InvalidArgument(format!(
                "transport {kind:?} was asked for, but {ENV_TRANSPORT}={set:?} says otherwise"
            )));
        }
    }
    let master = env.master_socket()?;
    // Listeners bind to the interface the job uses (the master address for the store, the
    // route to the master for data), never to every interface.
    let server = if env.rank == 0 { Some(StoreServer::start(master, env.token)?) } else { None };
    let mut store = StoreClient::connect(&master.to_string(), &env.token, config.timeout)?;
    // One process per rank: a second process started with the same rank is refused by name
    // instead of overwriting the first one's records.
    let me = format!("{} pid {}", hostname(), std::process::id());
    if let Some(holder) = store.claim(&format!("rank/{}", env.rank), me.as_bytes())? {
        return Err(CommError::Bootstrap(format!(
            "two processes were started as rank {}: {} and this one ({me}); every process of a job \
             needs its own rank (RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK, 0 to {})",
            env.rank,
            String::from_utf8_lossy(&holder),
            env.world_size - 1
        )));
    }
    check_setup(&mut store, env, &setup_description(env, &config, kind, digest), config.timeout)?;
    let host = hostname();
    store.set(&format!("host/{}", env.rank), host.as_bytes())?;
    let mut same_host = true;
    for r in 0..env.world_size {
        same_host &= store.get_string(&format!("host/{r}"), config.timeout)? == host;
    }
    // Every rank claimed its rank before publishing the setup that was just checked, so
    // these records are all there.
    let mut places = Vec::with_capacity(env.world_size);
    for r in 0..env.world_size {
        places.push(place_of(&store.get_string(&format!("rank/{r}"), config.timeout)?));
    }
    let store = Arc::new(Mutex::new(store));
    let fabric: Arc<dyn Fabric> = match kind {
        "shm" if !same_host => {
            return Err(CommError::Bootstrap(format!(
                "{ENV_TRANSPORT}=shm but the ranks are on different hosts; use tcp or auto"
            )))
        }
        "shm" | "auto" if same_host => Arc::new(ShmFabric::new(store, env.token, server)),
        "tcp" | "auto" => {
            let ip = route_to(&master);
            Arc::new(TcpFabric::new(store, env.token, ip, ip, server))
        }
        other => {
            return Err(CommError::Bootstrap(format!("{ENV_TRANSPORT}={other:?}: expected tcp, shm or auto")))
        }
    };
    Communicator::world_at(fabric, env.rank, env.world_size, config, places)
}

/// Where a rank runs, for errors, from the record it claimed its rank with ("HOST pid N").
fn place_of(record: &str) -> String {
    match record.rsplit_once(" pid ") {
        Some(("", pid)) => format!("an unnamed host as pid {pid}"),
        Some((host, pid)) => format!("host {host} as pid {pid}"),
        None => record.to_string(),
    }
}

/// [`init`] from this process's environment and [`CommConfig::from_env`].
pub fn init_from_env() -> Result<Communicator> {
    init(&LaunchEnv::from_env()?, CommConfig::from_env()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A job secret private to this test process.
    fn secret_file() -> String {
        let dir = std::env::temp_dir().join(format!("trident-bootstrap-test-{}", std::process::id()));
        dir.join("job-secret").display().to_string()
    }

    fn env(pairs: &[(&str, &str)]) -> Result<LaunchEnv> {
        let secret = secret_file();
        let mut all = vec![(ENV_SECRET_FILE, secret.as_str())];
        all.extend_from_slice(pairs);
        bare_env(&all)
    }

    fn bare_env(pairs: &[(&str, &str)]) -> Result<LaunchEnv> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LaunchEnv::from_vars(|k| map.get(k).cloned())
    }

    /// Two processes started as rank 1: the second is refused naming the rank and the first.
    #[test]
    fn a_rank_started_twice_is_refused_by_name() {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
        let token = JobToken::random().unwrap().to_hex();
        let config = CommConfig { timeout: std::time::Duration::from_secs(3), ..CommConfig::default() };
        let results: Vec<std::result::Result<(), String>> = std::thread::scope(|s| {
            let ranks = ["0", "1", "1"].map(|rank| {
                let (port, token, config) = (&port, &token, config.clone());
                s.spawn(move || {
                    if rank == "1" {
                        std::thread::sleep(std::time::Duration::from_millis(300));
                    }
                    let vars = [
                        ("RANK", rank),
                        ("WORLD_SIZE", "3"),
                        ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", port),
                        (ENV_TOKEN, token),
                    ];
                    let env = env(&vars).map_err(|e| e.to_string())?;
                    init_with_transport(&env, config, "tcp").map(drop).map_err(|e| e.to_string())
                })
            });
            ranks.map(|h| h.join().unwrap()).into_iter().collect()
        });
        let refused: Vec<&String> = results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .filter(|e| e.contains("two processes were started as rank 1"))
            .collect();
        assert_eq!(refused.len(), 1, "{results:?}");
        assert!(refused[0].contains(&format!("pid {}", std::process::id())), "{}", refused[0]);
    }

    /// A rank's place in errors comes from the record it claimed its rank with.
    #[test]
    fn places_read_the_rank_records() {
        assert_eq!(place_of("gpu3 pid 4242"), "host gpu3 as pid 4242");
        assert_eq!(place_of(" pid 7"), "an unnamed host as pid 7");
        assert_eq!(place_of("odd"), "odd");
    }

    #[test]
    fn derived_tokens_need_a_secret_or_an_explicit_opt_in() {
        let job = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_NODELIST", "gpu[03-05,07]"),
            ("SLURM_JOB_ID", "77"),
        ];
        // No token, no secret: refused, naming every way out.
        let err = bare_env(&job).unwrap_err().to_string();
        for name in [ENV_TOKEN, ENV_SECRET_FILE, ENV_INSECURE] {
            assert!(err.contains(name), "{err}");
        }
        // What an outsider computes from the job's public parameters is not the token.
        let keyed = env(&job).unwrap().token;
        let public = JobToken::derive(&["slurm", "77.", "gpu03", "29500", "8"]);
        assert_ne!(keyed, public);
        // ... unless the user accepted exactly that.
        let mut insecure = job.to_vec();
        insecure.push((ENV_INSECURE, "1"));
        assert_eq!(bare_env(&insecure).unwrap().token, public);
        // Another user's secret (another file) gives another token.
        let other_dir = std::env::temp_dir().join(format!("trident-bootstrap-other-{}", std::process::id()));
        let other = other_dir.join("s").display().to_string();
        let mut with_other = job.to_vec();
        with_other.push((ENV_SECRET_FILE, other.as_str()));
        assert_ne!(bare_env(&with_other).unwrap().token, keyed);
        let _ = std::fs::remove_dir_all(other_dir);
        // An explicit token wins over everything.
        let t = JobToken::random().unwrap();
        let hex = t.to_hex();
        let mut explicit = job.to_vec();
        explicit.push((ENV_TOKEN, hex.as_str()));
        assert_eq!(bare_env(&explicit).unwrap().token, t);
    }

    #[test]
    fn launchers() {
        let t = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "1234"),
        ])
        .unwrap();
        assert_eq!((t.rank, t.world_size, t.local_rank, t.master_port), (3, 4, 1, 1234));
        assert_eq!((t.launcher, t.store_port), ("torchrun", 1234));
        // torchrun's agent hosts its own store on MASTER_PORT: ours moves next door.
        let agent = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("MASTER_PORT", "1234"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ])
        .unwrap();
        assert_eq!(agent.store_port, 1235);

        let m = env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ])
        .unwrap();
        assert_eq!((m.rank, m.master_addr.as_str(), m.master_port), (1, "127.0.0.1", 29500));

        let s = env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_NODELIST", "gpu[03-05,07]"),
            ("SLURM_JOB_ID", "77"),
        ])
        .unwrap();
        assert_eq!((s.rank, s.master_addr.as_str()), (5, "gpu03"));
        // Ranks of one job derive the same token; another job differs.
        let s2 = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_NODELIST", "gpu[03-05,07]"),
            ("SLURM_JOB_ID", "77"),
        ])
        .unwrap();
        assert_eq!(s.token, s2.token);
        let other = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_NODELIST", "gpu[03-05,07]"),
            ("SLURM_JOB_ID", "78"),
        ])
        .unwrap();
        assert_ne!(s.token, other.token);

        assert!(env(&[("RANK", "4"), ("WORLD_SIZE", "4")]).is_err());
        assert!(env(&[("RANK", "x"), ("WORLD_SIZE", "4")]).is_err());
        assert!(env(&[]).is_err());
        assert!(env(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_WORLD_SIZE", "2")]).is_err());
        assert_eq!(first_slurm_host("node1,node2").as_deref(), Some("node1"));
    }
}
