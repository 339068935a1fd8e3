//! bf16 conversions in plain integer arithmetic, identical on the GPU and the host.

/// Rounds `x` to the nearest bf16 (ties to even); NaNs stay NaNs (quiet), infinities stay.
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let round = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// The f32 with the same value as bf16 `bits`.
#[inline]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Two bf16 in one register, `lo` in bits 0..16: the lower column index goes in the low half,
/// as mma and ldmatrix fragments hold them.
#[inline]
pub fn pack_bf16x2(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | (u32::from(hi) << 16)
}

/// The (low, high) halves of a packed pair.
#[inline]
pub fn unpack_bf16x2(pair: u32) -> (u16, u16) {
    (pair as u16, (pair >> 16) as u16)
}
