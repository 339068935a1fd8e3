//! One `--save` directory, one run: the process that writes the checkpoints holds an advisory
//! lock (`flock`) on `DIR/trident.lock` for the run's length, with its pid and host written in
//! the file, so that a second run with the same directory is refused at start instead of
//! overwriting the first one's checkpoints. The lock dies with its process, so a run that was
//! killed leaves no lock behind (the file stays, unlocked, and the next run takes it).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::CheckpointError;

/// The lock file's name inside the `--save` directory.
pub const LOCK_FILE: &str = "trident.lock";

/// The lock of a `--save` directory, held until this is dropped (or the process ends).
#[derive(Debug)]
pub struct SaveDirLock {
    file: File,
    path: PathBuf,
}

impl SaveDirLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SaveDirLock {
    fn drop(&mut self) {
        // Emptied first, so that a reader between the two calls sees no stale holder.
        let _ = self.file.set_len(0);
        // SAFETY: `flock` on a descriptor this struct owns and keeps open for the call.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unknown host".into())
}

/// Takes the lock of `dir` (which must exist) for this process, without waiting: fails with
/// [`CheckpointError::SaveDirInUse`] naming the holder's pid and host when another live process
/// holds it.
pub fn lock_save_dir(dir: &Path) -> Result<SaveDirLock, CheckpointError> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| CheckpointError::io(&path, e))?;
    // SAFETY: `flock` on a descriptor `file` owns and keeps open for the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(CheckpointError::io(&path, err));
        }
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        return Err(CheckpointError::SaveDirInUse {
            dir: dir.into(),
            holder: if holder.is_empty() {
                "a process that has not written its pid yet".into()
            } else {
                holder.into()
            },
        });
    }
    let me = format!("pid {} on {}", std::process::id(), hostname());
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(me.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|e| CheckpointError::io(&path, e))?;
    Ok(SaveDirLock { file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first_and_the_lock_frees_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_save_dir(dir.path()).unwrap();
        // A second open file description in this process conflicts like another process.
        let err = lock_save_dir(dir.path()).expect_err("the directory is locked");
        let text = err.to_string();
        assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(text.contains("--save"), "{text}");
        drop(first);
        // The file stays but is no longer locked: a later run takes it.
        assert!(dir.path().join(LOCK_FILE).is_file());
        let again = lock_save_dir(dir.path()).unwrap();
        assert_eq!(again.path(), dir.path().join(LOCK_FILE));
    }
}
