//! Emulated `mma.sync` with fragments from every `ldmatrix` form and from the PTX ISA layout
//! formulas, against an f64 product of the bf16-rounded inputs.

use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
use trident_simt::LaunchConfig;

use crate::rng::{seed, Rng};
use crate::{lend, ptr, run_selftest};

#[test]
fn mma_with_ldmatrix_fragments_matches_f64_reference() {
    let seed = seed("mma_with_ldmatrix_fragments");
    let mut rng = Rng::new(seed);
    for trial in 0..4 {
        let scale = [1.0, 8.0, 0.01, 100.0][trial];
        let a: Vec<u16> = (0..256).map(|_| f32_to_bf16(rng.f32() * scale)).collect();
        let b: Vec<u16> = (0..128).map(|_| f32_to_bf16(rng.f32() * scale)).collect();
        let c = rng.vec(128);
        let mut d = vec![f32::NAN; 512];
        let _lent = (lend(&a), lend(&b), lend(&c), lend(&d));
        run_selftest(
            "selftest_mma",
            LaunchConfig::linear(1, 32),
            &[a.as_ptr() as u64, b.as_ptr() as u64, c.as_ptr() as u64, ptr(&mut d)],
        )
        .unwrap();
        for row in 0..16 {
            for col in 0..8 {
                let terms: Vec<f64> = (0..16)
                    .map(|k| f64::from(bf16_to_f32(a[row * 16 + k])) * f64::from(bf16_to_f32(b[k * 8 + col])))
                    .collect();
                let want = terms.iter().sum::<f64>() + f64::from(c[row * 8 + col]);
                // f32 accumulation: error relative to the magnitude of the terms.
                let magnitude =
                    terms.iter().map(|t| t.abs()).sum::<f64>() + f64::from(c[row * 8 + col]).abs();
                for path in 0..4 {
                    let got = f64::from(d[path * 128 + row * 8 + col]);
                    assert!(
                        (got - want).abs() <= 1e-6 * magnitude,
                        "seed {seed} trial {trial} path {path} D[{row}][{col}] = {got}, want {want}"
                    );
                }
            }
        }
    }
}
