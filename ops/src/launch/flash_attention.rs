//! Launch wrappers of the tensor-core flash attention (`trident_kernels::flash_attention`):
//! bf16 tensors as `u16` views, in the layouts that module documents.

use trident_kernels::flash_attention::{
    backward_smem_bytes, forward_smem_bytes, BLOCK_KV, BLOCK_Q, PREP_ROWS, THREADS,
};
use trident_runtime::{Arg, LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// Sizes of causal flash attention: `b` sequences of `t` tokens, `nh` heads of `hs` channels
/// (64 or 128).
#[derive(Clone, Copy, Debug)]
pub struct FlashAttentionShape {
    /// Sequences.
    pub b: usize,
    /// Tokens per sequence.
    pub t: usize,
    /// Attention heads.
    pub nh: usize,
    /// Head size (64 or 128).
    pub hs: usize,
}

/// The head sizes the kernels are built for.
pub const FLASH_HEAD_SIZES: [usize; 2] = [64, 128];

impl FlashAttentionShape {
    fn c(&self) -> usize {
        self.nh * self.hs
    }

    /// Elements of `qkv` and `dqkv` (`[b, t, 3, nh, hs]`).
    pub fn qkv_len(&self) -> usize {
        self.b * self.t * 3 * self.c()
    }

    /// Elements of `out`, `dout` and `dq_accum` (`[b, t, nh, hs]`).
    pub fn out_len(&self) -> usize {
        self.b * self.t * self.c()
    }

    /// Elements of `lse` and `dsum` (`[b, nh, t]`).
    pub fn stat_len(&self) -> usize {
        self.b * self.nh * self.t
    }

    /// The scale of the scores, `1 / sqrt(hs)`.
    pub fn scale(&self) -> f32 {
        1.0 / (self.hs as f32).sqrt()
    }

    /// FLOPs of the causal forward as FlashAttention-2 counts them: the two `T x T x hs`
    /// products of every (sequence, head), halved for the mask, `4 b nh t^2 hs / 2`.
    pub fn forward_flops(&self) -> f64 {
        4.0 * (self.b * self.nh) as f64 * (self.t as f64).powi(2) * self.hs as f64 / 2.0
    }

    /// FLOPs of the causal backward as FlashAttention-2 counts them: 2.5 times the forward
    /// (five `T x T x hs` products, `S` recomputed, `dV`, `dP`, `dK`, `dQ`, against two).
    pub fn backward_flops(&self) -> f64 {
        2.5 * self.forward_flops()
    }

    /// The main kernel for this head size, or an error naming the supported ones.
    fn kernel(&self, ch: &Check, forward: bool) -> Result<&'static str> {
        ch.shape(FLASH_HEAD_SIZES.contains(&self.hs), || {
            format!("head size {} is not one of {FLASH_HEAD_SIZES:?}", self.hs)
        })?;
        Ok(match (forward, self.hs) {
            (true, 64) => "flash_attention_forward_hs64",
            (true, _) => "flash_attention_forward_hs128",
            (false, 64) => "flash_attention_backward_hs64",
            (false, _) => "flash_attention_backward_hs128",
        })
    }

    /// Grid over blocks of `rows` tokens, heads and sequences.
    fn grid(&self, rows: u32) -> Result<[u32; 3]> {
        to_u32("B*T*3C", self.qkv_len())?;
        Ok([
            to_u32("token blocks", self.t.div_ceil(rows as usize).max(1))?,
            to_u32("heads", self.nh)?,
            to_u32("batch", self.b)?,
        ])
    }
}

/// Fails unless the view's first element is `align`-byte aligned (`cp.async` and the paired
/// stores need it).
fn aligned(ch: &Check, what: &'static str, addr: u64, align: u64) -> Result<()> {
    ch.shape(addr % align == 0, || format!("{what} must start {align}-byte aligned (address {addr:#x})"))?;
    Ok(())
}

/// Forward: `out` bf16 `[b, t, nh, hs]` and `lse` f32 `[b, nh, t]` from `qkv` bf16
/// `[b, t, 3, nh, hs]` (views 16-byte aligned).
pub fn flash_attention_forward(
    k: &Kernels,
    out: &mut ViewMut<u16>,
    lse: &mut ViewMut<f32>,
    qkv: &View<u16>,
    s: &FlashAttentionShape,
) -> Result<()> {
    let ch = Check::new(k.device(), "flash_attention_forward");
    let kernel = s.kernel(&ch, true)?;
    ch.output("out", out, s.out_len())?.output("lse", lse, s.stat_len())?.input("qkv", qkv, s.qkv_len())?;
    aligned(&ch, "qkv", qkv.addr(), 16)?;
    aligned(&ch, "out", out.addr_mut(), 4)?;
    let cfg = LaunchConfig {
        grid: s.grid(BLOCK_Q)?,
        block: [THREADS, 1, 1],
        dynamic_smem_bytes: forward_smem_bytes(s.hs as u32),
    };
    if s.b * s.t * s.nh == 0 {
        return Ok(());
    }
    // The output is written as bf16 pairs (`u32`); the alignment was checked above.
    let args = [
        out.arg_mut_as::<u32>()?,
        lse.arg_mut(),
        qkv.arg(),
        (s.t as u32).into(),
        (s.nh as u32).into(),
        s.scale().into(),
    ];
    // SAFETY: the views hold the sizes and alignments the shape implies.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}

/// Backward: writes (not accumulates) `dqkv` bf16 `[b, t, 3, nh, hs]` from `dout` bf16
/// `[b, t, nh, hs]`, recomputing the scores from `qkv`, `out` and `lse`. `dsum` f32
/// `[b, nh, t]` and `dq_accum` f32 `[b, t, nh, hs]` are scratch. Three launches: the prep
/// kernel (`dsum`, `dq_accum = 0`), the main kernel (dK, dV, `dq_accum` by atomics), the dQ
/// conversion.
#[allow(clippy::too_many_arguments)]
pub fn flash_attention_backward(
    k: &Kernels,
    dqkv: &mut ViewMut<u16>,
    dsum: &mut ViewMut<f32>,
    dq_accum: &mut ViewMut<f32>,
    dout: &View<u16>,
    qkv: &View<u16>,
    out: &View<u16>,
    lse: &View<f32>,
    s: &FlashAttentionShape,
) -> Result<()> {
    flash_attention_backward_with(k, dqkv, dsum, dq_accum, dout, qkv, out, lse, s, |_| {})
}

/// [`flash_attention_backward`], calling `after(kernel)` once each of its three launches is
/// issued (on `Emu`, done: `last_launch_stats` then holds that launch's counters).
#[allow(clippy::too_many_arguments)]
pub fn flash_attention_backward_with(
    k: &Kernels,
    dqkv: &mut ViewMut<u16>,
    dsum: &mut ViewMut<f32>,
    dq_accum: &mut ViewMut<f32>,
    dout: &View<u16>,
    qkv: &View<u16>,
    out: &View<u16>,
    lse: &View<f32>,
    s: &FlashAttentionShape,
    mut after: impl FnMut(&'static str),
) -> Result<()> {
    let ch = Check::new(k.device(), "flash_attention_backward");
    let kernel = s.kernel(&ch, false)?;
    ch.output("dqkv", dqkv, s.qkv_len())?.output("dsum", dsum, s.stat_len())?;
    ch.output("dq_accum", dq_accum, s.out_len())?;
    ch.input("dout", dout, s.out_len())?.input("qkv", qkv, s.qkv_len())?;
    ch.input("out", out, s.out_len())?.input("lse", lse, s.stat_len())?;
    aligned(&ch, "qkv", qkv.addr(), 16)?;
    aligned(&ch, "dout", dout.addr(), 16)?;
    aligned(&ch, "out", out.addr(), 4)?;
    aligned(&ch, "dqkv", dqkv.addr_mut(), 4)?;
    aligned(&ch, "dq_accum", dq_accum.addr_mut(), 8)?;
    let main = LaunchConfig {
        grid: s.grid(BLOCK_KV)?,
        block: [THREADS, 1, 1],
        dynamic_smem_bytes: backward_smem_bytes(s.hs as u32),
    };
    let prep =
        LaunchConfig { grid: s.grid(PREP_ROWS)?, block: [32 * PREP_ROWS, 1, 1], dynamic_smem_bytes: 0 };
    let pairs = to_u32("B*T*C/2", s.out_len() / 2)?;
    let convert = LaunchConfig::for_items(pairs as usize, ELEMENTWISE_THREADS, MAX_BLOCKS);
    if s.b * s.t * s.nh == 0 {
        return Ok(());
    }
    let (t, nh, hs) = (Arg::from(s.t as u32), Arg::from(s.nh as u32), Arg::from(s.hs as u32));
    let scale = Arg::from(s.scale());
    // The prep kernel reads dO and O as bf16 pairs (`u32`); the main and dQ kernels write
    // dqkv as pairs.
    let args = [dsum.arg_mut(), dq_accum.arg_mut(), dout.arg_as::<u32>()?, out.arg_as::<u32>()?, t, nh, hs];
    // SAFETY: the views hold the sizes and alignments the shape implies.
    unsafe { k.launch("flash_attention_backward_prep", &prep, &args)? };
    after("flash_attention_backward_prep");
    let args = [
        dqkv.arg_mut_as::<u32>()?,
        dq_accum.arg_mut(),
        dout.arg(),
        qkv.arg(),
        lse.arg(),
        dsum.arg_mut(),
        t,
        nh,
        scale,
    ];
    // SAFETY: as above; `dsum` and `dq_accum` were just written by the prep kernel.
    unsafe { k.launch(kernel, &main, &args)? };
    after(kernel);
    let c = to_u32("C", s.c())?;
    let args = [dqkv.arg_mut_as::<u32>()?, dq_accum.arg_mut(), pairs.into(), c.into(), scale];
    // SAFETY: as above; the main kernel wrote dK and dV, this writes the disjoint Q third.
    unsafe { k.launch("flash_attention_backward_dq", &convert, &args)? };
    after("flash_attention_backward_dq");
    Ok(())
}
