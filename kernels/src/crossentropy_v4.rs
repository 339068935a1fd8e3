//! Fused softmax + cross-entropy over the vocabulary with 128-bit accesses, one block per token.
//!
//! Two passes over the row remain, and no more can go: the loss needs the log-sum-exp of the
//! whole row, and every gradient element `(softmax - onehot) * dloss` needs it too, so the
//! first pass (an online softmax: running maximum and sum of exponentials, rescaled when the
//! maximum grows, over 4 (f32) or 8 (16-bit) logits at a time) must end before the second
//! writes anything. A row of the GPT-2 vocabulary (50304 f32, 196 KiB) does not fit in a
//! block's registers, so the second pass reads it again; on a GPU whose L2 holds a row per resident block (H100: 50 MB)
//! that read is served from L2, and the DRAM traffic stays one read and one write of the
//! logits. Without `write_grad` (evaluation) there is one pass.
//!
//! Logits past the real vocabulary `v` (padding up to `vp`) take no part in the softmax and
//! get zero gradient. `vectorized = 1` where `logits` is 16-byte aligned and every row starts
//! 16-byte aligned (`vp` a multiple of 4 f32, or of 8 16-bit values).
//!
//! Three element types share one body (`row`): f32 (`crossentropy_v4_f32`, 4 logits per
//! 128-bit access) and bf16 and f16 (`crossentropy_v4_bf16`, `crossentropy_v4_f16`: 8 per
//! access, the mixed-precision LM head's logits as the GEMM stored them). The 16-bit variants
//! widen each logit to f32 on load (exact), keep the running maximum, the sum, the
//! log-sum-exp and the loss in f32, and write the gradient in place rounded to the nearest
//! 16-bit value (ties to even): the values the f32 kernel gives on the widened logits followed
//! by a rounding of its gradient, up to the order of the f32 sums (a thread here folds 8
//! consecutive logits where the f32 kernel's folds 4). At 2 bytes a logit the DRAM traffic is
//! half the f32 kernel's. f16 logits change nothing either: the GEMM's f16 output overflows
//! to infinity from 65520 exactly as rounding f32 logits to f16 did, and a row holding an
//! infinity gives a non-finite loss either way, which the fp16 loss scaler sees.

use crate::reduce::{block_max, block_sum};
use crate::simt::{self, Global, GlobalMut};
use crate::vector::{self, load_b16x8, narrow_b16, store_b16x8, widen_b16};

/// Folds `xs` into the running maximum `m` and sum `s` of `exp(x - m)`.
#[inline(always)]
fn online<const W: usize>(m: &mut f32, s: &mut f32, xs: [f32; W]) {
    let mut top = xs[0];
    for k in 1..W {
        top = top.max(xs[k]);
    }
    if top > *m {
        // From -inf the old sum is 0 and exp(-inf) is 0: no NaN.
        *s *= simt::exp(*m - top);
        *m = top;
    }
    for k in 0..W {
        *s += simt::exp(xs[k] - *m);
    }
}

/// How [`row`] reads and writes one row of logits of some element type, as f32: one element
/// at `i`, or the whole group of `W` at `i` (a multiple of `W`, 16-byte aligned).
trait RowAccess<const W: usize>: Copy {
    /// Logit `i`, widened.
    ///
    /// # Safety
    ///
    /// `i` lies in the row.
    unsafe fn one(self, i: usize) -> f32;

    /// Writes `g` (rounded to the element type) to element `i`.
    ///
    /// # Safety
    ///
    /// As for [`RowAccess::one`], and no other thread accesses the element.
    unsafe fn set_one(self, i: usize, g: f32);

    /// The group at `i`, widened.
    ///
    /// # Safety
    ///
    /// `i` is a multiple of `W`, the group lies in the row and the row is 16-byte aligned.
    unsafe fn group(self, i: usize) -> [f32; W];

    /// Writes `g` (rounded) to the group at `i`.
    ///
    /// # Safety
    ///
    /// As for [`RowAccess::group`], and no other thread accesses the group.
    unsafe fn set_group(self, i: usize, g: [f32; W]);
}

/// An f32 row: 4 logits per 128-bit access.
#[derive(Clone, Copy)]
struct F32Row(GlobalMut<f32>);

impl RowAccess<4> for F32Row {
    #[inline(always)]
    unsafe fn one(self, i: usize) -> f32 {
        self.0.load(i)
    }

    #[inline(always)]
    unsafe fn set_one(self, i: usize, g: f32) {
        self.0.store(i, g);
    }

    #[inline(always)]
    unsafe fn group(self, i: usize) -> [f32; 4] {
        self.0.load_v4(i)
    }

    #[inline(always)]
    unsafe fn set_group(self, i: usize, g: [f32; 4]) {
        self.0.store_v4(i, g);
    }
}

/// A row of 16-bit logits (f16 where `F16`, else bf16): 8 per 128-bit access.
#[derive(Clone, Copy)]
struct HalfRow<const F16: bool>(GlobalMut<u16>);

impl<const F16: bool> RowAccess<8> for HalfRow<F16> {
    #[inline(always)]
    unsafe fn one(self, i: usize) -> f32 {
        widen_b16::<F16>(self.0.load(i))
    }

    #[inline(always)]
    unsafe fn set_one(self, i: usize, g: f32) {
        self.0.store(i, narrow_b16::<F16>(g));
    }

    #[inline(always)]
    unsafe fn group(self, i: usize) -> [f32; 8] {
        load_b16x8::<F16>(self.0.as_const(), i)
    }

    #[inline(always)]
    unsafe fn set_group(self, i: usize, g: [f32; 8]) {
        store_b16x8::<F16>(self.0, i, g);
    }
}

/// The block's row `x`: the loss `lse - x[target]` into `losses[row]` (by thread 0) and, with
/// `write_grad`, `(softmax - onehot) * dloss` over the row in place (zero on the padding
/// `v..vp`), `W` logits per access where `vec`.
///
/// # Safety
///
/// `x` holds `vp` logits (16-byte aligned where `vec`, with `vp` a multiple of `W`),
/// `target < v <= vp`, `losses` holds `row + 1` values and no other block touches the row.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row<R: RowAccess<W>, const W: usize>(
    x: R,
    losses: GlobalMut<f32>,
    row: usize,
    target: u32,
    (v, vp): (u32, u32),
    dloss: f32,
    write_grad: bool,
    vec: bool,
    scratch: simt::Shared<f32>,
) {
    let (tid, step) = (simt::thread_idx_x(), simt::block_dim_x());
    let (mut m, mut s) = (f32::NEG_INFINITY, 0.0f32);
    let (mr, sr) = (&mut m, &mut s);
    vector::for_range::<W>(0, v, tid, step, vec, move |i, whole| {
        if whole {
            online(mr, sr, x.group(i));
        } else {
            online(mr, sr, [x.one(i)]);
        }
    });
    let row_max = block_max(m, scratch);
    let local = if m == f32::NEG_INFINITY { 0.0 } else { s * simt::exp(m - row_max) };
    let row_sum = block_sum(local, scratch);
    let lse = row_max + simt::log2(row_sum) * core::f32::consts::LN_2;
    if tid == 0 {
        losses.store(row, lse - x.one(target as usize));
    }
    // Every thread has read the target's logit above before any thread overwrites it.
    simt::sync_threads();
    if write_grad {
        // `for_range`'s loops written out: as a closure, the f16 variant's body (8 software
        // roundings a group) was too large to inline and its captures went to local memory.
        let g = Grad { v, target, lse, dloss };
        let vector::Split { g0, g1, lo, hi } = vector::split::<W>(0, vp, vec);
        let mut gi = g0 + tid;
        while gi < g1 {
            g.group(x, (gi * W as u32) as usize);
            gi += step;
        }
        let mut i = tid;
        while i < lo {
            g.one(x, i as usize);
            i += step;
        }
        let mut i = hi + tid;
        while i < vp {
            g.one(x, i as usize);
            i += step;
        }
    }
}

/// What the gradient `(softmax - onehot) * dloss` of a row needs: the real vocabulary, the
/// target, the row's log-sum-exp and the loss's gradient.
#[derive(Clone, Copy)]
struct Grad {
    v: u32,
    target: u32,
    lse: f32,
    dloss: f32,
}

impl Grad {
    /// The gradient at logit `i` of value `xi` (zero on the padding).
    #[inline(always)]
    fn at(self, i: usize, xi: f32) -> f32 {
        let g = if i < self.v as usize { simt::exp(xi - self.lse) } else { 0.0 };
        (if i == self.target as usize { g - 1.0 } else { g }) * self.dloss
    }

    /// Overwrites the whole group at `i` with its gradient.
    ///
    /// # Safety
    ///
    /// As for [`RowAccess::set_group`].
    #[inline(always)]
    unsafe fn group<R: RowAccess<W>, const W: usize>(self, x: R, i: usize) {
        let xs = x.group(i);
        let mut g = [0.0f32; W];
        for k in 0..W {
            g[k] = self.at(i + k, xs[k]);
        }
        x.set_group(i, g);
    }

    /// Overwrites logit `i` with its gradient.
    ///
    /// # Safety
    ///
    /// As for [`RowAccess::set_one`].
    #[inline(always)]
    unsafe fn one<R: RowAccess<W>, const W: usize>(self, x: R, i: usize) {
        x.set_one(i, self.at(i, x.one(i)));
    }
}

kernels! {
    /// `logits` is `[rows, vp]` f32, `losses` and `targets` `[rows]`; launch `rows` blocks.
    pub unsafe fn crossentropy_v4_f32(
        logits: GlobalMut<f32>, losses: GlobalMut<f32>, targets: Global<u32>, v: u32, vp: u32, dloss: f32,
        write_grad: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(CROSSENTROPY_V4_SCRATCH, f32, 32);
        let r = simt::block_idx_x() as usize;
        let x = F32Row(logits.add(r * vp as usize));
        row(x, losses, r, targets.load(r), (v, vp), dloss, write_grad != 0, vectorized != 0, scratch);
    }

    /// [`crossentropy_v4_f32`] on bf16 logits (`u16` bits), 8 per access; the gradient is
    /// written back in bf16.
    pub unsafe fn crossentropy_v4_bf16(
        logits: GlobalMut<u16>, losses: GlobalMut<f32>, targets: Global<u32>, v: u32, vp: u32, dloss: f32,
        write_grad: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(CROSSENTROPY_V4_BF16_SCRATCH, f32, 32);
        let r = simt::block_idx_x() as usize;
        let x = HalfRow::<false>(logits.add(r * vp as usize));
        row(x, losses, r, targets.load(r), (v, vp), dloss, write_grad != 0, vectorized != 0, scratch);
    }

    /// [`crossentropy_v4_f32`] on f16 logits (`u16` bits), 8 per access; the gradient is
    /// written back in f16.
    pub unsafe fn crossentropy_v4_f16(
        logits: GlobalMut<u16>, losses: GlobalMut<f32>, targets: Global<u32>, v: u32, vp: u32, dloss: f32,
        write_grad: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(CROSSENTROPY_V4_F16_SCRATCH, f32, 32);
        let r = simt::block_idx_x() as usize;
        let x = HalfRow::<true>(logits.add(r * vp as usize));
        row(x, losses, r, targets.load(r), (v, vp), dloss, write_grad != 0, vectorized != 0, scratch);
    }
}
