//! What outputs hold before a kernel runs, so that an element it fails to write shows: any
//! comparison through [`rel_err`](crate::rel_err) fails on it.

/// The f32 poison: a NaN.
pub const POISON: f32 = f32::NAN;

/// The bf16 poison: a quiet NaN other than the canonical `0x7FC0` a kernel's own NaN takes, so
/// that an element left untouched can be told from one computed as NaN.
pub const POISON_BF16: u16 = 0x7FC1;
