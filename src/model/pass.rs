//! One forward or backward pass of [`Gpt`](super::Gpt), an op at a time, over named slots of the
//! activation arena and named parameter tensors: the model's code then reads as the list of its
//! layers, and the slicing of the two buffers lives here.

use std::ops::Range;

use trident_runtime::{Buffer, View};

use super::activations::{Act, Workspace};
use super::{GptConfig, ModelError, ParamLayout, ParamTensor};
use crate::ops::{self, OpsContext};

type Result<T> = std::result::Result<T, ModelError>;

/// An activation tensor and its layer (the layer is ignored for tensors not stacked over layers).
pub(super) type Slot = (Act, usize);
/// A parameter tensor and its layer (ignored likewise).
pub(super) type Param = (ParamTensor, usize);

/// The tensors of one LayerNorm: its output, the statistics it saves, its scale and shift.
#[derive(Clone, Copy)]
pub(super) struct Norm {
    out: Act,
    mean: Act,
    rstd: Act,
    weight: ParamTensor,
    bias: ParamTensor,
}

pub(super) const LN1: Norm = Norm {
    out: Act::Ln1,
    mean: Act::Ln1Mean,
    rstd: Act::Ln1Rstd,
    weight: ParamTensor::Ln1W,
    bias: ParamTensor::Ln1B,
};
pub(super) const LN2: Norm = Norm {
    out: Act::Ln2,
    mean: Act::Ln2Mean,
    rstd: Act::Ln2Rstd,
    weight: ParamTensor::Ln2W,
    bias: ParamTensor::Ln2B,
};
pub(super) const LNF: Norm = Norm {
    out: Act::Lnf,
    mean: Act::LnfMean,
    rstd: Act::LnfRstd,
    weight: ParamTensor::LnfW,
    bias: ParamTensor::LnfB,
};

/// A linear layer `y = x W^T + bias`, with `W` of shape `[oc, ic]` (stored as llm.c stores it).
#[derive(Clone, Copy)]
pub(super) struct Linear {
    weight: ParamTensor,
    bias: Option<ParamTensor>,
    ic: usize,
    oc: usize,
}

/// The model's linear layers.
pub(super) struct Linears {
    pub qkv: Linear,
    pub attn_proj: Linear,
    pub fc: Linear,
    pub fc_proj: Linear,
    /// Tied with the token embedding, and without a bias.
    pub lm_head: Linear,
}

impl Linears {
    pub(super) fn of(config: &GptConfig) -> Self {
        let (c, vp) = (config.channels, config.padded_vocab_size);
        let linear = |weight, bias, ic, oc| Linear { weight, bias: Some(bias), ic, oc };
        Self {
            qkv: linear(ParamTensor::QkvW, ParamTensor::QkvB, c, 3 * c),
            attn_proj: linear(ParamTensor::AttnProjW, ParamTensor::AttnProjB, c, c),
            fc: linear(ParamTensor::FcW, ParamTensor::FcB, c, 4 * c),
            fc_proj: linear(ParamTensor::FcProjW, ParamTensor::FcProjB, 4 * c, c),
            lm_head: Linear { weight: ParamTensor::Wte, bias: None, ic: c, oc: vp },
        }
    }
}

/// A pass over the `b x t` tokens of the workspace's current batch.
pub(super) struct Forward<'a> {
    ctx: &'a OpsContext,
    config: &'a GptConfig,
    layout: &'a ParamLayout,
    params: &'a Buffer<f32>,
    ws: &'a mut Workspace,
    b: usize,
    t: usize,
}

/// The backward pass over the tokens of the last forward pass; gradients accumulate (`+=`).
pub(super) struct Backward<'a> {
    pass: Forward<'a>,
    grads: &'a mut Buffer<f32>,
}

fn param<'p>(params: &'p Buffer<f32>, layout: &ParamLayout, p: Param) -> Result<View<'p, f32>> {
    Ok(params.view(param_range(layout, p))?)
}

fn param_range(layout: &ParamLayout, (t, l): Param) -> Range<usize> {
    if t.per_layer() {
        layout.layer_range(t, l)
    } else {
        layout.range(t)
    }
}

impl<'a> Forward<'a> {
    /// A pass over `ws`'s current batch (set by the forward pass's caller).
    pub(super) fn new(
        ctx: &'a OpsContext,
        config: &'a GptConfig,
        layout: &'a ParamLayout,
        params: &'a Buffer<f32>,
        ws: &'a mut Workspace,
    ) -> Result<Self> {
        let (b, t) =
            ws.current.ok_or_else(|| ModelError::State { what: "a pass before forward()".into() })?;
        Ok(Self { ctx, config, layout, params, ws, b, t })
    }

    fn r(&self, (a, l): Slot) -> Range<usize> {
        self.ws.layout.range(a, l, self.b * self.t)
    }

    /// `out = wte[token] + wpe[position]` for the batch's tokens.
    pub(super) fn encoder(&mut self, out: Slot) -> Result<()> {
        let (b, t, c) = (self.b, self.t, self.config.channels);
        let tokens = self.ws.tokens.view(..b * t)?;
        let [mut y] = self.ws.acts.views_mut([self.r(out)])?;
        let wte = param(self.params, self.layout, (ParamTensor::Wte, 0))?;
        let wpe = param(self.params, self.layout, (ParamTensor::Wpe, 0))?;
        Ok(ops::encoder_forward(self.ctx, &mut y, tokens, wte, wpe, b, t, c)?)
    }

    /// The LayerNorm `norm` of layer `l` over `x`, saving its statistics.
    pub(super) fn layernorm(&mut self, norm: Norm, l: usize, x: Slot) -> Result<()> {
        let (n, c) = (self.b * self.t, self.config.channels);
        let ranges = [self.r((norm.out, l)), self.r((norm.mean, l)), self.r((norm.rstd, l)), self.r(x)];
        let [mut y, mut mean, mut rstd, x] = self.ws.acts.views_mut(ranges)?;
        let w = param(self.params, self.layout, (norm.weight, l))?;
        let bias = param(self.params, self.layout, (norm.bias, l))?;
        Ok(ops::layernorm_forward(self.ctx, &mut y, &mut mean, &mut rstd, x.as_view(), w, bias, n, c)?)
    }

    /// Layer `l` of `lin` from `inp` into `out`.
    pub(super) fn linear(&mut self, lin: Linear, l: usize, out: Slot, inp: Slot) -> Result<()> {
        let n = self.b * self.t;
        let [mut y, x] = self.ws.acts.views_mut([self.r(out), self.r(inp)])?;
        let w = param(self.params, self.layout, (lin.weight, l))?;
        let bias = lin.bias.map(|b| param(self.params, self.layout, (b, l))).transpose()?;
        Ok(ops::matmul_forward(self.ctx, &mut y, x.as_view(), w, bias, n, lin.ic, lin.oc)?)
    }

    /// As [`linear`](Self::linear), adding `residual` onto the result: a projection back onto
    /// the residual stream.
    pub(super) fn linear_onto(
        &mut self,
        lin: Linear,
        l: usize,
        out: Slot,
        inp: Slot,
        residual: Slot,
    ) -> Result<()> {
        let n = self.b * self.t;
        let [mut y, x, res] = self.ws.acts.views_mut([self.r(out), self.r(inp), self.r(residual)])?;
        let w = param(self.params, self.layout, (lin.weight, l))?;
        let bias = lin.bias.map(|b| param(self.params, self.layout, (b, l))).transpose()?;
        let (x, res) = (x.as_view(), res.as_view());
        Ok(ops::matmul_residual_forward(self.ctx, &mut y, x, w, bias, res, n, lin.ic, lin.oc)?)
    }

    /// Causal self-attention over `qkv`, saving the log-sum-exp of each row of scores.
    pub(super) fn attention(&mut self, out: Slot, lse: Slot, qkv: Slot) -> Result<()> {
        let GptConfig { channels: c, num_heads: nh, .. } = *self.config;
        let [mut y, mut lse, qkv] = self.ws.acts.views_mut([self.r(out), self.r(lse), self.r(qkv)])?;
        Ok(ops::attention_forward(self.ctx, &mut y, &mut lse, qkv.as_view(), self.b, self.t, c, nh)?)
    }

    pub(super) fn gelu(&mut self, out: Slot, inp: Slot) -> Result<()> {
        let len = self.r(out).len();
        let [mut y, x] = self.ws.acts.views_mut([self.r(out), self.r(inp)])?;
        Ok(ops::gelu_forward(self.ctx, &mut y, x.as_view(), len)?)
    }
}

impl<'a> Backward<'a> {
    pub(super) fn new(pass: Forward<'a>, grads: &'a mut Buffer<f32>) -> Self {
        Self { pass, grads }
    }

    pub(super) fn zero(&mut self, slot: Slot) -> Result<()> {
        Ok(self.pass.ws.acts.view_mut(self.pass.r(slot))?.fill_zero()?)
    }

    /// `dwte`, `dwpe` from the gradient `dout` of the embedding.
    pub(super) fn encoder(&mut self, dout: Slot) -> Result<()> {
        let f = &self.pass;
        let (b, t, c) = (f.b, f.t, f.config.channels);
        let ranges =
            [param_range(f.layout, (ParamTensor::Wte, 0)), param_range(f.layout, (ParamTensor::Wpe, 0))];
        let [mut dwte, mut dwpe] = self.grads.views_mut(ranges)?;
        let (dy, tokens) = (f.ws.acts.view(f.r(dout))?, f.ws.tokens.view(..b * t)?);
        Ok(ops::encoder_backward(f.ctx, &mut dwte, &mut dwpe, dy, tokens, b, t, c)?)
    }

    /// The LayerNorm `norm` of layer `l` over `x`: its output's gradient is in `dout`, and the
    /// input's gradient adds onto `dinp`.
    pub(super) fn layernorm(&mut self, norm: Norm, l: usize, dinp: Slot, dout: Slot, x: Slot) -> Result<()> {
        let f = &mut self.pass;
        let (n, c) = (f.b * f.t, f.config.channels);
        let ranges = [f.r(dinp), f.r(dout), f.r(x), f.r((norm.mean, l)), f.r((norm.rstd, l))];
        let [mut dx, dy, x, mean, rstd] = f.ws.acts.views_mut(ranges)?;
        let w = param(f.params, f.layout, (norm.weight, l))?;
        let granges = [param_range(f.layout, (norm.weight, l)), param_range(f.layout, (norm.bias, l))];
        let [mut dw, mut db] = self.grads.views_mut(granges)?;
        let (dy, x, mean, rstd) = (dy.as_view(), x.as_view(), mean.as_view(), rstd.as_view());
        Ok(ops::layernorm_backward(f.ctx, &mut dx, &mut dw, &mut db, dy, x, w, mean, rstd, n, c)?)
    }

    /// Layer `l` of `lin`, which read `inp`: from its output's gradient `dout`, `dinp` is
    /// overwritten and the weight and bias gradients accumulate.
    pub(super) fn linear(&mut self, lin: Linear, l: usize, dinp: Slot, dout: Slot, inp: Slot) -> Result<()> {
        let f = &mut self.pass;
        let n = f.b * f.t;
        let [mut dx, dy, x] = f.ws.acts.views_mut([f.r(dinp), f.r(dout), f.r(inp)])?;
        let (dy, x) = (dy.as_view(), x.as_view());
        let (w, ic, oc) = (param(f.params, f.layout, (lin.weight, l))?, lin.ic, lin.oc);
        let dw_range = param_range(f.layout, (lin.weight, l));
        match lin.bias {
            Some(bias) => {
                let [mut dw, mut db] = self.grads.views_mut([dw_range, param_range(f.layout, (bias, l))])?;
                Ok(ops::matmul_backward(f.ctx, &mut dx, &mut dw, Some(&mut db), dy, x, w, n, ic, oc)?)
            }
            None => {
                let [mut dw] = self.grads.views_mut([dw_range])?;
                Ok(ops::matmul_backward(f.ctx, &mut dx, &mut dw, None, dy, x, w, n, ic, oc)?)
            }
        }
    }

    /// Causal self-attention: `dqkv` from the gradient `dout` of its output, recomputing the
    /// scores from `qkv` and the saved log-sum-exp.
    pub(super) fn attention(
        &mut self,
        dqkv: Slot,
        dout: Slot,
        qkv: Slot,
        out: Slot,
        lse: Slot,
    ) -> Result<()> {
        let f = &mut self.pass;
        let GptConfig { channels: c, num_heads: nh, .. } = *f.config;
        let ranges = [f.r(dqkv), f.r(dout), f.r(qkv), f.r(out), f.r(lse)];
        let [mut dqkv, dy, qkv, y, lse] = f.ws.acts.views_mut(ranges)?;
        let (dy, qkv, y, lse) = (dy.as_view(), qkv.as_view(), y.as_view(), lse.as_view());
        Ok(ops::attention_backward(f.ctx, &mut dqkv, dy, qkv, y, lse, f.b, f.t, c, nh)?)
    }

    /// GeLU in place: `d` holds the gradient of the output and leaves with the input's.
    pub(super) fn gelu(&mut self, d: Slot, inp: Slot) -> Result<()> {
        let f = &mut self.pass;
        let len = f.r(d).len();
        let [mut d, x] = f.ws.acts.views_mut([f.r(d), f.r(inp)])?;
        Ok(ops::gelu_backward(f.ctx, &mut d, x.as_view(), len)?)
    }
}
