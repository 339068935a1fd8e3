//! The GPT training kernels on `Emu` (and `Cuda` when present) against f64 references on random
//! inputs and sizes, outputs poisoned first. The backward kernels are also checked against
//! finite differences of the f64 forward references on tiny shapes.

use rand::rngs::StdRng;
use rand::Rng;
use trident::launch::{self, AdamW, AttentionShape, EncoderShape, Kernels};
use trident::runtime::{Buffer, Device};
use trident_testkit::reference::{self as refs, weighted_differences};
use trident_testkit::{assert_close, f64s, kernel_tests, rng, uniform, POISON};

fn buf(device: &Device, data: &[f32]) -> Buffer<f32> {
    Buffer::from_slice(device, data).unwrap()
}

fn poisoned(device: &Device, n: usize) -> Buffer<f32> {
    buf(device, &vec![POISON; n])
}

/// Tolerance of kernels through the GPU's approximate `ex2`/`lg2` (about 2^-22 relative, but
/// compounded over a softmax) versus the emulator's exact functions.
fn approx_tol(device: &Device, emu: f64) -> f64 {
    if matches!(device, Device::Cuda(_)) {
        emu.max(1e-4)
    } else {
        emu
    }
}

// ---- tests ----------------------------------------------------------------------------------

fn encoder(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("encoder");
    let s = EncoderShape {
        b: rng.gen_range(1..4),
        t: rng.gen_range(1..20),
        c: rng.gen_range(1..40),
        vp: 11,
        max_t: 24,
    };
    let bt = s.b * s.t;
    // Repeated tokens exercise the atomic accumulation of `dwte`.
    let tokens: Vec<u32> = (0..bt).map(|_| rng.gen_range(0..s.vp as u32)).collect();
    let wte = uniform(&mut rng, s.vp * s.c, 1.0);
    let wpe = uniform(&mut rng, s.max_t * s.c, 1.0);
    let dtok = Buffer::from_slice(device, &tokens).unwrap();
    let mut out = poisoned(device, bt * s.c);
    launch::encoder_forward(
        &k,
        &mut out.view_mut(..).unwrap(),
        &dtok.view(..).unwrap(),
        &buf(device, &wte).view(..).unwrap(),
        &buf(device, &wpe).view(..).unwrap(),
        &s,
    )
    .unwrap();
    let want: Vec<f64> = (0..bt * s.c)
        .map(|i| {
            let (r, ch) = (i / s.c, i % s.c);
            wte[tokens[r] as usize * s.c + ch] as f64 + wpe[(r % s.t) * s.c + ch] as f64
        })
        .collect();
    assert_close("encoder forward", &out.to_vec().unwrap(), &want, 1e-7);

    let dout = uniform(&mut rng, bt * s.c, 1.0);
    let g0 = uniform(&mut rng, s.vp * s.c, 1.0);
    let p0 = uniform(&mut rng, s.max_t * s.c, 1.0);
    let (mut dwte, mut dwpe) = (buf(device, &g0), buf(device, &p0));
    launch::encoder_backward(
        &k,
        &mut dwte.view_mut(..).unwrap(),
        &mut dwpe.view_mut(..).unwrap(),
        &buf(device, &dout).view(..).unwrap(),
        &dtok.view(..).unwrap(),
        &s,
    )
    .unwrap();
    let (mut want_te, mut want_pe) = (f64s(&g0), f64s(&p0));
    for r in 0..bt {
        for ch in 0..s.c {
            want_te[tokens[r] as usize * s.c + ch] += dout[r * s.c + ch] as f64;
            want_pe[(r % s.t) * s.c + ch] += dout[r * s.c + ch] as f64;
        }
    }
    assert_close("encoder dwte", &dwte.to_vec().unwrap(), &want_te, 1e-6);
    assert_close("encoder dwpe", &dwpe.to_vec().unwrap(), &want_pe, 1e-6);
}

fn layernorm(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("layernorm");
    for (n, c) in [(rng.gen_range(1..40), rng.gen_range(1..200)), (3, 5)] {
        let x = uniform(&mut rng, n * c, 2.0);
        let w = uniform(&mut rng, c, 1.0);
        let b = uniform(&mut rng, c, 1.0);
        let (dx, dw, db) = (buf(device, &x), buf(device, &w), buf(device, &b));
        let (mut out, mut mean, mut rstd) =
            (poisoned(device, n * c), poisoned(device, n), poisoned(device, n));
        launch::layernorm_forward(
            &k,
            &mut out.view_mut(..).unwrap(),
            &mut mean.view_mut(..).unwrap(),
            &mut rstd.view_mut(..).unwrap(),
            &dx.view(..).unwrap(),
            &dw.view(..).unwrap(),
            &db.view(..).unwrap(),
            n,
            c,
        )
        .unwrap();
        let (want, want_m, want_s) = refs::layernorm(&f64s(&x), &f64s(&w), &f64s(&b), c);
        assert_close("layernorm out", &out.to_vec().unwrap(), &want, 1e-5);
        assert_close("layernorm mean", &mean.to_vec().unwrap(), &want_m, 1e-5);
        assert_close("layernorm rstd", &rstd.to_vec().unwrap(), &want_s, 1e-5);

        // Backward accumulates into gradients that already hold values.
        let dout = uniform(&mut rng, n * c, 1.0);
        let (gi, gw, gb) =
            (uniform(&mut rng, n * c, 1.0), uniform(&mut rng, c, 1.0), uniform(&mut rng, c, 1.0));
        let (mut dinp, mut dweight, mut dbias) = (buf(device, &gi), buf(device, &gw), buf(device, &gb));
        launch::layernorm_backward(
            &k,
            &mut dinp.view_mut(..).unwrap(),
            &mut dweight.view_mut(..).unwrap(),
            &mut dbias.view_mut(..).unwrap(),
            &buf(device, &dout).view(..).unwrap(),
            &dx.view(..).unwrap(),
            &dw.view(..).unwrap(),
            &mean.view(..).unwrap(),
            &rstd.view(..).unwrap(),
            n,
            c,
        )
        .unwrap();
        let (xd, wd, bd, gd) = (f64s(&x), f64s(&w), f64s(&b), f64s(&dout));
        let fd_x = weighted_differences(&xd, &gd, 1e-6, |x| refs::layernorm(x, &wd, &bd, c).0);
        let fd_w = weighted_differences(&wd, &gd, 1e-6, |w| refs::layernorm(&xd, w, &bd, c).0);
        let fd_b = weighted_differences(&bd, &gd, 1e-6, |b| refs::layernorm(&xd, &wd, b, c).0);
        let add =
            |a: &[f32], b: Vec<f64>| -> Vec<f64> { a.iter().zip(b).map(|(&a, b)| a as f64 + b).collect() };
        assert_close("layernorm dinp", &dinp.to_vec().unwrap(), &add(&gi, fd_x), 1e-4);
        assert_close("layernorm dweight", &dweight.to_vec().unwrap(), &add(&gw, fd_w), 1e-4);
        assert_close("layernorm dbias", &dbias.to_vec().unwrap(), &add(&gb, fd_b), 1e-4);
    }
}

fn linear(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("linear");
    let (rows, c, oc) = (rng.gen_range(1..70), rng.gen_range(1..50), rng.gen_range(1..90));
    let x = uniform(&mut rng, rows * c, 1.0);
    let w = uniform(&mut rng, oc * c, 1.0);
    let b = uniform(&mut rng, oc, 1.0);
    let (dx, dw, db) = (buf(device, &x), buf(device, &w), buf(device, &b));
    let mut out = poisoned(device, rows * oc);
    launch::linear_forward(
        &k,
        &mut out.view_mut(..).unwrap(),
        &dx.view(..).unwrap(),
        &dw.view(..).unwrap(),
        Some(&db.view(..).unwrap()),
        rows,
        c,
        oc,
    )
    .unwrap();
    let (xd, wd, bd) = (f64s(&x), f64s(&w), f64s(&b));
    assert_close("linear forward", &out.to_vec().unwrap(), &refs::matmul(&xd, &wd, Some(&bd), c, oc), 1e-5);

    let dout = uniform(&mut rng, rows * oc, 1.0);
    let gd = f64s(&dout);
    // dinp is overwritten; the weight and bias gradients accumulate onto what they hold.
    let (gw, gb) = (uniform(&mut rng, oc * c, 1.0), uniform(&mut rng, oc, 1.0));
    let (mut dinp, mut dweight, mut dbias) = (poisoned(device, rows * c), buf(device, &gw), buf(device, &gb));
    launch::linear_backward(
        &k,
        &mut dinp.view_mut(..).unwrap(),
        &mut dweight.view_mut(..).unwrap(),
        Some(&mut dbias.view_mut(..).unwrap()),
        &buf(device, &dout).view(..).unwrap(),
        &dx.view(..).unwrap(),
        &dw.view(..).unwrap(),
        rows,
        c,
        oc,
    )
    .unwrap();
    let (want_i, dw_ref, db_ref) = refs::matmul_backward(&gd, &xd, &wd, c, oc);
    let want_w: Vec<f64> = gw.iter().zip(dw_ref).map(|(&g, d)| g as f64 + d).collect();
    let want_b: Vec<f64> = gb.iter().zip(db_ref).map(|(&g, d)| g as f64 + d).collect();
    assert_close("linear dinp", &dinp.to_vec().unwrap(), &want_i, 1e-5);
    assert_close("linear dweight", &dweight.to_vec().unwrap(), &want_w, 1e-5);
    assert_close("linear dbias", &dbias.to_vec().unwrap(), &want_b, 1e-5);
}

fn attention_case(k: &Kernels, device: &Device, rng: &mut StdRng, s: AttentionShape, check_grad: bool) {
    let c = s.nh * s.hs;
    let bt = s.b * s.t;
    let qkv = uniform(rng, bt * 3 * c, 1.5);
    let dqkv_in = buf(device, &qkv);
    let (mut out, mut lse) = (poisoned(device, bt * c), poisoned(device, bt * s.nh));
    launch::attention_forward(
        k,
        &mut out.view_mut(..).unwrap(),
        &mut lse.view_mut(..).unwrap(),
        &dqkv_in.view(..).unwrap(),
        &s,
    )
    .unwrap();
    let qd = f64s(&qkv);
    assert_close(
        &format!("attention forward {s:?}"),
        &out.to_vec().unwrap(),
        &refs::attention(&qd, s.b, s.t, c, s.nh).0,
        approx_tol(device, 1e-5),
    );
    if !check_grad {
        return;
    }
    let dout = uniform(rng, bt * c, 1.0);
    let (mut dqkv, mut dsum) = (poisoned(device, bt * 3 * c), poisoned(device, bt * s.nh));
    launch::attention_backward(
        k,
        &mut dqkv.view_mut(..).unwrap(),
        &mut dsum.view_mut(..).unwrap(),
        &buf(device, &dout).view(..).unwrap(),
        &dqkv_in.view(..).unwrap(),
        &out.view(..).unwrap(),
        &lse.view(..).unwrap(),
        &s,
    )
    .unwrap();
    let want = weighted_differences(&qd, &f64s(&dout), 1e-6, |q| refs::attention(q, s.b, s.t, c, s.nh).0);
    assert_close(
        &format!("attention backward {s:?}"),
        &dqkv.to_vec().unwrap(),
        &want,
        approx_tol(device, 1e-4),
    );
}

fn attention(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("attention");
    // Tiny shapes for the finite differences, then sizes that span several key tiles and
    // query blocks, with head sizes that are not multiples of 32.
    attention_case(&k, device, &mut rng, AttentionShape { b: 2, t: 5, nh: 2, hs: 3 }, true);
    let (t, hs) = (rng.gen_range(33..48), rng.gen_range(20..40));
    attention_case(&k, device, &mut rng, AttentionShape { b: 1, t, nh: 1, hs }, true);
    let (t, hs) = (rng.gen_range(60..100), rng.gen_range(33..100));
    attention_case(&k, device, &mut rng, AttentionShape { b: 2, t, nh: 2, hs }, false);
    let t = rng.gen_range(1..40);
    attention_case(&k, device, &mut rng, AttentionShape { b: 2, t, nh: 3, hs: 128 }, false);
}

fn adamw_and_norm(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("adamw");
    let n = rng.gen_range(1..5000);
    let (p, g) = (uniform(&mut rng, n, 1.0), uniform(&mut rng, n, 1.0));
    let (m0, v0) =
        (uniform(&mut rng, n, 0.1), uniform(&mut rng, n, 0.1).iter().map(|x| x.abs()).collect::<Vec<_>>());
    let h =
        AdamW { lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, step: 7, grad_scale: 0.5 };
    let (mut dp, mut dm, mut dv) = (buf(device, &p), buf(device, &m0), buf(device, &v0));
    let dg = buf(device, &g);
    launch::adamw(
        &k,
        &mut dp.view_mut(..).unwrap(),
        &mut dm.view_mut(..).unwrap(),
        &mut dv.view_mut(..).unwrap(),
        &dg.view(..).unwrap(),
        &h,
    )
    .unwrap();
    let hr = refs::AdamW {
        lr: h.lr as f64,
        beta1: h.beta1 as f64,
        beta2: h.beta2 as f64,
        eps: h.eps as f64,
        weight_decay: h.weight_decay as f64,
        grad_scale: h.grad_scale as f64,
        step: h.step as i32,
    };
    let mut want = (vec![], vec![], vec![]);
    for i in 0..n {
        let (pi, mi, vi) = refs::adamw(p[i] as f64, g[i] as f64, m0[i] as f64, v0[i] as f64, &hr);
        want.0.push(pi);
        want.1.push(mi);
        want.2.push(vi);
    }
    assert_close("adamw params", &dp.to_vec().unwrap(), &want.0, 1e-6);
    assert_close("adamw m", &dm.to_vec().unwrap(), &want.1, 1e-6);
    assert_close("adamw v", &dv.to_vec().unwrap(), &want.2, 1e-6);

    let norm2 = launch::sum_squares(&k, &dg.view(..).unwrap()).unwrap();
    let want_n: f64 = g.iter().map(|&x| x as f64 * x as f64).sum();
    assert!((norm2 - want_n).abs() <= 1e-5 * want_n, "sum of squares {norm2} vs {want_n}");
    launch::scale(&k, &mut dp.view_mut(..).unwrap(), -2.0).unwrap();
    let want_s: Vec<f64> = want.0.iter().map(|x| -2.0 * x).collect();
    assert_close("scale", &dp.to_vec().unwrap(), &want_s, 1e-6);
}

kernel_tests!(encoder, layernorm, linear, attention, adamw_and_norm);
