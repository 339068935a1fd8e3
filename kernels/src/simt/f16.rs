//! IEEE binary16 (f16) conversions in plain integer arithmetic, identical on the GPU and the
//! host. Pairs are packed as bf16 pairs are ([`super::pack_bf16x2`] works for any b16 pair).

/// Rounds `x` to the nearest f16 (ties to even): magnitudes from 65520 up become infinity,
/// those below 2^-14 subnormals (down to 2^-24) or zero; NaNs stay NaNs (quiet).
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7FFF_FFFF;
    if abs > 0x7F80_0000 {
        return sign | 0x7E00 | ((abs >> 13) as u16 & 0x3FF);
    }
    // The f16 biased exponent: f32 bias 127, f16 bias 15.
    let exp = (abs >> 23) as i32 - 112;
    if exp >= 31 {
        return sign | 0x7C00;
    }
    if exp <= 0 {
        // Subnormal: the value in units of 2^-24 is the 24-bit significand >> (14 - exp).
        if exp < -10 {
            return sign;
        }
        let significand = (abs & 0x7F_FFFF) | 0x80_0000;
        let shift = (14 - exp) as u32;
        let half = significand >> shift;
        let rem = significand & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let up = rem > halfway || (rem == halfway && half & 1 == 1);
        return sign | (half + u32::from(up)) as u16;
    }
    let h = ((exp as u32) << 10) | ((abs >> 13) & 0x3FF);
    let rem = abs & 0x1FFF;
    let up = rem > 0x1000 || (rem == 0x1000 && h & 1 == 1);
    // A carry out of the mantissa steps the exponent, up to infinity (0x7C00) exactly.
    sign | (h + u32::from(up)) as u16
}

/// The f32 with the same value as f16 `bits`.
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from((bits >> 10) & 0x1F);
    let mut mant = u32::from(bits & 0x3FF);
    let out = match exp {
        0x1F => sign | 0x7F80_0000 | (mant << 13),
        0 if mant == 0 => sign,
        0 => {
            // Subnormal: normalise so bit 10 is the implicit one.
            let mut e = 113u32;
            while mant & 0x400 == 0 {
                mant <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((mant & 0x3FF) << 13)
        }
        _ => sign | ((exp + 112) << 23) | (mant << 13),
    };
    f32::from_bits(out)
}
