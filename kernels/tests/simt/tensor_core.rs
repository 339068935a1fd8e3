//! Emulated `mma.sync` (bf16 and f16 inputs) with fragments from every `ldmatrix` form and from
//! the PTX ISA layout formulas, against an f64 product of the rounded inputs; and the f16
//! conversions against the `half` crate.

use trident_kernels::simt::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use trident_simt::LaunchConfig;

use crate::rng::{seed, Rng};
use crate::{lend, ptr, run_selftest};

/// Runs `kernel` (`selftest_mma` or `selftest_mma_f16`) on values rounded by `round` and checks
/// every path against the f64 product of the rounded values, decoded by `decode`.
fn check_mma(kernel: &str, round: fn(f32) -> u16, decode: fn(u16) -> f32, scales: [f32; 4]) {
    let seed = seed(kernel);
    let mut rng = Rng::new(seed);
    for (trial, scale) in scales.into_iter().enumerate() {
        let a: Vec<u16> = (0..256).map(|_| round(rng.f32() * scale)).collect();
        let b: Vec<u16> = (0..128).map(|_| round(rng.f32() * scale)).collect();
        let c = rng.vec(128);
        let mut d = vec![f32::NAN; 512];
        let _lent = (lend(&a), lend(&b), lend(&c), lend(&d));
        run_selftest(
            kernel,
            LaunchConfig::linear(1, 32),
            &[a.as_ptr() as u64, b.as_ptr() as u64, c.as_ptr() as u64, ptr(&mut d)],
        )
        .unwrap();
        for row in 0..16 {
            for col in 0..8 {
                let terms: Vec<f64> = (0..16)
                    .map(|k| f64::from(decode(a[row * 16 + k])) * f64::from(decode(b[k * 8 + col])))
                    .collect();
                let want = terms.iter().sum::<f64>() + f64::from(c[row * 8 + col]);
                // f32 accumulation: error relative to the magnitude of the terms.
                let magnitude =
                    terms.iter().map(|t| t.abs()).sum::<f64>() + f64::from(c[row * 8 + col]).abs();
                for path in 0..4 {
                    let got = f64::from(d[path * 128 + row * 8 + col]);
                    assert!(
                        (got - want).abs() <= 1e-6 * magnitude,
                        "{kernel} seed {seed} trial {trial} path {path} D[{row}][{col}] = {got}, want {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn mma_with_ldmatrix_fragments_matches_f64_reference() {
    check_mma("selftest_mma", f32_to_bf16, bf16_to_f32, [1.0, 8.0, 0.01, 100.0]);
}

#[test]
fn f16_mma_with_ldmatrix_fragments_matches_f64_reference() {
    // 1e-4 puts some inputs among the f16 subnormals (below 6.1e-5); 100 keeps products of
    // 16 terms far from f16's 65504 range limit (accumulation is f32 anyway).
    check_mma("selftest_mma_f16", f32_to_f16, f16_to_f32, [1.0, 8.0, 1e-4, 100.0]);
}

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
