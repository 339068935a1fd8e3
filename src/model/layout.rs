//! Where each parameter tensor lives in the one contiguous parameter buffer.
//!
//! The order and shapes are llm.c's (`gpt2_124M.bin`), so a model file is the header followed by
//! this buffer verbatim. Weight matrices are stored `[out, in]` (row-major), as llm.c stores them.

use super::GptConfig;

/// The sixteen parameter tensors, in llm.c order. Per-layer tensors are stacked over layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamTensor {
    /// Token embedding `[Vp, C]`, tied with the LM head.
    Wte,
    /// Position embedding `[maxT, C]`.
    Wpe,
    /// First LayerNorm's gain `[L, C]` (before attention).
    Ln1W,
    /// First LayerNorm's bias `[L, C]`.
    Ln1B,
    /// `[L, 3C, C]`: Q, K, V projections stacked on the output dimension.
    QkvW,
    /// `[L, 3C]`: the Q, K, V biases.
    QkvB,
    /// `[L, C, C]`: the attention output projection.
    AttnProjW,
    /// `[L, C]`: the attention output projection's bias.
    AttnProjB,
    /// Second LayerNorm's gain `[L, C]` (before the MLP).
    Ln2W,
    /// Second LayerNorm's bias `[L, C]`.
    Ln2B,
    /// `[L, 4C, C]`: the MLP's first product (C to 4C).
    FcW,
    /// `[L, 4C]`: the MLP's first bias.
    FcB,
    /// `[L, C, 4C]`: the MLP's output projection (4C to C).
    FcProjW,
    /// `[L, C]`: the MLP's output projection's bias.
    FcProjB,
    /// Final LayerNorm's gain `[C]` (before the LM head).
    LnfW,
    /// Final LayerNorm's bias `[C]`.
    LnfB,
}

impl ParamTensor {
    /// Every tensor in buffer order; `ALL[t as usize] == t`.
    pub const ALL: [ParamTensor; 16] = [
        Self::Wte,
        Self::Wpe,
        Self::Ln1W,
        Self::Ln1B,
        Self::QkvW,
        Self::QkvB,
        Self::AttnProjW,
        Self::AttnProjB,
        Self::Ln2W,
        Self::Ln2B,
        Self::FcW,
        Self::FcB,
        Self::FcProjW,
        Self::FcProjB,
        Self::LnfW,
        Self::LnfB,
    ];

    /// Shape of the whole (layer-stacked) tensor.
    pub fn shape(self, c: &GptConfig) -> Vec<usize> {
        let (l, ch, vp, t) = (c.num_layers, c.channels, c.padded_vocab_size, c.max_seq_len);
        match self {
            Self::Wte => vec![vp, ch],
            Self::Wpe => vec![t, ch],
            Self::Ln1W | Self::Ln1B | Self::Ln2W | Self::Ln2B | Self::AttnProjB | Self::FcProjB => {
                vec![l, ch]
            }
            Self::QkvW => vec![l, 3 * ch, ch],
            Self::QkvB => vec![l, 3 * ch],
            Self::AttnProjW => vec![l, ch, ch],
            Self::FcW => vec![l, 4 * ch, ch],
            Self::FcB => vec![l, 4 * ch],
            Self::FcProjW => vec![l, ch, 4 * ch],
            Self::LnfW | Self::LnfB => vec![ch],
        }
    }

    /// Whether weight decay applies (matrices and embeddings yes; biases and LayerNorm no).
    pub fn decays(self) -> bool {
        matches!(self, Self::Wte | Self::Wpe | Self::QkvW | Self::AttnProjW | Self::FcW | Self::FcProjW)
    }

    /// Whether the tensor is stacked over layers.
    pub fn per_layer(self) -> bool {
        !matches!(self, Self::Wte | Self::Wpe | Self::LnfW | Self::LnfB)
    }

    /// llm.c's name of the tensor (`wte`, `qkvw`, ...), as checkpoints and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Wte => "wte",
            Self::Wpe => "wpe",
            Self::Ln1W => "ln1w",
            Self::Ln1B => "ln1b",
            Self::QkvW => "qkvw",
            Self::QkvB => "qkvb",
            Self::AttnProjW => "attprojw",
            Self::AttnProjB => "attprojb",
            Self::Ln2W => "ln2w",
            Self::Ln2B => "ln2b",
            Self::FcW => "fcw",
            Self::FcB => "fcb",
            Self::FcProjW => "fcprojw",
            Self::FcProjB => "fcprojb",
            Self::LnfW => "lnfw",
            Self::LnfB => "lnfb",
        }
    }
}

/// Offsets (in f32 elements) of every tensor in the parameter buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    /// The model the layout is for.
    pub config: GptConfig,
    offsets: [usize; 16],
    sizes: [usize; 16],
    total: usize,
}

impl ParamLayout {
    /// The layout of `config`'s parameters: the sixteen tensors back to back in
    /// [`ParamTensor::ALL`] order. `config` must be valid ([`GptConfig::validate`]), or the
    /// sizes may overflow.
    pub fn new(config: GptConfig) -> Self {
        let mut offsets = [0; 16];
        let mut sizes = [0; 16];
        let mut total = 0;
        for (i, t) in ParamTensor::ALL.iter().enumerate() {
            offsets[i] = total;
            sizes[i] = t.shape(&config).iter().product();
            total += sizes[i];
        }
        Self { config, offsets, sizes, total }
    }

    /// Elements in the whole buffer.
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether the buffer has no elements (never, for a valid config).
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Element range of a whole (layer-stacked) tensor.
    pub fn range(&self, t: ParamTensor) -> std::ops::Range<usize> {
        let i = t as usize;
        self.offsets[i]..self.offsets[i] + self.sizes[i]
    }

    /// Element range of layer `layer`'s slice of a per-layer tensor.
    pub fn layer_range(&self, t: ParamTensor, layer: usize) -> std::ops::Range<usize> {
        assert!(t.per_layer() && layer < self.config.num_layers, "{t:?} has no layer {layer}");
        let per = self.sizes[t as usize] / self.config.num_layers;
        let start = self.offsets[t as usize] + layer * per;
        start..start + per
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConfigError;

    #[test]
    fn gpt2_124m_has_124m_parameters() {
        let c = GptConfig::new(1024, 50257, 12, 12, 768, 128).unwrap();
        assert_eq!(c.padded_vocab_size, 50304);
        // llm.c reports 124,475,904 parameters for the padded model.
        assert_eq!(ParamLayout::new(c).len(), 124_475_904);
    }

    #[test]
    fn tensors_tile_the_buffer() {
        let c = GptConfig::new(64, 100, 3, 2, 16, 128).unwrap();
        let l = ParamLayout::new(c);
        let mut end = 0;
        for t in ParamTensor::ALL {
            assert_eq!(l.range(t).start, end);
            end = l.range(t).end;
        }
        assert_eq!(end, l.len());
        assert_eq!(l.layer_range(ParamTensor::FcW, 2).end, l.range(ParamTensor::FcW).end);
    }

    #[test]
    fn heads_must_divide_hidden() {
        assert_eq!(
            GptConfig::new(8, 10, 1, 3, 16, 1),
            Err(ConfigError::HeadsDoNotDivide { heads: 3, hidden: 16 })
        );
    }
}
