//! Durable, all-or-nothing writes: write a temporary file or directory beside the target,
//! fsync it, rename it into place, fsync the parent directory.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::CheckpointError;

/// Flushes a directory's entries (new names, renames) to disk.
pub fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| CheckpointError::io(dir, e))
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// This process as temporaries name it: `HOST-PID-START`, START being the process's start time
/// in clock ticks since boot (`/proc/PID/stat` field 22), so that a recycled pid is not taken
/// for the process that made a temporary; HOST, so that on a file system shared between hosts
/// a temporary is judged only by the host that made it. Without `/proc`, the pid alone.
fn process_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        match (hostname(), start_time(pid)) {
            (Some(host), Some(start)) => format!("{host}-{pid}-{start}"),
            _ => pid.to_string(),
        }
    })
}

/// The host name without `-` (which separates the tag's fields).
fn hostname() -> Option<String> {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim().replace('-', "_");
    (!name.is_empty()).then_some(name)
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot. Fields are
/// counted after the command name, which is in parentheses and may itself hold spaces.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process a temporary's tag names may still be running. Only a process that is
/// surely gone (no such pid on this host, or the pid now belongs to a process started at another
/// time) is dead; anything this host cannot judge counts as alive.
fn owner_may_be_alive(tag: &str) -> bool {
    if start_time(std::process::id()).is_none() {
        return true; // no `/proc` here: nothing can be judged
    }
    let fields: Vec<&str> = tag.rsplitn(3, '-').collect();
    match fields.as_slice() {
        // `HOST-PID-START`, written by this build.
        [start, pid, host] => {
            let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return true };
            if hostname().as_deref() != Some(*host) {
                return true;
            }
            start_time(pid) == Some(start)
        }
        // A bare pid: older builds, or a host without `/proc` (then this one has none either).
        [pid] => pid.parse::<u32>().map_or(true, |pid| Path::new(&format!("/proc/{pid}")).exists()),
        _ => true,
    }
}

/// A sibling of `path` named `.NAME.SUFFIX-TAG`, for temporaries ([`process_tag`]).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path.file_name().map_or_else(|| "unnamed".into(), |n| n.to_string_lossy().into_owned());
    parent_of(path).join(format!(".{name}.{suffix}-{}", process_tag()))
}

/// Splits a temporary's name `.NAME.SUFFIX-TAG` into NAME, SUFFIX (`tmp` or `old`) and TAG.
fn parse_temporary(file_name: &str) -> Option<(&str, &str, &str)> {
    let rest = file_name.strip_prefix('.')?;
    for suffix in ["tmp", "old"] {
        let marker = format!(".{suffix}-");
        if let Some(at) = rest.rfind(&marker) {
            let (name, tag) = (&rest[..at], &rest[at + marker.len()..]);
            if !name.is_empty() && !tag.is_empty() {
                return Some((name, suffix, tag));
            }
        }
    }
    None
}

/// Removes the temporaries that processes which are surely dead left in `dir` (a save killed
/// half-way leaves `.NAME.tmp-TAG`; one killed between its two renames also leaves the previous
/// `NAME` as `.NAME.old-TAG`, which is put back when `NAME` is missing, since it is a complete
/// checkpoint). A live process's temporaries are never touched. Returns what it removed or
/// restored.
pub fn clean_stale_temporaries(dir: &Path) -> Result<Vec<PathBuf>, CheckpointError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CheckpointError::io(dir, e)),
    };
    let mut stale = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CheckpointError::io(dir, e))?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else { continue };
        if let Some((name, suffix, tag)) = parse_temporary(file_name) {
            if tag != process_tag() && !owner_may_be_alive(tag) {
                stale.push((entry.path(), dir.join(name), suffix == "old"));
            }
        }
    }
    // The `.old` ones first, so that a restored directory is never one a `.tmp` replaces.
    stale.sort_by_key(|(_, _, old)| !old);
    let mut handled = Vec::new();
    for (path, target, is_old) in stale {
        let removed = if is_old && !target.exists() {
            fs::rename(&path, &target)
        } else if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => handled.push(path),
            // Another process cleaning the same directory got there first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CheckpointError::io(&path, e)),
        }
    }
    if !handled.is_empty() {
        sync_dir(dir)?;
    }
    Ok(handled)
}

/// Makes sure files can be written in `dir`: creates it (and its parents) when missing, then
/// creates, writes and removes a probe file in it. Permission bits alone do not tell (root
/// ignores them, a read-only mount refuses everyone), so this tries.
pub fn check_writable_dir(dir: &Path) -> Result<(), CheckpointError> {
    if dir.exists() && !dir.is_dir() {
        return Err(CheckpointError::NotADirectory { path: dir.into() });
    }
    fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
    let probe = sibling(&dir.join("write-probe"), "tmp");
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| f.write_all(b"probe"));
    let removed = fs::remove_file(&probe);
    written.and(removed).map_err(|e| CheckpointError::io(&probe, e))
}

/// Writes a file through `write`, fsyncs it and renames it over `path`: readers see the old
/// file or the whole new one, never a part.
pub fn write_file_atomically<F>(path: &Path, write: F) -> Result<(), CheckpointError>
where
    F: FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
{
    clean_stale_temporaries(&parent_of(path))?;
    let tmp = sibling(path, "tmp");
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(CheckpointError::io(path, e));
    }
    sync_dir(&parent_of(path))
}

/// Fsyncs a file that was written by other code (e.g. a library writing to a path).
pub(crate) fn sync_file(path: &Path) -> Result<(), CheckpointError> {
    File::open(path).and_then(|f| f.sync_all()).map_err(|e| CheckpointError::io(path, e))
}

/// Fills a fresh temporary directory through `fill` (which must fsync its files), then
/// renames it to `dir`, replacing any previous `dir`. A crash leaves either the old directory or
/// the new one in place (and at worst a hidden temporary directory beside it).
pub(crate) fn write_dir_atomically<F>(dir: &Path, fill: F) -> Result<(), CheckpointError>
where
    F: FnOnce(&Path) -> Result<(), CheckpointError>,
{
    let parent = parent_of(dir);
    fs::create_dir_all(&parent).map_err(|e| CheckpointError::io(&parent, e))?;
    clean_stale_temporaries(&parent)?;
    let tmp = sibling(dir, "tmp");
    let old = sibling(dir, "old");
    for leftover in [&tmp, &old] {
        if leftover.exists() {
            fs::remove_dir_all(leftover).map_err(|e| CheckpointError::io(leftover, e))?;
        }
    }
    fs::create_dir(&tmp).map_err(|e| CheckpointError::io(&tmp, e))?;
    if let Err(e) = fill(&tmp).and_then(|()| sync_dir(&tmp)) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let had_old = dir.exists();
    if had_old {
        fs::rename(dir, &old).map_err(|e| CheckpointError::io(dir, e))?;
    }
    fs::rename(&tmp, dir).map_err(|e| CheckpointError::io(dir, e))?;
    sync_dir(&parent)?;
    if had_old {
        fs::remove_dir_all(&old).map_err(|e| CheckpointError::io(&old, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_is_replaced_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        write_file_atomically(&path, |w| w.write_all(b"first")).unwrap();
        let err = write_file_atomically(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("disk on fire"));
        assert_eq!(fs::read(&path).unwrap(), b"first");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
    }

    #[test]
    fn directory_is_replaced_whole() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("nested").join("ckpt");
        write_dir_atomically(&dir, |d| fs::write(d.join("a"), b"1").map_err(|e| CheckpointError::io(d, e)))
            .unwrap();
        let failed = write_dir_atomically(&dir, |d| {
            fs::write(d.join("a"), b"2").map_err(|e| CheckpointError::io(d, e))?;
            Err(CheckpointError::io(d, std::io::Error::other("crash")))
        });
        assert!(failed.is_err());
        assert_eq!(fs::read(dir.join("a")).unwrap(), b"1");
        write_dir_atomically(&dir, |d| fs::write(d.join("b"), b"3").map_err(|e| CheckpointError::io(d, e)))
            .unwrap();
        assert!(!dir.join("a").exists());
        assert_eq!(fs::read(dir.join("b")).unwrap(), b"3");
        assert_eq!(fs::read_dir(dir.parent().unwrap()).unwrap().count(), 1);
    }

    /// A tag of a process that has exited (and been reaped) on this host.
    fn dead_tag() -> String {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_time(pid);
        child.wait().unwrap();
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "pid {pid} was recycled already");
        format!("{}-{pid}-{}", hostname().unwrap(), start.unwrap_or(1))
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_cleaned_and_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step_00000002");
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let live = format!("{}-{}-{}", hostname().unwrap(), sleeper.id(), start_time(sleeper.id()).unwrap());
        let dead = dead_tag();
        // The same pid as a live process but another start time: the pid was recycled.
        let recycled =
            format!("{}-{}-{}", hostname().unwrap(), sleeper.id(), start_time(sleeper.id()).unwrap() + 1);
        let make = |name: String| {
            let p = root.path().join(name);
            fs::create_dir(&p).unwrap();
            fs::write(p.join("model.safetensors"), b"half").unwrap();
            p
        };
        let kept = [
            make(format!(".step_00000001.tmp-{live}")),
            make(format!(".step_00000001.tmp-{}", process_tag())),
            make(".step_00000001.tmp-otherhost-1-1".to_string()),
            make(format!(".step_00000001.tmp-{}", std::process::id())),
        ];
        let removed = [
            make(format!(".step_00000001.tmp-{dead}")),
            make(format!(".step_00000003.tmp-{recycled}")),
            make(format!(".step_00000001.old-{dead}")), // step_00000001 does not exist: put back
            make(format!(".step_00000002.tmp-{dead}")),
        ];
        let probe = root.path().join(format!(".write-probe.tmp-{dead}"));
        fs::write(&probe, b"probe").unwrap();
        write_dir_atomically(&dir, |d| fs::write(d.join("a"), b"1").map_err(|e| CheckpointError::io(d, e)))
            .unwrap();
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        for p in &kept {
            assert!(p.exists(), "{} belongs to a live process", p.display());
        }
        for p in removed.iter().chain([&probe]) {
            assert!(!p.exists(), "{} was left", p.display());
        }
        assert_eq!(fs::read(root.path().join("step_00000001/model.safetensors")).unwrap(), b"half");
        assert_eq!(fs::read(dir.join("a")).unwrap(), b"1");
        // The sleeper is dead now: the next save takes its temporary too.
        clean_stale_temporaries(root.path()).unwrap();
        assert!(!kept[0].exists());
        assert!(kept[1].exists() && kept[2].exists() && kept[3].exists());
    }

    #[test]
    fn a_full_disk_is_reported_as_such_and_replaces_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ck");
        write_dir_atomically(&dir, |d| fs::write(d.join("a"), b"1").map_err(|e| CheckpointError::io(d, e)))
            .unwrap();
        // /dev/full fails every write with ENOSPC, as a full file system does.
        let full = Path::new("/dev/full");
        let err = write_dir_atomically(&dir, |d| {
            fs::write(d.join("a"), b"2").map_err(|e| CheckpointError::io(d, e))?;
            let mut f = File::create(full).map_err(|e| CheckpointError::io(full, e))?;
            f.write_all(&[0u8; 1 << 16]).and_then(|()| f.sync_all()).map_err(|e| CheckpointError::io(full, e))
        })
        .unwrap_err();
        assert!(matches!(&err, CheckpointError::DiskFull { path } if path == full), "{err}");
        assert!(err.to_string().contains("no space left") && err.to_string().contains("/dev/full"), "{err}");
        assert_eq!(fs::read(dir.join("a")).unwrap(), b"1");
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1, "a temporary was left");
        let err = write_file_atomically(&root.path().join("f"), |w| {
            let mut f = File::create(full)?;
            f.write_all(&[0u8; 16])?;
            w.write_all(b"x")
        })
        .unwrap_err();
        assert!(err.is_disk_full(), "{err}");
    }

    #[test]
    fn unwritable_save_directories_are_found_before_writing() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        fs::write(&file, b"x").unwrap();
        assert!(matches!(check_writable_dir(&file), Err(CheckpointError::NotADirectory { .. })));
        let below_file = file.join("ck");
        let err = check_writable_dir(&below_file).unwrap_err();
        assert!(err.to_string().contains("ck"), "{err}");
        // procfs takes no new files, not even from root.
        assert!(check_writable_dir(Path::new("/proc/self/ck")).is_err());
        let fresh = root.path().join("a/b");
        check_writable_dir(&fresh).unwrap();
        assert_eq!(fs::read_dir(&fresh).unwrap().count(), 0, "the probe was left");
    }
}
