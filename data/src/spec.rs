//! `--data` as the command line gives it: `addition[:DIGITS]`, a UTF-8 text file, a directory
//! of llm.c token shards, or a comma-separated list of shard files.

use std::path::{Path, PathBuf};

use super::dataset::DEFAULT_VAL_FRACTION;
use super::{AdditionTask, DataError, Dataset, TokenizerKind};

/// Training lines the built-in addition data set generates.
pub const ADDITION_TRAIN_PROBLEMS: usize = 100_000;
/// Held-out lines it generates for the validation loss.
pub const ADDITION_VAL_PROBLEMS: usize = 2_000;
/// Operand width of `--data addition`.
pub const ADDITION_DEFAULT_DIGITS: u32 = 3;

/// What to train on, as a specification names it: `addition[:DIGITS]`, a text file, a
/// directory of llm.c shards, or a comma-separated list of `.bin` shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSpec {
    /// The built-in addition task.
    Addition {
        /// Digits per operand.
        digits: u32,
    },
    /// A UTF-8 text file, tokenized and split.
    Text {
        /// The file.
        path: PathBuf,
        /// The tokenizer (bytes by default).
        tokenizer: TokenizerKind,
    },
    /// llm.c token shards.
    Shards {
        /// The shards, sorted.
        paths: Vec<PathBuf>,
        /// The tokenizer they were written with (GPT-2 by default).
        tokenizer: TokenizerKind,
    },
}

impl DataSpec {
    /// Reads `--data` (and `--tokenizer` when given: `bytes` or `gpt2`; text files default to
    /// bytes, shards to gpt2).
    pub fn parse(spec: &str, tokenizer: Option<TokenizerKind>) -> Result<Self, DataError> {
        if let Some(rest) = spec.strip_prefix("addition") {
            let digits = match rest.strip_prefix(':') {
                None if rest.is_empty() => ADDITION_DEFAULT_DIGITS,
                Some(d) => d.parse().map_err(|_| DataError::InvalidSpec {
                    spec: spec.into(),
                    problem: "expected addition:DIGITS, e.g. addition:4".into(),
                })?,
                None => return Self::parse_path(spec, tokenizer),
            };
            if tokenizer.is_some_and(|t| t != TokenizerKind::Addition) {
                return Err(DataError::AdditionTokenizer);
            }
            AdditionTask::new(digits)?;
            return Ok(Self::Addition { digits });
        }
        Self::parse_path(spec, tokenizer)
    }

    fn parse_path(spec: &str, tokenizer: Option<TokenizerKind>) -> Result<Self, DataError> {
        let path = Path::new(spec);
        if path.is_dir() {
            let mut paths = Vec::new();
            for entry in std::fs::read_dir(path).map_err(|e| DataError::io(path, e))? {
                let p = entry.map_err(|e| DataError::io(path, e))?.path();
                if p.extension().is_some_and(|e| e == "bin") {
                    paths.push(p);
                }
            }
            if paths.is_empty() {
                return Err(DataError::NoShards(path.into()));
            }
            paths.sort();
            return Ok(Self::Shards { paths, tokenizer: tokenizer.unwrap_or(TokenizerKind::Gpt2) });
        }
        if spec.split(',').all(|p| p.ends_with(".bin")) {
            return Ok(Self::Shards {
                paths: spec.split(',').map(PathBuf::from).collect(),
                tokenizer: tokenizer.unwrap_or(TokenizerKind::Gpt2),
            });
        }
        if !path.is_file() {
            return Err(DataError::InvalidSpec {
                spec: spec.into(),
                problem: "no such file or directory (use `addition`, a text file, a directory of .bin \
                          shards, or a comma-separated list of .bin files)"
                    .into(),
            });
        }
        Ok(Self::Text { path: path.into(), tokenizer: tokenizer.unwrap_or(TokenizerKind::Bytes) })
    }

    /// The built-in task, if this is it.
    pub fn addition(&self) -> Option<AdditionTask> {
        match self {
            Self::Addition { digits } => AdditionTask::new(*digits).ok(),
            _ => None,
        }
    }

    /// The tokenizer the data uses.
    pub fn tokenizer(&self) -> TokenizerKind {
        match self {
            Self::Addition { .. } => TokenizerKind::Addition,
            Self::Text { tokenizer, .. } | Self::Shards { tokenizer, .. } => *tokenizer,
        }
    }

    /// Opens (or, for addition, generates with `seed` as sequences of `seq_len` tokens) the
    /// data set.
    pub fn open(&self, seed: u64, seq_len: usize) -> Result<Dataset, DataError> {
        match self {
            Self::Addition { digits } => Dataset::addition(
                AdditionTask::new(*digits)?,
                ADDITION_TRAIN_PROBLEMS,
                ADDITION_VAL_PROBLEMS,
                seed,
                seq_len,
            ),
            Self::Text { path, tokenizer } => Dataset::text_file(path, *tokenizer, DEFAULT_VAL_FRACTION),
            Self::Shards { paths, tokenizer } => Dataset::shards(paths, *tokenizer, DEFAULT_VAL_FRACTION),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_form() {
        assert_eq!(DataSpec::parse("addition", None).unwrap(), DataSpec::Addition { digits: 3 });
        assert_eq!(DataSpec::parse("addition:5", None).unwrap(), DataSpec::Addition { digits: 5 });
        assert!(DataSpec::parse("addition:x", None).is_err());
        assert!(DataSpec::parse("addition:12", None).is_err());
        assert!(DataSpec::parse("addition", Some(TokenizerKind::Gpt2)).is_err());

        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(DataSpec::parse(dir.path().to_str().unwrap(), None), Err(DataError::NoShards(_))));
        std::fs::write(dir.path().join("b.bin"), b"").unwrap();
        std::fs::write(dir.path().join("a.bin"), b"").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"hi").unwrap();
        let DataSpec::Shards { paths, tokenizer } =
            DataSpec::parse(dir.path().to_str().unwrap(), None).unwrap()
        else {
            panic!("a directory is a shard set")
        };
        assert_eq!(tokenizer, TokenizerKind::Gpt2);
        assert_eq!(paths.len(), 2);
        assert!(paths[0].ends_with("a.bin"));

        let txt = dir.path().join("notes.txt");
        assert_eq!(
            DataSpec::parse(txt.to_str().unwrap(), None).unwrap(),
            DataSpec::Text { path: txt.clone(), tokenizer: TokenizerKind::Bytes }
        );
        assert!(DataSpec::parse("no/such/file.txt", None).is_err());
        // An empty shard is rejected when opened, with the file named.
        let err = DataSpec::parse(dir.path().to_str().unwrap(), None).unwrap().open(0, 64).unwrap_err();
        assert!(err.to_string().contains("a.bin"), "{err}");
    }
}
