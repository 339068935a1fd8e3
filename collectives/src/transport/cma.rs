//! Cross-memory attach: copying straight between the address spaces of two processes of one
//! host (`process_vm_readv` / `process_vm_writev`), one copy where a shared-memory ring needs
//! two. The kernel allows it between processes of one user unless a security module says
//! otherwise, so a job probes it before relying on it.

use crate::error::CommError;
use crate::frame::Header;

/// Which way bytes move.
#[derive(Clone, Copy, Debug)]
enum Direction {
    FromPeer,
    ToPeer,
}

/// Moves `len` bytes between `local` (this process) and `remote` (in process `pid`),
/// looping over partial transfers.
///
/// # Safety
/// `local` must be valid for `len` bytes (writable when reading from the peer), and
/// `[remote, remote + len)` must be memory of `pid` that nobody else uses meanwhile.
unsafe fn transfer(pid: u32, local: *mut u8, remote: u64, len: usize, dir: Direction) -> std::io::Result<()> {
    let mut done = 0;
    while done < len {
        let local_iov = libc::iovec { iov_base: local.add(done).cast(), iov_len: len - done };
        let remote_iov =
            libc::iovec { iov_base: (remote as usize + done) as *mut libc::c_void, iov_len: len - done };
        let moved = match dir {
            Direction::FromPeer => {
                libc::process_vm_readv(pid as libc::pid_t, &local_iov, 1, &remote_iov, 1, 0)
            }
            Direction::ToPeer => {
                libc::process_vm_writev(pid as libc::pid_t, &local_iov, 1, &remote_iov, 1, 0)
            }
        };
        if moved < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if moved == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no bytes moved"));
        }
        done += moved as usize;
    }
    Ok(())
}

/// Copies `dst.len()` bytes from address `remote` of process `pid`.
///
/// # Safety
/// `[remote, remote + dst.len())` must be memory of `pid` that nobody writes meanwhile.
pub unsafe fn read(pid: u32, remote: u64, dst: &mut [u8]) -> std::io::Result<()> {
    transfer(pid, dst.as_mut_ptr(), remote, dst.len(), Direction::FromPeer)
}

/// Copies `src` to address `remote` of process `pid`.
///
/// # Safety
/// `[remote, remote + src.len())` must be memory of `pid` that nobody reads or writes
/// meanwhile.
pub unsafe fn write(pid: u32, remote: u64, src: &[u8]) -> std::io::Result<()> {
    transfer(pid, src.as_ptr().cast_mut(), remote, src.len(), Direction::ToPeer)
}

/// Whether this process can read process `pid`'s memory: reads 8 bytes at `remote`, which
/// the peer says hold `expect`. Any failure (not permitted, not supported, another process
/// under that pid, e.g. in another pid namespace) answers false.
pub fn probe(pid: u32, remote: u64, expect: u64) -> bool {
    let mut word = [0u8; 8];
    // SAFETY: the peer published `remote` as the address of a word it never changes.
    let ok = unsafe { read(pid, remote, &mut word) }.is_ok();
    ok && u64::from_ne_bytes(word) == expect
}

/// The error for a failed copy `what` ("reading from", "writing to") `peer` during `op`.
pub fn error(op: &Header, what: &str, peer: usize, pid: u32, err: std::io::Error) -> CommError {
    if err.raw_os_error() == Some(libc::ESRCH) {
        CommError::PeerLost {
            op: op.to_string(),
            peer,
            detail: format!("its process has exited (pid {pid})"),
        }
    } else {
        CommError::io(format!("{op}: {what} rank {peer}'s memory (pid {pid})"), err)
    }
}
