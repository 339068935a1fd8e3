//! Text <-> token ids for the three vocabularies Trident trains on.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::addition::ADDITION_ALPHABET;
use super::DataError;

/// GPT-2's byte-pair encoder, from `tiktoken-rs` (the `tokenizer` feature).
#[cfg(feature = "tokenizer")]
type Bpe = tiktoken_rs::CoreBPE;

/// Without the `tokenizer` feature there is no byte-pair encoder: a type with no values, so the
/// GPT-2 arms below are never reached.
#[cfg(not(feature = "tokenizer"))]
#[derive(Debug)]
enum Bpe {}

#[cfg(not(feature = "tokenizer"))]
impl Bpe {
    fn encode_with_special_tokens(&self, _text: &str) -> Vec<u32> {
        match *self {}
    }

    fn decode_bytes(&self, _tokens: &[u32]) -> Result<Vec<u8>, std::convert::Infallible> {
        match *self {}
    }
}

/// GPT-2's BPE tables (`r50k_base`, built into `tiktoken-rs`).
#[cfg(feature = "tokenizer")]
fn gpt2_bpe() -> Result<Bpe, DataError> {
    tiktoken_rs::r50k_base().map_err(|e| DataError::Bpe(e.to_string()))
}

/// Without the `tokenizer` feature: the error that names it.
#[cfg(not(feature = "tokenizer"))]
fn gpt2_bpe() -> Result<Bpe, DataError> {
    Err(DataError::MissingFeature { feature: "tokenizer", what: "the GPT-2 BPE tokenizer" })
}

/// Which tokenizer produced a data set; stored in checkpoints so sampling decodes the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerKind {
    /// The addition task's 13 characters `0-9 + = \n`.
    Addition,
    /// One token per UTF-8 byte (vocabulary 256).
    Bytes,
    /// GPT-2's byte-level BPE (`r50k_base`, vocabulary 50257; ranks embedded in the binary).
    Gpt2,
}

impl TokenizerKind {
    /// Tokens in the vocabulary: 13 (addition), 256 (bytes), 50257 (GPT-2).
    pub fn vocab_size(self) -> usize {
        match self {
            Self::Addition => ADDITION_ALPHABET.len(),
            Self::Bytes => 256,
            Self::Gpt2 => GPT2_VOCAB_SIZE,
        }
    }

    /// The name as the command line and checkpoints spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Addition => "addition",
            Self::Bytes => "bytes",
            Self::Gpt2 => "gpt2",
        }
    }

    /// Parses `bytes` or `gpt2` (the names `--tokenizer` accepts).
    pub fn parse(name: &str) -> Result<Self, DataError> {
        match name {
            "addition" => Ok(Self::Addition),
            "bytes" | "byte" => Ok(Self::Bytes),
            "gpt2" | "r50k_base" => Ok(Self::Gpt2),
            other => Err(DataError::InvalidArgument(format!(
                "unknown tokenizer {other:?}: use bytes, gpt2 or addition"
            ))),
        }
    }
}

impl fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// GPT-2's BPE vocabulary (`r50k_base`).
pub const GPT2_VOCAB_SIZE: usize = 50257;
/// GPT-2's `<|endoftext|>`.
pub const GPT2_EOT: u32 = 50256;

/// A ready-to-use tokenizer.
#[derive(Clone)]
pub struct Tokenizer {
    kind: TokenizerKind,
    bpe: Option<Arc<Bpe>>,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer").field("kind", &self.kind).finish()
    }
}

impl Tokenizer {
    /// A tokenizer of `kind`; for GPT-2 it loads the BPE tables ([`DataError::Bpe`] where
    /// that fails, [`DataError::MissingFeature`] where Trident was built without its
    /// `tokenizer` feature).
    pub fn new(kind: TokenizerKind) -> Result<Self, DataError> {
        let bpe = match kind {
            TokenizerKind::Gpt2 => Some(Arc::new(gpt2_bpe()?)),
            _ => None,
        };
        Ok(Self { kind, bpe })
    }

    /// Which tokenizer this is.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    /// Tokens in its vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.kind.vocab_size()
    }

    /// The token that separates documents, where the vocabulary has one.
    pub fn end_of_text(&self) -> Option<u32> {
        match self.kind {
            TokenizerKind::Gpt2 => Some(GPT2_EOT),
            TokenizerKind::Addition | TokenizerKind::Bytes => None,
        }
    }

    /// Encodes `text`; `<|endoftext|>` in GPT-2 text is read as the special token.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DataError> {
        match (self.kind, &self.bpe) {
            (TokenizerKind::Addition, _) => text
                .chars()
                .map(|ch| {
                    addition_token(ch).ok_or_else(|| DataError::Unencodable {
                        tokenizer: "addition",
                        text: text.to_owned(),
                        ch,
                    })
                })
                .collect(),
            (TokenizerKind::Bytes, _) => Ok(text.bytes().map(u32::from).collect()),
            (TokenizerKind::Gpt2, Some(bpe)) => Ok(bpe.encode_with_special_tokens(text)),
            (TokenizerKind::Gpt2, None) => unreachable!("Tokenizer::new builds the BPE for Gpt2"),
        }
    }

    /// Decodes `tokens`; ids outside the vocabulary (e.g. padded rows) become U+FFFD, and bytes
    /// that are not valid UTF-8 are replaced the same way.
    pub fn decode(&self, tokens: &[u32]) -> String {
        let mut bytes = Vec::with_capacity(tokens.len());
        for &t in tokens {
            match (self.kind, &self.bpe) {
                (TokenizerKind::Addition, _) => match ADDITION_ALPHABET.get(t as usize) {
                    Some(&b) => bytes.push(b),
                    None => bytes.extend_from_slice("\u{fffd}".as_bytes()),
                },
                (TokenizerKind::Bytes, _) => match u8::try_from(t) {
                    Ok(b) => bytes.push(b),
                    Err(_) => bytes.extend_from_slice("\u{fffd}".as_bytes()),
                },
                (TokenizerKind::Gpt2, Some(bpe)) => match bpe.decode_bytes(&[t]) {
                    Ok(b) => bytes.extend_from_slice(&b),
                    Err(_) => bytes.extend_from_slice("\u{fffd}".as_bytes()),
                },
                (TokenizerKind::Gpt2, None) => unreachable!("Tokenizer::new builds the BPE"),
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

fn addition_token(ch: char) -> Option<u32> {
    let b = u8::try_from(ch).ok()?;
    ADDITION_ALPHABET.iter().position(|&a| a == b).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_utf8() {
        let t = Tokenizer::new(TokenizerKind::Bytes).unwrap();
        let text = "héllo, wörld ✓";
        let ids = t.encode(text).unwrap();
        assert_eq!(ids.len(), text.len());
        assert_eq!(t.decode(&ids), text);
    }

    #[test]
    fn addition_rejects_foreign_characters() {
        let t = Tokenizer::new(TokenizerKind::Addition).unwrap();
        assert_eq!(t.encode("12+3=\n").unwrap(), vec![1, 2, 10, 3, 11, 12]);
        assert!(matches!(t.encode("1-2"), Err(DataError::Unencodable { ch: '-', .. })));
        assert_eq!(t.decode(&[9, 10, 0, 11, 12]), "9+0=\n");
    }

    #[cfg(feature = "tokenizer")]
    #[test]
    fn gpt2_bpe_is_offline_and_matches_known_ids() {
        let t = Tokenizer::new(TokenizerKind::Gpt2).unwrap();
        // GPT-2 ids, as published with the r50k_base ranks.
        assert_eq!(t.encode("Hello world").unwrap(), vec![15496, 995]);
        assert_eq!(t.encode("<|endoftext|>").unwrap(), vec![GPT2_EOT]);
        let text = "The quick brown fox jumps over the lazy dog.";
        assert_eq!(t.decode(&t.encode(text).unwrap()), text);
        assert_eq!(t.vocab_size(), 50257);
    }

    #[cfg(not(feature = "tokenizer"))]
    #[test]
    fn gpt2_without_the_feature_is_an_error_naming_it() {
        let e = Tokenizer::new(TokenizerKind::Gpt2).unwrap_err();
        assert!(matches!(e, DataError::MissingFeature { feature: "tokenizer", .. }), "{e}");
        assert!(e.to_string().contains("`tokenizer` feature"), "{e}");
    }
}
