//! GPT-2: pre-LayerNorm blocks, learned positions, tied embeddings, GeLU MLP. Parameters and
//! their gradients are one buffer each in [`ParamLayout`] order; activations live in a
//! [`Workspace`]. Every step calls `ops`, so the model runs on any device.

use std::ops::Range;

use trident_runtime::{Buffer, Device, View};

use super::activations::{Act, Workspace};
use super::{gpt2_init, GptConfig, ModelError, ParamLayout, ParamTensor};
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
        let GptConfig { channels: c, num_heads: nh, padded_vocab_size: vp, .. } = self.config;
        let n = b * t;
        ws.current = Some((b, t));
        ws.dlogits_ready = false;
        ws.tokens.view_mut(..n)?.copy_from_slice(tokens)?;
        let (lay, acts, tok) = (&ws.layout, &mut ws.acts, ws.tokens.view(..n)?);
        let r = |a: Act, l: usize| lay.range(a, l, n);
        let p = |t: ParamTensor, l: usize| self.layer_param(t, l);

        let [mut enc] = acts.views_mut([r(Act::Encoded, 0)])?;
        ops::encoder_forward(
            ctx,
            &mut enc,
            tok,
            self.param(ParamTensor::Wte)?,
            self.param(ParamTensor::Wpe)?,
            b,
            t,
            c,
        )?;
        for l in 0..self.config.num_layers {
            let res_in = if l == 0 { r(Act::Encoded, 0) } else { r(Act::Res3, l - 1) };
            // Attention block.
            let [mut ln1, mut mean, mut rstd, x] =
                acts.views_mut([r(Act::Ln1, l), r(Act::Ln1Mean, l), r(Act::Ln1Rstd, l), res_in.clone()])?;
            let (w, bias) = (p(ParamTensor::Ln1W, l)?, p(ParamTensor::Ln1B, l)?);
            ops::layernorm_forward(ctx, &mut ln1, &mut mean, &mut rstd, x.as_view(), w, bias, n, c)?;
            let [mut qkv, ln1] = acts.views_mut([r(Act::Qkv, l), r(Act::Ln1, l)])?;
            let (w, bias) = (p(ParamTensor::QkvW, l)?, p(ParamTensor::QkvB, l)?);
            ops::matmul_forward(ctx, &mut qkv, ln1.as_view(), w, Some(bias), n, c, 3 * c)?;
            let [mut atty, mut lse, qkv] =
                acts.views_mut([r(Act::Atty, l), r(Act::AttLse, l), r(Act::Qkv, l)])?;
            ops::attention_forward(ctx, &mut atty, &mut lse, qkv.as_view(), b, t, c, nh)?;
            let [mut res2, atty, x] = acts.views_mut([r(Act::Res2, l), r(Act::Atty, l), res_in])?;
            let (w, bias) = (p(ParamTensor::AttnProjW, l)?, p(ParamTensor::AttnProjB, l)?);
            let (atty, x) = (atty.as_view(), x.as_view());
            ops::matmul_residual_forward(ctx, &mut res2, atty, w, Some(bias), x, n, c, c)?;
            // MLP block.
            let [mut ln2, mut mean, mut rstd, x] =
                acts.views_mut([r(Act::Ln2, l), r(Act::Ln2Mean, l), r(Act::Ln2Rstd, l), r(Act::Res2, l)])?;
            let (w, bias) = (p(ParamTensor::Ln2W, l)?, p(ParamTensor::Ln2B, l)?);
            ops::layernorm_forward(ctx, &mut ln2, &mut mean, &mut rstd, x.as_view(), w, bias, n, c)?;
            let [mut fch, ln2] = acts.views_mut([r(Act::Fch, l), r(Act::Ln2, l)])?;
            let (w, bias) = (p(ParamTensor::FcW, l)?, p(ParamTensor::FcB, l)?);
            ops::matmul_forward(ctx, &mut fch, ln2.as_view(), w, Some(bias), n, c, 4 * c)?;
            let [mut gelu, fch] = acts.views_mut([r(Act::FchGelu, l), r(Act::Fch, l)])?;
            ops::gelu_forward(ctx, &mut gelu, fch.as_view(), n * 4 * c)?;
            let [mut res3, gelu, x] =
                acts.views_mut([r(Act::Res3, l), r(Act::FchGelu, l), r(Act::Res2, l)])?;
            let (w, bias) = (p(ParamTensor::FcProjW, l)?, p(ParamTensor::FcProjB, l)?);
            let (gelu, x) = (gelu.as_view(), x.as_view());
            ops::matmul_residual_forward(ctx, &mut res3, gelu, w, Some(bias), x, n, 4 * c, c)?;
        }
        let last = r(Act::Res3, self.config.num_layers - 1);
        let [mut lnf, mut mean, mut rstd, x] =
            acts.views_mut([r(Act::Lnf, 0), r(Act::LnfMean, 0), r(Act::LnfRstd, 0), last])?;
        let (w, bias) = (self.param(ParamTensor::LnfW)?, self.param(ParamTensor::LnfB)?);
        ops::layernorm_forward(ctx, &mut lnf, &mut mean, &mut rstd, x.as_view(), w, bias, n, c)?;
        let [mut logits, lnf] = acts.views_mut([r(Act::Logits, 0), r(Act::Lnf, 0)])?;
        ops::matmul_forward(ctx, &mut logits, lnf.as_view(), self.param(ParamTensor::Wte)?, None, n, c, vp)?;
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
            ws.acts.views_mut([lay.range(Act::Logits, 0, n), lay.range(Act::Losses, 0, n)])?;
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
        let start = ws.layout.range(Act::Logits, 0, b * t).start + (row * t + pos) * vp;
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
    fn param(&self, t: ParamTensor) -> Result<View<'_, f32>> {
        Ok(self.params.view(self.layout.range(t))?)
    }

    fn layer_param(&self, t: ParamTensor, layer: usize) -> Result<View<'_, f32>> {
        Ok(self.params.view(self.layout.layer_range(t, layer))?)
    }

    /// Element range of a tensor (for per-tensor optimizer settings).
    pub fn tensor_range(&self, t: ParamTensor) -> Range<usize> {
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
    let (b, t) = ws.current.expect("a loss gradient comes from a forward pass");
    let GptConfig { channels: c, num_heads: nh, padded_vocab_size: vp, num_layers: nl, .. } = *config;
    let n = b * t;
    let (lay, acts, tok) = (&ws.layout, &mut ws.acts, ws.tokens.view(..n)?);
    let r = |a: Act, l: usize| lay.range(a, l, n);
    let p = |t: ParamTensor, l: usize| params.view(layout.layer_range(t, l));
    let g = |t: ParamTensor, l: usize| layout.layer_range(t, l);

    acts.view_mut(r(Act::DRes, 0))?.fill_zero()?;
    // LM head (tied with the token embedding) and the final LayerNorm.
    let [mut dln, dlogits, lnf] = acts.views_mut([r(Act::DLn, 0), r(Act::Logits, 0), r(Act::Lnf, 0)])?;
    let [mut dwte] = grads.views_mut([layout.range(ParamTensor::Wte)])?;
    let wte = params.view(layout.range(ParamTensor::Wte))?;
    ops::matmul_backward(ctx, &mut dln, &mut dwte, None, dlogits.as_view(), lnf.as_view(), wte, n, c, vp)?;
    let [mut dres, dln, x, mean, rstd] = acts.views_mut([
        r(Act::DRes, 0),
        r(Act::DLn, 0),
        r(Act::Res3, nl - 1),
        r(Act::LnfMean, 0),
        r(Act::LnfRstd, 0),
    ])?;
    let [mut dw, mut db] =
        grads.views_mut([layout.range(ParamTensor::LnfW), layout.range(ParamTensor::LnfB)])?;
    let w = params.view(layout.range(ParamTensor::LnfW))?;
    let (dy, x, mean, rstd) = (dln.as_view(), x.as_view(), mean.as_view(), rstd.as_view());
    ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w, mean, rstd, n, c)?;

    for l in (0..nl).rev() {
        let res_in = if l == 0 { r(Act::Encoded, 0) } else { r(Act::Res3, l - 1) };
        // MLP block: dres is the gradient of both the MLP output and the residual.
        let [mut dfch, dres, gelu] =
            acts.views_mut([r(Act::DFch, 0), r(Act::DRes, 0), r(Act::FchGelu, l)])?;
        let [mut dw, mut db] = grads.views_mut([g(ParamTensor::FcProjW, l), g(ParamTensor::FcProjB, l)])?;
        let w = p(ParamTensor::FcProjW, l)?;
        ops::matmul_backward(
            ctx,
            &mut dfch,
            &mut dw,
            Some(&mut db),
            dres.as_view(),
            gelu.as_view(),
            w,
            n,
            4 * c,
            c,
        )?;
        let [mut dfch, fch] = acts.views_mut([r(Act::DFch, 0), r(Act::Fch, l)])?;
        ops::gelu_backward(ctx, &mut dfch, fch.as_view(), n * 4 * c)?;
        let [mut dln, dfch, ln2] = acts.views_mut([r(Act::DLn, 0), r(Act::DFch, 0), r(Act::Ln2, l)])?;
        let [mut dw, mut db] = grads.views_mut([g(ParamTensor::FcW, l), g(ParamTensor::FcB, l)])?;
        let w = p(ParamTensor::FcW, l)?;
        ops::matmul_backward(
            ctx,
            &mut dln,
            &mut dw,
            Some(&mut db),
            dfch.as_view(),
            ln2.as_view(),
            w,
            n,
            c,
            4 * c,
        )?;
        let [mut dres, dln, x, mean, rstd] = acts.views_mut([
            r(Act::DRes, 0),
            r(Act::DLn, 0),
            r(Act::Res2, l),
            r(Act::Ln2Mean, l),
            r(Act::Ln2Rstd, l),
        ])?;
        let [mut dw, mut db] = grads.views_mut([g(ParamTensor::Ln2W, l), g(ParamTensor::Ln2B, l)])?;
        let w = p(ParamTensor::Ln2W, l)?;
        let (dy, x, mean, rstd) = (dln.as_view(), x.as_view(), mean.as_view(), rstd.as_view());
        ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w, mean, rstd, n, c)?;
        // Attention block.
        let [mut datty, dres, atty] = acts.views_mut([r(Act::DAtty, 0), r(Act::DRes, 0), r(Act::Atty, l)])?;
        let [mut dw, mut db] =
            grads.views_mut([g(ParamTensor::AttnProjW, l), g(ParamTensor::AttnProjB, l)])?;
        let w = p(ParamTensor::AttnProjW, l)?;
        ops::matmul_backward(
            ctx,
            &mut datty,
            &mut dw,
            Some(&mut db),
            dres.as_view(),
            atty.as_view(),
            w,
            n,
            c,
            c,
        )?;
        let [mut dqkv, datty, qkv, atty, lse] = acts.views_mut([
            r(Act::DQkv, 0),
            r(Act::DAtty, 0),
            r(Act::Qkv, l),
            r(Act::Atty, l),
            r(Act::AttLse, l),
        ])?;
        let (dy, qkv, atty, lse) = (datty.as_view(), qkv.as_view(), atty.as_view(), lse.as_view());
        ops::attention_backward(ctx, &mut dqkv, dy, qkv, atty, lse, b, t, c, nh)?;
        let [mut dln, dqkv, ln1] = acts.views_mut([r(Act::DLn, 0), r(Act::DQkv, 0), r(Act::Ln1, l)])?;
        let [mut dw, mut db] = grads.views_mut([g(ParamTensor::QkvW, l), g(ParamTensor::QkvB, l)])?;
        let w = p(ParamTensor::QkvW, l)?;
        ops::matmul_backward(
            ctx,
            &mut dln,
            &mut dw,
            Some(&mut db),
            dqkv.as_view(),
            ln1.as_view(),
            w,
            n,
            c,
            3 * c,
        )?;
        let [mut dres, dln, x, mean, rstd] = acts.views_mut([
            r(Act::DRes, 0),
            r(Act::DLn, 0),
            res_in,
            r(Act::Ln1Mean, l),
            r(Act::Ln1Rstd, l),
        ])?;
        let [mut dw, mut db] = grads.views_mut([g(ParamTensor::Ln1W, l), g(ParamTensor::Ln1B, l)])?;
        let w = p(ParamTensor::Ln1W, l)?;
        let (dy, x, mean, rstd) = (dln.as_view(), x.as_view(), mean.as_view(), rstd.as_view());
        ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w, mean, rstd, n, c)?;
    }
    let [dres] = acts.views_mut([r(Act::DRes, 0)])?;
    let [mut dwte, mut dwpe] =
        grads.views_mut([layout.range(ParamTensor::Wte), layout.range(ParamTensor::Wpe)])?;
    ops::encoder_backward(ctx, &mut dwte, &mut dwpe, dres.as_view(), tok, b, t, c)?;
    ws.dlogits_ready = false;
    Ok(())
}
