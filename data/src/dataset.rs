//! Token sets for training and validation, from any of the supported sources.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::shard::{check_shard_tokens, check_vocab, read_shard};
use super::{AdditionTask, DataError, Tokenizer, TokenizerKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// Which split of a data set.
pub enum Split {
    /// What the model trains on.
    Train = 0,
    /// What it is evaluated on.
    Validation = 1,
}

/// Where a part's tokens live: already in memory, or in a shard read when the loader reaches it.
#[derive(Clone, Debug)]
enum PartSource {
    Memory(Arc<Vec<u16>>),
    Shard(PathBuf),
}

/// A contiguous run of tokens; sample windows never cross from one part into the next.
#[derive(Clone, Debug)]
struct Part {
    source: PartSource,
    range: Range<usize>,
}

/// The tokens of one split: a list of parts in a fixed order.
#[derive(Clone, Debug)]
pub struct TokenSet {
    name: String,
    parts: Vec<Part>,
    vocab_size: usize,
}

impl TokenSet {
    /// The shard files of `self` that `other` also reads from (a validation split carved out
    /// of a training shard).
    pub fn shared_shards(&self, other: &TokenSet) -> Vec<PathBuf> {
        let files = |set: &TokenSet| -> Vec<PathBuf> {
            set.parts
                .iter()
                .filter_map(|p| match &p.source {
                    PartSource::Shard(path) => Some(path.clone()),
                    PartSource::Memory(_) => None,
                })
                .collect()
        };
        let theirs = files(other);
        let mut shared: Vec<PathBuf> = files(self).into_iter().filter(|f| theirs.contains(f)).collect();
        shared.dedup();
        shared
    }

    /// An in-memory set; every token must be below `vocab_size`.
    pub fn from_tokens(
        name: impl Into<String>,
        tokens: Vec<u16>,
        vocab_size: usize,
    ) -> Result<Self, DataError> {
        let name = name.into();
        check_vocab(&name, &tokens, vocab_size)?;
        let range = 0..tokens.len();
        Ok(Self {
            name,
            parts: vec![Part { source: PartSource::Memory(Arc::new(tokens)), range }],
            vocab_size,
        })
    }

    /// An in-memory set of independent sequences: `tokens` cut into consecutive records of
    /// `record_len` tokens, each its own part. A loader with `seq_len = record_len - 1` then
    /// serves every record as one whole window, never a window straddling two records.
    pub fn from_records(
        name: impl Into<String>,
        tokens: Vec<u16>,
        record_len: usize,
        vocab_size: usize,
    ) -> Result<Self, DataError> {
        let name = name.into();
        if record_len < 2 || tokens.is_empty() || tokens.len() % record_len != 0 {
            return Err(DataError::InvalidArgument(format!(
                "{name}: {} tokens do not make whole records of {record_len} (at least 2) tokens",
                tokens.len()
            )));
        }
        check_vocab(&name, &tokens, vocab_size)?;
        let all = Arc::new(tokens);
        let parts = (0..all.len() / record_len)
            .map(|i| Part {
                source: PartSource::Memory(all.clone()),
                range: i * record_len..(i + 1) * record_len,
            })
            .collect();
        Ok(Self { name, parts, vocab_size })
    }

    /// The set's name in messages (a path, `addition`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its tokenizer's vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Parts in the set (shards, or records of a generated task).
    pub fn num_parts(&self) -> usize {
        self.parts.len()
    }

    /// Tokens in part `i`.
    pub fn part_len(&self, i: usize) -> usize {
        self.parts[i].range.len()
    }

    /// Token range of part `i` inside its source.
    pub(crate) fn part_range(&self, i: usize) -> Range<usize> {
        self.parts[i].range.clone()
    }

    /// Bytes a loader holds for this set beyond what is in memory already: the largest shard
    /// it reads (a loader keeps one part's source loaded, and reads a shard whole), 0 for
    /// in-memory sets.
    pub fn resident_shard_bytes(&self) -> u64 {
        let shard_tokens = |p: &Part| match p.source {
            PartSource::Shard(_) => p.range.end as u64,
            PartSource::Memory(_) => 0,
        };
        self.parts.iter().map(shard_tokens).max().unwrap_or(0).saturating_mul(2)
    }

    /// Tokens over all parts.
    pub fn total_tokens(&self) -> usize {
        self.parts.iter().map(|p| p.range.len()).sum()
    }

    /// The tokens of part `i`: the whole source (shared) and the part's range inside it.
    /// Shards are read (and checked against the vocabulary) on every call.
    pub(crate) fn load_part(&self, i: usize) -> Result<(Arc<Vec<u16>>, Range<usize>), DataError> {
        let part = &self.parts[i];
        let tokens = match &part.source {
            PartSource::Memory(tokens) => tokens.clone(),
            PartSource::Shard(path) => Arc::new(read_shard(path, self.vocab_size)?),
        };
        if part.range.end > tokens.len() {
            return Err(DataError::InvalidArgument(format!(
                "{}: part {i} changed size since the data set was opened",
                self.name
            )));
        }
        Ok((tokens, part.range.clone()))
    }

    /// Whether part `i` is the same source as part `j` (a loader can keep it loaded).
    pub(crate) fn same_source(&self, i: usize, j: usize) -> bool {
        match (&self.parts[i].source, &self.parts[j].source) {
            (PartSource::Memory(a), PartSource::Memory(b)) => Arc::ptr_eq(a, b),
            (PartSource::Shard(a), PartSource::Shard(b)) => a == b,
            _ => false,
        }
    }
}

/// A training set and its validation set, with the tokenizer that made them.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// The tokenizer the tokens come from.
    pub tokenizer: TokenizerKind,
    /// The training split.
    pub train: TokenSet,
    /// The validation split.
    pub val: TokenSet,
    /// Set for the built-in addition task, whose skill [`AdditionTask::score`] measures.
    pub addition: Option<AdditionTask>,
}

/// Share of a single text file or shard held out for validation.
pub const DEFAULT_VAL_FRACTION: f64 = 0.1;

/// Seed of the addition task's validation stream: fixed, so validation losses compare across
/// training seeds.
const ADDITION_VAL_SEED: u64 = 0x00ad_d7e5_7000;

impl Dataset {
    /// The tokenizer's vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    /// The split `split`.
    pub fn split(&self, split: Split) -> &TokenSet {
        match split {
            Split::Train => &self.train,
            Split::Validation => &self.val,
        }
    }

    /// The addition task: about `train_problems` training problems drawn with `seed`, and
    /// about `val_problems` held-out ones, as independent sequences of `seq_len` tokens
    /// ([`AdditionTask::generate_sequences`]) that a loader with that `seq_len` serves whole.
    pub fn addition(
        task: AdditionTask,
        train_problems: usize,
        val_problems: usize,
        seed: u64,
        seq_len: usize,
    ) -> Result<Self, DataError> {
        let vocab = task.vocab_size();
        let per_sequence = task.problems_per_sequence(seq_len);
        let make = |name: &str, split, problems: usize, seed| {
            let sequences = problems.div_ceil(per_sequence);
            let tokens = task.generate_sequences(split, sequences, seq_len, seed);
            TokenSet::from_records(name, tokens, seq_len + 1, vocab)
        };
        Ok(Self {
            tokenizer: TokenizerKind::Addition,
            train: make("addition (train)", Split::Train, train_problems, seed)?,
            val: make("addition (held out)", Split::Validation, val_problems, ADDITION_VAL_SEED)?,
            addition: Some(task),
        })
    }

    /// One token stream; its last `val_fraction` is the validation set.
    pub fn from_tokens(
        name: &str,
        tokenizer: TokenizerKind,
        tokens: Vec<u16>,
        val_fraction: f64,
    ) -> Result<Self, DataError> {
        check_fraction(val_fraction)?;
        let vocab = tokenizer.vocab_size();
        check_vocab(name, &tokens, vocab)?;
        let cut = split_point(tokens.len(), val_fraction);
        let all = Arc::new(tokens);
        let set = |suffix: &str, range: Range<usize>| TokenSet {
            name: format!("{name} ({suffix})"),
            parts: vec![Part { source: PartSource::Memory(all.clone()), range }],
            vocab_size: vocab,
        };
        Ok(Self {
            tokenizer,
            train: set("train", 0..cut),
            val: set("validation", cut..all.len()),
            addition: None,
        })
    }

    /// A UTF-8 text file, tokenized whole; its last `val_fraction` is the validation set.
    pub fn text_file(path: &Path, tokenizer: TokenizerKind, val_fraction: f64) -> Result<Self, DataError> {
        let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            DataError::InvalidArgument(format!(
                "{} is not UTF-8 text (invalid byte at offset {}); pass llm.c token shards (.bin) for binary data",
                path.display(),
                e.utf8_error().valid_up_to()
            ))
        })?;
        let ids = Tokenizer::new(tokenizer)?.encode(&text)?;
        let tokens = ids
            .into_iter()
            .map(|t| u16::try_from(t).expect("all supported vocabularies fit in u16"))
            .collect();
        Self::from_tokens(&path.display().to_string(), tokenizer, tokens, val_fraction)
    }

    /// llm.c token shards. Files whose name contains `_val_` or ends in `_val.bin` (llm.c's
    /// two naming schemes) form the validation set; when there are none, the last
    /// `val_fraction` of the last training shard is held out instead.
    /// Headers, sizes and every token's range are checked now (and the tokens again when the
    /// loader reads each shard).
    pub fn shards(paths: &[PathBuf], tokenizer: TokenizerKind, val_fraction: f64) -> Result<Self, DataError> {
        check_fraction(val_fraction)?;
        let vocab = tokenizer.vocab_size();
        let mut train = Vec::new();
        let mut val = Vec::new();
        for path in paths {
            let header = check_shard_tokens(path, vocab)?;
            let part = Part { source: PartSource::Shard(path.clone()), range: 0..header.tokens as usize };
            let is_val = path.file_name().is_some_and(|n| {
                let name = n.to_string_lossy();
                name.contains("_val_") || name.ends_with("_val.bin")
            });
            if is_val {
                val.push(part);
            } else {
                train.push(part);
            }
        }
        let Some(last) = train.last_mut() else {
            return Err(DataError::InvalidArgument(format!(
                "no training shards among {} file(s): every name marks a validation shard (`_val_` or `_val.bin`)",
                paths.len()
            )));
        };
        if val.is_empty() {
            let cut = split_point(last.range.len(), val_fraction);
            val.push(Part { source: last.source.clone(), range: cut..last.range.end });
            last.range.end = cut;
        }
        let name = |what: &str, n: usize| format!("{n} {what} shard(s)");
        Ok(Self {
            tokenizer,
            train: TokenSet { name: name("training", train.len()), parts: train, vocab_size: vocab },
            val: TokenSet { name: name("validation", val.len()), parts: val, vocab_size: vocab },
            addition: None,
        })
    }
}

fn check_fraction(val_fraction: f64) -> Result<(), DataError> {
    if (0.0..1.0).contains(&val_fraction) && val_fraction > 0.0 {
        Ok(())
    } else {
        Err(DataError::InvalidArgument(format!(
            "the validation fraction must be in (0, 1) (got {val_fraction})"
        )))
    }
}

fn split_point(len: usize, val_fraction: f64) -> usize {
    len - ((len as f64 * val_fraction).round() as usize).min(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write_shard;

    #[test]
    fn text_file_splits_off_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        let text = "abcdefghij".repeat(10);
        std::fs::write(&path, &text).unwrap();
        let ds = Dataset::text_file(&path, TokenizerKind::Bytes, 0.1).unwrap();
        assert_eq!(ds.train.total_tokens(), 90);
        assert_eq!(ds.val.total_tokens(), 10);
        let (tokens, range) = ds.val.load_part(0).unwrap();
        assert_eq!(
            &tokens[range],
            &text.as_bytes()[90..].iter().map(|&b| u16::from(b)).collect::<Vec<_>>()[..]
        );

        std::fs::write(&path, [0x61, 0xff, 0x62]).unwrap();
        let err = Dataset::text_file(&path, TokenizerKind::Bytes, 0.1).unwrap_err();
        assert!(err.to_string().contains("offset 1"), "{err}");
        assert!(Dataset::text_file(&dir.path().join("nope.txt"), TokenizerKind::Bytes, 0.1).is_err());
    }

    #[test]
    fn shards_use_val_files_or_hold_out_a_tail() {
        let dir = tempfile::tempdir().unwrap();
        let tr: Vec<u16> = (0..500).map(|i| (i * 7 % 256) as u16).collect();
        let va: Vec<u16> = (0..100).map(|i| (i * 3 % 256) as u16).collect();
        let train_path = dir.path().join("x_train_000001.bin");
        let val_path = dir.path().join("x_val_000000.bin");
        write_shard(&train_path, &tr).unwrap();
        write_shard(&val_path, &va).unwrap();

        let ds = Dataset::shards(&[val_path.clone(), train_path.clone()], TokenizerKind::Bytes, 0.1).unwrap();
        assert_eq!(ds.train.total_tokens(), 500);
        assert_eq!(ds.val.total_tokens(), 100);

        let single_val = dir.path().join("x_val.bin");
        write_shard(&single_val, &va).unwrap();
        let ds = Dataset::shards(&[train_path.clone(), single_val], TokenizerKind::Bytes, 0.1).unwrap();
        assert_eq!((ds.train.total_tokens(), ds.val.total_tokens()), (500, 100));

        assert!(ds.val.shared_shards(&ds.train).is_empty(), "a validation file shares nothing");
        assert_eq!((ds.train.resident_shard_bytes(), ds.val.resident_shard_bytes()), (1000, 200));
        let ds = Dataset::shards(std::slice::from_ref(&train_path), TokenizerKind::Bytes, 0.1).unwrap();
        assert_eq!(
            ds.val.shared_shards(&ds.train),
            std::slice::from_ref(&train_path),
            "carved out of the only shard"
        );
        assert_eq!((ds.train.resident_shard_bytes(), ds.val.resident_shard_bytes()), (900, 1000));
        assert_eq!(ds.train.total_tokens(), 450);
        assert_eq!(ds.val.total_tokens(), 50);
        let (tokens, range) = ds.val.load_part(0).unwrap();
        assert_eq!(&tokens[range], &tr[450..]);

        assert!(Dataset::shards(std::slice::from_ref(&val_path), TokenizerKind::Bytes, 0.1).is_err());
        // A token past the vocabulary in the last shard is found when the set is opened.
        let late = dir.path().join("x_train_000002.bin");
        let mut bad = tr.clone();
        bad[321] = 256;
        write_shard(&late, &bad).unwrap();
        let err = Dataset::shards(&[val_path.clone(), train_path.clone(), late], TokenizerKind::Bytes, 0.1)
            .unwrap_err();
        assert!(matches!(err, DataError::TokenOutOfRange { position: 321, token: 256, .. }), "{err}");
        assert!(err.to_string().contains("x_train_000002.bin"), "{err}");
        assert!(Dataset::shards(&[train_path], TokenizerKind::Bytes, 1.5).is_err());
    }

    #[test]
    fn addition_windows_are_whole_sequences() {
        use crate::addition::NEWLINE;
        use crate::DataLoader;
        let seed = 0xa11;
        let task = AdditionTask::new(3).unwrap();
        for seq_len in [13, 30] {
            let data = Dataset::addition(task, 400, 50, seed, seq_len).unwrap();
            let per_sequence = task.problems_per_sequence(seq_len);
            assert_eq!(data.train.num_parts(), 400usize.div_ceil(per_sequence));
            assert_eq!(data.val.total_tokens(), 50usize.div_ceil(per_sequence) * (seq_len + 1));
            let (train, _) = data.train.load_part(0).unwrap();
            let records: std::collections::HashSet<&[u16]> = train.chunks(seq_len + 1).collect();
            let mut loader = DataLoader::new(data.train.clone(), 7, seq_len, seed, true).unwrap();
            // Past an epoch, so that a second epoch's order is drawn too.
            for _ in 0..2 * data.train.num_parts() / 7 + 1 {
                let batch = loader.next_batch().unwrap();
                for (inputs, targets) in batch.inputs.chunks(seq_len).zip(batch.targets.chunks(seq_len)) {
                    assert_eq!(inputs[0], NEWLINE, "seed {seed}: a window starts mid-sequence");
                    let mut window: Vec<u16> = inputs.iter().map(|&t| t as u16).collect();
                    window.push(*targets.last().unwrap() as u16);
                    assert!(records.contains(&window[..]), "seed {seed}: {window:?} is no sequence");
                }
            }
        }
        // A sequence needs one input and one target at least.
        assert!(Dataset::addition(task, 400, 50, seed, 0).is_err());
        assert!(TokenSet::from_records("r", vec![1; 10], 3, 13).is_err());
        assert_eq!(TokenSet::from_records("r", vec![1; 9], 3, 13).unwrap().num_parts(), 3);
    }

    #[test]
    fn out_of_vocabulary_tokens_are_rejected() {
        let err = Dataset::from_tokens("t", TokenizerKind::Addition, vec![1, 2, 13], 0.1).unwrap_err();
        assert!(matches!(err, DataError::TokenOutOfRange { position: 2, token: 13, .. }), "{err}");
    }
}
