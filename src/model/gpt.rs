//! The GPT as one rank holds it: GPT-2 (pre-LayerNorm blocks, learned positions, tied
//! embeddings, GeLU MLP) split as Megatron-LM splits it, the layers of one pipeline stage on
//! one tensor-parallel rank. At TP = PP = 1 that share is the whole model, every collective is
//! a no-op, and the code below is the single-rank model; there is no other.
//!
//! The embedding is vocab parallel (lookup of the local rows, then g), and the LM head is a
//! column-parallel product with the local embedding rows (f before it) feeding the
//! vocab-parallel cross-entropy; at TP = 1 both are the plain embedding and the fused
//! softmax cross-entropy kernel. LayerNorm inputs and gradients are the same on every
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

use super::activations::{Dims, MicroActs, Workspace};
use super::layer::{gathered, gathered_act, layer_backward, layer_forward, layernorm_backward, Weights};
use super::tensor::{storage, store_acts, Act};
use super::vocab::{vocab_parallel_cross_entropy, VocabShard};
use super::{gpt2_init, GptConfig, ModelError, ParamLayout, ParamTensor, Precision, ShardLayout, ShardPlace};
use crate::ops::{self, Operand, OperandMut, OpsContext};
use crate::parallel::{Recompute, TpGroup};

type Result<T> = std::result::Result<T, ModelError>;

/// One rank's share of the model: its parameters and their gradients, one buffer each in
/// [`ShardLayout`] order.
///
/// A training step runs [`embed`](Self::embed), [`forward`](Self::forward) and
/// [`backward`](Self::backward) per micro-batch over a [`Workspace`] and one [`MicroActs`]
/// each (the trainer does that, pipeline schedule included); inference on a whole model is
/// [`logits`](Self::logits). A tiny whole model on the CPU:
///
/// ```
/// use trident::model::{Gpt, GptConfig, ModelError};
/// use trident::ops::OpsContext;
/// use trident::runtime::Device;
///
/// # fn main() -> Result<(), ModelError> {
/// // 8 positions, a vocabulary of 10 (padded to 16), 2 layers, 2 heads, hidden size 16.
/// let config = GptConfig::new(8, 10, 2, 2, 16, 16)?;
/// let device = Device::Cpu;
/// let model = Gpt::init(&device, config, 1234)?;
/// // Per layer 12 C^2 + 13 C, then (Vp + maxT) C embeddings and the final LayerNorm's 2 C.
/// assert_eq!(model.num_params(), 2 * (12 * 16 * 16 + 13 * 16) + (16 + 8) * 16 + 2 * 16);
///
/// let ctx = OpsContext::new(&device)?;
/// let (b, t) = (2, 4);
/// let tokens = [1, 2, 3, 4, 5, 6, 7, 8]; // [b, t], row-major
/// let logits = model.logits(&ctx, &tokens, b, t)?; // [b, t, vocab_size]: padding dropped
/// assert_eq!(logits.len(), b * t * config.vocab_size);
/// assert!(logits.iter().all(|x| x.is_finite()));
///
/// // Causal attention: position 0 of sequence 0 sees only token 1, whatever follows it.
/// let alone = model.logits(&ctx, &[1, 9, 9, 9], 1, t)?;
/// for (x, y) in alone[..10].iter().zip(&logits[..10]) {
///     assert!((x - y).abs() < 1e-5);
/// }
///
/// // Token 10 is outside the vocabulary; more positions than the model has are refused.
/// let bad = model.logits(&ctx, &[10, 1, 2, 3], 1, t);
/// assert!(matches!(bad, Err(ModelError::TokenOutOfRange { token: 10, position: 0, .. })));
/// let long = model.logits(&ctx, &[1; 9], 1, 9);
/// assert!(matches!(long, Err(ModelError::SeqTooLong { seq: 9, max: 8 })));
/// # Ok(())
/// # }
/// ```
pub struct Gpt {
    layout: ShardLayout,
    /// The master weights (fp32).
    params: Buffer<f32>,
    /// Under mixed precision, the weights the products read: the master weights rounded to
    /// bf16 (fp16), refreshed after every update ([`sync_compute_weights`](Self::sync_compute_weights));
    /// a 16-bit buffer on `Emu` and `Cuda`, f32 of the rounded values on `Cpu`. Only the
    /// weight matrices are read from it; LayerNorm parameters, biases and the embedding lookup
    /// read the master weights.
    compute: Option<Act>,
    grads: Buffer<f32>,
    vocab: VocabShard,
    options: GptOptions,
}

/// How a model runs, beside its shape and place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GptOptions {
    /// What the backward recomputes instead of keeping ([`Recompute::None`]: keep every
    /// activation; `--recompute-granularity`).
    pub recompute: Recompute,
    /// Split the residual stream over the tensor-parallel ranks (only at TP > 1).
    pub sequence_parallel: bool,
    /// The precision of activations, their gradients and the products' weights (`--bf16`,
    /// `--fp16`; fp32 master weights either way).
    pub precision: Precision,
}

/// Called with each layer as soon as its gradients are complete for the micro-batch (the
/// data-parallel buckets start reducing then).
pub type LayerDone<'a> = dyn FnMut(usize, &Buffer<f32>) -> Result<()> + 'a;

impl Gpt {
    /// The share of `full` (a whole model's parameters in [`ParamLayout`] order) that the rank
    /// at `layout.place` holds. Sequence parallelism applies only at TP > 1.
    pub fn new(device: &Device, layout: ShardLayout, full: &[f32], options: GptOptions) -> Result<Self> {
        let config = layout.config;
        config.validate()?;
        let expected = ParamLayout::new(config).len();
        if full.len() != expected {
            return Err(ModelError::ParamCount { got: full.len(), expected });
        }
        let place = layout.place;
        let local = config.padded_vocab_size / place.tp;
        let vocab = VocabShard { start: place.tp_rank * local, local, vocab: config.vocab_size };
        let params = Buffer::from_slice(device, &layout.extract(full))?;
        let grads = Buffer::zeros(device, layout.len())?;
        let sequence_parallel = options.sequence_parallel && place.tp > 1;
        let options = GptOptions { sequence_parallel, ..options };
        let compute = options
            .precision
            .format()
            .map(|f| Act::zeros(device, layout.len(), storage(device, Some(f))))
            .transpose()?;
        let mut model = Self { layout, params, compute, grads, vocab, options };
        model.sync_compute_weights(&OpsContext::new(device)?)?;
        Ok(model)
    }

    /// Rounds the master weights into the weights the products read (after every update of
    /// the master weights; nothing to do in fp32): one conversion into the 16-bit buffer, or
    /// on `Cpu` a copy rounded in place.
    pub fn sync_compute_weights(&mut self, ctx: &OpsContext) -> Result<()> {
        let master = self.params.view(..)?;
        match (self.compute.as_mut(), self.options.precision.format()) {
            (Some(Act::F32(compute)), Some(format)) => {
                compute.view_mut(..)?.copy_from(&master)?;
                ops::round_to(ctx, &mut compute.view_mut(..)?, format)?;
            }
            (Some(compute @ Act::Half(..)), _) => {
                ops::mixed::convert(ctx, &mut compute.all_mut()?, Operand::F32(master))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Bytes of the compute weights (mixed precision's rounded copy of the parameters; 2 per
    /// parameter where it is a 16-bit buffer, 4 on `Cpu`, 0 in fp32).
    pub fn compute_weight_bytes(&self) -> usize {
        self.compute.as_ref().map_or(0, Act::bytes)
    }

    /// The whole model on one rank, holding `params` (in [`ParamLayout`] order).
    pub fn from_params(device: &Device, config: GptConfig, params: &[f32]) -> Result<Self> {
        config.validate()?;
        let layout = ShardLayout::new(config, ShardPlace::SINGLE);
        Self::new(device, layout, params, GptOptions::default())
    }

    /// A freshly initialised whole model on one rank (GPT-2 initialisation, seeded).
    pub fn init(device: &Device, config: GptConfig, seed: u64) -> Result<Self> {
        config.validate()?;
        Self::from_params(device, config, &gpt2_init(&ParamLayout::new(config), seed))
    }

    /// The whole model's shape (not this rank's share of it).
    pub fn config(&self) -> &GptConfig {
        &self.layout.config
    }

    /// Where each of this rank's tensors lies in [`params`](Self::params) and
    /// [`grads`](Self::grads), and which layers and chunks the rank holds.
    pub fn layout(&self) -> &ShardLayout {
        &self.layout
    }

    /// The vocabulary rows this rank's embedding holds (all of them at TP = 1).
    pub fn vocab(&self) -> VocabShard {
        self.vocab
    }

    /// What the backward recomputes ([`GptOptions::recompute`]).
    pub fn recompute(&self) -> Recompute {
        self.options.recompute
    }

    /// Whether the residual stream is split over the tensor-parallel ranks.
    pub fn sequence_parallel(&self) -> bool {
        self.options.sequence_parallel
    }

    /// The precision of activations and products.
    pub fn precision(&self) -> Precision {
        self.options.precision
    }

    /// Parameters held by this rank.
    pub fn num_params(&self) -> usize {
        self.layout.len()
    }

    /// The fp32 master weights, [`num_params`](Self::num_params) elements in [`ShardLayout`]
    /// order.
    pub fn params(&self) -> &Buffer<f32> {
        &self.params
    }

    /// A whole model's (TP = PP = 1) `values` — its parameters, gradients or anything else
    /// in [`ShardLayout`] order — in llm.c's [`ParamLayout`] order.
    pub fn to_param_layout(&self, values: &Buffer<f32>) -> Result<Vec<f32>> {
        let place = self.layout.place;
        if place.tp != 1 || place.pp != 1 {
            return Err(ModelError::State {
                what: format!(
                    "a share of tensor-parallel size {} over {} stages is not a whole model",
                    place.tp, place.pp
                ),
            });
        }
        let mut full = vec![0.0; ParamLayout::new(self.layout.config).len()];
        self.layout.insert(&values.to_vec()?, &mut full);
        Ok(full)
    }

    /// The master weights, to update or load. Under mixed precision call
    /// [`sync_compute_weights`](Self::sync_compute_weights) after writing them.
    pub fn params_mut(&mut self) -> &mut Buffer<f32> {
        &mut self.params
    }

    /// The fp32 gradients, in [`ShardLayout`] order: the sum of every
    /// [`backward`](Self::backward) since the last [`zero_grads`](Self::zero_grads).
    pub fn grads(&self) -> &Buffer<f32> {
        &self.grads
    }

    /// The gradients, to reduce, scale or clip in place.
    pub fn grads_mut(&mut self) -> &mut Buffer<f32> {
        &mut self.grads
    }

    /// Parameters and gradients at once (for the optimizer).
    pub fn params_and_grads(&mut self) -> (&mut Buffer<f32>, &Buffer<f32>) {
        (&mut self.params, &self.grads)
    }

    /// Sets every gradient to 0 (before the first micro-batch of a step).
    pub fn zero_grads(&mut self) -> Result<()> {
        Ok(self.grads.view_mut(..)?.fill_zero()?)
    }

    fn weights(&self) -> Weights<'_> {
        Weights { master: &self.params, compute: self.compute.as_ref(), layout: &self.layout }
    }

    /// The first stage's embedding of `tokens` (`[b, t]`, row-major) into `acts.input`:
    /// `wte[token] + wpe[position]`, summed over TP (each rank looks up the rows it holds).
    pub fn embed(
        &self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        ws: &mut Workspace,
        acts: &mut MicroActs,
        tokens: &[u32],
    ) -> Result<()> {
        let Dims { b, t, n, c, .. } = ws.dims;
        if !self.layout.place.is_first_chunk(acts.chunk) {
            return Err(ModelError::State {
                what: "the embedding belongs to the first virtual pipeline stage".into(),
            });
        }
        if tokens.len() != n {
            return Err(ModelError::TokenCount {
                what: "the embedding",
                got: tokens.len(),
                batch: b,
                seq: t,
            });
        }
        if let Some(position) = tokens.iter().position(|&x| x as usize >= self.vocab.vocab) {
            let (token, vocab) = (tokens[position], self.vocab.vocab);
            return Err(ModelError::TokenOutOfRange { token, position, vocab });
        }
        let w = self.weights();
        let s = &mut ws.scratch;
        let Some(wte_ext) = s.wte_ext.as_mut() else {
            // TP = 1: every row is here.
            acts.tokens.copy_from_slice(tokens)?;
            let (wte, wpe) = (w.p(ParamTensor::Wte, 0)?, w.p(ParamTensor::Wpe, 0)?);
            let mut out = acts.input.view_mut(..)?;
            ops::encoder_forward(ctx, &mut out, acts.tokens.view(..)?, wte, wpe, b, t, c)?;
            return Ok(());
        };
        acts.tokens.copy_from_slice(&self.vocab.map_tokens(tokens))?;
        let local_rows = self.vocab.local * c;
        wte_ext.view_mut(..local_rows)?.copy_from(&w.p(ParamTensor::Wte, 0)?)?;
        let wpe = match &s.zero_wpe {
            Some(z) => z.view(..)?,
            None => w.p(ParamTensor::Wpe, 0)?,
        };
        let (tokens, wte_ext) = (acts.tokens.view(..)?, wte_ext.view(..)?);
        match &s.sp {
            // The lookup of every row, then g as a reduce-scatter onto this rank's rows.
            Some(_) => {
                let mut full = s.proj.view_mut(..)?;
                ops::encoder_forward(ctx, &mut full, tokens, wte_ext, wpe, b, t, c)?;
                tp.reduce_scatter_rows(&full.as_view(), &mut acts.input.view_mut(..)?)?;
            }
            None => {
                let mut out = acts.input.view_mut(..)?;
                ops::encoder_forward(ctx, &mut out, tokens, wte_ext, wpe, b, t, c)?;
                tp.all_reduce_view(&mut out)?;
            }
        }
        Ok(())
    }

    /// The forward pass of the stage's layers over `acts.input`. On the last stage also the
    /// logits and, with `targets`, the loss (returned: the mean over the micro-batch's tokens)
    /// and, with `dloss = Some(g)`, the logits' gradient: `g` times the gradient of the summed
    /// per-token losses, ready for [`backward`](Self::backward) (for a mean over `k`
    /// micro-batches of `b x t` tokens on `d` data-parallel ranks, `g = 1 / (k d b t)`).
    pub fn forward(
        &self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        ws: &mut Workspace,
        acts: &mut MicroActs,
        targets: Option<&[u32]>,
        dloss: Option<f32>,
    ) -> Result<Option<f32>> {
        let w = self.weights();
        let (d, s) = (ws.dims, &mut ws.scratch);
        let chunk = self.layout.chunks[acts.chunk].clone();
        for (i, l) in chunk.enumerate() {
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
        if !self.layout.place.is_last_chunk(acts.chunk) {
            return Ok(None);
        }
        let Dims { b, t, n, c, ns, .. } = d;
        let out = match acts.layers.last() {
            Some(l) => l.res3.view(..)?,
            None => acts.outputs.last().expect("a stage has layers").view(..)?,
        };
        let head = acts.head.as_mut().expect("the last stage keeps the head's activations");
        head.dlogits_ready = false;
        let (lw, lb) = (w.p(ParamTensor::LnfW, 0)?, w.p(ParamTensor::LnfB, 0)?);
        let (mut lnf, mut mean, mut rstd) =
            (head.lnf.all_mut()?, head.mean.view_mut(..)?, head.rstd.view_mut(..)?);
        ops::mixed::layernorm_forward(ctx, &mut lnf, &mut mean, &mut rstd, out, lw, lb, ns, c)?;
        store_acts(ctx, d, &mut [&mut head.lnf])?;
        let lnf = head.lnf.all()?;
        // f (identity; under sequence parallelism the all-gather of the rows), then the
        // column-parallel product with the local vocabulary rows. The logits are stored in the
        // activations' precision (the GEMM's f32 accumulator rounded once, by its epilogue on
        // the kernel devices); the loss reads them into f32.
        let lnf = gathered_act(ctx, tp, s.sp.as_mut().map(|sp| &mut sp.ln_full), lnf)?;
        let wte = w.m(ParamTensor::Wte, 0)?;
        let mut logits = head.logits.all_mut()?;
        ops::mixed::linear_forward(ctx, &mut logits, lnf, wte, None, None, n, c, self.vocab.local)?;
        store_acts(ctx, d, &mut [&mut head.logits])?;
        let Some(targets) = targets else { return Ok(None) };
        if targets.len() != n {
            return Err(ModelError::TokenCount {
                what: "loss targets",
                got: targets.len(),
                batch: b,
                seq: t,
            });
        }
        let vocab = self.vocab;
        if tp.size == 1 {
            // The fused softmax cross-entropy on the device, over the padded rows: the loss in
            // f32, the gradient written over the logits in their precision.
            head.targets.copy_from_slice(targets)?;
            let (v, vp) = (vocab.vocab, vocab.local);
            let (mut losses, targets) = (head.losses.view_mut(..)?, head.targets.view(..)?);
            let mut logits = head.logits.all_mut()?;
            ops::mixed::softmax_cross_entropy(ctx, &mut logits, &mut losses, targets, n, v, vp, dloss)?;
        } else {
            // On the host in f32 (16-bit logits widened, their gradient rounded back).
            ctx.device().synchronize()?;
            let mut losses = vec![0.0f32; n];
            head.logits
                .on_host_f32(|h| vocab_parallel_cross_entropy(tp, vocab, h, &mut losses, targets, dloss))?;
            head.losses.copy_from_slice(&losses)?;
        }
        head.dlogits_ready = dloss.is_some();
        if dloss.is_some() {
            // The loss is fp32; its gradient goes back in the activations' precision (f32
            // buffers of a mixed-precision pass, the Cpu's, are rounded here).
            store_acts(ctx, d, &mut [&mut head.logits])?;
        }
        let losses = head.losses.to_vec()?;
        Ok(Some((losses.iter().map(|&x| x as f64).sum::<f64>() / n as f64) as f32))
    }

    /// The logits (first `vocab_size` entries) of sequence `row` at position `pos` of the
    /// last forward pass through `acts` (a whole model's: TP = 1, last stage).
    pub fn logits_at(&self, ws: &Workspace, acts: &MicroActs, row: usize, pos: usize) -> Result<Vec<f32>> {
        let Dims { b, t, .. } = ws.dims;
        let head = match &acts.head {
            Some(head) if self.layout.place.tp == 1 && !head.dlogits_ready => head,
            _ => {
                return Err(ModelError::State {
                    what: "logits_at() needs the logits of a forward pass of the whole vocabulary".into(),
                })
            }
        };
        if row >= b || pos >= t {
            return Err(ModelError::State {
                what: format!("no logits for row {row}, position {pos} of a {b} x {t} pass"),
            });
        }
        let start = (row * t + pos) * self.vocab.local;
        head.logits.to_f32_vec(start..start + self.vocab.vocab)
    }

    /// Inference on a whole model (TP = PP = 1): the logits over the real vocabulary of every
    /// position of `tokens` (`[b, t]`, row-major), as `[b, t, vocab_size]`.
    pub fn logits(&self, ctx: &OpsContext, tokens: &[u32], b: usize, t: usize) -> Result<Vec<f32>> {
        let ws = &mut Workspace::new(ctx.device(), self, b, t)?;
        let acts = &mut MicroActs::new(ctx.device(), self, ws)?;
        let tp = &mut TpGroup::single();
        self.embed(ctx, tp, ws, acts, tokens)?;
        self.forward(ctx, tp, ws, acts, None, None)?;
        let mut out = Vec::with_capacity(b * t * self.vocab.vocab);
        for row in 0..b {
            for pos in 0..t {
                out.extend(self.logits_at(ws, acts, row, pos)?);
            }
        }
        Ok(out)
    }

    /// The backward pass of the micro-batch in `acts`, accumulating (`+=`) into the model's
    /// gradients; see [`backward_into`](Self::backward_into).
    pub fn backward(
        &mut self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        ws: &mut Workspace,
        acts: &mut MicroActs,
        dout: Option<View<'_, f32>>,
        layer_done: &mut LayerDone,
    ) -> Result<()> {
        let w = Weights { master: &self.params, compute: self.compute.as_ref(), layout: &self.layout };
        backward_pass(&w, self.vocab, ctx, tp, ws, acts, dout, &mut self.grads, layer_done)
    }

    /// The backward pass of the micro-batch in `acts`, accumulating (`+=`, so that
    /// micro-batches add up) into `grads` (in [`ShardLayout`] order): several workspaces that
    /// share the parameters can then run their backward passes at the same time. On the last
    /// stage it starts from the logits' gradient the forward pass left; elsewhere `dout` is
    /// the gradient of the stage's output. Leaves the gradient of the stage's input in
    /// [`Workspace::input_grad`]. `layer_done(l, grads)` runs as soon as layer `l`'s gradients
    /// are complete for this micro-batch.
    #[allow(clippy::too_many_arguments)]
    pub fn backward_into(
        &self,
        ctx: &OpsContext,
        tp: &mut TpGroup,
        ws: &mut Workspace,
        acts: &mut MicroActs,
        dout: Option<View<'_, f32>>,
        grads: &mut Buffer<f32>,
        layer_done: &mut LayerDone,
    ) -> Result<()> {
        if grads.len() != self.layout.len() {
            return Err(ModelError::ParamCount { got: grads.len(), expected: self.layout.len() });
        }
        backward_pass(&self.weights(), self.vocab, ctx, tp, ws, acts, dout, grads, layer_done)
    }
}

/// See [`Gpt::backward_into`].
#[allow(clippy::too_many_arguments)]
fn backward_pass(
    w: &Weights,
    vocab: VocabShard,
    ctx: &OpsContext,
    tp: &mut TpGroup,
    ws: &mut Workspace,
    acts: &mut MicroActs,
    dout: Option<View<'_, f32>>,
    grads: &mut Buffer<f32>,
    layer_done: &mut LayerDone,
) -> Result<()> {
    let d = ws.dims;
    let Dims { b, t, n, c, ns, .. } = d;
    let s = &mut ws.scratch;
    let place = w.layout.place;
    if place.is_last_chunk(acts.chunk) {
        let head = acts.head.as_mut().expect("the last stage keeps the head's activations");
        if !head.dlogits_ready {
            return Err(ModelError::NoLossGradient);
        }
        head.dlogits_ready = false;
        // The LM head: column parallel over the vocabulary, then f's all-reduce.
        let mut dwte = grads.view_mut(w.layout.range(ParamTensor::Wte, 0))?;
        let dlogits = head.logits.all()?;
        let (ln_full, dln_full) = match &mut s.sp {
            Some(sp) => (Some(&mut sp.ln_full), Some(&mut sp.dln_full)),
            None => (None, None),
        };
        let lnf = gathered_act(ctx, tp, ln_full, head.lnf.all()?)?;
        let wte = w.m(ParamTensor::Wte, 0)?;
        // The input gradient's partial sums go to whole rows under sequence parallelism.
        let mut dln_full = dln_full;
        let partial = match dln_full.as_deref_mut() {
            Some(full) => full,
            None => &mut s.dln,
        };
        let mut dln = OperandMut::F32(partial.view_mut(..)?);
        ops::mixed::linear_backward(ctx, &mut dln, &mut dwte, None, dlogits, lnf, wte, n, c, vocab.local)?;
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
        layernorm_backward(ctx, tp, grads, w, lnf_t, s, x, mean, rstd, ns, c)?;
    } else {
        let dout = dout.ok_or_else(|| ModelError::State {
            what: "an inner (virtual) pipeline stage's backward needs the gradient of its output".into(),
        })?;
        s.dres.view_mut(..)?.copy_from(&dout)?;
    }
    for (i, l) in w.layout.chunks[acts.chunk].clone().enumerate().rev() {
        if acts.layers.is_empty() {
            let mut la = s.layer.take().expect("full recomputation has a layer scratch");
            let x = if i == 0 { &acts.input } else { &acts.outputs[i - 1] };
            // Full recomputation: rerun the layer (with its collectives), then differentiate.
            let r = layer_forward(ctx, tp, w, d, s, l, x, &mut la)
                .and_then(|()| layer_backward(ctx, tp, w, grads, d, s, l, x, &la));
            s.layer = Some(la);
            r?;
        } else {
            let x = if i == 0 { &acts.input } else { &acts.layers[i - 1].res3 };
            layer_backward(ctx, tp, w, grads, d, s, l, x, &acts.layers[i])?;
        }
        layer_done(l, grads)?;
    }
    if place.is_first_chunk(acts.chunk) {
        let wte = w.layout.range(ParamTensor::Wte, 0);
        let wpe = w.layout.range(ParamTensor::Wpe, 0);
        // Under sequence parallelism, g's backward: every row's gradient, gathered.
        let dres = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.dres_full), s.dres.view(..)?)?;
        let tokens = acts.tokens.view(..)?;
        match s.dwte_ext.as_mut() {
            None => {
                // TP = 1: every token's row is here.
                let [mut dwte, mut dwpe] = grads.views_mut([wte, wpe])?;
                ops::encoder_backward(ctx, &mut dwte, &mut dwpe, dres, tokens, b, t, c)?;
            }
            Some(dwte_ext) => {
                let local_rows = vocab.local * c;
                // Accumulate on top of the local rows; the extra row collects tokens other
                // ranks hold.
                dwte_ext.view_mut(..local_rows)?.copy_from(&grads.view(wte.clone())?)?;
                dwte_ext.view_mut(local_rows..)?.fill_zero()?;
                let mut dwpe = grads.view_mut(wpe)?;
                ops::encoder_backward(ctx, &mut dwte_ext.view_mut(..)?, &mut dwpe, dres, tokens, b, t, c)?;
                grads.view_mut(wte)?.copy_from(&dwte_ext.view(..local_rows)?)?;
            }
        }
    }
    Ok(())
}
