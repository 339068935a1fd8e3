use serde::{Deserialize, Serialize};

/// GPT-2 hyper-parameters, named as in llm.c.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GptConfig {
    /// Longest sequence the position table covers.
    pub max_seq_len: usize,
    /// Tokens the tokenizer produces.
    pub vocab_size: usize,
    /// `vocab_size` rounded up (to a multiple of 128 in single-rank runs); rows past
    /// `vocab_size` are never targets and their logits are masked out of the softmax.
    pub padded_vocab_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    /// Hidden size (llm.c's `C`).
    pub channels: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--num-attention-heads {heads} does not divide --hidden-size {hidden}: each head needs hidden/heads channels")]
    HeadsDoNotDivide { heads: usize, hidden: usize },
    #[error("{what} must be at least 1 (got {value})")]
    Zero { what: &'static str, value: usize },
    #[error("padded vocabulary {padded} is smaller than the vocabulary {vocab}")]
    PaddedTooSmall { padded: usize, vocab: usize },
}

impl GptConfig {
    /// A config with the vocabulary padded to a multiple of `multiple`.
    pub fn new(
        max_seq_len: usize,
        vocab_size: usize,
        num_layers: usize,
        num_heads: usize,
        channels: usize,
        multiple: usize,
    ) -> Result<Self, ConfigError> {
        let padded_vocab_size = vocab_size.div_ceil(multiple.max(1)) * multiple.max(1);
        let cfg = Self { max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels };
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        for (what, value) in [
            ("--max-position-embeddings", self.max_seq_len),
            ("the vocabulary size", self.vocab_size),
            ("--num-layers", self.num_layers),
            ("--num-attention-heads", self.num_heads),
            ("--hidden-size", self.channels),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero { what, value });
            }
        }
        if self.channels % self.num_heads != 0 {
            return Err(ConfigError::HeadsDoNotDivide { heads: self.num_heads, hidden: self.channels });
        }
        if self.padded_vocab_size < self.vocab_size {
            return Err(ConfigError::PaddedTooSmall {
                padded: self.padded_vocab_size,
                vocab: self.vocab_size,
            });
        }
        Ok(())
    }

    pub fn head_dim(&self) -> usize {
        self.channels / self.num_heads
    }
}
