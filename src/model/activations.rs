//! The activation arena: every tensor the forward pass saves for the backward pass, and the
//! backward pass's gradient scratch, at explicit offsets in one buffer (as llm.c lays them out).

use std::ops::Range;

use trident_runtime::{Buffer, Device};

use super::{GptConfig, ModelError};

/// The tensors of the arena. Sizes are per token; the stacked ones exist once per layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// Token + position embedding `[B, T, C]`, the residual stream entering layer 0.
    Encoded,
    Ln1,
    Ln1Mean,
    Ln1Rstd,
    /// `[B, T, 3C]`
    Qkv,
    /// Attention output before the projection `[B, T, C]`.
    Atty,
    /// Per-row log-sum-exp of the attention scores `[B, NH, T]`.
    AttLse,
    /// Residual stream after attention (the projection adds onto the stream entering).
    Res2,
    Ln2,
    Ln2Mean,
    Ln2Rstd,
    /// `[B, T, 4C]`
    Fch,
    FchGelu,
    /// Residual stream leaving the layer (the MLP projection adds onto `Res2`).
    Res3,
    Lnf,
    LnfMean,
    LnfRstd,
    /// `[B, T, Vp]`; the loss overwrites it with its gradient.
    Logits,
    Losses,
    /// Gradient scratch, training only: the residual stream's gradient,
    DRes,
    /// a LayerNorm output's gradient,
    DLn,
    /// the attention output's,
    DAtty,
    /// `qkv`'s,
    DQkv,
    /// and the MLP hidden layer's.
    DFch,
}

impl Act {
    pub const ALL: [Act; 24] = [
        Act::Encoded,
        Act::Ln1,
        Act::Ln1Mean,
        Act::Ln1Rstd,
        Act::Qkv,
        Act::Atty,
        Act::AttLse,
        Act::Res2,
        Act::Ln2,
        Act::Ln2Mean,
        Act::Ln2Rstd,
        Act::Fch,
        Act::FchGelu,
        Act::Res3,
        Act::Lnf,
        Act::LnfMean,
        Act::LnfRstd,
        Act::Logits,
        Act::Losses,
        Act::DRes,
        Act::DLn,
        Act::DAtty,
        Act::DQkv,
        Act::DFch,
    ];

    /// Elements per token.
    pub fn width(self, c: &GptConfig) -> usize {
        let ch = c.channels;
        match self {
            Act::Ln1Mean
            | Act::Ln1Rstd
            | Act::Ln2Mean
            | Act::Ln2Rstd
            | Act::LnfMean
            | Act::LnfRstd
            | Act::Losses => 1,
            Act::AttLse => c.num_heads,
            Act::Qkv | Act::DQkv => 3 * ch,
            Act::Fch | Act::FchGelu | Act::DFch => 4 * ch,
            Act::Logits => c.padded_vocab_size,
            _ => ch,
        }
    }

    /// Whether each layer has its own copy (saved for the backward pass).
    pub fn per_layer(self) -> bool {
        matches!(
            self,
            Act::Ln1
                | Act::Ln1Mean
                | Act::Ln1Rstd
                | Act::Qkv
                | Act::Atty
                | Act::AttLse
                | Act::Res2
                | Act::Ln2
                | Act::Ln2Mean
                | Act::Ln2Rstd
                | Act::Fch
                | Act::FchGelu
                | Act::Res3
        )
    }

    /// Whether only training needs it.
    pub fn is_gradient(self) -> bool {
        matches!(self, Act::DRes | Act::DLn | Act::DAtty | Act::DQkv | Act::DFch)
    }
}

/// Offsets of every [`Act`] in the arena, for up to `tokens` tokens per pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivationLayout {
    config: GptConfig,
    tokens: usize,
    offsets: [usize; Act::ALL.len()],
    total: usize,
}

impl ActivationLayout {
    pub fn new(config: GptConfig, tokens: usize, training: bool) -> Self {
        let mut offsets = [usize::MAX; Act::ALL.len()];
        let mut total = 0;
        for (i, a) in Act::ALL.iter().enumerate() {
            if a.is_gradient() && !training {
                continue;
            }
            offsets[i] = total;
            let layers = if a.per_layer() { config.num_layers } else { 1 };
            total += layers * tokens * a.width(&config);
        }
        Self { config, tokens, offsets, total }
    }

    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub fn has(&self, a: Act) -> bool {
        self.offsets[a as usize] != usize::MAX
    }

    /// The range holding `a` for the first `ntok` tokens of `layer` (0 for unstacked tensors).
    pub fn range(&self, a: Act, layer: usize, ntok: usize) -> Range<usize> {
        assert!(self.has(a), "{a:?} is not in an inference arena");
        assert!(ntok <= self.tokens, "{ntok} tokens exceed the arena's {}", self.tokens);
        let per = self.tokens * a.width(&self.config);
        let start = self.offsets[a as usize] + if a.per_layer() { layer * per } else { 0 };
        start..start + ntok * a.width(&self.config)
    }
}

/// Everything one forward/backward pass of up to `batch x seq` tokens needs on the device,
/// allocated once.
pub struct Workspace {
    pub(super) layout: ActivationLayout,
    pub(super) acts: Buffer<f32>,
    pub(super) tokens: Buffer<u32>,
    pub(super) targets: Buffer<u32>,
    pub(super) batch: usize,
    pub(super) seq: usize,
    /// The shape of the last forward pass.
    pub(super) current: Option<(usize, usize)>,
    /// Whether the logits hold the loss gradient of the current pass.
    pub(super) dlogits_ready: bool,
}

impl Workspace {
    /// A workspace for batches of up to `batch` sequences of `seq` tokens; `training` adds the
    /// backward pass's scratch.
    pub fn new(
        device: &Device,
        config: &GptConfig,
        batch: usize,
        seq: usize,
        training: bool,
    ) -> Result<Self, ModelError> {
        if batch == 0 || seq == 0 {
            return Err(ModelError::EmptyBatch { batch, seq });
        }
        if seq > config.max_seq_len {
            return Err(ModelError::SeqTooLong { seq, max: config.max_seq_len });
        }
        let layout = ActivationLayout::new(*config, batch * seq, training);
        Ok(Self {
            acts: Buffer::zeros(device, layout.len())?,
            tokens: Buffer::zeros(device, batch * seq)?,
            targets: Buffer::zeros(device, batch * seq)?,
            layout,
            batch,
            seq,
            current: None,
            dlogits_ready: false,
        })
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    pub fn seq(&self) -> usize {
        self.seq
    }

    pub fn is_training(&self) -> bool {
        self.layout.has(Act::DRes)
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.acts.len() * 4 + self.tokens.len() * 8
    }
}
