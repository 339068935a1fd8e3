//! Training metrics as JSON Lines: one object per iteration, written and flushed as it happens,
//! so a crashed run's log is complete up to its last iteration.
//!
//! ```text
//! {"iter":10,"loss":2.3456,"lr":0.0006,"grad_norm":1.25,"tokens_per_s":51234.5}
//! {"iter":20,"loss":2.1,"lr":0.0006,"grad_norm":1.1,"tokens_per_s":51800.0,"val_loss":2.2}
//! ```
//! Non-finite numbers (a diverged loss) are written as `null` and read back as NaN.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checkpoint::{write_file_atomically, CheckpointError};

/// One line of the metrics file: what one training iteration measured (NaN, written as
/// `null`, where a value was not computed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterMetrics {
    /// The iteration, from 1.
    pub iter: u64,
    #[serde(with = "nan_as_null")]
    /// Mean training loss of the iteration's batch, nats per token.
    pub loss: f32,
    #[serde(with = "nan_as_null")]
    /// Learning rate the update used.
    pub lr: f32,
    #[serde(with = "nan_as_null")]
    /// Global gradient norm before clipping.
    pub grad_norm: f32,
    /// Training throughput of the iteration, tokens per second (measured wall time).
    pub tokens_per_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Validation loss, on iterations that evaluated it.
    pub val_loss: Option<f32>,
    /// fp16: the loss scale of the iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<f32>,
    /// fp16: whether the iteration's update was skipped for an overflow.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f32(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        Ok(Option::<f32>::deserialize(d)?.unwrap_or(f32::NAN))
    }
}

/// Why a metrics file could not be read, appended to or rewritten.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The file could not be read or written.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A line that is not a metrics record.
    #[error("{path}:{line}: not a metrics record ({cause})")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The JSON error.
        cause: serde_json::Error,
    },
    /// The atomic rewrite (truncating to a resumed step) failed.
    #[error(transparent)]
    Rewrite(#[from] CheckpointError),
}

/// Appends one JSON line per iteration to a file.
pub struct MetricsWriter {
    path: PathBuf,
    file: File,
}

impl MetricsWriter {
    /// Starts a new log (an existing file is truncated).
    pub fn create(path: &Path) -> Result<Self, MetricsError> {
        let file =
            File::create(path).map_err(|source| MetricsError::Io { path: path.into(), cause: source })?;
        Ok(Self { path: path.into(), file })
    }

    /// Continues the log of a run resumed after iteration `last_iter`: records past it (written
    /// after the checkpoint, before a crash) are dropped. Returns the records kept, e.g. for the
    /// loss plot.
    pub fn resume(path: &Path, last_iter: u64) -> Result<(Self, Vec<IterMetrics>), MetricsError> {
        let mut kept = if path.exists() { read_metrics(path)? } else { Vec::new() };
        kept.retain(|m| m.iter <= last_iter);
        let mut text = Vec::new();
        for m in &kept {
            text.extend(to_line(m));
        }
        write_file_atomically(path, |w| w.write_all(&text))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|source| MetricsError::Io { path: path.into(), cause: source })?;
        Ok((Self { path: path.into(), file }, kept))
    }

    /// Writes one record as one line, in one write, and flushes it.
    pub fn write(&mut self, m: &IterMetrics) -> Result<(), MetricsError> {
        self.file
            .write_all(&to_line(m))
            .and_then(|()| self.file.flush())
            .map_err(|source| MetricsError::Io { path: self.path.clone(), cause: source })
    }
}

fn to_line(m: &IterMetrics) -> Vec<u8> {
    let mut line = serde_json::to_vec(m).expect("metrics records always serialise");
    line.push(b'\n');
    line
}

/// Reads a metrics log. A last line cut short by a crash is ignored; any other bad line is an
/// error naming it.
pub fn read_metrics(path: &Path) -> Result<Vec<IterMetrics>, MetricsError> {
    let io = |source| MetricsError::Io { path: path.into(), cause: source };
    let lines: Vec<String> =
        BufReader::new(File::open(path).map_err(io)?).lines().collect::<Result<_, _>>().map_err(io)?;
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(m) => out.push(m),
            Err(e) if i + 1 == lines.len() && e.is_eof() => break,
            Err(source) => return Err(MetricsError::Parse { path: path.into(), line: i + 1, cause: source }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_data::SplitMix64;

    fn records(seed: u64, n: u64) -> Vec<IterMetrics> {
        let mut rng = SplitMix64::new(seed);
        (1..=n)
            .map(|iter| IterMetrics {
                iter,
                loss: 4.0 * rng.next_f32() + 0.1,
                lr: 6e-4 * rng.next_f32(),
                grad_norm: rng.next_f32(),
                tokens_per_s: 1e5 * f64::from(rng.next_f32()),
                val_loss: (iter % 5 == 0).then(|| rng.next_f32()),
                loss_scale: (iter % 3 == 0).then_some(65536.0),
                skipped: iter % 7 == 0,
            })
            .collect()
    }

    #[test]
    fn lines_are_written_as_they_happen_and_read_back() {
        let seed = 0x3e7;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let all = records(seed, 12);
        let mut w = MetricsWriter::create(&path).unwrap();
        for (i, m) in all.iter().enumerate() {
            w.write(m).unwrap();
            // Visible to a reader right away.
            assert_eq!(read_metrics(&path).unwrap().len(), i + 1);
        }
        assert_eq!(read_metrics(&path).unwrap(), all, "seed {seed}");
        let text = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        for key in ["iter", "loss", "lr", "grad_norm", "tokens_per_s"] {
            assert!(first.get(key).is_some(), "missing {key}");
        }
        assert!(first.get("val_loss").is_none());
        assert!(text.lines().nth(4).unwrap().contains("\"val_loss\""));
    }

    #[test]
    fn diverged_losses_survive_as_nan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        let mut m = records(1, 1).remove(0);
        m.loss = f32::NAN;
        m.grad_norm = f32::INFINITY;
        MetricsWriter::create(&path).unwrap().write(&m).unwrap();
        let back = read_metrics(&path).unwrap().remove(0);
        assert!(back.loss.is_nan() && back.grad_norm.is_nan());
        assert_eq!(back.lr, m.lr);
    }

    #[test]
    fn resume_drops_iterations_past_the_checkpoint_and_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        let all = records(2, 10);
        let mut w = MetricsWriter::create(&path).unwrap();
        for m in &all {
            w.write(m).unwrap();
        }
        drop(w);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"iter\":11,\"lo").unwrap();
        drop(f);
        let (mut w, kept) = MetricsWriter::resume(&path, 6).unwrap();
        assert_eq!(kept, all[..6]);
        w.write(&all[9]).unwrap();
        let back = read_metrics(&path).unwrap();
        assert_eq!(back.len(), 7);
        assert_eq!(back[6], all[9]);

        std::fs::write(&path, "{\"iter\":1}\nnot json\n").unwrap();
        let err = read_metrics(&path).unwrap_err();
        assert!(matches!(err, MetricsError::Parse { line: 1, .. }), "{err}");
    }
}
