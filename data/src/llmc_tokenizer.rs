//! llm.c tokenizer files (`gpt2_tokenizer.bin`), which llm.c reads to print the text it samples:
//! a header of 256 little-endian u32 — `[0]` = 20240328, `[1]` = 2 (version), `[2]` = vocabulary
//! size, `[3]` = the end-of-text token, which llm.c feeds as the first token when it samples —
//! then, per token, one byte of length (1 to 255) and that many bytes.

use std::io::Write;
use std::path::Path;

use super::DataError;

/// First header word of an llm.c tokenizer file.
pub const TOKENIZER_MAGIC: u32 = 20240328;
/// The version written: with the end-of-text token id in the header.
pub const TOKENIZER_VERSION: u32 = 2;
const HEADER_BYTES: usize = 256 * 4;

/// Writes `tokens` (each token's bytes, in id order) with `eot` as the end-of-text token.
pub fn write_llmc_tokenizer(path: &Path, tokens: &[Vec<u8>], eot: u32) -> Result<(), DataError> {
    let invalid = |msg: String| Err(DataError::InvalidArgument(msg));
    if eot as usize >= tokens.len() {
        return invalid(format!("end-of-text token {eot} is not among the {} tokens", tokens.len()));
    }
    if let Some(id) = tokens.iter().position(|t| t.is_empty() || t.len() > 255) {
        return invalid(format!(
            "token {id} has {} bytes; an llm.c tokenizer file holds 1 to 255 per token",
            tokens[id].len()
        ));
    }
    let vocab = u32::try_from(tokens.len())
        .map_err(|_| DataError::InvalidArgument(format!("{} tokens is too many", tokens.len())))?;
    let mut header = [0u32; 256];
    header[..4].copy_from_slice(&[TOKENIZER_MAGIC, TOKENIZER_VERSION, vocab, eot]);
    let mut bytes: Vec<u8> = header.iter().flat_map(|w| w.to_le_bytes()).collect();
    for t in tokens {
        bytes.push(t.len() as u8);
        bytes.extend_from_slice(t);
    }
    let write = || std::fs::File::create(path)?.write_all(&bytes);
    write().map_err(|e| DataError::io(path, e))
}

/// Reads a version-2 tokenizer file: each token's bytes and the end-of-text token.
pub fn read_llmc_tokenizer(path: &Path) -> Result<(Vec<Vec<u8>>, u32), DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let bad = |what: String| {
        Err(DataError::InvalidArgument(format!("{} is not an llm.c tokenizer file: {what}", path.display())))
    };
    if bytes.len() < HEADER_BYTES {
        return bad(format!("{} bytes, shorter than the header", bytes.len()));
    }
    let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    if word(0) != TOKENIZER_MAGIC || word(1) != TOKENIZER_VERSION {
        return bad(format!(
            "header starts {} {}, expected {TOKENIZER_MAGIC} {TOKENIZER_VERSION}",
            word(0),
            word(1)
        ));
    }
    let (vocab, eot) = (word(2) as usize, word(3));
    let mut tokens = Vec::with_capacity(vocab);
    let mut at = HEADER_BYTES;
    for id in 0..vocab {
        let len = bytes.get(at).copied().map_or(0, usize::from);
        if len == 0 || at + 1 + len > bytes.len() {
            return bad(format!("token {id} at byte {at} is empty or runs past the end"));
        }
        tokens.push(bytes[at + 1..at + 1 + len].to_vec());
        at += 1 + len;
    }
    if at != bytes.len() || eot as usize >= vocab {
        return bad(format!("{} bytes follow the last token, end-of-text is {eot}", bytes.len() - at));
    }
    Ok((tokens, eot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_llmc_would_misread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tok.bin");
        let tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([b"hello".to_vec()]).collect();
        write_llmc_tokenizer(&path, &tokens, 256).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..16], [20240328u32, 2, 257, 256].map(u32::to_le_bytes).concat());
        assert_eq!(&bytes[1024..1026], [1, 0], "token 0: length 1, byte 0");
        assert_eq!(read_llmc_tokenizer(&path).unwrap(), (tokens.clone(), 256));

        assert!(write_llmc_tokenizer(&path, &tokens, 257).is_err());
        assert!(write_llmc_tokenizer(&path, &[vec![]], 0).is_err());
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(read_llmc_tokenizer(&path).is_err());
    }
}
