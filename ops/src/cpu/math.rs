//! Scalar building blocks written so that LLVM vectorises them once they are inlined into a
//! [`simd`] region: no libm calls, no branches, lane arrays for reductions.

/// Runs `f` compiled for the widest instruction set the CPU has (AVX-512, AVX2+FMA, or the
/// baseline). Only code inlined into `f` benefits, hence `#[inline(always)]` on the helpers,
/// and on the closure itself (`simd(#[inline(always)] || ...)`): a closure left out of line is
/// compiled for the baseline, 4 lanes wide.
#[inline(always)]
pub fn simd<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

const LANES: usize = 16;

/// `e^x` within 2 ulp for `x` in the normal range; inputs below -87.3 give ~1e-38, above 88.3
/// give ~2e38 (never inf). A branch-free polynomial, so loops over it vectorise.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_in_range(x.clamp(-87.3, 88.3))
}

/// [`exp`] without its clamp, for callers whose `x` already lies in [-87.3, 88.3] (so that
/// e^x is a normal f32). Outside that range the result is wrong, though always defined.
#[inline(always)]
pub fn exp_in_range(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that n * LN2_HI is exact for |n| < 2^10.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let shifted = x.mul_add(LOG2E, ROUND);
    let n = shifted - ROUND;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    // Horner's rule in fused multiply-adds: LLVM does not contract `a * b + c` on its own.
    let p = [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0]
        .iter()
        .fold(1.0f32 / 720.0, |p, &c| p.mul_add(r, c));
    // The low mantissa bits of `shifted` hold n (two's complement, offset by ROUND's bits):
    // integer arithmetic builds 2^n without a float-to-int conversion, which LLVM would not
    // vectorise (Rust's `as` saturates).
    let biased = shifted.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127);
    let scale = f32::from_bits(biased << 23);
    p * scale
}

/// `tanh(x)`, absolute error below 1e-7.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let e = exp(-2.0 * x.abs());
    let t = (1.0 - e) / (1.0 + e);
    t.copysign(x)
}

/// `sum a[i] b[i]` over the shorter length, in `LANES` partial sums.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for k in 0..LANES {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ar.iter().zip(br) {
        tail += x * y;
    }
    sum_lanes(acc) + tail
}

/// `y += alpha * x`
#[inline(always)]
pub fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += alpha * x;
    }
}

/// `y *= alpha`.
#[inline(always)]
pub fn scale(alpha: f32, y: &mut [f32]) {
    for y in y.iter_mut() {
        *y *= alpha;
    }
}

/// `sum a[i]`, in `LANES` partial sums.
#[inline(always)]
pub fn sum(a: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = a.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for x in chunks {
        for k in 0..LANES {
            acc[k] += x[k];
        }
    }
    sum_lanes(acc) + tail
}

/// The largest element (`-inf` for none).
#[inline(always)]
pub fn max(a: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = a.chunks_exact(LANES);
    let mut tail = f32::NEG_INFINITY;
    for &x in chunks.remainder() {
        tail = tail.max(x);
    }
    for x in chunks {
        for k in 0..LANES {
            acc[k] = acc[k].max(x[k]);
        }
    }
    acc.iter().fold(tail, |m, &x| m.max(x))
}

/// `sum(e^(a[i] - shift))`
#[inline(always)]
pub fn sum_exp(a: &[f32], shift: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = a.chunks_exact(LANES);
    let mut tail = 0.0;
    for &x in chunks.remainder() {
        tail += exp(x - shift);
    }
    for x in chunks {
        for k in 0..LANES {
            acc[k] += exp(x[k] - shift);
        }
    }
    sum_lanes(acc) + tail
}

#[inline(always)]
fn sum_lanes(acc: [f32; LANES]) -> f32 {
    let mut h = [0.0f32; LANES / 2];
    for k in 0..LANES / 2 {
        h[k] = acc[k] + acc[k + LANES / 2];
    }
    h.iter().sum()
}

/// A mutable slice shared by parallel tasks that each write their own disjoint elements
/// (e.g. one attention head's columns of a `[T, C]` matrix).
#[derive(Clone, Copy)]
pub struct DisjointMut<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: a `DisjointMut` is only a pointer; the `unsafe` accessor's contract (no two tasks touch
// the same element) is what makes concurrent use sound, as for `&mut [T]` split across threads.
unsafe impl<T: Send> Send for DisjointMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for DisjointMut<T> {}

impl<T> DisjointMut<T> {
    /// Remembers `slice`'s pointer and length; it carries no borrow, so the accessor's
    /// contract covers the slice's lifetime.
    pub fn new(slice: &mut [T]) -> Self {
        Self { ptr: slice.as_mut_ptr(), len: slice.len() }
    }

    /// Elements `start..start + len`.
    ///
    /// # Safety
    /// The slice this was made from must still be alive and not be used otherwise while the
    /// returned slice lives, and no other slice obtained from this `DisjointMut` may overlap it.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub unsafe fn slice(&self, start: usize, len: usize) -> &mut [T] {
        assert!(start + len <= self.len, "{start}+{len} past {} elements", self.len);
        // SAFETY: in bounds (checked above); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }

    /// A raw pointer to element `start`, for strided writes that no slice can describe.
    ///
    /// # Safety
    /// Writes through it must stay inside the slice and touch no element that another live
    /// slice or thread uses.
    #[inline(always)]
    pub unsafe fn ptr(&self, start: usize) -> *mut T {
        assert!(start < self.len, "{start} past {} elements", self.len);
        // SAFETY: in bounds (checked above).
        unsafe { self.ptr.add(start) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_tanh_match_std() {
        let mut worst_exp = 0.0f64;
        let mut worst_tanh = 0.0f64;
        for i in -20_000..=20_000 {
            let x = i as f32 * 4.3e-3;
            let want = (x as f64).exp();
            worst_exp = worst_exp.max(((exp(x) as f64 - want) / want).abs());
            worst_tanh = worst_tanh.max((tanh(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst_exp < 3e-7, "exp relative error {worst_exp}");
        assert!(worst_tanh < 2e-7, "tanh absolute error {worst_tanh}");
        assert!(exp(-1000.0) < 1e-37 && exp(1000.0).is_finite());
    }

    #[test]
    fn reductions_match_serial_sums() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos()).collect();
        let d: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot(&a, &b) as f64 - d).abs() < 1e-5);
        assert!((sum(&a) as f64 - a.iter().map(|&x| x as f64).sum::<f64>()).abs() < 1e-5);
        assert_eq!(max(&a), a.iter().cloned().fold(f32::MIN, f32::max));
        let se: f64 = a.iter().map(|&x| ((x - 0.5) as f64).exp()).sum();
        assert!((sum_exp(&a, 0.5) as f64 - se).abs() / se < 1e-6);
    }
}
