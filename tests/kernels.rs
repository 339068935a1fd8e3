//! The foundation kernels on `Emu` (and `Cuda` when present) against f64 references, on random
//! sizes and shapes, with outputs poisoned before each launch.

use rand::Rng;
use trident::launch::{self, Gemm, Kernels, LaunchError};
use trident::runtime::{Buffer, Device};
use trident_testkit::reference as refs;
use trident_testkit::{assert_close, kernel_tests, rng, uniform, POISON};

fn add(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("add");
    for n in [0, 1, 255, 257, rng.gen_range(1000..70_000)] {
        let a = uniform(&mut rng, n, 10.0);
        let b = uniform(&mut rng, n, 10.0);
        let (da, db) = (Buffer::from_slice(device, &a).unwrap(), Buffer::from_slice(device, &b).unwrap());
        let mut out = Buffer::from_slice(device, &vec![POISON; n]).unwrap();
        launch::add(&k, &mut out.view_mut(..).unwrap(), &da.view(..).unwrap(), &db.view(..).unwrap())
            .unwrap();
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| x as f64 + y as f64).collect();
        assert_close(&format!("add n={n}"), &out.to_vec().unwrap(), &want, 1e-7);
    }
}

fn gemm_case(k: &Kernels, device: &Device, rng: &mut rand::rngs::StdRng, spec: Gemm, padded: bool) {
    let ta = spec.trans_a == launch::Transpose::Yes;
    let tb = spec.trans_b == launch::Transpose::Yes;
    let (ar, ac) = if ta { (spec.k, spec.m) } else { (spec.m, spec.k) };
    let (br, bc) = if tb { (spec.n, spec.k) } else { (spec.k, spec.n) };
    let pad =
        |cols: usize, rng: &mut rand::rngs::StdRng| if padded { cols + rng.gen_range(1..5) } else { cols };
    let ld = (pad(ac, rng), pad(bc, rng), pad(spec.n, rng));
    let st = (ar * ld.0 + usize::from(padded) * 3, br * ld.1, spec.m * ld.2 + usize::from(padded) * 5);
    let spec = spec.leading_dims(ld.0, ld.1, ld.2).batch_strides(st.0, st.1, st.2);
    let a = uniform(rng, spec.batch * st.0, 1.0);
    let b = uniform(rng, spec.batch * st.1, 1.0);
    // beta == 0 must not read C, so C starts poisoned then; otherwise it holds data.
    let c0 =
        if spec.beta == 0.0 { vec![POISON; spec.batch * st.2] } else { uniform(rng, spec.batch * st.2, 1.0) };
    let da = Buffer::from_slice(device, &a).unwrap();
    let db = Buffer::from_slice(device, &b).unwrap();
    let mut dc = Buffer::from_slice(device, &c0).unwrap();
    launch::gemm(k, &mut dc.view_mut(..).unwrap(), &da.view(..).unwrap(), &db.view(..).unwrap(), &spec)
        .unwrap();
    let got = dc.to_vec().unwrap();
    let reference = refs::Gemm {
        m: spec.m,
        n: spec.n,
        k: spec.k,
        batch: spec.batch,
        trans_a: ta,
        trans_b: tb,
        alpha: spec.alpha as f64,
        beta: spec.beta as f64,
        ld,
        stride: st,
    };
    let want = refs::gemm(&reference, &a, &b, &c0);
    // Compare only the elements of C the GEMM owns; padding must keep its old value.
    let mut g = Vec::new();
    let mut w = Vec::new();
    for z in 0..spec.batch {
        for i in 0..spec.m {
            for j in 0..ld.2 {
                let idx = z * st.2 + i * ld.2 + j;
                if j < spec.n {
                    g.push(got[idx]);
                    w.push(want[idx]);
                } else {
                    assert!(got[idx].to_bits() == c0[idx].to_bits(), "gemm wrote padding at {idx}");
                }
            }
        }
    }
    assert_close(&format!("{spec:?}"), &g, &w, 1e-5);
}

fn gemm(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("gemm");
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        for _ in 0..2 {
            let (m, n, kk) = (rng.gen_range(1..150), rng.gen_range(1..150), rng.gen_range(1..200));
            let mut spec = Gemm::new(m, n, kk);
            if ta {
                spec = spec.trans_a();
            }
            if tb {
                spec = spec.trans_b();
            }
            let alpha = rng.gen_range(0.5..2.0);
            let beta = if rng.gen_bool(0.5) { 0.0 } else { rng.gen_range(-1.0..1.0) };
            gemm_case(&k, device, &mut rng, spec.alpha(alpha).beta(beta), false);
        }
    }
    // Batched with leading dimensions and strides that are not the dense ones.
    let spec = Gemm::new(rng.gen_range(1..70), rng.gen_range(1..70), rng.gen_range(1..90))
        .trans_b()
        .batched(3)
        .beta(0.5);
    gemm_case(&k, device, &mut rng, spec, true);
}

fn gemm_rejects_short_views(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let a = Buffer::<f32>::zeros(device, 6).unwrap();
    let b = Buffer::<f32>::zeros(device, 6).unwrap();
    let mut c = Buffer::<f32>::zeros(device, 3).unwrap();
    let err = launch::gemm(
        &k,
        &mut c.view_mut(..).unwrap(),
        &a.view(..).unwrap(),
        &b.view(..).unwrap(),
        &Gemm::new(2, 2, 3),
    )
    .unwrap_err();
    assert!(matches!(err, LaunchError::TooShort { what: "C", needed: 4, got: 3, .. }), "{err}");
}

/// The device-side range check of token ids finds the first id past the vocabulary, whichever
/// block holds it, and none where there is none.
fn token_range_check(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("token_range_check");
    for n in [1, 255, 257, 5000, rng.gen_range(10_000..70_000)] {
        let vocab = 50;
        let mut tokens: Vec<u32> = (0..n).map(|_| rng.gen_range(0..vocab)).collect();
        let check = |tokens: &[u32]| {
            let b = Buffer::from_slice(device, tokens).unwrap();
            launch::first_token_out_of_range(&k, &b.view(..).unwrap(), vocab as usize).unwrap()
        };
        assert_eq!(check(&tokens), None, "n={n}");
        // Two bad ids, the later one in another block: the first is named.
        let (first, later) = (rng.gen_range(0..n), n - 1);
        tokens[later] = vocab + 7;
        tokens[first] = vocab;
        assert_eq!(check(&tokens), Some(first.min(later)), "n={n}");
        tokens[first] = u32::MAX;
        assert_eq!(check(&tokens), Some(first.min(later)), "n={n}");
    }
}

kernel_tests!(add, gemm, gemm_rejects_short_views, token_range_check);
