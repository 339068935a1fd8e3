//! Each op against an f64 reference on seeded random inputs (relative error), and each
//! backward against central finite differences of the f64 forward on small shapes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use trident_runtime::{Buffer, Device};
use trident_testkit::f64s;
use trident_testkit::reference::{self as refs, central_differences};

use super::*;

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

fn randn(r: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| (r.gen::<f32>() * 2.0 - 1.0) * scale).collect()
}

fn assert_close(what: &str, seed: u64, got: &[f32], want: &[f64], tol: f64) {
    trident_testkit::assert_close(&format!("{what} (seed {seed})"), got, want, tol);
}

fn weighted(out: &[f64], w: &[f64]) -> f64 {
    out.iter().zip(w).map(|(a, b)| a * b).sum()
}

fn buf(x: &[f32]) -> Buffer<f32> {
    Buffer::from_slice(&Device::Cpu, x).unwrap()
}

fn cpu() -> OpsContext {
    OpsContext::new(&Device::Cpu).unwrap()
}

// ---- forward against the references ----

#[test]
fn encoder_forward_matches_reference_and_backward_accumulates() {
    let seed = 11;
    let mut r = rng(seed);
    let (b, t, c, v, max_t) = (3, 7, 24, 13, 9);
    let tokens: Vec<u32> = (0..b * t).map(|_| r.gen_range(0..v as u32)).collect();
    let (wte, wpe) = (randn(&mut r, v * c, 1.0), randn(&mut r, max_t * c, 1.0));
    let ctx = cpu();
    let tok = Buffer::from_slice(&Device::Cpu, &tokens).unwrap();
    let (wte_b, wpe_b) = (buf(&wte), buf(&wpe));
    let mut out = buf(&randn(&mut r, b * t * c, 9.0));
    let (tv, wv, pv) = (tok.view(..).unwrap(), wte_b.view(..).unwrap(), wpe_b.view(..).unwrap());
    encoder_forward(&ctx, &mut out.view_mut(..).unwrap(), tv, wv, pv, b, t, c).unwrap();
    let want: Vec<f64> = (0..b * t * c)
        .map(|i| {
            let (row, ch) = (i / c, i % c);
            wte[tokens[row] as usize * c + ch] as f64 + wpe[(row % t) * c + ch] as f64
        })
        .collect();
    assert_close("encoder_forward", seed, &out.to_vec().unwrap(), &want, 1e-7);

    // The forward is linear, so the gradient of sum(out * dout) is exact: check it plus the
    // accumulation into nonzero starting gradients.
    let dout = randn(&mut r, b * t * c, 1.0);
    let (dwte0, dwpe0) = (randn(&mut r, v * c, 1.0), randn(&mut r, max_t * c, 1.0));
    let (mut dwte, mut dwpe, dout_b) = (buf(&dwte0), buf(&dwpe0), buf(&dout));
    encoder_backward(
        &ctx,
        &mut dwte.view_mut(..).unwrap(),
        &mut dwpe.view_mut(..).unwrap(),
        dout_b.view(..).unwrap(),
        tv,
        b,
        t,
        c,
    )
    .unwrap();
    let (mut want_wte, mut want_wpe) = (f64s(&dwte0), f64s(&dwpe0));
    for row in 0..b * t {
        for ch in 0..c {
            want_wte[tokens[row] as usize * c + ch] += dout[row * c + ch] as f64;
            want_wpe[(row % t) * c + ch] += dout[row * c + ch] as f64;
        }
    }
    assert_close("encoder_backward dwte", seed, &dwte.to_vec().unwrap(), &want_wte, 1e-6);
    assert_close("encoder_backward dwpe", seed, &dwpe.to_vec().unwrap(), &want_wpe, 1e-6);
}

#[test]
fn layernorm_matches_reference_and_finite_differences() {
    let seed = 12;
    let mut r = rng(seed);
    let ctx = cpu();
    for (n, c) in [(37, 96), (4, 7)] {
        let (x, w, bias) = (randn(&mut r, n * c, 2.0), randn(&mut r, c, 1.0), randn(&mut r, c, 1.0));
        let (xb, wb, bb) = (buf(&x), buf(&w), buf(&bias));
        let (mut out, mut mean, mut rstd) = (buf(&vec![7.0; n * c]), buf(&vec![7.0; n]), buf(&vec![7.0; n]));
        layernorm_forward(
            &ctx,
            &mut out.view_mut(..).unwrap(),
            &mut mean.view_mut(..).unwrap(),
            &mut rstd.view_mut(..).unwrap(),
            xb.view(..).unwrap(),
            wb.view(..).unwrap(),
            bb.view(..).unwrap(),
            n,
            c,
        )
        .unwrap();
        let (want, wm, wr) = refs::layernorm(&f64s(&x), &f64s(&w), &f64s(&bias), c);
        assert_close("layernorm out", seed, &out.to_vec().unwrap(), &want, 1e-5);
        assert_close("layernorm mean", seed, &mean.to_vec().unwrap(), &wm, 1e-5);
        assert_close("layernorm rstd", seed, &rstd.to_vec().unwrap(), &wr, 1e-5);

        let dout = randn(&mut r, n * c, 1.0);
        let dinp0 = randn(&mut r, n * c, 1.0);
        let (mut dinp, mut dw, mut db, dy) =
            (buf(&dinp0), buf(&vec![0.5; c]), buf(&vec![-0.5; c]), buf(&dout));
        layernorm_backward(
            &ctx,
            &mut dinp.view_mut(..).unwrap(),
            &mut dw.view_mut(..).unwrap(),
            &mut db.view_mut(..).unwrap(),
            dy.view(..).unwrap(),
            xb.view(..).unwrap(),
            wb.view(..).unwrap(),
            mean.view(..).unwrap(),
            rstd.view(..).unwrap(),
            n,
            c,
        )
        .unwrap();
        let (xd, wd, bd, dd) = (f64s(&x), f64s(&w), f64s(&bias), f64s(&dout));
        let gx = central_differences(&xd, 1e-5, |x| weighted(&refs::layernorm(x, &wd, &bd, c).0, &dd));
        let gw = central_differences(&wd, 1e-5, |w| weighted(&refs::layernorm(&xd, w, &bd, c).0, &dd));
        let gb = central_differences(&bd, 1e-5, |b| weighted(&refs::layernorm(&xd, &wd, b, c).0, &dd));
        let gx: Vec<f64> = gx.iter().zip(&dinp0).map(|(g, d0)| g + *d0 as f64).collect();
        let gw: Vec<f64> = gw.iter().map(|g| g + 0.5).collect();
        let gb: Vec<f64> = gb.iter().map(|g| g - 0.5).collect();
        assert_close("layernorm dinp", seed, &dinp.to_vec().unwrap(), &gx, 1e-4);
        assert_close("layernorm dweight", seed, &dw.to_vec().unwrap(), &gw, 1e-4);
        assert_close("layernorm dbias", seed, &db.to_vec().unwrap(), &gb, 1e-4);
    }
}

fn matmul_residual_forward_adds_the_product_to_the_stream(device: &Device) {
    let seed = 19;
    let mut r = rng(seed);
    let ctx = OpsContext::new(device).unwrap();
    let on = |v: &[f32]| Buffer::from_slice(device, v).unwrap();
    for (n, ic, oc, with_bias) in [(7, 5, 9, true), (37, 20, 12, false), (130, 64, 96, true)] {
        let (x, w) = (randn(&mut r, n * ic, 1.0), randn(&mut r, oc * ic, 1.0));
        let (bias, res) = (randn(&mut r, oc, 1.0), randn(&mut r, n * oc, 2.0));
        let (xb, wb, bb, rb, mut out) = (on(&x), on(&w), on(&bias), on(&res), on(&vec![f32::NAN; n * oc]));
        let bias_view = with_bias.then(|| bb.view(..).unwrap());
        let (xv, wv, rv) = (xb.view(..).unwrap(), wb.view(..).unwrap(), rb.view(..).unwrap());
        matmul_residual_forward(&ctx, &mut out.view_mut(..).unwrap(), xv, wv, bias_view, rv, n, ic, oc)
            .unwrap();
        let bd = f64s(&bias);
        let product = refs::matmul(&f64s(&x), &f64s(&w), with_bias.then_some(bd.as_slice()), ic, oc);
        let want: Vec<f64> = product.iter().zip(&res).map(|(p, &q)| p + q as f64).collect();
        assert_close("matmul_residual_forward", seed, &out.to_vec().unwrap(), &want, 1e-5);
    }
    // A residual one element short of [n=2, oc=2].
    let (xb, wb, rb, mut out) = (on(&[1.0; 6]), on(&[1.0; 6]), on(&[1.0; 3]), on(&[0.0; 4]));
    let (xv, wv, rv) = (xb.view(..).unwrap(), wb.view(..).unwrap(), rb.view(..).unwrap());
    let err = matmul_residual_forward(&ctx, &mut out.view_mut(..).unwrap(), xv, wv, None, rv, 2, 3, 2);
    let err = err.unwrap_err().to_string();
    assert!(err.contains("`residual` has 3 elements, expected 4"), "{err}");
}

trident_testkit::device_tests!(matmul_residual_forward_adds_the_product_to_the_stream);

/// `out += inp`, exactly (one f32 addition per element), at lengths that are and are not
/// multiples of the vector width; a short input is refused naming it.
fn accumulate_adds_onto_the_output(device: &Device) {
    let seed = 23;
    let mut r = rng(seed);
    let ctx = OpsContext::new(device).unwrap();
    let on = |v: &[f32]| Buffer::from_slice(device, v).unwrap();
    for n in [1, 7, 768, 8195] {
        let (a, b) = (randn(&mut r, n, 1.0), randn(&mut r, n, 1.0));
        let (mut out, inp) = (on(&a), on(&b));
        accumulate(&ctx, &mut out.view_mut(..).unwrap(), inp.view(..).unwrap(), n).unwrap();
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(out.to_vec().unwrap(), want, "n {n}");
    }
    let (mut out, inp) = (on(&[0.0; 4]), on(&[1.0; 3]));
    let err = accumulate(&ctx, &mut out.view_mut(..).unwrap(), inp.view(..).unwrap(), 4).unwrap_err();
    assert!(err.to_string().contains("`inp` has 3 elements, expected 4"), "{err}");
}

trident_testkit::device_tests!(accumulate_adds_onto_the_output);

#[test]
fn matmul_at_a_size_split_across_cores() {
    // n * ic * oc = 2^30 multiply-adds in each of the three products, which gemm splits across
    // its threads. Checked on sampled entries against f64.
    let seed = 17;
    let mut r = rng(seed);
    let ctx = cpu();
    let (n, ic, oc) = (512, 1024, 2048);
    let (x, w) = (randn(&mut r, n * ic, 1.0), randn(&mut r, oc * ic, 1.0));
    let (xb, wb) = (buf(&x), buf(&w));
    let (xv, wv) = (xb.view(..).unwrap(), wb.view(..).unwrap());
    let mut out = buf(&vec![3.0; n * oc]);
    matmul_forward(&ctx, &mut out.view_mut(..).unwrap(), xv, wv, None, n, ic, oc).unwrap();
    let dout = randn(&mut r, n * oc, 1.0);
    let (mut dinp, mut dw, dy) = (buf(&vec![9.0; n * ic]), buf(&vec![0.0; oc * ic]), buf(&dout));
    let dyv = dy.view(..).unwrap();
    matmul_backward(
        &ctx,
        &mut dinp.view_mut(..).unwrap(),
        &mut dw.view_mut(..).unwrap(),
        None,
        dyv,
        xv,
        wv,
        n,
        ic,
        oc,
    )
    .unwrap();
    let (out, dinp, dw) = (out.to_vec().unwrap(), dinp.to_vec().unwrap(), dw.to_vec().unwrap());
    let dot = |a: &mut dyn Iterator<Item = (f32, f32)>| a.map(|(p, q)| p as f64 * q as f64).sum::<f64>();
    let picks: Vec<usize> = (0..400).map(|_| r.gen_range(0..usize::MAX)).collect();
    let (mut got, mut want) = (vec![], vec![]);
    for &p in &picks {
        let (row, o) = (p % n, (p / n) % oc);
        got.push(out[row * oc + o]);
        want.push(dot(&mut (0..ic).map(|i| (x[row * ic + i], w[o * ic + i]))));
        let i = (p / 7) % ic;
        got.push(dinp[row * ic + i]);
        want.push(dot(&mut (0..oc).map(|o| (dout[row * oc + o], w[o * ic + i]))));
        got.push(dw[o * ic + i]);
        want.push(dot(&mut (0..n).map(|row| (dout[row * oc + o], x[row * ic + i]))));
    }
    assert_close("matmul over the threshold", seed, &got, &want, 1e-5);
}

#[test]
fn weight_gradient_over_many_output_rows_accumulates_every_block() {
    // 4,100 output rows of 2,048 tokens: the Cpu weight gradient runs in blocks of output rows
    // (2,048 here), the last one partial. Every entry is checked, and the gradient adds onto
    // what was there.
    let seed = 23;
    let mut r = rng(seed);
    let ctx = cpu();
    let (n, ic, oc) = (2048, 3, 4100);
    let (x, w, dout) = (randn(&mut r, n * ic, 1.0), randn(&mut r, oc * ic, 1.0), randn(&mut r, n * oc, 1.0));
    let before = randn(&mut r, oc * ic, 1.0);
    let (xb, wb, dy) = (buf(&x), buf(&w), buf(&dout));
    let (mut dinp, mut dw) = (buf(&vec![0.0; n * ic]), buf(&before));
    let (xv, wv, dyv) = (xb.view(..).unwrap(), wb.view(..).unwrap(), dy.view(..).unwrap());
    let (dinp_view, dw_view) = (&mut dinp.view_mut(..).unwrap(), &mut dw.view_mut(..).unwrap());
    matmul_backward(&ctx, dinp_view, dw_view, None, dyv, xv, wv, n, ic, oc).unwrap();
    let want: Vec<f64> = (0..oc * ic)
        .map(|e| {
            let (o, i) = (e / ic, e % ic);
            before[e] as f64
                + (0..n).map(|row| dout[row * oc + o] as f64 * x[row * ic + i] as f64).sum::<f64>()
        })
        .collect();
    assert_close("dweight in blocks of output rows", seed, &dw.to_vec().unwrap(), &want, 1e-5);
}

#[test]
fn matmul_matches_reference_and_finite_differences() {
    let seed = 13;
    let mut r = rng(seed);
    let ctx = cpu();
    // The larger shapes take gemm's parallel path.
    for (n, ic, oc, with_bias) in [(5, 4, 6, true), (67, 45, 33, false), (256, 192, 320, true)] {
        let (x, w, bias) = (randn(&mut r, n * ic, 1.0), randn(&mut r, oc * ic, 1.0), randn(&mut r, oc, 1.0));
        let (xb, wb, bb) = (buf(&x), buf(&w), buf(&bias));
        let mut out = buf(&vec![3.0; n * oc]);
        let bias_view = with_bias.then(|| bb.view(..).unwrap());
        let (xv, wv) = (xb.view(..).unwrap(), wb.view(..).unwrap());
        matmul_forward(&ctx, &mut out.view_mut(..).unwrap(), xv, wv, bias_view, n, ic, oc).unwrap();
        let (xd, wd, bd) = (f64s(&x), f64s(&w), f64s(&bias));
        let bias_ref = with_bias.then_some(bd.as_slice());
        assert_close(
            "matmul_forward",
            seed,
            &out.to_vec().unwrap(),
            &refs::matmul(&xd, &wd, bias_ref, ic, oc),
            1e-5,
        );

        let dout = randn(&mut r, n * oc, 1.0);
        let dw0 = randn(&mut r, oc * ic, 1.0);
        let (mut dinp, mut dw, mut db, dy) =
            (buf(&vec![9.0; n * ic]), buf(&dw0), buf(&vec![0.25; oc]), buf(&dout));
        let mut dbv = db.view_mut(..).unwrap();
        let dbias = if with_bias { Some(&mut dbv) } else { None };
        matmul_backward(
            &ctx,
            &mut dinp.view_mut(..).unwrap(),
            &mut dw.view_mut(..).unwrap(),
            dbias,
            dy.view(..).unwrap(),
            xv,
            wv,
            n,
            ic,
            oc,
        )
        .unwrap();
        // The layer is bilinear: the exact gradients are dout @ W, dout^T @ x, colsum(dout).
        let dd = f64s(&dout);
        let (gx, gw, gb) = refs::matmul_backward(&dd, &xd, &wd, ic, oc);
        let gw: Vec<f64> = gw.iter().zip(&dw0).map(|(g, &d0)| d0 as f64 + g).collect();
        let gb: Vec<f64> = gb.iter().map(|g| 0.25 + g).collect();
        assert_close("matmul dinp", seed, &dinp.to_vec().unwrap(), &gx, 1e-5);
        assert_close("matmul dweight", seed, &dw.to_vec().unwrap(), &gw, 1e-5);
        if with_bias {
            assert_close("matmul dbias", seed, &db.to_vec().unwrap(), &gb, 1e-5);
        } else {
            assert_eq!(db.to_vec().unwrap(), vec![0.25; oc], "dbias untouched without a bias");
        }
        if n * ic < 100 {
            let gx_fd =
                central_differences(&xd, 1e-5, |x| weighted(&refs::matmul(x, &wd, bias_ref, ic, oc), &dd));
            assert_close("matmul dinp (finite differences)", seed, &dinp.to_vec().unwrap(), &gx_fd, 1e-5);
        }
    }
}

#[test]
fn attention_matches_reference_and_finite_differences() {
    let seed = 14;
    let mut r = rng(seed);
    let ctx = cpu();
    // T = 70 crosses a key-block boundary; the second shape is for finite differences.
    for (b, t, c, nh) in [(2, 70, 32, 4), (1, 66, 8, 2), (2, 5, 8, 2)] {
        let qkv = randn(&mut r, b * t * 3 * c, 1.5);
        let qb = buf(&qkv);
        let (mut out, mut lse) = (buf(&vec![5.0; b * t * c]), buf(&vec![5.0; b * nh * t]));
        attention_forward(
            &ctx,
            &mut out.view_mut(..).unwrap(),
            &mut lse.view_mut(..).unwrap(),
            qb.view(..).unwrap(),
            b,
            t,
            c,
            nh,
        )
        .unwrap();
        let qd = f64s(&qkv);
        let (want, want_lse) = refs::attention(&qd, b, t, c, nh);
        assert_close("attention out", seed, &out.to_vec().unwrap(), &want, 1e-5);
        assert_close("attention lse", seed, &lse.to_vec().unwrap(), &want_lse, 1e-5);
        if c == 32 {
            continue;
        }
        let dout = randn(&mut r, b * t * c, 1.0);
        let (mut dqkv, dy) = (buf(&vec![4.0; b * t * 3 * c]), buf(&dout));
        attention_backward(
            &ctx,
            &mut dqkv.view_mut(..).unwrap(),
            dy.view(..).unwrap(),
            qb.view(..).unwrap(),
            out.view(..).unwrap(),
            lse.view(..).unwrap(),
            b,
            t,
            c,
            nh,
        )
        .unwrap();
        let dd = f64s(&dout);
        let g = central_differences(&qd, 1e-5, |q| weighted(&refs::attention(q, b, t, c, nh).0, &dd));
        assert_close("attention dqkv", seed, &dqkv.to_vec().unwrap(), &g, 1e-4);
    }
}

#[test]
fn gelu_and_residual_match_reference_and_finite_differences() {
    let seed = 15;
    let mut r = rng(seed);
    let ctx = cpu();
    let n = 9_000;
    let x = randn(&mut r, n, 5.0);
    let xb = buf(&x);
    let mut out = buf(&vec![1.0; n]);
    gelu_forward(&ctx, &mut out.view_mut(..).unwrap(), xb.view(..).unwrap(), n).unwrap();
    let want: Vec<f64> = x.iter().map(|&v| refs::gelu(v as f64)).collect();
    assert_close("gelu_forward", seed, &out.to_vec().unwrap(), &want, 1e-6);

    let dout = randn(&mut r, n, 1.0);
    let mut d = buf(&dout);
    gelu_backward(&ctx, &mut d.view_mut(..).unwrap(), xb.view(..).unwrap(), n).unwrap();
    let h = 1e-5;
    let g: Vec<f64> = x
        .iter()
        .zip(&dout)
        .map(|(&v, &dy)| dy as f64 * (refs::gelu(v as f64 + h) - refs::gelu(v as f64 - h)) / (2.0 * h))
        .collect();
    assert_close("gelu_backward", seed, &d.to_vec().unwrap(), &g, 1e-5);

    let y = randn(&mut r, n, 1.0);
    let yb = buf(&y);
    residual_forward(&ctx, &mut out.view_mut(..).unwrap(), xb.view(..).unwrap(), yb.view(..).unwrap(), n)
        .unwrap();
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| *a as f64 + *b as f64).collect();
    assert_close("residual_forward", seed, &out.to_vec().unwrap(), &want, 1e-7);
}

#[test]
fn cross_entropy_matches_reference_and_finite_differences() {
    let seed = 16;
    let mut r = rng(seed);
    let ctx = cpu();
    for (n, v, vp) in [(6, 50, 64), (3, 7, 9)] {
        let logits = randn(&mut r, n * vp, 4.0);
        let targets: Vec<u32> = (0..n).map(|_| r.gen_range(0..v as u32)).collect();
        let tb = Buffer::from_slice(&Device::Cpu, &targets).unwrap();
        let mut lg = buf(&logits);
        let mut losses = buf(&vec![2.0; n]);
        let t = tb.view(..).unwrap();
        softmax_cross_entropy(
            &ctx,
            &mut lg.view_mut(..).unwrap(),
            &mut losses.view_mut(..).unwrap(),
            t,
            n,
            v,
            vp,
            None,
        )
        .unwrap();
        let ld = f64s(&logits);
        let want = refs::cross_entropy(&ld, &targets, v, vp);
        assert_close("cross-entropy losses", seed, &losses.to_vec().unwrap(), &want, 1e-5);
        assert_eq!(lg.to_vec().unwrap(), logits, "logits untouched without dloss");

        let g = 0.37f32;
        softmax_cross_entropy(
            &ctx,
            &mut lg.view_mut(..).unwrap(),
            &mut losses.view_mut(..).unwrap(),
            t,
            n,
            v,
            vp,
            Some(g),
        )
        .unwrap();
        assert_close("cross-entropy losses (with grad)", seed, &losses.to_vec().unwrap(), &want, 1e-5);
        let fd = central_differences(&ld, 1e-5, |l| {
            g as f64 * refs::cross_entropy(l, &targets, v, vp).iter().sum::<f64>()
        });
        let got = lg.to_vec().unwrap();
        assert_close("cross-entropy dlogits", seed, &got, &fd, 1e-4);
        assert!(got.chunks(vp).all(|row| row[v..].iter().all(|&x| x == 0.0)), "padding gradient is zero");
    }
}

#[test]
fn adamw_and_sum_of_squares_match_reference() {
    let seed = 17;
    let mut r = rng(seed);
    let ctx = cpu();
    let n = 20_011;
    let p0 = randn(&mut r, n, 1.0);
    let (mut p, mut m, mut v) = (buf(&p0), buf(&vec![0.0; n]), buf(&vec![0.0; n]));
    let (mut pd, mut md, mut vd) = (f64s(&p0), vec![0.0f64; n], vec![0.0f64; n]);
    for step in 1..=3u64 {
        let g = randn(&mut r, n, 0.1);
        let gb = buf(&g);
        let hp = AdamWParams {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            grad_scale: 0.5,
            step,
        };
        adamw_update(
            &ctx,
            &mut p.view_mut(..).unwrap(),
            gb.view(..).unwrap(),
            &mut m.view_mut(..).unwrap(),
            &mut v.view_mut(..).unwrap(),
            &hp,
        )
        .unwrap();
        let h = refs::AdamW {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            grad_scale: 0.5,
            step: step as i32,
        };
        for i in 0..n {
            (pd[i], md[i], vd[i]) = refs::adamw(pd[i], g[i] as f64, md[i], vd[i], &h);
        }
    }
    assert_close("adamw params", seed, &p.to_vec().unwrap(), &pd, 1e-5);
    assert_close("adamw m", seed, &m.to_vec().unwrap(), &md, 1e-5);
    assert_close("adamw v", seed, &v.to_vec().unwrap(), &vd, 1e-5);

    let x = randn(&mut r, 100_003, 3.0);
    let want: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let got = sum_of_squares(&ctx, buf(&x).view(..).unwrap()).unwrap();
    assert!(((got - want) / want).abs() < 1e-6, "sum_of_squares {got} vs {want} (seed {seed})");
}

#[test]
fn bad_arguments_are_refused_with_clear_errors() {
    let ctx = cpu();
    let x = buf(&[1.0; 12]);
    let mut out = buf(&[0.0; 10]);
    let err = gelu_forward(&ctx, &mut out.view_mut(..).unwrap(), x.view(..).unwrap(), 12).unwrap_err();
    assert!(matches!(err, OpsError::Length { arg: "out", got: 10, expected: 12, .. }), "{err}");

    let emu = Buffer::from_slice(&Device::Emu, &[1.0f32; 12]).unwrap();
    let mut out = buf(&[0.0; 12]);
    let err = gelu_forward(&ctx, &mut out.view_mut(..).unwrap(), emu.view(..).unwrap(), 12).unwrap_err();
    assert!(matches!(err, OpsError::WrongDevice { arg: "inp", .. }), "{err}");

    let tokens = Buffer::from_slice(&Device::Cpu, &[0u32, 5]).unwrap();
    let (wte, wpe) = (buf(&[0.0; 8]), buf(&[0.0; 8]));
    let mut o = buf(&[0.0; 8]);
    let err = encoder_forward(
        &ctx,
        &mut o.view_mut(..).unwrap(),
        tokens.view(..).unwrap(),
        wte.view(..).unwrap(),
        wpe.view(..).unwrap(),
        1,
        2,
        4,
    )
    .unwrap_err();
    assert!(matches!(err, OpsError::TokenOutOfRange { token: 5, position: 1, vocab: 2, .. }), "{err}");

    let qkv = buf(&[0.0; 3 * 12]);
    let (mut o, mut l) = (buf(&[0.0; 12]), buf(&[0.0; 4]));
    let err = attention_forward(
        &ctx,
        &mut o.view_mut(..).unwrap(),
        &mut l.view_mut(..).unwrap(),
        qkv.view(..).unwrap(),
        1,
        2,
        6,
        4,
    )
    .unwrap_err();
    assert!(err.to_string().contains("heads do not divide"), "{err}");
}

/// Without the `cuda` feature there is no PTX: `Emu` runs every kernel from its host entries,
/// and `Cuda` (where a GPU is present) refuses to load them, saying why.
#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_cuda_feature_emu_runs_and_cuda_says_why_not() {
    use crate::launch::LaunchError;

    assert!(crate::kernels::PTX.is_none());
    let ctx = OpsContext::new(&Device::Emu).unwrap();
    let mut x = Buffer::from_slice(&Device::Emu, &[1.0f32, -2.0]).unwrap();
    round_to(&ctx, &mut x.view_mut(..).unwrap(), HalfFormat::Bf16).unwrap();
    assert_eq!(x.to_vec().unwrap(), [1.0, -2.0]);
    if let Some(gpu) = trident_testkit::cuda_or_skip(Device::cuda(0)) {
        let Err(err) = OpsContext::new(&gpu) else { panic!("no PTX, yet Cuda loaded the kernels") };
        assert!(err.to_string().contains("without its `cuda` feature"), "{err}");
        assert!(matches!(crate::kernels::load(&gpu), Err(LaunchError::NoPtx)));
    }
}

/// A shape whose products wrap around `usize` (here `n * oc` and `oc * ic` both wrap to 4) is
/// refused by the CPU GEMM's length checks instead of writing past `out`.
#[test]
#[should_panic(expected = "assertion failed")]
fn cpu_matmul_refuses_a_shape_whose_products_overflow() {
    let oc = (1usize << (usize::BITS - 1)) + 2;
    let (inp, weight, mut out) = ([1.0f32; 4], [1.0f32; 4], [0.0f32; 4]);
    cpu::matmul_forward(&mut out, &inp, &weight, None, 2, oc);
}
