//! The elementwise kernels of the residual stream and the MLP with 128-bit accesses: f32
//! (`_v4_f32`, 4 per access) and bf16 in and out with f32 math (`_bf16`, 8 per access).
//!
//! Each is one grid-stride loop ([`vector::grid_stride`]) over whole 16-byte groups where the
//! launch passes `vectorized = 1` (every pointer 16-byte aligned), and over single elements
//! for the rest of `0..n`. An output may be one of the inputs: each thread reads a group before
//! it writes it.

use crate::gelu::{gelu, gelu_grad};
use crate::simt::{Global, GlobalMut};
use crate::vector::{self, Elem};

/// `out[i] = f(x[i])` over `0..n`, `W` elements (one group of `T`) per vector access.
///
/// # Safety
///
/// `out` and `x` hold `n` elements, 16-byte aligned where `vectorized` is 1; `out` may be `x`
/// but no other thread's memory.
#[inline(always)]
unsafe fn map1<T: Elem, const W: usize>(
    out: GlobalMut<T>,
    x: Global<T>,
    n: u32,
    vectorized: u32,
    f: impl Fn(f32) -> f32,
) {
    let len = n as usize;
    vector::grid_stride::<W>(n, vectorized != 0, |i, whole| {
        if whole {
            let v = vector::load::<T, W>(x, i, len, true);
            vector::store::<T, W>(out, i, len, true, &v.map(&f));
        } else {
            out.store(i, T::from_f32(f(x.load(i).to_f32())));
        }
    });
}

/// `out[i] = f(a[i], b[i])` over `0..n`; see [`map1`].
///
/// # Safety
///
/// As for [`map1`], for `a` and `b`.
#[inline(always)]
unsafe fn map2<T: Elem, const W: usize>(
    out: GlobalMut<T>,
    a: Global<T>,
    b: Global<T>,
    n: u32,
    vectorized: u32,
    f: impl Fn(f32, f32) -> f32,
) {
    let len = n as usize;
    vector::grid_stride::<W>(n, vectorized != 0, |i, whole| {
        if whole {
            let (x, y) = (vector::load::<T, W>(a, i, len, true), vector::load::<T, W>(b, i, len, true));
            let mut r = [0.0f32; W];
            for k in 0..W {
                r[k] = f(x[k], y[k]);
            }
            vector::store::<T, W>(out, i, len, true, &r);
        } else {
            out.store(i, T::from_f32(f(a.load(i).to_f32(), b.load(i).to_f32())));
        }
    });
}

kernels! {
    /// `out[i] = a[i] + b[i]` for `i < n`, 4 per access where `vectorized`.
    pub unsafe fn add_v4_f32(out: GlobalMut<f32>, a: Global<f32>, b: Global<f32>, n: u32, vectorized: u32) {
        map2::<f32, 4>(out, a, b, n, vectorized, |x, y| x + y);
    }

    /// `out[i] = bf16(a[i] + b[i])` for `i < n` (the sum in f32), 8 per access where
    /// `vectorized`: the residual add in bf16.
    pub unsafe fn add_bf16(out: GlobalMut<u16>, a: Global<u16>, b: Global<u16>, n: u32, vectorized: u32) {
        map2::<u16, 8>(out, a, b, n, vectorized, |x, y| x + y);
    }

    /// `out[i] = gelu(inp[i])` for `i < n`, 4 per access where `vectorized`.
    pub unsafe fn gelu_forward_v4_f32(out: GlobalMut<f32>, inp: Global<f32>, n: u32, vectorized: u32) {
        map1::<f32, 4>(out, inp, n, vectorized, gelu);
    }

    /// `out[i] = bf16(gelu(inp[i]))` for `i < n`, 8 per access where `vectorized`.
    pub unsafe fn gelu_forward_bf16(out: GlobalMut<u16>, inp: Global<u16>, n: u32, vectorized: u32) {
        map1::<u16, 8>(out, inp, n, vectorized, gelu);
    }

    /// `dinp[i] = gelu'(inp[i]) * dout[i]` for `i < n`, 4 per access where `vectorized`;
    /// `dinp` may be `dout`.
    pub unsafe fn gelu_backward_v4_f32(dinp: GlobalMut<f32>, inp: Global<f32>, dout: Global<f32>, n: u32, vectorized: u32) {
        map2::<f32, 4>(dinp, inp, dout, n, vectorized, |x, d| gelu_grad(x) * d);
    }

    /// `dinp[i] = bf16(gelu'(inp[i]) * dout[i])` for `i < n`, 8 per access where
    /// `vectorized`; `dinp` may be `dout`.
    pub unsafe fn gelu_backward_bf16(dinp: GlobalMut<u16>, inp: Global<u16>, dout: Global<u16>, n: u32, vectorized: u32) {
        map2::<u16, 8>(dinp, inp, dout, n, vectorized, |x, d| gelu_grad(x) * d);
    }
}
