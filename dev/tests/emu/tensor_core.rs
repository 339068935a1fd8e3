//! Emulated `mma.sync` (bf16 and f16 inputs) with fragments from every `ldmatrix` form and from
//! the PTX ISA layout formulas, against an f64 product of the rounded inputs.

use rand::Rng;
use trident_kernels::simt::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use trident_simt::LaunchConfig;
use trident_testkit::{rng, uniform};

use crate::{lend, ptr, run_selftest};

/// Runs `kernel` (`selftest_mma` or `selftest_mma_f16`) on values rounded by `round` and checks
/// every path against the f64 product of the rounded values, decoded by `decode`.
fn check_mma(kernel: &str, round: fn(f32) -> u16, decode: fn(u16) -> f32, scales: [f32; 4]) {
    let mut rng = rng(kernel);
    for (trial, scale) in scales.into_iter().enumerate() {
        let a: Vec<u16> = (0..256).map(|_| round(rng.gen_range(-1.0f32..1.0) * scale)).collect();
        let b: Vec<u16> = (0..128).map(|_| round(rng.gen_range(-1.0f32..1.0) * scale)).collect();
        let c = uniform(&mut rng, 128, 1.0);
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
                        "{kernel} trial {trial} path {path} D[{row}][{col}] = {got}, want {want}"
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
