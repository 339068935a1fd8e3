//! Durable, all-or-nothing writes: write a temporary file or directory beside the target,
//! fsync it, rename it into place, fsync the parent directory.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use super::CheckpointError;

/// Flushes a directory's entries (new names, renames) to disk.
pub fn sync_dir(dir: &Path) -> Result<(), CheckpointError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| CheckpointError::io(dir, e))
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A sibling of `path` named `.NAME.SUFFIX-PID`, for temporary files.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "unnamed".into(), |n| n.to_string_lossy().into_owned());
    parent_of(path).join(format!(".{name}.{suffix}-{}", std::process::id()))
}

/// Writes a file through `write`, fsyncs it and renames it over `path`: readers see the old
/// file or the whole new one, never a part.
pub fn write_file_atomically<F>(path: &Path, write: F) -> Result<(), CheckpointError>
where
    F: FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
{
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
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| CheckpointError::io(path, e))
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
    use std::io::Write;

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
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn directory_is_replaced_whole() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("nested").join("ckpt");
        write_dir_atomically(&dir, |d| {
            fs::write(d.join("a"), b"1").map_err(|e| CheckpointError::io(d, e))
        })
        .unwrap();
        let failed = write_dir_atomically(&dir, |d| {
            fs::write(d.join("a"), b"2").map_err(|e| CheckpointError::io(d, e))?;
            Err(CheckpointError::io(d, std::io::Error::other("crash")))
        });
        assert!(failed.is_err());
        assert_eq!(fs::read(dir.join("a")).unwrap(), b"1");
        write_dir_atomically(&dir, |d| {
            fs::write(d.join("b"), b"3").map_err(|e| CheckpointError::io(d, e))
        })
        .unwrap();
        assert!(!dir.join("a").exists());
        assert_eq!(fs::read(dir.join("b")).unwrap(), b"3");
        assert_eq!(fs::read_dir(dir.parent().unwrap()).unwrap().count(), 1);
    }
}
