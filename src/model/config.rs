//! The model's shape ([`GptConfig`]) and the checks that make every size derived from it
//! (parameter offsets, activation widths) safe to compute.

use serde::{Deserialize, Serialize};

/// GPT-2 hyper-parameters, named as in llm.c.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GptConfig {
    /// Longest sequence the position table covers (llm.c's `maxT`, `--max-position-embeddings`).
    pub max_seq_len: usize,
    /// Tokens the tokenizer produces.
    pub vocab_size: usize,
    /// `vocab_size` rounded up (to a multiple of 128 in single-rank runs); rows past
    /// `vocab_size` are never targets and their logits are masked out of the softmax.
    pub padded_vocab_size: usize,
    /// Transformer blocks (llm.c's `L`, `--num-layers`).
    pub num_layers: usize,
    /// Attention heads per block (llm.c's `NH`, `--num-attention-heads`); divides
    /// [`channels`](Self::channels).
    pub num_heads: usize,
    /// Hidden size (llm.c's `C`, `--hidden-size`).
    pub channels: usize,
}

/// Why a [`GptConfig`] cannot describe a model ([`GptConfig::validate`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// `channels % num_heads != 0`: the heads cannot split the hidden size evenly.
    #[error("--num-attention-heads {heads} does not divide --hidden-size {hidden}: each head needs hidden/heads channels")]
    HeadsDoNotDivide {
        /// [`GptConfig::num_heads`].
        heads: usize,
        /// [`GptConfig::channels`].
        hidden: usize,
    },
    /// A size that must be at least 1 is 0.
    #[error("{what} must be at least 1 (got {value})")]
    Zero {
        /// The size, named by its flag where it has one (`--num-layers`).
        what: &'static str,
        /// The value given (0).
        value: usize,
    },
    /// `padded_vocab_size < vocab_size`: some real tokens would have no embedding row.
    #[error("padded vocabulary {padded} is smaller than the vocabulary {vocab}")]
    PaddedTooSmall {
        /// [`GptConfig::padded_vocab_size`].
        padded: usize,
        /// [`GptConfig::vocab_size`].
        vocab: usize,
    },
    /// The parameter count, or its f32 byte count, overflows `usize`
    /// ([`GptConfig::checked_num_params`] is `None`).
    #[error(
        "a model of {layers} layers, hidden size {hidden}, {positions} positions and a vocabulary of {vocab} \
         has more parameters than this machine can count; lower --hidden-size or --num-layers"
    )]
    TooLarge {
        /// [`GptConfig::num_layers`].
        layers: usize,
        /// [`GptConfig::channels`].
        hidden: usize,
        /// [`GptConfig::max_seq_len`].
        positions: usize,
        /// [`GptConfig::padded_vocab_size`].
        vocab: usize,
    },
}

impl ConfigError {
    /// This error in the words of a file that describes the model (llm.c's header fields,
    /// `trainer.json`'s config), not of the flags, which the user may never have passed.
    pub fn in_file_words(&self) -> String {
        let field = |flag: &str| match flag {
            "--max-position-embeddings" => "max_seq_len",
            "--num-layers" => "num_layers",
            "--num-attention-heads" => "num_heads",
            "--hidden-size" => "channels",
            _ => "vocab_size",
        };
        match self {
            ConfigError::HeadsDoNotDivide { heads, hidden } => {
                format!("num_heads {heads} does not divide channels {hidden}")
            }
            ConfigError::Zero { what, value } => {
                format!("{} is {value}, and must be at least 1", field(what))
            }
            ConfigError::PaddedTooSmall { padded, vocab } => {
                format!("padded_vocab_size {padded} is smaller than vocab_size {vocab}")
            }
            ConfigError::TooLarge { layers, hidden, positions, vocab } => format!(
                "num_layers {layers}, channels {hidden}, max_seq_len {positions} and padded_vocab_size \
                 {vocab} make more parameters than this machine can count"
            ),
        }
    }
}

impl GptConfig {
    /// A config with the vocabulary padded to a multiple of `multiple` (llm.c pads to 128;
    /// 0 counts as 1), validated ([`validate`](Self::validate)).
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

    /// Checks that the sizes describe a model: every size at least 1, heads dividing the
    /// hidden size, a parameter count that fits `usize` (so that no layout arithmetic can
    /// overflow), and a padded vocabulary covering the real one. Checked in that order; the
    /// first failure is returned.
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
        if self.checked_num_params().is_none() {
            return Err(ConfigError::TooLarge {
                layers: self.num_layers,
                hidden: self.channels,
                positions: self.max_seq_len,
                vocab: self.padded_vocab_size,
            });
        }
        if self.padded_vocab_size < self.vocab_size {
            return Err(ConfigError::PaddedTooSmall {
                padded: self.padded_vocab_size,
                vocab: self.vocab_size,
            });
        }
        Ok(())
    }

    /// Parameters of the model ([`ParamLayout`](super::ParamLayout)'s length), `None` where the
    /// count, or the f32 bytes holding it, overflow `usize`. Per layer that is 12 C^2 + 13 C
    /// (QKV 3 C^2 and 3 C, attention projection C^2 and C, MLP 8 C^2 and 5 C, two LayerNorms
    /// 4 C), then the embeddings (Vp + T) C and the final LayerNorm 2 C. Every shape product of
    /// the layout is at most this, so a validated config's layout cannot overflow.
    pub fn checked_num_params(&self) -> Option<usize> {
        let c = self.channels;
        let per_layer = c.checked_mul(c)?.checked_mul(12)?.checked_add(c.checked_mul(13)?)?;
        let total = self
            .num_layers
            .checked_mul(per_layer)?
            .checked_add(self.padded_vocab_size.checked_add(self.max_seq_len)?.checked_mul(c)?)?
            .checked_add(c.checked_mul(2)?)?;
        total.checked_mul(4)?;
        Some(total)
    }

    /// Channels per attention head (llm.c's `hs`): `C / NH`, exact for a validated config.
    pub fn head_dim(&self) -> usize {
        self.channels / self.num_heads
    }
}
