//! Errors a launch reports: a bad configuration, or a fault some emulated thread hit.

use std::fmt;
use std::panic::Location;

/// A 3-component index or extent, displayed as `(x, y, z)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dim3(pub [u32; 3]);

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.0;
        write!(f, "({x}, {y}, {z})")
    }
}

/// Source location of the kernel code that made an access or reached a barrier.
pub type Site = &'static Location<'static>;

/// Why a launch failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EmuError {
    /// The launch configuration is outside what the hardware accepts.
    #[error("cannot launch kernel `{kernel}`: {problem}")]
    InvalidLaunch { kernel: &'static str, problem: String },
    /// The emulator could not get the host resources it needs (stacks, threads).
    #[error("cannot emulate kernel `{kernel}`: {problem}")]
    HostResources { kernel: &'static str, problem: String },
    /// An emulated thread did something whose result is undefined on a GPU.
    #[error("kernel `{kernel}`, block {block}, thread {thread}: {fault}")]
    Fault { kernel: &'static str, block: Dim3, thread: Dim3, fault: Fault },
}

impl EmuError {
    /// The fault, when the error is one.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            EmuError::Fault { fault, .. } => Some(fault),
            _ => None,
        }
    }
}

/// What kind of shared-memory access a race report is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Read,
    Write,
    Atomic,
    /// A `cp.async` copy into shared memory that has not been waited for.
    AsyncCopy,
}

impl fmt::Display for AccessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::Atomic => "atomic",
            AccessKind::AsyncCopy => "cp.async copy",
        })
    }
}

/// One side of a data race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub kind: AccessKind,
    pub thread: Dim3,
    pub site: Site,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by thread {} at {}", self.kind, self.thread, self.site)
    }
}

/// A fault of one emulated thread (the thread the enclosing [`EmuError`] names).
#[derive(Clone, Debug, thiserror::Error)]
pub enum Fault {
    #[error(
        "shared-memory data race on byte {byte} of {region}: {earlier}, then {later}, \
         with no sync_threads() (nor, within one warp, sync_warp) between them"
    )]
    SharedRace { region: String, byte: u32, earlier: Access, later: Access },
    #[error(
        "shared-memory byte {byte} of {region} is still being filled: {copy} has not been \
         waited for (cp_async_wait_group / cp_async_wait_all, then sync_threads for other \
         threads) when {access}"
    )]
    AsyncCopyInFlight { region: String, byte: u32, copy: Access, access: Access },
    #[error("invalid operand at {site}: {detail}")]
    BadOperand { site: Site, detail: String },
    #[error("shared-memory access out of range at {site}: {detail}")]
    SharedOutOfRange { site: Site, detail: String },
    #[error("barrier at {site} reached by only part of the block: thread {missing} {missing_state}")]
    PartialBarrier { site: Site, missing: Dim3, missing_state: String },
    #[error("divergent barrier: this thread waits at {site} while thread {other} waits at {other_site}")]
    DivergentBarrier { site: Site, other: Dim3, other_site: Site },
    #[error("warp collective at {site}: {detail}")]
    WarpCollective { site: Site, detail: String },
    #[error("global-memory access out of range at {site}: {detail}")]
    GlobalOutOfRange { site: Site, detail: String },
    #[error("read of uninitialized global memory at {site}: {detail}")]
    GlobalUninitialized { site: Site, detail: String },
    /// `location` names the bytes and the earlier access ("byte 4 of allocation ...: read by
    /// thread (0, 0, 0) at file:line"); `later` is the faulting thread's access.
    #[error("global-memory data race on {location}, then {later}, {why}")]
    GlobalRace { location: String, later: Access, why: &'static str },
    #[error("panicked: {message}")]
    Panic { message: String },
}
