//! The tensors one transformer layer's forward saves for its backward, described once (as
//! llm.c's `fill_in_activation_sizes` describes its activations): name, shape, element type and
//! whether selective recomputation drops it. The table sizes the layer's buffers
//! ([`LayerActs`](super::activations)), the model's memory report, the pre-flight memory check
//! (`train::memory`) and the bytes the local planner counts per rank (`calibrate::rank_memory`),
//! so a new saved tensor is added here and nowhere else.
//!
//! Shapes are this rank's: `C / TP` channels of its heads and `4C / TP` of the MLP; the residual
//! stream and the LayerNorm outputs hold `ns` rows (`n / TP` under sequence parallelism, else the
//! micro-batch's `n = b t`), the products' outputs all `n`.

/// How many rows a saved tensor has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// The micro-batch's token rows, `n = b t`.
    Tokens,
    /// The residual stream's rows on this rank, `ns` (`n / TP` under sequence parallelism).
    Residual,
    /// One per sequence, local head and position: `b (NH / TP) t` (the log-sum-exp).
    HeadPositions,
}

/// How wide a saved tensor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// The model's channels, `C`.
    Channels,
    /// `k` times the local heads' channels, `k C / TP`.
    LocalChannels(usize),
    /// The MLP's local hidden width, `4 C / TP`.
    LocalHidden,
    /// One element per row (statistics).
    One,
}

/// What a saved tensor's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    /// f32 always (the residual stream, statistics, the log-sum-exp).
    F32,
    /// 16 bits under mixed precision on the kernel devices (an f32 buffer of rounded values on
    /// the Cpu), f32 otherwise: what the products and attention read and write.
    Half,
}

/// One tensor a layer saves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavedTensor {
    /// Its name in the layer (the [`LayerActs`](super::activations) field).
    pub name: &'static str,
    /// Its rows.
    pub rows: Rows,
    /// Its width.
    pub width: Width,
    /// Its elements.
    pub element: Element,
    /// Whether it is saved only without recomputation (selective recomputation reruns the
    /// attention core instead and keeps its output in the shared scratch).
    pub attention: bool,
}

const fn saved(name: &'static str, rows: Rows, width: Width, element: Element) -> SavedTensor {
    SavedTensor { name, rows, width, element, attention: false }
}

/// The first LayerNorm's output `[ns, C]`.
pub const LN1: SavedTensor = saved("ln1", Rows::Residual, Width::Channels, Element::Half);
/// Its per-row mean `[ns]`.
pub const LN1_MEAN: SavedTensor = saved("ln1_mean", Rows::Residual, Width::One, Element::F32);
/// Its per-row reciprocal standard deviation `[ns]`.
pub const LN1_RSTD: SavedTensor = saved("ln1_rstd", Rows::Residual, Width::One, Element::F32);
/// The QKV projection `[n, 3 C / TP]`.
pub const QKV: SavedTensor = saved("qkv", Rows::Tokens, Width::LocalChannels(3), Element::Half);
/// The attention output `[n, C / TP]` (not under recomputation).
pub const ATTY: SavedTensor =
    SavedTensor { attention: true, ..saved("atty", Rows::Tokens, Width::LocalChannels(1), Element::Half) };
/// The attention's log-sum-exp `[b, NH / TP, t]` (not under recomputation).
pub const LSE: SavedTensor =
    SavedTensor { attention: true, ..saved("lse", Rows::HeadPositions, Width::One, Element::F32) };
/// The residual stream after attention `[ns, C]`.
pub const RES2: SavedTensor = saved("res2", Rows::Residual, Width::Channels, Element::F32);
/// The second LayerNorm's output `[ns, C]`.
pub const LN2: SavedTensor = saved("ln2", Rows::Residual, Width::Channels, Element::Half);
/// Its per-row mean `[ns]`.
pub const LN2_MEAN: SavedTensor = saved("ln2_mean", Rows::Residual, Width::One, Element::F32);
/// Its per-row reciprocal standard deviation `[ns]`.
pub const LN2_RSTD: SavedTensor = saved("ln2_rstd", Rows::Residual, Width::One, Element::F32);
/// The MLP's hidden layer before GeLU `[n, 4 C / TP]`.
pub const FCH: SavedTensor = saved("fch", Rows::Tokens, Width::LocalHidden, Element::Half);
/// The MLP's hidden layer after GeLU `[n, 4 C / TP]`.
pub const FCH_GELU: SavedTensor = saved("fch_gelu", Rows::Tokens, Width::LocalHidden, Element::Half);
/// The residual stream leaving the layer `[ns, C]`.
pub const RES3: SavedTensor = saved("res3", Rows::Residual, Width::Channels, Element::F32);

/// Every tensor a layer saves, in the order the forward writes them.
pub const LAYER_TENSORS: [SavedTensor; 13] =
    [LN1, LN1_MEAN, LN1_RSTD, QKV, ATTY, LSE, RES2, LN2, LN2_MEAN, LN2_RSTD, FCH, FCH_GELU, RES3];

/// The sizes a micro-batch has on one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Token rows, `b t`.
    pub n: usize,
    /// Residual rows on this rank.
    pub ns: usize,
    /// Channels, `C`.
    pub c: usize,
    /// Local heads' channels, `C / TP`.
    pub cl: usize,
    /// The MLP's local hidden width, `4 C / TP`.
    pub fl: usize,
    /// Sequences times local heads times positions, `b (NH / TP) t`.
    pub head_positions: usize,
}

impl Geometry {
    /// A micro-batch of `b` sequences of `t` tokens of a model of `c` channels and `heads`
    /// heads, on one of `tp` tensor-parallel ranks, with or without sequence parallelism.
    pub fn new(b: usize, t: usize, c: usize, heads: usize, tp: usize, sequence_parallel: bool) -> Self {
        let tp = tp.max(1);
        let n = b * t;
        Geometry {
            n,
            ns: if sequence_parallel && tp > 1 { n / tp } else { n },
            c,
            cl: c / tp,
            fl: 4 * c / tp,
            head_positions: b * (heads / tp) * t,
        }
    }
}

impl SavedTensor {
    /// Its elements in `g`.
    pub fn elements(&self, g: &Geometry) -> usize {
        let rows = match self.rows {
            Rows::Tokens => g.n,
            Rows::Residual => g.ns,
            Rows::HeadPositions => g.head_positions,
        };
        let width = match self.width {
            Width::Channels => g.c,
            Width::LocalChannels(k) => k * g.cl,
            Width::LocalHidden => g.fl,
            Width::One => 1,
        };
        rows * width
    }

    /// Elements per token of a model of `c` channels and `heads` heads split over `tp` ranks,
    /// without sequence parallelism (what a run holds at most), rounded up where `tp` does not
    /// divide; `None` when the product overflows.
    pub fn per_token(&self, c: u64, heads: u64, tp: u64) -> Option<u64> {
        let tp = tp.max(1);
        match (self.rows, self.width) {
            (Rows::HeadPositions, _) => Some(heads.div_ceil(tp)),
            (_, Width::Channels) => Some(c),
            (_, Width::LocalChannels(k)) => Some((k as u64).checked_mul(c)?.div_ceil(tp)),
            (_, Width::LocalHidden) => Some(c.checked_mul(4)?.div_ceil(tp)),
            (_, Width::One) => Some(1),
        }
    }

    /// Whether a layer whose forward keeps its attention output (`keep_attention`: no
    /// recomputation, or the layer being recomputed) saves this tensor.
    pub fn kept(&self, keep_attention: bool) -> bool {
        keep_attention || !self.attention
    }
}

/// Elements one layer saves in `g`, with or without its attention output.
pub fn layer_elements(g: &Geometry, keep_attention: bool) -> usize {
    LAYER_TENSORS.iter().filter(|t| t.kept(keep_attention)).map(|t| t.elements(g)).sum()
}

/// Bytes one layer saves in `g`, with `half_bytes` bytes per element of the [`Element::Half`]
/// tensors (2 in 16-bit buffers, 4 in f32 ones).
pub fn layer_bytes(g: &Geometry, keep_attention: bool, half_bytes: usize) -> usize {
    LAYER_TENSORS
        .iter()
        .filter(|t| t.kept(keep_attention))
        .map(|t| t.elements(g) * if t.element == Element::Half { half_bytes } else { 4 })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPT-2 124M's layer at micro-batch 4 x 64 on TP 2 with sequence parallelism, by hand:
    /// n 256, ns 128, C 768, C/TP 384, 4C/TP 1536, 6 local heads. Saved: ln1, res2, ln2, res3
    /// `4 x 128 x 768`, four statistics `4 x 128`, qkv `256 x 1152`, fch and its GeLU
    /// `2 x 256 x 1536`, and without recomputation the attention output `256 x 384` and the
    /// log-sum-exp `4 x 6 x 64`.
    #[test]
    fn gpt2_layer_by_hand() {
        let g = Geometry::new(4, 64, 768, 12, 2, true);
        assert_eq!((g.n, g.ns, g.cl, g.fl, g.head_positions), (256, 128, 384, 1536, 1536));
        let selective = 4 * 128 * 768 + 4 * 128 + 256 * 1152 + 2 * 256 * 1536;
        assert_eq!(layer_elements(&g, false), selective);
        assert_eq!(layer_elements(&g, true), selective + 256 * 384 + 1536);
        // 16-bit: ln1, ln2 (128 x 768 each), qkv, atty, fch, fch_gelu.
        let half = 2 * 128 * 768 + 256 * 1152 + 256 * 384 + 2 * 256 * 1536;
        assert_eq!(layer_bytes(&g, true, 2), 4 * layer_elements(&g, true) - 2 * half);
        let names: Vec<_> = LAYER_TENSORS.iter().map(|t| t.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    /// Per token without sequence parallelism, the same widths as the elements of a one-token
    /// micro-batch whose heads divide.
    #[test]
    fn per_token_agrees_with_elements() {
        let g = Geometry::new(1, 1, 768, 12, 4, false);
        for t in LAYER_TENSORS {
            assert_eq!(t.per_token(768, 12, 4), Some(t.elements(&g) as u64), "{}", t.name);
        }
        assert_eq!(QKV.per_token(u64::MAX / 2, 12, 1), None);
    }
}
