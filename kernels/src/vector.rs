//! 128-bit global accesses for the memory-bound kernels, with the scalar remainder.
//!
//! A *group* is the 16 bytes one `ld/st.global.v4.b32` moves: 4 f32 or 8 bf16. The loops here
//! hand a kernel's body whole groups where the launch wrapper found every pointer 16-byte
//! aligned (`vectorized`), and single elements for the rest of the range (the elements before
//! the first and after the last whole group, or every element where a pointer is not aligned),
//! so any length and any offset is right and only the ends pay for scalar accesses.
//!
//! [`Elem`] reads and writes groups and single elements of an f32 or bf16 (`u16` bits) array
//! as f32, rounding to bf16 on the way out (nearest, ties to even: [`simt::f32_to_bf16`]).
//! [`widen_b16`], [`narrow_b16`], [`load_b16x8`] and [`store_b16x8`] do the same for bf16 or
//! f16 bits chosen by a const parameter, for the kernels built in both 16-bit formats.

use crate::simt::{self, Global, GlobalMut};

/// Bytes of one vector access.
pub const VECTOR_BYTES: usize = 16;

/// Calls `body(i, true)` for the whole groups of `W` elements (`i` a multiple of `W`) inside
/// `start..end` and `body(i, false)` for every other element of the range, dealing both out
/// over the threads `t = 0..step` (thread `t` takes groups and elements `t`, `t + step`, ...).
/// Without `vectorized` every element is a single one.
#[inline(always)]
pub fn for_range<const W: usize>(
    start: u32,
    end: u32,
    t: u32,
    step: u32,
    vectorized: bool,
    mut body: impl FnMut(usize, bool),
) {
    let Split { g0, g1, lo, hi } = split::<W>(start, end, vectorized);
    let w = W as u32;
    let mut g = g0 + t;
    while g < g1 {
        body((g * w) as usize, true);
        g += step;
    }
    let mut i = start + t;
    while i < lo {
        body(i as usize, false);
        i += step;
    }
    let mut i = hi + t;
    while i < end {
        body(i as usize, false);
        i += step;
    }
}

/// How [`for_range`] splits `start..end`: the whole groups `g0..g1` (group `g` holds elements
/// `g W ..`), and the single elements `start..lo` and `hi..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// The first whole group.
    pub g0: u32,
    /// One past the last whole group.
    pub g1: u32,
    /// The single elements before the groups end here.
    pub lo: u32,
    /// The single elements after the groups start here.
    pub hi: u32,
}

/// [`for_range`]'s split of `start..end` into whole groups of `W` (none without `vectorized`)
/// and single elements, for a kernel that writes the loops itself (where a closure's body is
/// too large for the compiler to inline into them).
#[inline(always)]
pub fn split<const W: usize>(start: u32, end: u32, vectorized: bool) -> Split {
    let w = W as u32;
    let (first, last) = (start.div_ceil(w), end / w);
    let (g0, g1) = if vectorized && first < last { (first, last) } else { (0, 0) };
    let (lo, hi) = if g0 < g1 { (g0 * w, g1 * w) } else { (end, end) };
    Split { g0, g1, lo, hi }
}

/// [`for_range`] over `0..n`, dealt out over the whole grid (a grid-stride loop).
#[inline(always)]
pub fn grid_stride<const W: usize>(n: u32, vectorized: bool, body: impl FnMut(usize, bool)) {
    let step = simt::block_dim_x() * simt::grid_dim_x();
    let t = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
    for_range::<W>(0, n, t, step, vectorized, body);
}

/// An element type of the memory-bound kernels, computed on as f32.
pub trait Elem: Copy {
    /// Elements per 16-byte group.
    const GROUP: u32;

    /// The element's value.
    fn to_f32(self) -> f32;

    /// `x` as this type (bf16: rounded to nearest, ties to even).
    fn from_f32(x: f32) -> Self;

    /// Reads the group of `GROUP` elements at `i` into `out[..GROUP]`.
    ///
    /// # Safety
    ///
    /// `i` is a multiple of `GROUP`, the array's base is 16-byte aligned and the group lies in
    /// it.
    unsafe fn load_group(p: Global<Self>, i: usize, out: &mut [f32]);

    /// Writes `v[..GROUP]` to the group at `i`.
    ///
    /// # Safety
    ///
    /// As for [`Elem::load_group`], and no other thread accesses the group.
    unsafe fn store_group(p: GlobalMut<Self>, i: usize, v: &[f32]);

    /// Writes `v[..GROUP / 2]` to the half group (8 bytes) at `i`.
    ///
    /// # Safety
    ///
    /// `i` is a multiple of `GROUP / 2`, the array's base is 16-byte aligned, the half group
    /// lies in it and no other thread accesses it.
    unsafe fn store_half_group(p: GlobalMut<Self>, i: usize, v: &[f32]);
}

impl Elem for f32 {
    const GROUP: u32 = 4;

    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }

    #[inline(always)]
    unsafe fn load_group(p: Global<f32>, i: usize, out: &mut [f32]) {
        out[..4].copy_from_slice(&p.load_v4(i));
    }

    #[inline(always)]
    unsafe fn store_group(p: GlobalMut<f32>, i: usize, v: &[f32]) {
        p.store_v4(i, [v[0], v[1], v[2], v[3]]);
    }

    #[inline(always)]
    unsafe fn store_half_group(p: GlobalMut<f32>, i: usize, v: &[f32]) {
        p.store_v2(i, [v[0], v[1]]);
    }
}

/// bf16, as its bits.
impl Elem for u16 {
    const GROUP: u32 = 8;

    #[inline(always)]
    fn to_f32(self) -> f32 {
        simt::bf16_to_f32(self)
    }

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        simt::f32_to_bf16(x)
    }

    #[inline(always)]
    unsafe fn load_group(p: Global<u16>, i: usize, out: &mut [f32]) {
        // Four words of two bf16 each, element 2k in the low half of word k.
        let words = p.pairs().load_v4(i / 2);
        for k in 0..4 {
            let (lo, hi) = simt::unpack_bf16x2(words[k]);
            out[2 * k] = simt::bf16_to_f32(lo);
            out[2 * k + 1] = simt::bf16_to_f32(hi);
        }
    }

    #[inline(always)]
    unsafe fn store_group(p: GlobalMut<u16>, i: usize, v: &[f32]) {
        let pack = |k: usize| simt::pack_bf16x2(simt::f32_to_bf16(v[2 * k]), simt::f32_to_bf16(v[2 * k + 1]));
        p.pairs().store_v4(i / 2, [pack(0), pack(1), pack(2), pack(3)]);
    }

    #[inline(always)]
    unsafe fn store_half_group(p: GlobalMut<u16>, i: usize, v: &[f32]) {
        let pack = |k: usize| simt::pack_bf16x2(simt::f32_to_bf16(v[2 * k]), simt::f32_to_bf16(v[2 * k + 1]));
        p.pairs().store_v2(i / 2, [pack(0), pack(1)]);
    }
}

/// Reads `W` elements from `i` (`W` a multiple of the group): whole groups where `vectorized`
/// (then `i` is a multiple of `W` and the base 16-byte aligned), else one element at a time,
/// with `0` for elements at or past `n`.
///
/// # Safety
///
/// The elements below `n` of `i..i + W` lie in the array.
#[inline(always)]
pub unsafe fn load<T: Elem, const W: usize>(p: Global<T>, i: usize, n: usize, vectorized: bool) -> [f32; W] {
    let mut v = [0.0f32; W];
    if vectorized {
        let g = T::GROUP as usize;
        for q in 0..W / g {
            T::load_group(p, i + q * g, &mut v[q * g..]);
        }
    } else {
        for k in 0..W {
            if i + k < n {
                v[k] = p.load(i + k).to_f32();
            }
        }
    }
    v
}

/// Writes `v` to `i..i + W`, as [`load`] reads (elements at or past `n` are not written); `W`
/// may also be half a group (one 8-byte access where `vectorized`, `i` a multiple of `W`).
///
/// # Safety
///
/// As for [`load`], and no other thread accesses those elements.
#[inline(always)]
pub unsafe fn store<T: Elem, const W: usize>(
    p: GlobalMut<T>,
    i: usize,
    n: usize,
    vectorized: bool,
    v: &[f32; W],
) {
    if vectorized {
        let g = T::GROUP as usize;
        if 2 * W == g {
            T::store_half_group(p, i, v);
        }
        for q in 0..W / g {
            T::store_group(p, i + q * g, &v[q * g..]);
        }
    } else {
        for k in 0..W {
            if i + k < n {
                p.store(i + k, T::from_f32(v[k]));
            }
        }
    }
}

/// `bits` as f32 (exact): f16 bits where `F16`, else bf16.
#[inline(always)]
pub fn widen_b16<const F16: bool>(bits: u16) -> f32 {
    if F16 {
        simt::f16_to_f32(bits)
    } else {
        simt::bf16_to_f32(bits)
    }
}

/// `x` rounded to the nearest f16 (where `F16`; magnitudes from 65520 up become infinities)
/// or bf16, ties to even.
#[inline(always)]
pub fn narrow_b16<const F16: bool>(x: f32) -> u16 {
    if F16 {
        simt::f32_to_f16(x)
    } else {
        simt::f32_to_bf16(x)
    }
}

/// The 8 16-bit values (f16 where `F16`, else bf16) of the group at `i`, widened, in one
/// 128-bit load.
///
/// # Safety
///
/// `i` is a multiple of 8, the array's base is 16-byte aligned and the group lies in it.
#[inline(always)]
pub unsafe fn load_b16x8<const F16: bool>(p: Global<u16>, i: usize) -> [f32; 8] {
    // Four words of two values each, element 2k in the low half of word k.
    let words = p.pairs().load_v4(i / 2);
    let mut out = [0.0f32; 8];
    for k in 0..4 {
        let (lo, hi) = simt::unpack_bf16x2(words[k]);
        out[2 * k] = widen_b16::<F16>(lo);
        out[2 * k + 1] = widen_b16::<F16>(hi);
    }
    out
}

/// Writes `v` rounded (see [`narrow_b16`]) to the group of 8 16-bit values at `i` in one
/// 128-bit store.
///
/// # Safety
///
/// As for [`load_b16x8`], and no other thread accesses the group.
#[inline(always)]
pub unsafe fn store_b16x8<const F16: bool>(p: GlobalMut<u16>, i: usize, v: [f32; 8]) {
    let pack = |k: usize| simt::pack_bf16x2(narrow_b16::<F16>(v[2 * k]), narrow_b16::<F16>(v[2 * k + 1]));
    p.pairs().store_v4(i / 2, [pack(0), pack(1), pack(2), pack(3)]);
}
