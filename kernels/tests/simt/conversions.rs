//! The SIMT API's f16 conversions against `half`'s IEEE round-to-nearest-even, on every f16 bit
//! pattern and around every rounding boundary.

use trident_kernels::simt::{f16_to_f32, f32_to_f16};

use crate::rng::{seed, Rng};

#[test]
fn f16_conversions_match_ieee_rounding() {
    // Every f16 bit pattern decodes as `half` decodes it, and rounds back to itself.
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32();
        let got = f16_to_f32(bits);
        assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{bits:#06x}");
        if !got.is_nan() {
            assert_eq!(f32_to_f16(got), bits, "round trip of {bits:#06x}");
        }
    }
    // f32 values around every rounding boundary (halfway points, the subnormal and overflow
    // edges) and at random, against `half`'s round-to-nearest-even.
    let seed = seed("f16_conversions");
    let mut rng = Rng::new(seed);
    let check = |x: f32| {
        let want = half::f16::from_f32(x).to_bits();
        let got = f32_to_f16(x);
        assert!(
            got == want || (x.is_nan() && got & 0x7C00 == 0x7C00 && got & 0x3FF != 0),
            "seed {seed}: {x:e}"
        );
    };
    for bits in (0..=u16::MAX).step_by(7) {
        let v = half::f16::from_bits(bits).to_f32();
        let next = half::f16::from_bits(bits.wrapping_add(1)).to_f32();
        if v.is_finite() && next.is_finite() {
            let mid = (f64::from(v) + f64::from(next)) / 2.0;
            for x in [
                mid as f32,
                f32::from_bits((mid as f32).to_bits() + 1),
                f32::from_bits((mid as f32).to_bits() - 1),
            ] {
                check(x);
            }
        }
    }
    for x in [65504.0, 65519.0, 65520.0, 1e6, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, f32::INFINITY, f32::NAN] {
        check(x);
        check(-x);
    }
    for _ in 0..100_000 {
        check(f32::from_bits(rng.next_u64() as u32));
    }
}
