//! llm.c token shards: a header of 256 little-endian i32 (`[0]` = 20240520, `[1]` = version 1,
//! `[2]` = token count) followed by the tokens as little-endian u16.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::DataError;

/// First header word of an llm.c token shard.
pub const SHARD_MAGIC: i32 = 20240520;
/// The shard version read and written: u16 tokens.
pub const SHARD_VERSION: i32 = 1;
/// The header: 256 little-endian `i32` words (magic, version, token count, zeros).
pub const SHARD_HEADER_BYTES: u64 = 256 * 4;

/// What a shard's header promises, checked against the file's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardHeader {
    /// Tokens after the header.
    pub tokens: u64,
}

fn parse_header(path: &Path, bytes: &[u8], file_bytes: u64) -> Result<ShardHeader, DataError> {
    let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    if bytes.len() < SHARD_HEADER_BYTES as usize || word(0) != SHARD_MAGIC {
        let found = if bytes.len() >= 4 { word(0) } else { 0 };
        return Err(DataError::ShardMagic { path: path.into(), found });
    }
    if word(1) != SHARD_VERSION {
        return Err(DataError::ShardVersion { path: path.into(), found: word(1) });
    }
    let tokens = word(2).max(0) as u64;
    let expected_bytes = SHARD_HEADER_BYTES + 2 * tokens;
    if word(2) < 0 || expected_bytes != file_bytes {
        return Err(DataError::ShardSize {
            path: path.into(),
            header_tokens: tokens,
            expected_bytes,
            file_bytes,
        });
    }
    Ok(ShardHeader { tokens })
}

/// Reads and checks only the header (and the file's size).
pub fn read_shard_header(path: &Path) -> Result<ShardHeader, DataError> {
    let mut file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let file_bytes = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    let mut header = vec![0u8; SHARD_HEADER_BYTES.min(file_bytes) as usize];
    file.read_exact(&mut header).map_err(|e| DataError::io(path, e))?;
    parse_header(path, &header, file_bytes)
}

/// Reads and checks the header, then streams the tokens to check that every one is below
/// `vocab_size`, without holding the shard in memory: run over every shard at start, so that a
/// token from another tokenizer in a late shard is reported before training, not when the
/// loader reaches it. The scan takes the maximum of each block of tokens (a loop the compiler
/// vectorises) and looks for the position only in a block that has a token out of range.
pub fn check_shard_tokens(path: &Path, vocab_size: usize) -> Result<ShardHeader, DataError> {
    let header = read_shard_header(path)?;
    let mut file = File::open(path).map_err(|e| DataError::io(path, e))?;
    file.seek(SeekFrom::Start(SHARD_HEADER_BYTES)).map_err(|e| DataError::io(path, e))?;
    const BLOCK_TOKENS: usize = 1 << 20;
    let mut buf = vec![0u8; 2 * BLOCK_TOKENS];
    let mut done = 0u64;
    while done < header.tokens {
        let n = (header.tokens - done).min(BLOCK_TOKENS as u64) as usize;
        let bytes = &mut buf[..2 * n];
        file.read_exact(bytes).map_err(|e| DataError::io(path, e))?;
        let max = bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).fold(0u16, u16::max);
        if usize::from(max) >= vocab_size {
            let tokens: Vec<u16> = bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
            if let Err(DataError::TokenOutOfRange { what, position, token, vocab_size }) =
                check_vocab(&path.display().to_string(), &tokens, vocab_size)
            {
                let position = position + done as usize;
                return Err(DataError::TokenOutOfRange { what, position, token, vocab_size });
            }
        }
        done += n as u64;
    }
    Ok(header)
}

/// Reads a whole shard; every token must be below `vocab_size`.
pub fn read_shard(path: &Path, vocab_size: usize) -> Result<Vec<u16>, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let header = parse_header(path, &bytes, bytes.len() as u64)?;
    let tokens: Vec<u16> = bytes[SHARD_HEADER_BYTES as usize..]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    debug_assert_eq!(tokens.len() as u64, header.tokens);
    check_vocab(&path.display().to_string(), &tokens, vocab_size)?;
    Ok(tokens)
}

pub(crate) fn check_vocab(what: &str, tokens: &[u16], vocab_size: usize) -> Result<(), DataError> {
    match tokens.iter().position(|&t| usize::from(t) >= vocab_size) {
        Some(position) => Err(DataError::TokenOutOfRange {
            what: what.to_owned(),
            position,
            token: u32::from(tokens[position]),
            vocab_size,
        }),
        None => Ok(()),
    }
}

/// Writes `tokens` as a version-1 shard (written whole, then renamed into place).
pub fn write_shard(path: &Path, tokens: &[u16]) -> Result<(), DataError> {
    let count = i32::try_from(tokens.len()).map_err(|_| {
        DataError::InvalidArgument(format!(
            "a token shard holds at most {} tokens (got {}); split the data",
            i32::MAX,
            tokens.len()
        ))
    })?;
    let mut bytes = Vec::with_capacity(SHARD_HEADER_BYTES as usize + 2 * tokens.len());
    let mut header = [0i32; 256];
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = count;
    for w in header {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    for &t in tokens {
        bytes.extend_from_slice(&t.to_le_bytes());
    }
    let tmp = path.with_extension("bin.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| DataError::io(path, e))
}

/// Splits a token stream into llm.c-style shards in `dir`: `{prefix}_val_000000.bin` holds the
/// first `val_tokens` tokens, then `{prefix}_train_000001.bin`, ... hold at most
/// `tokens_per_shard` each. Returns the paths written, validation shard first.
pub fn write_shards(
    dir: &Path,
    prefix: &str,
    tokens: &[u16],
    val_tokens: usize,
    tokens_per_shard: usize,
) -> Result<Vec<PathBuf>, DataError> {
    if val_tokens == 0 || val_tokens >= tokens.len() || tokens_per_shard == 0 {
        return Err(DataError::InvalidArgument(format!(
            "cannot shard {} tokens with {val_tokens} validation tokens and {tokens_per_shard} tokens per shard",
            tokens.len()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    let (val, train) = tokens.split_at(val_tokens);
    let mut paths = vec![dir.join(format!("{prefix}_val_000000.bin"))];
    write_shard(&paths[0], val)?;
    for (i, chunk) in train.chunks(tokens_per_shard).enumerate() {
        let path = dir.join(format!("{prefix}_train_{:06}.bin", i + 1));
        write_shard(&path, chunk)?;
        paths.push(path);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SplitMix64;

    fn tokens(seed: u64, n: usize, vocab: u64) -> Vec<u16> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| rng.below(vocab) as u16).collect()
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data_train_000000.bin");
        let toks = tokens(11, 1000, 50257);
        write_shard(&path, &toks).unwrap();
        assert_eq!(read_shard_header(&path).unwrap().tokens, 1000);
        assert_eq!(read_shard(&path, 50257).unwrap(), toks);
    }

    #[test]
    fn a_stream_becomes_a_val_shard_and_train_shards() {
        let dir = tempfile::tempdir().unwrap();
        let toks = tokens(13, 2500, 256);
        let paths = write_shards(dir.path(), "tiny", &toks, 300, 1000).unwrap();
        let names: Vec<String> =
            paths.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(
            names,
            [
                "tiny_val_000000.bin",
                "tiny_train_000001.bin",
                "tiny_train_000002.bin",
                "tiny_train_000003.bin"
            ]
        );
        let back: Vec<u16> = paths.iter().flat_map(|p| read_shard(p, 256).unwrap()).collect();
        assert_eq!(back, toks);
        assert!(write_shards(dir.path(), "x", &toks, 0, 1000).is_err());
    }

    #[test]
    fn corrupt_shards_are_named_and_explained() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.bin");
        write_shard(&path, &tokens(12, 100, 300)).unwrap();
        let good = std::fs::read(&path).unwrap();

        std::fs::write(&path, &good[..good.len() - 3]).unwrap();
        let err = read_shard(&path, 300).unwrap_err();
        assert!(
            matches!(err, DataError::ShardSize { file_bytes, .. } if file_bytes == good.len() as u64 - 3)
        );
        assert!(err.to_string().contains("truncated"), "{err}");

        let mut bad = good.clone();
        bad[0] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(read_shard(&path, 300), Err(DataError::ShardMagic { .. })));

        let mut bad = good.clone();
        bad[4] = 2;
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(read_shard(&path, 300), Err(DataError::ShardVersion { found: 2, .. })));

        std::fs::write(&path, &good[..10]).unwrap();
        assert!(matches!(read_shard_header(&path), Err(DataError::ShardMagic { .. })));

        std::fs::write(&path, &good).unwrap();
        check_shard_tokens(&path, 300).unwrap();
        let err = read_shard(&path, 200).unwrap_err();
        assert!(matches!(err, DataError::TokenOutOfRange { vocab_size: 200, .. }), "{err}");

        let missing = dir.path().join("missing.bin");
        assert!(matches!(read_shard(&missing, 300), Err(DataError::Io { .. })));
    }

    #[test]
    fn the_token_scan_names_the_shard_and_offset_of_the_first_bad_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late_train_000007.bin");
        // Past the first block of the scan, so that the offset adds the blocks before it.
        let n = (1 << 20) + 5000;
        let mut toks = tokens(14, n, 50257);
        for (at, bad) in [((1 << 20) + 1234, 50300u16), ((1 << 20) + 4000, 65535)] {
            toks[at] = bad;
        }
        write_shard(&path, &toks).unwrap();
        let err = check_shard_tokens(&path, 50257).unwrap_err();
        assert!(
            matches!(&err, DataError::TokenOutOfRange { position, token: 50300, .. } if *position == (1 << 20) + 1234),
            "{err}"
        );
        assert!(err.to_string().contains("late_train_000007.bin"), "{err}");
        let mut early = toks.clone();
        early[3] = 50257;
        write_shard(&path, &early).unwrap();
        let err = check_shard_tokens(&path, 50257).unwrap_err();
        assert!(matches!(err, DataError::TokenOutOfRange { position: 3, token: 50257, .. }), "{err}");
        assert_eq!(check_shard_tokens(&path, 65536).unwrap().tokens, n as u64);
    }
}
