//! The element types the collectives move: f32, and bf16 held as its `u16` bits. Sums are
//! always taken in f32.

use crate::simt;

/// An element a collective reduces in f32.
pub trait Element: Copy {
    /// The value as f32 (exact for both types).
    fn to_f32(self) -> f32;
    /// `v` rounded to the type (to nearest, ties to even, for bf16).
    fn from_f32(v: f32) -> Self;
}

impl Element for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

/// bf16, as its bits.
impl Element for u16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        simt::bf16_to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        simt::f32_to_bf16(v)
    }
}
