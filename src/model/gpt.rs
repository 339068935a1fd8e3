//! GPT-2: pre-LayerNorm blocks, learned positions, tied embeddings, GeLU MLP. Parameters and
//! their gradients are one buffer each in [`ParamLayout`] order; activations live in a
//! [`Workspace`]. Every step calls `ops`, so the model runs on any device.

use std::ops::Range;

use trident_runtime::{Buffer, Device};

use super::activations::{Act as A, Workspace};
use super::pass::{Backward, Forward, Linears, LN1, LN2, LNF};
use super::{gpt2_init, GptConfig, ModelError, ParamLayout, ParamTensor as P};
use crate::ops::{self, OpsContext};

pub struct Gpt {
    config: GptConfig,
    layout: ParamLayout,
    params: Buffer<f32>,
    grads: Buffer<f32>,
}

type Result<T> = std::result::Result<T, ModelError>;

impl Gpt {
    /// A freshly initialised model (GPT-2 initialisation, seeded).
    pub fn new(device: &Device, config: GptConfig, seed: u64) -> Result<Self> {
        config.validate()?;
        let layout = ParamLayout::new(config);
        let params = gpt2_init(&layout, seed);
        Self::from_params(device, config, &params)
    }

    /// A model holding `params` (in [`ParamLayout`] order).
    pub fn from_params(device: &Device, config: GptConfig, params: &[f32]) -> Result<Self> {
        config.validate()?;
        let layout = ParamLayout::new(config);
        if params.len() != layout.len() {
            return Err(ModelError::ParamCount { got: params.len(), expected: layout.len() });
        }
        Ok(Self {
            config,
            params: Buffer::from_slice(device, params)?,
            grads: Buffer::zeros(device, layout.len())?,
            layout,
        })
    }

    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    pub fn layout(&self) -> &ParamLayout {
        &self.layout
    }

    pub fn num_params(&self) -> usize {
        self.layout.len()
    }

    pub fn params(&self) -> &Buffer<f32> {
        &self.params
    }

    pub fn grads(&self) -> &Buffer<f32> {
        &self.grads
    }

    pub fn grads_mut(&mut self) -> &mut Buffer<f32> {
        &mut self.grads
    }

    /// Parameters and gradients at once (for the optimizer).
    pub fn params_and_grads(&mut self) -> (&mut Buffer<f32>, &Buffer<f32>) {
        (&mut self.params, &self.grads)
    }

    pub fn zero_grads(&mut self) -> Result<()> {
        Ok(self.grads.view_mut(..)?.fill_zero()?)
    }

    /// Runs the model on `tokens` (`[b, t]`, row-major), leaving the logits in `ws`.
    pub fn forward(
        &self,
        ctx: &OpsContext,
        ws: &mut Workspace,
        tokens: &[u32],
        b: usize,
        t: usize,
    ) -> Result<()> {
        if b == 0 || t == 0 {
            return Err(ModelError::EmptyBatch { batch: b, seq: t });
        }
        if t > self.config.max_seq_len {
            return Err(ModelError::SeqTooLong { seq: t, max: self.config.max_seq_len });
        }
        if b > ws.batch || t > ws.seq {
            return Err(ModelError::BatchTooLarge { batch: b, seq: t, cap_batch: ws.batch, cap_seq: ws.seq });
        }
        if tokens.len() != b * t {
            return Err(ModelError::TokenCount { what: "forward", got: tokens.len(), batch: b, seq: t });
        }
        if let Some(position) = tokens.iter().position(|&x| x as usize >= self.config.vocab_size) {
            let (token, vocab) = (tokens[position], self.config.vocab_size);
            return Err(ModelError::TokenOutOfRange { token, position, vocab });
        }
        let nl = self.config.num_layers;
        let Linears { qkv, attn_proj, fc, fc_proj, lm_head } = Linears::of(&self.config);
        ws.current = Some((b, t));
        ws.dlogits_ready = false;
        ws.tokens.view_mut(..b * t)?.copy_from_slice(tokens)?;
        let mut f = Forward::new(ctx, &self.config, &self.layout, &self.params, ws)?;

        f.encoder((A::Encoded, 0))?;
        for l in 0..nl {
            let res_in = if l == 0 { (A::Encoded, 0) } else { (A::Res3, l - 1) };
            // Attention block.
            f.layernorm(LN1, l, res_in)?;
            f.linear(qkv, l, (A::Qkv, l), (A::Ln1, l))?;
            f.attention((A::Atty, l), (A::AttLse, l), (A::Qkv, l))?;
            f.linear_onto(attn_proj, l, (A::Res2, l), (A::Atty, l), res_in)?;
            // MLP block.
            f.layernorm(LN2, l, (A::Res2, l))?;
            f.linear(fc, l, (A::Fch, l), (A::Ln2, l))?;
            f.gelu((A::FchGelu, l), (A::Fch, l))?;
            f.linear_onto(fc_proj, l, (A::Res3, l), (A::FchGelu, l), (A::Res2, l))?;
        }
        f.layernorm(LNF, 0, (A::Res3, nl - 1))?;
        f.linear(lm_head, 0, (A::Logits, 0), (A::Lnf, 0))?;
        Ok(())
    }

    /// Cross-entropy of the last forward pass against `targets`; returns the mean loss over its
    /// tokens. With `dloss = Some(g)` the logits are replaced by `g` times the gradient of the
    /// summed per-token losses, ready for [`backward`](Self::backward) (for a mean over `k`
    /// micro-batches of `b x t` tokens, `g = 1 / (k b t)`).
    pub fn loss(
        &self,
        ctx: &OpsContext,
        ws: &mut Workspace,
        targets: &[u32],
        dloss: Option<f32>,
    ) -> Result<f32> {
        let (b, t) =
            ws.current.ok_or_else(|| ModelError::State { what: "loss() before forward()".into() })?;
        let n = b * t;
        if targets.len() != n {
            return Err(ModelError::TokenCount {
                what: "loss targets",
                got: targets.len(),
                batch: b,
                seq: t,
            });
        }
        if dloss.is_some() && !ws.is_training() {
            return Err(ModelError::State { what: "a loss gradient needs a training workspace".into() });
        }
        if ws.dlogits_ready {
            return Err(ModelError::State {
                what: "the logits already hold the loss gradient; run forward() again".into(),
            });
        }
        ws.targets.view_mut(..n)?.copy_from_slice(targets)?;
        let lay = &ws.layout;
        let [mut logits, mut losses] =
            ws.acts.views_mut([lay.range(A::Logits, 0, n), lay.range(A::Losses, 0, n)])?;
        let (v, vp) = (self.config.vocab_size, self.config.padded_vocab_size);
        ops::softmax_cross_entropy(ctx, &mut logits, &mut losses, ws.targets.view(..n)?, n, v, vp, dloss)?;
        ws.dlogits_ready = dloss.is_some();
        let losses = losses.as_view().to_vec()?;
        Ok((losses.iter().map(|&x| x as f64).sum::<f64>() / n as f64) as f32)
    }

    /// The logits (first `vocab_size` entries) of sequence `row` at position `pos` of the last
    /// forward pass.
    pub fn logits_at(&self, ws: &Workspace, row: usize, pos: usize) -> Result<Vec<f32>> {
        let (b, t) =
            ws.current.ok_or_else(|| ModelError::State { what: "logits_at() before forward()".into() })?;
        if row >= b || pos >= t || ws.dlogits_ready {
            return Err(ModelError::State {
                what: format!("no logits for row {row}, position {pos} of a {b} x {t} pass"),
            });
        }
        let vp = self.config.padded_vocab_size;
        let start = ws.layout.range(A::Logits, 0, b * t).start + (row * t + pos) * vp;
        Ok(ws.acts.view(start..start + self.config.vocab_size)?.to_vec()?)
    }

    /// Accumulates the gradient of the loss into the parameter gradients (`+=`, so that
    /// micro-batches add up; see [`zero_grads`](Self::zero_grads)).
    pub fn backward(&mut self, ctx: &OpsContext, ws: &mut Workspace) -> Result<()> {
        backward_pass(&self.config, &self.layout, &self.params, &mut self.grads, ctx, ws)
    }

    /// As [`backward`](Self::backward), into `grads` (in [`ParamLayout`] order) instead of the
    /// model's own gradients: each of several workspaces that share the parameters can then
    /// run its backward pass at the same time.
    pub fn backward_into(&self, ctx: &OpsContext, ws: &mut Workspace, grads: &mut Buffer<f32>) -> Result<()> {
        if grads.len() != self.layout.len() {
            return Err(ModelError::ParamCount { got: grads.len(), expected: self.layout.len() });
        }
        backward_pass(&self.config, &self.layout, &self.params, grads, ctx, ws)
    }
    /// Element range of a tensor (for per-tensor optimizer settings).
    pub fn tensor_range(&self, t: P) -> Range<usize> {
        self.layout.range(t)
    }
}

/// The backward pass of `Gpt` over `ws`, accumulating into `grads`.
fn backward_pass(
    config: &GptConfig,
    layout: &ParamLayout,
    params: &Buffer<f32>,
    grads: &mut Buffer<f32>,
    ctx: &OpsContext,
    ws: &mut Workspace,
) -> Result<()> {
    if !ws.dlogits_ready || !ws.is_training() {
        return Err(ModelError::NoLossGradient);
    }
    let nl = config.num_layers;
    let Linears { qkv, attn_proj, fc, fc_proj, lm_head } = Linears::of(config);
    let mut g = Backward::new(Forward::new(ctx, config, layout, params, ws)?, grads);
    // DRes is the residual stream's gradient: the LayerNorms and projections add onto it.
    g.zero((A::DRes, 0))?;

    // LM head (tied with the token embedding) and the final LayerNorm.
    g.linear(lm_head, 0, (A::DLn, 0), (A::Logits, 0), (A::Lnf, 0))?;
    g.layernorm(LNF, 0, (A::DRes, 0), (A::DLn, 0), (A::Res3, nl - 1))?;
    for l in (0..nl).rev() {
        let res_in = if l == 0 { (A::Encoded, 0) } else { (A::Res3, l - 1) };
        // MLP block: DRes is the gradient of both the MLP output and the residual.
        g.linear(fc_proj, l, (A::DFch, 0), (A::DRes, 0), (A::FchGelu, l))?;
        g.gelu((A::DFch, 0), (A::Fch, l))?;
        g.linear(fc, l, (A::DLn, 0), (A::DFch, 0), (A::Ln2, l))?;
        g.layernorm(LN2, l, (A::DRes, 0), (A::DLn, 0), (A::Res2, l))?;
        // Attention block.
        g.linear(attn_proj, l, (A::DAtty, 0), (A::DRes, 0), (A::Atty, l))?;
        g.attention((A::DQkv, 0), (A::DAtty, 0), (A::Qkv, l), (A::Atty, l), (A::AttLse, l))?;
        g.linear(qkv, l, (A::DLn, 0), (A::DQkv, 0), (A::Ln1, l))?;
        g.layernorm(LN1, l, (A::DRes, 0), (A::DLn, 0), res_in)?;
    }
    g.encoder((A::DRes, 0))?;
    ws.dlogits_ready = false;
    Ok(())
}
