//! What a pass keeps on the device: per in-flight micro-batch the tensors the forward saves
//! for the backward ([`MicroActs`]), and per rank the geometry of a micro-batch and the
//! scratch every micro-batch shares ([`Workspace`]). Widths are this rank's: `C / TP` channels
//! of its heads, `4C / TP` of the MLP, `Vp / TP` rows of the vocabulary; under sequence
//! parallelism the residual stream holds `n / TP` of the micro-batch's `n = b t` rows.
//!
//! Under mixed precision on `Emu` and `Cuda` the tensors the products and attention read and
//! write are 16-bit buffers (LayerNorm outputs, QKV, the attention output, the MLP's hidden
//! layer before and after GeLU, the logits, and the gradients of the attention output, QKV,
//! the hidden layer and the logits, which the loss writes over them); the residual stream, its
//! gradient, the LayerNorm input gradient, the statistics and the losses stay f32 (the
//! tensor-parallel collectives and the pipeline transfers reduce and move f32, and the loss
//! is computed in fp32).

use trident_runtime::{Buffer, Device, RuntimeError};

use super::layer_tensors::{self as lt, Element, Geometry, SavedTensor};
use super::tensor::{storage, Act};
use super::{Gpt, ModelError};
use crate::ops::HalfFormat;
use crate::parallel::Recompute;

type Result<T> = std::result::Result<T, ModelError>;

/// Sizes of one micro-batch on this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dims {
    pub b: usize,
    pub t: usize,
    /// Token rows of the micro-batch: `b t`.
    pub n: usize,
    pub c: usize,
    /// Channels of the local heads (C / TP).
    pub cl: usize,
    pub heads: usize,
    /// MLP hidden width held here (4C / TP).
    pub fl: usize,
    /// Rows of the residual stream held here: `n / TP` under sequence parallelism, else `n`.
    pub ns: usize,
    /// The 16-bit format activations and their gradients are stored in (mixed precision).
    pub half: Option<HalfFormat>,
    /// The format of the 16-bit buffers ([`Act::Half`]): `half` on the kernel devices, `None`
    /// on `Cpu` (f32 buffers of rounded values).
    pub storage: Option<HalfFormat>,
}

/// What a layer's forward saves for its backward (local widths).
pub(super) struct LayerActs {
    pub ln1: Act,
    pub ln1_mean: Buffer<f32>,
    pub ln1_rstd: Buffer<f32>,
    /// `[n, 3 C/TP]`
    pub qkv: Act,
    /// Attention output `[n, C/TP]` and log-sum-exp `[b, NH/TP, t]`; `None` under selective
    /// recomputation.
    pub atty: Option<Act>,
    pub lse: Option<Buffer<f32>>,
    /// Residual stream after attention `[ns, C]`.
    pub res2: Buffer<f32>,
    pub ln2: Act,
    pub ln2_mean: Buffer<f32>,
    pub ln2_rstd: Buffer<f32>,
    /// `[n, 4C/TP]` before and after GeLU.
    pub fch: Act,
    pub fch_gelu: Act,
    /// Residual stream leaving the layer `[ns, C]`.
    pub res3: Buffer<f32>,
}

impl LayerActs {
    /// The buffers of [`LAYER_TENSORS`](super::layer_tensors::LAYER_TENSORS) in `d`, the
    /// attention output and log-sum-exp only with `keep_attention`.
    pub(super) fn new(device: &Device, d: Dims, keep_attention: bool) -> Result<Self> {
        let g = d.geometry();
        let f32s = |t: SavedTensor| {
            debug_assert_eq!(t.element, Element::F32, "{}", t.name);
            Buffer::zeros(device, t.elements(&g))
        };
        let act = |t: SavedTensor| {
            debug_assert_eq!(t.element, Element::Half, "{}", t.name);
            Act::zeros(device, t.elements(&g), d.storage)
        };
        Ok(Self {
            ln1: act(lt::LN1)?,
            ln1_mean: f32s(lt::LN1_MEAN)?,
            ln1_rstd: f32s(lt::LN1_RSTD)?,
            qkv: act(lt::QKV)?,
            atty: keep_attention.then(|| act(lt::ATTY)).transpose()?,
            lse: keep_attention.then(|| f32s(lt::LSE)).transpose()?,
            res2: f32s(lt::RES2)?,
            ln2: act(lt::LN2)?,
            ln2_mean: f32s(lt::LN2_MEAN)?,
            ln2_rstd: f32s(lt::LN2_RSTD)?,
            fch: act(lt::FCH)?,
            fch_gelu: act(lt::FCH_GELU)?,
            res3: f32s(lt::RES3)?,
        })
    }

    /// Bytes held: the table's count for this layer ([`lt::layer_bytes`]).
    pub(super) fn bytes(&self, d: Dims) -> usize {
        let half_bytes = if d.storage.is_some() { 2 } else { 4 };
        lt::layer_bytes(&d.geometry(), self.atty.is_some(), half_bytes)
    }
}

impl Dims {
    /// The sizes the layer's tensor table reads.
    pub(super) fn geometry(&self) -> Geometry {
        Geometry {
            n: self.n,
            ns: self.ns,
            c: self.c,
            cl: self.cl,
            fl: self.fl,
            head_positions: self.b * self.heads * self.t,
        }
    }
}

/// The LM head's saved tensors (last stage).
pub(super) struct HeadActs {
    pub lnf: Act,
    pub mean: Buffer<f32>,
    pub rstd: Buffer<f32>,
    /// `[n, Vp/TP]`; overwritten with its gradient by the loss.
    pub logits: Act,
    /// Per-token losses `[n]` and the targets on the device (read by the cross-entropy kernel
    /// at TP = 1; the vocab-parallel cross-entropy reads the host's).
    pub losses: Buffer<f32>,
    pub targets: Buffer<u32>,
    /// Whether the logits hold the loss gradient of the current micro-batch.
    pub dlogits_ready: bool,
}

/// Everything one in-flight micro-batch keeps between its forward and its backward.
pub struct MicroActs {
    /// The stage's input `[ns, C]`: the embedding (first stage) or the received activation.
    pub input: Buffer<f32>,
    /// Token rows (first stage): the token ids at TP = 1, else the local embedding rows.
    pub(super) tokens: Buffer<u32>,
    /// The model chunk (virtual pipeline stage of this rank) the micro-batch passes through.
    pub(super) chunk: usize,
    /// Saved per layer, or under full recomputation empty.
    pub(super) layers: Vec<LayerActs>,
    /// Under full recomputation: each layer's output only.
    pub(super) outputs: Vec<Buffer<f32>>,
    pub(super) head: Option<HeadActs>,
    /// The micro-batch's sizes on this rank (what the layer table counts in).
    dims: Dims,
}

impl MicroActs {
    /// Storage for one micro-batch of `ws`'s shape through `model`'s layers (its only chunk).
    pub fn new(device: &Device, model: &Gpt, ws: &Workspace) -> Result<Self> {
        Self::for_chunk(device, model, ws, 0)
    }

    /// Storage for one micro-batch of `ws`'s shape through the layers of model chunk `chunk`.
    pub fn for_chunk(device: &Device, model: &Gpt, ws: &Workspace, chunk: usize) -> Result<Self> {
        let d = ws.dims;
        let keep_layers = model.recompute() != Recompute::Full;
        let keep_attention = model.recompute() == Recompute::None;
        let layers = model.layout().chunks.get(chunk).cloned().ok_or_else(|| ModelError::State {
            what: format!(
                "the stage holds {} model chunks, not a chunk {chunk}",
                model.layout().chunks.len()
            ),
        })?;
        let (layers, outputs) = if keep_layers {
            (layers.map(|_| LayerActs::new(device, d, keep_attention)).collect::<Result<_>>()?, Vec::new())
        } else {
            let outputs =
                layers.map(|_| Buffer::zeros(device, d.ns * d.c)).collect::<std::result::Result<_, _>>()?;
            (Vec::new(), outputs)
        };
        let head = model
            .layout()
            .place
            .is_last_chunk(chunk)
            .then(|| -> Result<HeadActs> {
                Ok(HeadActs {
                    lnf: Act::zeros(device, d.ns * d.c, d.storage)?,
                    mean: Buffer::zeros(device, d.ns)?,
                    rstd: Buffer::zeros(device, d.ns)?,
                    logits: Act::zeros(device, d.n * model.vocab().local, d.storage)?,
                    losses: Buffer::zeros(device, d.n)?,
                    targets: Buffer::zeros(device, d.n)?,
                    dlogits_ready: false,
                })
            })
            .transpose()?;
        Ok(MicroActs {
            chunk,
            input: Buffer::zeros(device, d.ns * d.c)?,
            tokens: Buffer::zeros(device, d.n)?,
            layers,
            outputs,
            head,
            dims: d,
        })
    }

    /// Bytes held for this micro-batch.
    pub fn bytes(&self) -> usize {
        let head = self.head.as_ref().map_or(0, |h| {
            h.lnf.bytes()
                + h.logits.bytes()
                + 4 * (h.mean.len() + h.rstd.len() + h.losses.len() + h.targets.len())
        });
        let outputs: usize = self.outputs.iter().map(|o| o.len()).sum();
        4 * (self.input.len() + self.tokens.len() + outputs)
            + self.layers.iter().map(|l| l.bytes(self.dims)).sum::<usize>()
            + head
    }

    /// The stage's output (the last layer's residual stream).
    pub fn output(&self) -> &Buffer<f32> {
        match self.layers.last() {
            Some(l) => &l.res3,
            None => self.outputs.last().unwrap_or(&self.input),
        }
    }
}

/// Buffers shared by all micro-batches: projections, gradients, recomputation space.
pub(super) struct Scratch {
    /// Sequence parallelism: a row-parallel product's `[n, c]` partial sums before their
    /// reduce-scatter (elsewhere the products add onto the residual stream directly).
    pub proj: Buffer<f32>,
    /// Sequence parallelism's buffers of whole rows, see [`SpScratch`].
    pub sp: Option<SpScratch>,
    /// Gradient of the residual stream `[ns, C]`; on entry to the backward, of the stage's
    /// output.
    pub dres: Buffer<f32>,
    pub dln: Buffer<f32>,
    pub datty: Act,
    pub dqkv: Act,
    pub dfch: Act,
    /// Attention output and log-sum-exp under selective recomputation.
    pub atty: Act,
    pub lse: Buffer<f32>,
    /// The layer being recomputed (full recomputation).
    pub layer: Option<LayerActs>,
    /// TP > 1, first stage: local embedding rows plus one zero row for tokens held elsewhere,
    /// and its gradient.
    pub wte_ext: Option<Buffer<f32>>,
    pub dwte_ext: Option<Buffer<f32>>,
    /// Zeros standing in for the position table on tensor-parallel ranks other than 0, so
    /// that the all-reduce adds it once.
    pub zero_wpe: Option<Buffer<f32>>,
}

/// Sequence parallelism: buffers of whole rows beside the local ones — the product's
/// reduce-scattered rows, a LayerNorm output gathered for the next product, the residual
/// gradient gathered for a row-parallel backward, a column-parallel input gradient before its
/// reduce-scatter, and one LayerNorm's weight and bias gradients (`2c`) before their sum over
/// TP.
pub(super) struct SpScratch {
    pub proj_local: Buffer<f32>,
    pub ln_full: Buffer<f32>,
    pub dres_full: Buffer<f32>,
    pub dln_full: Buffer<f32>,
    pub dln_params: Buffer<f32>,
}

impl SpScratch {
    fn len(&self) -> usize {
        self.proj_local.len()
            + self.ln_full.len()
            + self.dres_full.len()
            + self.dln_full.len()
            + self.dln_params.len()
    }
}

/// One rank's pass geometry (`b x t` tokens per micro-batch) and the scratch its
/// micro-batches share.
pub struct Workspace {
    pub(super) dims: Dims,
    pub(super) scratch: Scratch,
}

impl Workspace {
    /// A workspace for micro-batches of `b` sequences of `t` tokens through `model`.
    pub fn new(device: &Device, model: &Gpt, b: usize, t: usize) -> Result<Self> {
        let config = model.config();
        if b == 0 || t == 0 {
            return Err(ModelError::EmptyBatch { batch: b, seq: t });
        }
        if t > config.max_seq_len {
            return Err(ModelError::SeqTooLong { seq: t, max: config.max_seq_len });
        }
        let place = model.layout().place;
        let (c, tp) = (config.channels, place.tp);
        let sp = model.sequence_parallel();
        if sp && t % tp != 0 {
            return Err(ModelError::State {
                what: format!(
                    "--sequence-parallel splits the sequence over --tensor-model-parallel-size {tp}: \
                     --seq-length {t} is not divisible by it"
                ),
            });
        }
        let n = b.checked_mul(t).ok_or(ModelError::EmptyBatch { batch: b, seq: t })?;
        let ns = if sp { n / tp } else { n };
        let (cl, heads, fl) = (c / tp, config.num_heads / tp, 4 * c / tp);
        let half = model.precision().format();
        let dims = Dims { b, t, n, c, cl, heads, fl, ns, half, storage: storage(device, half) };
        let local_vocab = model.vocab().local;
        let z = |len: usize| Buffer::<f32>::zeros(device, len);
        let h = |len: usize| Act::zeros(device, len, dims.storage);
        let first = place.is_first_stage();
        let scratch = Scratch {
            proj: z(if sp { n * c } else { 0 })?,
            sp: sp
                .then(|| -> std::result::Result<SpScratch, RuntimeError> {
                    Ok(SpScratch {
                        proj_local: z(ns * c)?,
                        ln_full: z(n * c)?,
                        dres_full: z(n * c)?,
                        dln_full: z(n * c)?,
                        dln_params: z(2 * c)?,
                    })
                })
                .transpose()?,
            dres: z(ns * c)?,
            dln: z(ns * c)?,
            datty: h(n * dims.cl)?,
            dqkv: h(n * 3 * dims.cl)?,
            dfch: h(n * dims.fl)?,
            atty: h(if model.recompute() == Recompute::None { 0 } else { n * dims.cl })?,
            lse: z(if model.recompute() == Recompute::None { 0 } else { b * dims.heads * t })?,
            layer: (model.recompute() == Recompute::Full)
                .then(|| LayerActs::new(device, dims, true))
                .transpose()?,
            wte_ext: (first && tp > 1).then(|| z((local_vocab + 1) * c)).transpose()?,
            dwte_ext: (first && tp > 1).then(|| z((local_vocab + 1) * c)).transpose()?,
            zero_wpe: (first && place.tp_rank != 0).then(|| z(config.max_seq_len * c)).transpose()?,
        };
        Ok(Self { dims, scratch })
    }

    /// Sequences per micro-batch.
    pub fn batch(&self) -> usize {
        self.dims.b
    }

    /// Tokens per sequence.
    pub fn seq(&self) -> usize {
        self.dims.t
    }

    /// Elements of one micro-batch's activation as a pipeline stage sends it: `n / TP` rows of
    /// `c` under sequence parallelism, else `n`.
    pub fn activation_len(&self) -> usize {
        self.dims.ns * self.dims.c
    }

    /// Bytes of the shared scratch buffers.
    pub fn bytes(&self) -> usize {
        let s = &self.scratch;
        let opt = |b: &Option<Buffer<f32>>| b.as_ref().map_or(0, |b| b.len());
        let layer = s.layer.as_ref().map_or(0, |l| l.bytes(self.dims));
        4 * (s.proj.len()
            + s.dres.len()
            + s.dln.len()
            + s.lse.len()
            + opt(&s.wte_ext)
            + opt(&s.dwte_ext)
            + opt(&s.zero_wpe)
            + s.sp.as_ref().map_or(0, SpScratch::len))
            + s.datty.bytes()
            + s.dqkv.bytes()
            + s.dfch.bytes()
            + s.atty.bytes()
            + layer
    }

    /// The gradient of the stage's input after a backward pass.
    pub fn input_grad(&self) -> &Buffer<f32> {
        &self.scratch.dres
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::HalfFormat;

    /// The buffers a layer allocates are the table's, byte for byte, on the Cpu (f32 buffers
    /// of rounded values) and on `Emu` (16-bit buffers), with and without the attention output.
    #[test]
    fn a_layers_buffers_are_the_tables() {
        for (device, storage) in [(Device::Cpu, None), (Device::Emu, Some(HalfFormat::Bf16))] {
            for sp in [false, true] {
                let (b, t, c, heads, tp) = (2, 8, 16, 4, 2);
                let g = Geometry::new(b, t, c, heads, tp, sp);
                let d = Dims {
                    b,
                    t,
                    n: g.n,
                    c,
                    cl: g.cl,
                    heads: heads / tp,
                    fl: g.fl,
                    ns: g.ns,
                    half: Some(HalfFormat::Bf16),
                    storage,
                };
                assert_eq!(d.geometry(), g);
                for keep in [false, true] {
                    let l = LayerActs::new(&device, d, keep).unwrap();
                    let f32s = |b: &Buffer<f32>| 4 * b.len();
                    let held = l.ln1.bytes()
                        + f32s(&l.ln1_mean)
                        + f32s(&l.ln1_rstd)
                        + l.qkv.bytes()
                        + l.atty.as_ref().map_or(0, Act::bytes)
                        + l.lse.as_ref().map_or(0, f32s)
                        + f32s(&l.res2)
                        + l.ln2.bytes()
                        + f32s(&l.ln2_mean)
                        + f32s(&l.ln2_rstd)
                        + l.fch.bytes()
                        + l.fch_gelu.bytes()
                        + f32s(&l.res3);
                    assert_eq!(held, l.bytes(d), "{device:?} sp {sp} keep {keep}");
                }
            }
        }
    }
}
