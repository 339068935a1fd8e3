//! Collectives for Trident: communicators, process groups, ring algorithms and transports.
//!
//! A [`Communicator`] runs AllReduce, reduce-scatter, all-gather, broadcast, barrier and
//! tagged send/recv over a [`Transport`]: threads of one process ([`InprocFabric`]),
//! processes on one host through shared memory ([`ShmFabric`]) or hosts over TCP
//! ([`TcpFabric`]). [`bootstrap`] builds the world communicator from what torchrun, Slurm or
//! Open MPI put in the environment, and [`launcher`] starts local ranks like torchrun does.

pub mod agree;
pub mod algo;
pub mod bench;
pub mod blame;
pub mod bootstrap;
pub mod communicator;
pub mod config;
pub mod element;
pub mod error;
pub mod frame;
pub mod grid;
pub mod launcher;
pub mod shared_buffer;
pub mod sink;
pub mod store;
pub mod token;
pub mod transport;
pub mod verify;
pub mod wait;

pub use communicator::{Communicator, ParallelGroups};
pub use config::{CommConfig, LargeAllReduce};
pub use element::{Combine, DType, Element, HostCombine, ReduceOp};
pub use error::{AbortReason, CommError, PeerNames, Result};
pub use grid::{GridCoords, RankGrid};
pub use shared_buffer::SharedBuffer;
pub use transport::inproc::InprocFabric;
pub use transport::shm::ShmFabric;
pub use transport::tcp::TcpFabric;
pub use transport::{Fabric, SharedRegion, Transport};
