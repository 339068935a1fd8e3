//! The time model against published measurements: the SGEMM worklog's designs (kernels 1-6,
//! re-implemented in `trident_dev_kernels::designs`), counted on `Emu` at 4096^3 and predicted on
//! the RTX A6000 they were measured on. Every prediction must fall within 25% of the published
//! GFLOP/s, and the designs must rank as published. Also checks that the designs compute
//! `C = alpha A B + beta C` (they are test kernels, but a wrong kernel would validate nothing).

use trident::runtime::{Buffer, Device};
use trident_bench::Bench;
use trident_dev::designs::SgemmDesign;
use trident_perfmodel::Target;
use trident_testkit::reference;

/// The designs' predictions on the A6000 at 4096^3: (design, predicted GFLOP/s, bound).
fn predictions() -> Vec<(SgemmDesign, f64, String)> {
    let bench = Bench::load(&Device::Emu).unwrap();
    let target = Target::named("rtx-a6000").unwrap();
    let size = 4096;
    SgemmDesign::ALL
        .iter()
        .map(|&d| {
            // Counted at K = 64 and 128 with M = N = 4096 (the grid sampled at its edges and
            // interior), extrapolated to K = 4096: the K-loop's steps repeat exactly.
            let w1 = bench.count_design(d, size, 64).unwrap();
            let w2 = bench.count_design(d, size, 128).unwrap();
            let flops = 2.0 * (size as f64).powi(3);
            let w =
                w1.extrapolate(&w2, (size - 64) as f64 / 64.0).with_dram_bytes(4 * 4 * (size * size) as u64);
            let p = target.predict(&w).unwrap();
            (d, flops / p.seconds / 1e9, p.bound.to_string())
        })
        .collect()
}

#[test]
fn sgemm_designs_are_predicted_within_25_percent_and_ranked_as_published() {
    let preds = predictions();
    let mut table = String::from(
        "| kernel | published GFLOP/s (A6000) | predicted | error | bound |\n|---|---|---|---|---|\n",
    );
    for (d, gflops, bound) in &preds {
        let p = d.published();
        table += &format!(
            "| {}: {} | {:.0} | {:.0} | {:+.0}% | {} |\n",
            p.number,
            p.title,
            p.gflops,
            gflops,
            100.0 * (gflops / p.gflops - 1.0),
            bound
        );
    }
    eprintln!("{table}");
    for (d, gflops, _) in &preds {
        let published = d.published().gflops;
        let err = gflops / published - 1.0;
        assert!(
            err.abs() <= 0.25,
            "{}: predicted {gflops:.0} GFLOP/s, published {published}: {:+.0}%\n{table}",
            d.kernel(),
            100.0 * err
        );
    }
    // Published order is the designs' order: each is faster than the one before.
    for pair in preds.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "{} should be predicted faster than {}\n{table}",
            pair[1].0.kernel(),
            pair[0].0.kernel()
        );
    }
}

#[test]
fn sgemm_designs_compute_the_product() {
    let device = Device::Emu;
    let bench = Bench::load(&device).unwrap();
    let mut rng = trident_testkit::rng("sgemm_designs_compute_the_product");
    for d in SgemmDesign::ALL {
        // The tiled designs need whole tiles; the first two check bounds, so give them ragged
        // edges.
        let shape = match d {
            SgemmDesign::Naive | SgemmDesign::Coalesced => (40, 72, 24),
            _ => (128, 256, 32),
        };
        let (m, n, k) = shape;
        let a = trident_testkit::uniform(&mut rng, m * k, 1.0);
        let b = trident_testkit::uniform(&mut rng, k * n, 1.0);
        let c0 = trident_testkit::uniform(&mut rng, m * n, 1.0);
        let (alpha, beta) = (0.75, -0.5);
        let (ab, bb) = (Buffer::from_slice(&device, &a).unwrap(), Buffer::from_slice(&device, &b).unwrap());
        let mut cb = Buffer::from_slice(&device, &c0).unwrap();
        d.launch(
            &bench.dev,
            &mut cb.view_mut(..).unwrap(),
            &ab.view(..).unwrap(),
            &bb.view(..).unwrap(),
            shape,
            alpha,
            beta,
        )
        .unwrap();
        let got = cb.to_vec().unwrap();
        let want = reference::gemm(&reference::Gemm::dense(m, n, k, alpha as f64, beta as f64), &a, &b, &c0);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{}: C[{i}] = {g}, expected {w}",
                d.kernel()
            );
        }
    }
}

#[test]
fn tiled_designs_refuse_partial_tiles() {
    let bench = Bench::load(&Device::Emu).unwrap();
    let device = Device::Emu;
    let (a, b) =
        (Buffer::<f32>::zeros(&device, 100 * 8).unwrap(), Buffer::<f32>::zeros(&device, 8 * 128).unwrap());
    let mut c = Buffer::<f32>::zeros(&device, 100 * 128).unwrap();
    let err = SgemmDesign::Tiled2d
        .launch(
            &bench.dev,
            &mut c.view_mut(..).unwrap(),
            &a.view(..).unwrap(),
            &b.view(..).unwrap(),
            (100, 128, 8),
            1.0,
            0.0,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("design_sgemm_tiled_2d") && err.contains("M % 128"), "{err}");
}
