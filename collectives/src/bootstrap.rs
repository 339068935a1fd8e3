//! Building the world communicator from what a launcher put in the environment: torchrun
//! (and our own [`crate::launch`]), Slurm and Open MPI. Rank 0 hosts the rendezvous store at
//! `MASTER_ADDR:MASTER_PORT`.

use crate::communicator::Communicator;
use crate::config::CommConfig;
use crate::error::{CommError, Result};
use crate::store::{StoreClient, StoreServer};
use crate::token::{JobToken, ENV_TOKEN};
use crate::transport::shm::ShmFabric;
use crate::transport::tcp::TcpFabric;
use crate::transport::Fabric;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::{Arc, Mutex};

/// Which transport processes use: `tcp`, `shm` or `auto` (shared memory when every rank is
/// on this host, TCP otherwise).
pub const ENV_TRANSPORT: &str = "TRIDENT_TRANSPORT";
pub const DEFAULT_MASTER_PORT: u16 = 29500;
/// Port of the rendezvous store on the master host, when it must differ from MASTER_PORT.
pub const ENV_STORE_PORT: &str = "TRIDENT_STORE_PORT";

/// Where this process sits in the job, as its launcher described it.
#[derive(Clone, Debug)]
pub struct LaunchEnv {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub local_world_size: Option<usize>,
    pub master_addr: String,
    pub master_port: u16,
    /// Where rank 0 hosts the rendezvous store: MASTER_PORT, except under a torchrun whose
    /// agent already serves its own store there (`TORCHELASTIC_USE_AGENT_STORE=True`), where
    /// it is MASTER_PORT + 1. [`ENV_STORE_PORT`] overrides both.
    pub store_port: u16,
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
                JobToken::derive(&[launcher, &job, &master_addr, &port, &size])
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
    if let Ok(set) = std::env::var(ENV_TRANSPORT) {
        if set != kind {
            return Err(CommError::InvalidArgument(format!(
                "transport {kind:?} was asked for, but {ENV_TRANSPORT}={set:?} says otherwise"
            )));
        }
    }
    let master = env.master_socket()?;
    let server = if env.rank == 0 {
        let bind = if master.ip().is_loopback() {
            master
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), master.port())
        };
        Some(StoreServer::start(bind, env.token)?)
    } else {
        None
    };
    let mut store = StoreClient::connect(&master.to_string(), &env.token, config.timeout)?;
    let host = hostname();
    store.set(&format!("host/{}", env.rank), host.as_bytes())?;
    let mut same_host = true;
    for r in 0..env.world_size {
        same_host &= store.get_string(&format!("host/{r}"), config.timeout)? == host;
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
            let bind = if ip.is_loopback() { ip } else { IpAddr::V4(Ipv4Addr::UNSPECIFIED) };
            Arc::new(TcpFabric::new(store, env.token, ip, bind, server))
        }
        other => {
            return Err(CommError::Bootstrap(format!("{ENV_TRANSPORT}={other:?}: expected tcp, shm or auto")))
        }
    };
    Communicator::world(fabric, env.rank, env.world_size, config)
}

/// [`init`] from this process's environment and [`CommConfig::from_env`].
pub fn init_from_env() -> Result<Communicator> {
    init(&LaunchEnv::from_env()?, CommConfig::from_env()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<LaunchEnv> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LaunchEnv::from_vars(|k| map.get(k).cloned())
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
