//! One pipeline stage's share of the GPT on one tensor-parallel rank: forward and backward of
//! a micro-batch, with the tensor-parallel collectives where Megatron-LM puts them.
//!
//! Per layer (f: identity forward, all-reduce backward; g: all-reduce forward, identity
//! backward):
//!
//! ```text
//! x -> LN1 -> f -> QKV (column parallel) -> attention (local heads) -> proj (row parallel) -> g -> + x
//!   -> LN2 -> f -> FC (column parallel) -> GeLU -> FC proj (row parallel) -> g -> + res
//! ```
//!
//! The embedding is vocab parallel (lookup of the local rows, then g), and the LM head is a
//! column-parallel product with the local embedding rows (f before it) feeding the
//! vocab-parallel cross-entropy. LayerNorm inputs and gradients are the same on every
//! tensor-parallel rank, so the replicated LayerNorm parameters stay identical.
//!
//! Sequence parallelism (Korthikanti et al. 2022) splits what lies between the
//! tensor-parallel products — the residual stream, the LayerNorms, the pipeline transfers —
//! over the TP ranks by rows: rank `r` holds rows `r * n/TP ..` of the micro-batch's `n = b t`
//! token rows (Megatron-LM's `[s, b, h]` layout makes that a split of the sequence; in our
//! `[b, t, h]` one it is the same contiguous block of rows, the same cost and memory). Then f
//! is an all-gather of the LayerNorm output (its backward a reduce-scatter) and g a
//! reduce-scatter of the row-parallel product (its backward an all-gather). Each rank's
//! LayerNorm weight gradients come from its own rows only, so they are summed over TP.

use trident_runtime::{Buffer, Device, View};

use super::vocab::{vocab_parallel_cross_entropy, VocabShard};
use super::{on_host, Recompute, Result, ShardLayout, TpGroup};
use crate::model::{GptConfig, ModelError, ParamTensor};
use crate::ops::{self, OpsContext};

/// Sizes of one micro-batch on this rank.
#[derive(Clone, Copy, Debug)]
struct Dims {
    b: usize,
    t: usize,
    n: usize,
    c: usize,
    /// Channels of the local heads (C / TP).
    cl: usize,
    heads: usize,
    /// MLP hidden width held here (4C / TP).
    fl: usize,
    /// Rows of the residual stream held here: `n / TP` under sequence parallelism, else `n`.
    ns: usize,
}

/// What a layer's forward saves for its backward (local widths).
pub struct LayerActs {
    ln1: Buffer<f32>,
    ln1_mean: Buffer<f32>,
    ln1_rstd: Buffer<f32>,
    qkv: Buffer<f32>,
    /// Attention output and log-sum-exp; `None` under selective recomputation.
    atty: Option<Buffer<f32>>,
    lse: Option<Buffer<f32>>,
    res2: Buffer<f32>,
    ln2: Buffer<f32>,
    ln2_mean: Buffer<f32>,
    ln2_rstd: Buffer<f32>,
    fch: Buffer<f32>,
    fch_gelu: Buffer<f32>,
    res3: Buffer<f32>,
}

impl LayerActs {
    fn new(device: &Device, d: Dims, keep_attention: bool) -> Result<Self> {
        let z = |len: usize| Buffer::zeros(device, len);
        Ok(Self {
            ln1: z(d.ns * d.c)?,
            ln1_mean: z(d.ns)?,
            ln1_rstd: z(d.ns)?,
            qkv: z(d.n * 3 * d.cl)?,
            atty: keep_attention.then(|| z(d.n * d.cl)).transpose()?,
            lse: keep_attention.then(|| z(d.b * d.heads * d.t)).transpose()?,
            res2: z(d.ns * d.c)?,
            ln2: z(d.ns * d.c)?,
            ln2_mean: z(d.ns)?,
            ln2_rstd: z(d.ns)?,
            fch: z(d.n * d.fl)?,
            fch_gelu: z(d.n * d.fl)?,
            res3: z(d.ns * d.c)?,
        })
    }
}

/// The LM head's saved tensors (last stage).
struct HeadActs {
    lnf: Buffer<f32>,
    mean: Buffer<f32>,
    rstd: Buffer<f32>,
    /// `[n, Vp/TP]`; overwritten with its gradient by the loss.
    logits: Buffer<f32>,
    losses: Vec<f32>,
}

/// Everything one in-flight micro-batch keeps between its forward and its backward.
pub struct MicroActs {
    /// The stage's input: the embedding (first stage) or the received activation.
    pub input: Buffer<f32>,
    /// Local token rows (first stage).
    tokens: Buffer<u32>,
    /// Saved per layer, or under full recomputation empty.
    layers: Vec<LayerActs>,
    /// Under full recomputation: each layer's output only.
    outputs: Vec<Buffer<f32>>,
    head: Option<HeadActs>,
}

impl MicroActs {
    /// Bytes held for this micro-batch.
    pub fn bytes(&self) -> usize {
        let head = self
            .head
            .as_ref()
            .map_or(0, |h| h.lnf.len() + h.mean.len() + h.rstd.len() + h.logits.len() + h.losses.len());
        let outputs: usize = self.outputs.iter().map(|o| o.len()).sum();
        4 * (self.input.len()
            + self.tokens.len()
            + self.layers.iter().map(layer_len).sum::<usize>()
            + outputs
            + head)
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
struct Scratch {
    /// A row-parallel product's `[n, c]` output (partial sums under sequence parallelism).
    proj: Buffer<f32>,
    /// Sequence parallelism: buffers of whole rows beside the local ones — the product's
    /// reduce-scattered rows, a LayerNorm output gathered for the next product, the residual
    /// gradient gathered for a row-parallel backward, a column-parallel input gradient before
    /// its reduce-scatter, and one LayerNorm's weight and bias gradients (`2c`) before their
    /// sum over TP.
    sp: Option<SpScratch>,
    /// Gradient of the residual stream; on entry to the backward, of the stage's output.
    dres: Buffer<f32>,
    dln: Buffer<f32>,
    datty: Buffer<f32>,
    dqkv: Buffer<f32>,
    dfch: Buffer<f32>,
    atty: Buffer<f32>,
    lse: Buffer<f32>,
    /// The layer being recomputed (full recomputation).
    layer: Option<LayerActs>,
    /// Local embedding rows plus one zero row for tokens held elsewhere, and its gradient.
    wte_ext: Option<Buffer<f32>>,
    dwte_ext: Option<Buffer<f32>>,
    /// Zeros standing in for the position table on tensor-parallel ranks other than 0, so
    /// that the all-reduce adds it once.
    zero_wpe: Option<Buffer<f32>>,
}

/// See [`Scratch::sp`].
struct SpScratch {
    proj_local: Buffer<f32>,
    ln_full: Buffer<f32>,
    dres_full: Buffer<f32>,
    dln_full: Buffer<f32>,
    dln_params: Buffer<f32>,
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

/// One rank's part of the model and its gradients.
pub struct StageModel {
    pub layout: ShardLayout,
    pub params: Buffer<f32>,
    pub grads: Buffer<f32>,
    pub vocab: VocabShard,
    recompute: Recompute,
    dims: Dims,
    scratch: Scratch,
}

impl StageModel {
    /// The stage's share of `full` (a whole model's parameters in llm.c order), for
    /// micro-batches of `b x t` tokens.
    pub fn new(
        device: &Device,
        layout: ShardLayout,
        full: &[f32],
        b: usize,
        t: usize,
        recompute: Recompute,
        sequence_parallel: bool,
    ) -> Result<Self> {
        let config = layout.config;
        if b == 0 || t == 0 {
            return Err(ModelError::EmptyBatch { batch: b, seq: t }.into());
        }
        if t > config.max_seq_len {
            return Err(ModelError::SeqTooLong { seq: t, max: config.max_seq_len }.into());
        }
        let place = layout.place;
        let (c, tp) = (config.channels, place.tp);
        let sp = sequence_parallel && tp > 1;
        if sp && t % tp != 0 {
            return Err(super::ParallelError::Unsupported(format!(
                "--sequence-parallel splits the sequence over --tensor-model-parallel-size {tp}: \
                 --seq-length {t} is not divisible by it"
            )));
        }
        let n = b * t;
        let ns = if sp { n / tp } else { n };
        let dims = Dims { b, t, n, c, cl: c / tp, heads: config.num_heads / tp, fl: 4 * c / tp, ns };
        let local_vocab = config.padded_vocab_size / tp;
        let vocab =
            VocabShard { start: place.tp_rank * local_vocab, local: local_vocab, vocab: config.vocab_size };
        let z = |len: usize| Buffer::<f32>::zeros(device, len);
        let first = place.is_first_stage();
        let scratch = Scratch {
            proj: z(dims.n * c)?,
            sp: sp
                .then(|| -> std::result::Result<SpScratch, trident_runtime::RuntimeError> {
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
            datty: z(dims.n * dims.cl)?,
            dqkv: z(dims.n * 3 * dims.cl)?,
            dfch: z(dims.n * dims.fl)?,
            atty: z(dims.n * dims.cl)?,
            lse: z(b * dims.heads * t)?,
            layer: (recompute == Recompute::Full).then(|| LayerActs::new(device, dims, true)).transpose()?,
            wte_ext: first.then(|| z((local_vocab + 1) * c)).transpose()?,
            dwte_ext: first.then(|| z((local_vocab + 1) * c)).transpose()?,
            zero_wpe: (first && place.tp_rank != 0).then(|| z(config.max_seq_len * c)).transpose()?,
        };
        let params = Buffer::from_slice(device, &layout.extract(full))?;
        let grads = Buffer::zeros(device, layout.len())?;
        Ok(Self { layout, params, grads, vocab, recompute, dims, scratch })
    }

    pub fn config(&self) -> &GptConfig {
        &self.layout.config
    }

    /// Storage for one in-flight micro-batch.
    pub fn new_micro_acts(&self, device: &Device) -> Result<MicroActs> {
        let d = self.dims;
        let place = self.layout.place;
        let keep_layers = self.recompute != Recompute::Full;
        let keep_attention = self.recompute == Recompute::None;
        let layers = if keep_layers {
            self.layout
                .layers
                .clone()
                .map(|_| LayerActs::new(device, d, keep_attention))
                .collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        let outputs = if keep_layers {
            Vec::new()
        } else {
            self.layout
                .layers
                .clone()
                .map(|_| Buffer::zeros(device, d.ns * d.c))
                .collect::<std::result::Result<_, _>>()?
        };
        let head = place
            .is_last_stage()
            .then(|| -> Result<HeadActs> {
                Ok(HeadActs {
                    lnf: Buffer::zeros(device, d.ns * d.c)?,
                    mean: Buffer::zeros(device, d.ns)?,
                    rstd: Buffer::zeros(device, d.ns)?,
                    logits: Buffer::zeros(device, d.n * self.vocab.local)?,
                    losses: vec![0.0; d.n],
                })
            })
            .transpose()?;
        Ok(MicroActs {
            input: Buffer::zeros(device, d.ns * d.c)?,
            tokens: Buffer::zeros(device, d.n)?,
            layers,
            outputs,
            head,
        })
    }

    /// Bytes of the shared scratch buffers.
    pub fn scratch_bytes(&self) -> usize {
        let s = &self.scratch;
        let opt = |b: &Option<Buffer<f32>>| b.as_ref().map_or(0, |b| b.len());
        let layer = s.layer.as_ref().map_or(0, layer_len);
        4 * (s.proj.len()
            + s.dres.len()
            + s.dln.len()
            + s.datty.len()
            + s.dqkv.len()
            + s.dfch.len()
            + s.atty.len()
            + s.lse.len()
            + layer
            + opt(&s.wte_ext)
            + opt(&s.dwte_ext)
            + opt(&s.zero_wpe)
            + s.sp.as_ref().map_or(0, SpScratch::len))
    }

    /// Elements of one micro-batch's activation as a pipeline stage sends it: `n / TP` rows of
    /// `c` under sequence parallelism, else `n`.
    pub fn activation_len(&self) -> usize {
        self.dims.ns * self.dims.c
    }

    /// The first stage's embedding of `tokens` into `acts.input`, summed over TP.
    pub fn embed(
        &mut self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        acts: &mut MicroActs,
        tokens: &[u32],
    ) -> Result<()> {
        let Dims { b, t, c, .. } = self.dims;
        if let Some(position) = tokens.iter().position(|&x| x as usize >= self.vocab.vocab) {
            let (token, vocab) = (tokens[position], self.vocab.vocab);
            return Err(ModelError::TokenOutOfRange { token, position, vocab }.into());
        }
        acts.tokens.copy_from_slice(&self.vocab.map_tokens(tokens))?;
        let local_rows = self.vocab.local * c;
        let w = Weights { params: &self.params, layout: &self.layout };
        let wte_ext = self.scratch.wte_ext.as_mut().expect("the first stage has the embedding scratch");
        wte_ext.view_mut(..local_rows)?.copy_from(&w.p(ParamTensor::Wte, 0)?)?;
        let wpe = match &self.scratch.zero_wpe {
            Some(z) => z.view(..)?,
            None => w.p(ParamTensor::Wpe, 0)?,
        };
        let (tokens, wte_ext) = (acts.tokens.view(..)?, wte_ext.view(..)?);
        match &self.scratch.sp {
            // The lookup of every row, then g as a reduce-scatter onto this rank's rows.
            Some(_) => {
                let mut full = self.scratch.proj.view_mut(..)?;
                ops::encoder_forward(ctx, &mut full, tokens, wte_ext, wpe, b, t, c)?;
                tp.reduce_scatter_rows(&full.as_view(), &mut acts.input.view_mut(..)?)
            }
            None => {
                let mut out = acts.input.view_mut(..)?;
                ops::encoder_forward(ctx, &mut out, tokens, wte_ext, wpe, b, t, c)?;
                tp.all_reduce_view(&mut out)
            }
        }
    }

    /// The forward pass of the stage's layers over `acts.input`; on the last stage also the
    /// loss (returned, mean over the micro-batch) and, with `dloss`, the logits' gradient.
    pub fn forward(
        &mut self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        acts: &mut MicroActs,
        targets: Option<&[u32]>,
        dloss: Option<f32>,
    ) -> Result<Option<f32>> {
        let w = Weights { params: &self.params, layout: &self.layout };
        let (d, s) = (self.dims, &mut self.scratch);
        for (i, l) in self.layout.layers.clone().enumerate() {
            if acts.layers.is_empty() {
                let mut la = s.layer.take().expect("full recomputation has a layer scratch");
                let x = if i == 0 { &acts.input } else { &acts.outputs[i - 1] };
                let r = layer_forward(ctx, tp, &w, d, s, l, x, &mut la);
                if r.is_ok() {
                    acts.outputs[i].view_mut(..)?.copy_from(&la.res3.view(..)?)?;
                }
                s.layer = Some(la);
                r?;
            } else {
                let (before, rest) = acts.layers.split_at_mut(i);
                let x = if i == 0 { &acts.input } else { &before[i - 1].res3 };
                layer_forward(ctx, tp, &w, d, s, l, x, &mut rest[0])?;
            }
        }
        if !self.layout.place.is_last_stage() {
            return Ok(None);
        }
        let targets = targets.expect("the last stage gets the targets");
        let Dims { n, c, ns, .. } = d;
        let out = match acts.layers.last() {
            Some(l) => l.res3.view(..)?,
            None => acts.outputs.last().expect("a stage has layers").view(..)?,
        };
        let head = acts.head.as_mut().expect("the last stage keeps the head's activations");
        let (lw, lb) = (w.p(ParamTensor::LnfW, 0)?, w.p(ParamTensor::LnfB, 0)?);
        let (mut lnf, mut mean, mut rstd) =
            (head.lnf.view_mut(..)?, head.mean.view_mut(..)?, head.rstd.view_mut(..)?);
        ops::layernorm_forward(ctx, &mut lnf, &mut mean, &mut rstd, out, lw, lb, ns, c)?;
        // f (identity; under sequence parallelism the all-gather of the rows), then the
        // column-parallel product with the local vocabulary rows.
        let lnf = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.ln_full), lnf.as_view())?;
        let mut logits = head.logits.view_mut(..)?;
        let wte = w.p(ParamTensor::Wte, 0)?;
        ops::matmul_forward(ctx, &mut logits, lnf, wte, None, n, c, self.vocab.local)?;
        ctx.device().synchronize()?;
        let vocab = self.vocab;
        let losses = &mut head.losses;
        on_host(&mut logits, |h| vocab_parallel_cross_entropy(tp, vocab, h, losses, targets, dloss))?;
        Ok(Some((losses.iter().map(|&x| x as f64).sum::<f64>() / n as f64) as f32))
    }

    /// The backward pass of the micro-batch in `acts`, accumulating into the gradients. On the
    /// last stage it starts from the logits' gradient; elsewhere `dout` is the gradient of the
    /// stage's output. Leaves the gradient of the stage's input in
    /// [`input_grad`](Self::input_grad). `layer_done(l, grads)` runs as soon as layer `l`'s
    /// gradients are complete for this micro-batch.
    pub fn backward(
        &mut self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        acts: &MicroActs,
        dout: Option<&[f32]>,
        layer_done: &mut dyn FnMut(usize, &Buffer<f32>) -> Result<()>,
    ) -> Result<()> {
        let d = self.dims;
        let Dims { b, t, n, c, ns, .. } = d;
        let w = Weights { params: &self.params, layout: &self.layout };
        let (s, grads) = (&mut self.scratch, &mut self.grads);
        let place = self.layout.place;
        if place.is_last_stage() {
            let head = acts.head.as_ref().expect("the last stage keeps the head's activations");
            // The LM head: column parallel over the vocabulary, then f's all-reduce.
            let mut dwte = grads.view_mut(self.layout.range(ParamTensor::Wte, 0))?;
            let dlogits = head.logits.view(..)?;
            let (ln_full, dln_full) = match &mut s.sp {
                Some(sp) => (Some(&mut sp.ln_full), Some(&mut sp.dln_full)),
                None => (None, None),
            };
            let lnf = gathered(tp, ln_full, head.lnf.view(..)?)?;
            let wte = w.p(ParamTensor::Wte, 0)?;
            // The input gradient's partial sums go to whole rows under sequence parallelism.
            let mut dln_full = dln_full;
            let partial = match dln_full.as_deref_mut() {
                Some(full) => full,
                None => &mut s.dln,
            };
            let (mut dln, local) = (partial.view_mut(..)?, self.vocab.local);
            ops::matmul_backward(ctx, &mut dln, &mut dwte, None, dlogits, lnf, wte, n, c, local)?;
            match dln_full {
                Some(full) => tp.reduce_scatter_rows(&full.view(..)?, &mut s.dln.view_mut(..)?)?,
                None => tp.all_reduce_view(&mut s.dln.view_mut(..)?)?,
            }
            s.dres.view_mut(..)?.fill_zero()?;
            let (mean, rstd) = (&head.mean, &head.rstd);
            let lnf_t = (ParamTensor::LnfW, ParamTensor::LnfB, 0);
            let x = match acts.layers.last() {
                Some(l) => &l.res3,
                None => acts.outputs.last().expect("a stage has layers"),
            };
            layernorm_backward(ctx, tp, grads, &w, lnf_t, s, x, mean, rstd, ns, c)?;
        } else {
            let dout = dout.expect("an inner stage receives its output's gradient");
            s.dres.copy_from_slice(dout)?;
        }
        for (i, l) in self.layout.layers.clone().enumerate().rev() {
            if acts.layers.is_empty() {
                let mut la = s.layer.take().expect("full recomputation has a layer scratch");
                let x = if i == 0 { &acts.input } else { &acts.outputs[i - 1] };
                // Full recomputation: rerun the layer (with its collectives), then differentiate.
                let r = layer_forward(ctx, tp, &w, d, s, l, x, &mut la)
                    .and_then(|()| layer_backward(ctx, tp, &w, grads, d, s, l, x, &la));
                s.layer = Some(la);
                r?;
            } else {
                let x = if i == 0 { &acts.input } else { &acts.layers[i - 1].res3 };
                layer_backward(ctx, tp, &w, grads, d, s, l, x, &acts.layers[i])?;
            }
            layer_done(l, grads)?;
        }
        if place.is_first_stage() {
            let local_rows = self.vocab.local * c;
            let wte = self.layout.range(ParamTensor::Wte, 0);
            let wpe = self.layout.range(ParamTensor::Wpe, 0);
            let dwte_ext = s.dwte_ext.as_mut().expect("the first stage has the embedding scratch");
            // Accumulate on top of the local rows; the extra row collects tokens other ranks hold.
            dwte_ext.view_mut(..local_rows)?.copy_from(&grads.view(wte.clone())?)?;
            dwte_ext.view_mut(local_rows..)?.fill_zero()?;
            let mut dwpe = grads.view_mut(wpe)?;
            // Under sequence parallelism, g's backward: every row's gradient, gathered.
            let dres = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.dres_full), s.dres.view(..)?)?;
            let tokens = acts.tokens.view(..)?;
            ops::encoder_backward(ctx, &mut dwte_ext.view_mut(..)?, &mut dwpe, dres, tokens, b, t, c)?;
            grads.view_mut(wte)?.copy_from(&dwte_ext.view(..local_rows)?)?;
        }
        Ok(())
    }

    /// The gradient of the stage's input after [`backward`](Self::backward).
    pub fn input_grad(&self) -> &Buffer<f32> {
        &self.scratch.dres
    }

    pub fn zero_grads(&mut self) -> Result<()> {
        Ok(self.grads.view_mut(..)?.fill_zero()?)
    }
}

/// The parameters, read by tensor and layer.
struct Weights<'a> {
    params: &'a Buffer<f32>,
    layout: &'a ShardLayout,
}

impl Weights<'_> {
    fn p(&self, t: ParamTensor, layer: usize) -> Result<View<'_, f32>> {
        Ok(self.params.view(self.layout.range(t, layer))?)
    }
}

/// The attention output and log-sum-exp: the layer's own, or under selective recomputation
/// the shared scratch.
fn attention_buffers<'a>(
    atty: &'a mut Option<Buffer<f32>>,
    lse: &'a mut Option<Buffer<f32>>,
    s_atty: &'a mut Buffer<f32>,
    s_lse: &'a mut Buffer<f32>,
) -> (&'a mut Buffer<f32>, &'a mut Buffer<f32>) {
    match (atty.as_mut(), lse.as_mut()) {
        (Some(x), Some(y)) => (x, y),
        _ => (s_atty, s_lse),
    }
}

/// `local`'s rows from every tensor-parallel rank gathered into `full` (sequence parallelism's
/// f forward and g backward), or, without sequence parallelism, `local` itself.
fn gathered<'a>(
    tp: &mut TpGroup,
    full: Option<&'a mut Buffer<f32>>,
    local: View<'a, f32>,
) -> Result<View<'a, f32>> {
    match full {
        Some(full) => {
            tp.all_gather_rows(&local, &mut full.view_mut(..)?)?;
            let full: &'a Buffer<f32> = full;
            Ok(full.view(..)?)
        }
        None => Ok(local),
    }
}

/// Row-parallel linear layer forward: the local product over this rank's input columns, the
/// bias added on tensor-parallel rank 0 only, then g: the sum over the group, all-reduced in
/// `s.proj` or, under sequence parallelism, reduce-scattered onto this rank's rows in
/// `proj_local`. Returns the buffer that holds the result.
#[allow(clippy::too_many_arguments)]
fn row_parallel_forward<'s>(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    (proj, proj_local): (&'s mut Buffer<f32>, Option<&'s mut Buffer<f32>>),
    inp: View<f32>,
    w: View<f32>,
    bias: View<f32>,
    n: usize,
    ic_local: usize,
    oc: usize,
) -> Result<&'s Buffer<f32>> {
    let bias = (tp.rank == 0).then_some(bias);
    let mut out = proj.view_mut(..)?;
    ops::matmul_forward(ctx, &mut out, inp, w, bias, n, ic_local, oc)?;
    match proj_local {
        Some(local) => {
            tp.reduce_scatter_rows(&out.as_view(), &mut local.view_mut(..)?)?;
            Ok(local)
        }
        None => {
            tp.all_reduce_view(&mut out)?;
            Ok(proj)
        }
    }
}

/// Column-parallel linear layer backward: local weight gradients and the input gradient's
/// partial sums, then f's backward: the sum over the group into `dln`, all-reduced or,
/// under sequence parallelism, computed in `dln_full` and reduce-scattered onto this rank's
/// rows.
#[allow(clippy::too_many_arguments)]
fn column_parallel_backward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    grads: &mut Buffer<f32>,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    (dln, dln_full): (&mut Buffer<f32>, Option<&mut Buffer<f32>>),
    dout: View<f32>,
    inp: View<f32>,
    (n, ic, oc_local): (usize, usize, usize),
) -> Result<()> {
    // The local products are a row-parallel backward's; only the reduction differs.
    let mut dln_full = dln_full;
    let partial = match dln_full.as_deref_mut() {
        Some(full) => full,
        None => &mut *dln,
    };
    row_parallel_backward(ctx, grads, w, (wt, bt, l), partial, dout, inp, (n, ic, oc_local))?;
    match dln_full {
        Some(full) => tp.reduce_scatter_rows(&full.view(..)?, &mut dln.view_mut(..)?),
        None => tp.all_reduce_view(&mut dln.view_mut(..)?),
    }
}

/// The scratch's LayerNorm-gather and column-gradient buffers (sequence parallelism).
fn sp_ln_buffers(sp: &mut Option<SpScratch>) -> (Option<&mut Buffer<f32>>, Option<&mut Buffer<f32>>) {
    match sp {
        Some(sp) => (Some(&mut sp.ln_full), Some(&mut sp.dln_full)),
        None => (None, None),
    }
}

/// Row-parallel linear layer backward: g's backward is the identity, so the local product
/// gives this rank's input columns' gradient; the replicated bias gets the same gradient on
/// every rank.
#[allow(clippy::too_many_arguments)]
fn row_parallel_backward(
    ctx: &OpsContext,
    grads: &mut Buffer<f32>,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    dinp: &mut Buffer<f32>,
    dout: View<f32>,
    inp: View<f32>,
    (n, ic_local, oc): (usize, usize, usize),
) -> Result<()> {
    let [mut dw, mut db] = grads.views_mut([w.layout.range(wt, l), w.layout.range(bt, l)])?;
    let mut dinp = dinp.view_mut(..)?;
    ops::matmul_backward(ctx, &mut dinp, &mut dw, Some(&mut db), dout, inp, w.p(wt, l)?, n, ic_local, oc)?;
    Ok(())
}

/// A LayerNorm of this rank's residual rows (`ns` of them).
#[allow(clippy::too_many_arguments)]
fn layernorm_rows(
    ctx: &OpsContext,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    out: &mut Buffer<f32>,
    mean: &mut Buffer<f32>,
    rstd: &mut Buffer<f32>,
    x: &Buffer<f32>,
    d: Dims,
) -> Result<()> {
    let (mut out, mut mean, mut rstd) = (out.view_mut(..)?, mean.view_mut(..)?, rstd.view_mut(..)?);
    ops::layernorm_forward(
        ctx,
        &mut out,
        &mut mean,
        &mut rstd,
        x.view(..)?,
        w.p(wt, l)?,
        w.p(bt, l)?,
        d.ns,
        d.c,
    )?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn layer_forward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    w: &Weights,
    d: Dims,
    s: &mut Scratch,
    l: usize,
    x: &Buffer<f32>,
    a: &mut LayerActs,
) -> Result<()> {
    let Dims { b, t, n, c, cl, heads, fl, ns, .. } = d;
    let p = |t: ParamTensor| w.p(t, l);
    let ln1 = (ParamTensor::Ln1W, ParamTensor::Ln1B, l);
    layernorm_rows(ctx, w, ln1, &mut a.ln1, &mut a.ln1_mean, &mut a.ln1_rstd, x, d)?;
    // f, then QKV: column parallel over this rank's heads.
    let (qkvw, qkvb) = (p(ParamTensor::QkvW)?, p(ParamTensor::QkvB)?);
    let ln = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.ln_full), a.ln1.view(..)?)?;
    ops::matmul_forward(ctx, &mut a.qkv.view_mut(..)?, ln, qkvw, Some(qkvb), n, c, 3 * cl)?;
    let (atty, lse) = attention_buffers(&mut a.atty, &mut a.lse, &mut s.atty, &mut s.lse);
    ops::attention_forward(
        ctx,
        &mut atty.view_mut(..)?,
        &mut lse.view_mut(..)?,
        a.qkv.view(..)?,
        b,
        t,
        cl,
        heads,
    )?;
    let atty = atty.view(..)?;
    let (pw, pb) = (p(ParamTensor::AttnProjW)?, p(ParamTensor::AttnProjB)?);
    let bufs = (&mut s.proj, s.sp.as_mut().map(|sp| &mut sp.proj_local));
    let proj = row_parallel_forward(ctx, tp, bufs, atty, pw, pb, n, cl, c)?;
    ops::residual_forward(ctx, &mut a.res2.view_mut(..)?, x.view(..)?, proj.view(..)?, ns * c)?;
    let ln2 = (ParamTensor::Ln2W, ParamTensor::Ln2B, l);
    layernorm_rows(ctx, w, ln2, &mut a.ln2, &mut a.ln2_mean, &mut a.ln2_rstd, &a.res2, d)?;
    let (fcw, fcb) = (p(ParamTensor::FcW)?, p(ParamTensor::FcB)?);
    let ln = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.ln_full), a.ln2.view(..)?)?;
    ops::matmul_forward(ctx, &mut a.fch.view_mut(..)?, ln, fcw, Some(fcb), n, c, fl)?;
    ops::gelu_forward(ctx, &mut a.fch_gelu.view_mut(..)?, a.fch.view(..)?, n * fl)?;
    let (pw, pb) = (p(ParamTensor::FcProjW)?, p(ParamTensor::FcProjB)?);
    let bufs = (&mut s.proj, s.sp.as_mut().map(|sp| &mut sp.proj_local));
    let proj = row_parallel_forward(ctx, tp, bufs, a.fch_gelu.view(..)?, pw, pb, n, fl, c)?;
    ops::residual_forward(ctx, &mut a.res3.view_mut(..)?, a.res2.view(..)?, proj.view(..)?, ns * c)?;
    Ok(())
}

/// Backward of one layer: `s.dres` holds the gradient of the layer's output on entry and of
/// its input `x` on return (this rank's rows under sequence parallelism).
#[allow(clippy::too_many_arguments)]
fn layer_backward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    w: &Weights,
    grads: &mut Buffer<f32>,
    d: Dims,
    s: &mut Scratch,
    l: usize,
    x: &Buffer<f32>,
    a: &LayerActs,
) -> Result<()> {
    let Dims { b, t, n, c, cl, heads, fl, ns, .. } = d;
    // MLP: FC proj (row parallel), GeLU, FC (column parallel, then f's backward), LN2.
    let fcproj = (ParamTensor::FcProjW, ParamTensor::FcProjB, l);
    let dres = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.dres_full), s.dres.view(..)?)?;
    row_parallel_backward(ctx, grads, w, fcproj, &mut s.dfch, dres, a.fch_gelu.view(..)?, (n, fl, c))?;
    ops::gelu_backward(ctx, &mut s.dfch.view_mut(..)?, a.fch.view(..)?, n * fl)?;
    let fc = (ParamTensor::FcW, ParamTensor::FcB, l);
    let (ln_full, dln_full) = sp_ln_buffers(&mut s.sp);
    let ln2_rows = gathered(tp, ln_full, a.ln2.view(..)?)?;
    let dln = (&mut s.dln, dln_full);
    column_parallel_backward(ctx, tp, grads, w, fc, dln, s.dfch.view(..)?, ln2_rows, (n, c, fl))?;
    let ln2 = (ParamTensor::Ln2W, ParamTensor::Ln2B, l);
    layernorm_backward(ctx, tp, grads, w, ln2, s, &a.res2, &a.ln2_mean, &a.ln2_rstd, ns, c)?;
    // Attention: proj (row parallel), attention over the local heads, QKV (column parallel), LN1.
    if a.atty.is_none() {
        // Selective recomputation: the attention output was not kept.
        let (mut atty, mut lse) = (s.atty.view_mut(..)?, s.lse.view_mut(..)?);
        ops::attention_forward(ctx, &mut atty, &mut lse, a.qkv.view(..)?, b, t, cl, heads)?;
    }
    let (atty, lse) = match (&a.atty, &a.lse) {
        (Some(x), Some(y)) => (x, y),
        _ => (&s.atty, &s.lse),
    };
    let proj = (ParamTensor::AttnProjW, ParamTensor::AttnProjB, l);
    let dres = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.dres_full), s.dres.view(..)?)?;
    row_parallel_backward(ctx, grads, w, proj, &mut s.datty, dres, atty.view(..)?, (n, cl, c))?;
    let (datty, qkv) = (s.datty.view(..)?, a.qkv.view(..)?);
    ops::attention_backward(
        ctx,
        &mut s.dqkv.view_mut(..)?,
        datty,
        qkv,
        atty.view(..)?,
        lse.view(..)?,
        b,
        t,
        cl,
        heads,
    )?;
    let qkvt = (ParamTensor::QkvW, ParamTensor::QkvB, l);
    let (ln_full, dln_full) = sp_ln_buffers(&mut s.sp);
    let ln1_rows = gathered(tp, ln_full, a.ln1.view(..)?)?;
    let dln = (&mut s.dln, dln_full);
    column_parallel_backward(ctx, tp, grads, w, qkvt, dln, s.dqkv.view(..)?, ln1_rows, (n, c, 3 * cl))?;
    let ln1 = (ParamTensor::Ln1W, ParamTensor::Ln1B, l);
    layernorm_backward(ctx, tp, grads, w, ln1, s, x, &a.ln1_mean, &a.ln1_rstd, ns, c)
}

/// LayerNorm backward of this rank's `n` rows from `s.dln`, accumulating into `s.dres` (the
/// residual stream). Under sequence parallelism the weight and bias gradients of these rows
/// are summed over the tensor-parallel group before they join the gradients.
#[allow(clippy::too_many_arguments)]
fn layernorm_backward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    grads: &mut Buffer<f32>,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    s: &mut Scratch,
    x: &Buffer<f32>,
    mean: &Buffer<f32>,
    rstd: &Buffer<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    let (dy, x, mean, rstd) = (s.dln.view(..)?, x.view(..)?, mean.view(..)?, rstd.view(..)?);
    let (wr, br) = (w.layout.range(wt, l), w.layout.range(bt, l));
    let Some(sp) = &mut s.sp else {
        let [mut dw, mut db] = grads.views_mut([wr, br])?;
        let mut dres = s.dres.view_mut(..)?;
        ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w.p(wt, l)?, mean, rstd, n, c)?;
        return Ok(());
    };
    sp.dln_params.view_mut(..)?.fill_zero()?;
    let [mut dw, mut db] = sp.dln_params.views_mut([0..c, c..2 * c])?;
    let mut dres = s.dres.view_mut(..)?;
    ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w.p(wt, l)?, mean, rstd, n, c)?;
    tp.all_reduce_view(&mut sp.dln_params.view_mut(..)?)?;
    let sums = sp.dln_params.to_vec()?;
    for (range, part) in [(wr, &sums[..c]), (br, &sums[c..])] {
        on_host(&mut grads.view_mut(range)?, |g| {
            g.iter_mut().zip(part).for_each(|(g, p)| *g += p);
            Ok(())
        })?;
    }
    Ok(())
}

fn layer_len(a: &LayerActs) -> usize {
    let opt = |b: &Option<Buffer<f32>>| b.as_ref().map_or(0, |b| b.len());
    a.ln1.len()
        + a.ln1_mean.len()
        + a.ln1_rstd.len()
        + a.qkv.len()
        + opt(&a.atty)
        + opt(&a.lse)
        + a.res2.len()
        + a.ln2.len()
        + a.ln2_mean.len()
        + a.ln2_rstd.len()
        + a.fch.len()
        + a.fch_gelu.len()
        + a.res3.len()
}
