//! The 128-bit memory-bound kernels on `Emu` (and `Cuda` when present) against f64 references,
//! outputs poisoned first: lengths and widths that divide no vector width, views that start
//! unaligned (every element then takes the scalar path) or a few elements in (the ranges'
//! unaligned ends take it), f32 and bf16 (to bf16's rounding) variants. bf16 results that are
//! a single rounding of an f32 value must equal the host's `half` rounding bit for bit.

// Lists of one range are ranges to sum, not ranges to collect.
#![allow(clippy::single_range_in_vec_init)]

use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;
use trident::launch::{self, AdamW, HalfFormat, Kernels};
use trident::runtime::{Buffer, Device};
use trident_testkit::reference::{self as refs, gelu, gelu_grad};
use trident_testkit::{assert_close, assert_each, f64s, kernel_tests, rng, uniform, POISON, POISON_BF16};

fn to_bf16(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| bf16::from_f32(x).to_bits()).collect()
}

fn from_bf16(v: &[u16]) -> Vec<f32> {
    v.iter().map(|&b| bf16::from_bits(b).to_f32()).collect()
}

/// Lengths that divide no vector width, and some that do.
const LENGTHS: [usize; 8] = [1, 3, 4, 8, 13, 129, 1030, 4101];

/// Offsets of the views into their buffers: aligned, one element in (no view aligned), four in
/// (f32 aligned, bf16 not).
const OFFSETS: [usize; 3] = [0, 1, 4];

/// `out = f(inputs)` on f32 views `off..off + n` of poisoned and random buffers, against `want`.
fn elementwise_f32(
    device: &Device,
    rng: &mut StdRng,
    inputs: usize,
    run: impl Fn(&Kernels, &mut Buffer<f32>, &[Buffer<f32>], std::ops::Range<usize>),
    want: impl Fn(&[f64]) -> f64,
    tol: f64,
    what: &str,
) {
    let k = Kernels::load(device).unwrap();
    for n in LENGTHS {
        for off in OFFSETS {
            let ins: Vec<Vec<f32>> = (0..inputs).map(|_| uniform(rng, off + n, 4.0)).collect();
            let bufs: Vec<Buffer<f32>> = ins.iter().map(|v| Buffer::from_slice(device, v).unwrap()).collect();
            let mut out = Buffer::from_slice(device, &vec![POISON; off + n + 1]).unwrap();
            run(&k, &mut out, &bufs, off..off + n);
            let got = out.to_vec().unwrap();
            let expect: Vec<f64> =
                (off..off + n).map(|i| want(&ins.iter().map(|v| v[i] as f64).collect::<Vec<_>>())).collect();
            assert_each(&format!("{what} n {n} offset {off}"), &got[off..off + n], &expect, tol, tol);
            assert!(
                got[..off].iter().chain(&got[off + n..]).all(|x| x.is_nan()),
                "{what}: wrote outside its view"
            );
        }
    }
}

fn add_v4(device: &Device) {
    let mut rng = rng("add_v4");
    elementwise_f32(
        device,
        &mut rng,
        2,
        |k, out, ins, r| {
            launch::add_v4(
                k,
                &mut out.view_mut(r.clone()).unwrap(),
                &ins[0].view(r.clone()).unwrap(),
                &ins[1].view(r).unwrap(),
            )
            .unwrap()
        },
        |x| x[0] + x[1],
        1e-7,
        "add_v4",
    );
    // In place: `out += b`.
    let k = Kernels::load(device).unwrap();
    let (a, b) = (uniform(&mut rng, 1031, 1.0), uniform(&mut rng, 1031, 1.0));
    let mut out = Buffer::from_slice(device, &a).unwrap();
    launch::add_assign_v4(
        &k,
        &mut out.view_mut(2..).unwrap(),
        &Buffer::from_slice(device, &b[2..]).unwrap().view(..).unwrap(),
    )
    .unwrap();
    let got = out.to_vec().unwrap();
    for i in 0..1031 {
        assert_eq!(got[i], if i < 2 { a[i] } else { a[i] + b[i] }, "add_assign_v4 element {i}");
    }
}

fn gelu_v4(device: &Device) {
    let mut rng = rng("gelu_v4");
    // The emulator's tanh is the host's; the GPU's `tanh.approx` is about 2^-11 off.
    let tol = if matches!(device, Device::Cuda(_)) { 2e-3 } else { 1e-5 };
    elementwise_f32(
        device,
        &mut rng,
        1,
        |k, out, ins, r| {
            launch::gelu_forward_v4(k, &mut out.view_mut(r.clone()).unwrap(), &ins[0].view(r).unwrap())
                .unwrap()
        },
        |x| gelu(x[0]),
        tol,
        "gelu_forward_v4",
    );
    elementwise_f32(
        device,
        &mut rng,
        2,
        |k, out, ins, r| {
            launch::gelu_backward_v4(
                k,
                &mut out.view_mut(r.clone()).unwrap(),
                &ins[0].view(r.clone()).unwrap(),
                &ins[1].view(r).unwrap(),
            )
            .unwrap()
        },
        |x| gelu_grad(x[0]) * x[1],
        tol,
        "gelu_backward_v4",
    );
    // In place: `d = gelu'(x) * d`.
    let k = Kernels::load(device).unwrap();
    let (x, d) = (uniform(&mut rng, 517, 3.0), uniform(&mut rng, 517, 1.0));
    let mut db = Buffer::from_slice(device, &d).unwrap();
    launch::gelu_backward_v4_inplace(
        &k,
        &mut db.view_mut(..).unwrap(),
        &Buffer::from_slice(device, &x).unwrap().view(..).unwrap(),
    )
    .unwrap();
    let want: Vec<f64> = x.iter().zip(&d).map(|(&x, &d)| gelu_grad(x as f64) * d as f64).collect();
    assert_each("gelu_backward_v4_inplace", &db.to_vec().unwrap(), &want, tol, tol);
}

/// `run(k, out, inputs, range)` on bf16 views; `want` of the inputs' f32 values.
fn elementwise_bf16(
    device: &Device,
    rng: &mut StdRng,
    inputs: usize,
    run: impl Fn(&Kernels, &mut Buffer<u16>, &[Buffer<u16>], std::ops::Range<usize>),
    check: impl Fn(&str, &[f32], &[Vec<f32>]),
) {
    let k = Kernels::load(device).unwrap();
    for n in LENGTHS {
        for off in OFFSETS {
            let ins: Vec<Vec<f32>> =
                (0..inputs).map(|_| from_bf16(&to_bf16(&uniform(rng, off + n, 4.0)))).collect();
            let bufs: Vec<Buffer<u16>> =
                ins.iter().map(|v| Buffer::from_slice(device, &to_bf16(v)).unwrap()).collect();
            let mut out = Buffer::from_slice(device, &vec![POISON_BF16; off + n + 1]).unwrap();
            run(&k, &mut out, &bufs, off..off + n);
            let got = out.to_vec().unwrap();
            let view: Vec<Vec<f32>> = ins.iter().map(|v| v[off..off + n].to_vec()).collect();
            check(&format!("n {n} offset {off}"), &from_bf16(&got[off..off + n]), &view);
            assert!(
                got[..off].iter().chain(&got[off + n..]).all(|&x| x == POISON_BF16),
                "wrote outside its view"
            );
        }
    }
}

fn bf16_elementwise(device: &Device) {
    let mut rng = rng("bf16_elementwise");
    // The sum of two bf16 is one f32 addition, then one rounding: the host's, bit for bit.
    elementwise_bf16(
        device,
        &mut rng,
        2,
        |k, out, ins, r| {
            launch::add_bf16(
                k,
                &mut out.view_mut(r.clone()).unwrap(),
                &ins[0].view(r.clone()).unwrap(),
                &ins[1].view(r).unwrap(),
            )
            .unwrap()
        },
        |what, got, ins| {
            for i in 0..got.len() {
                let want = bf16::from_f32(ins[0][i] + ins[1][i]).to_f32();
                assert_eq!(got[i].to_bits(), want.to_bits(), "add_bf16 {what}: element {i}");
            }
        },
    );
    // GeLU to one bf16 rounding (half an ulp, 2^-9 relative) plus the tanh's error.
    let tanh = if matches!(device, Device::Cuda(_)) { 2e-3 } else { 1e-6 };
    elementwise_bf16(
        device,
        &mut rng,
        1,
        |k, out, ins, r| {
            launch::gelu_forward_bf16(k, &mut out.view_mut(r.clone()).unwrap(), &ins[0].view(r).unwrap())
                .unwrap()
        },
        |what, got, ins| {
            let want: Vec<f64> = ins[0].iter().map(|&x| gelu(x as f64)).collect();
            assert_each(&format!("gelu_forward_bf16 {what}"), got, &want, 1.0 / 256.0, tanh);
        },
    );
    elementwise_bf16(
        device,
        &mut rng,
        2,
        |k, out, ins, r| {
            launch::gelu_backward_bf16(
                k,
                &mut out.view_mut(r.clone()).unwrap(),
                &ins[0].view(r.clone()).unwrap(),
                &ins[1].view(r).unwrap(),
            )
            .unwrap()
        },
        |what, got, ins| {
            let want: Vec<f64> =
                ins[0].iter().zip(&ins[1]).map(|(&x, &d)| gelu_grad(x as f64) * d as f64).collect();
            assert_each(&format!("gelu_backward_bf16 {what}"), got, &want, 1.0 / 256.0, tanh * 4.0);
        },
    );
}

/// `(res, out, mean, rstd)` of LayerNorm over `x (+ r)` rows of `c`, in f64; `round` is what
/// storing the sum does to it.
fn layernorm_ref(
    x: &[f32],
    r: Option<&[f32]>,
    w: &[f32],
    b: &[f32],
    c: usize,
    round: impl Fn(f32) -> f32,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let res: Vec<f64> = match r {
        Some(r) => x.iter().zip(r).map(|(&a, &b)| round(a + b) as f64).collect(),
        None => x.iter().map(|&a| a as f64).collect(),
    };
    let (out, mean, rstd) = refs::layernorm(&res, &f64s(w), &f64s(b), c);
    (res, out, mean, rstd)
}

/// Row widths: below a warp, one past a group, GPT-2's, odd, the widest.
const WIDTHS: [usize; 7] = [1, 5, 36, 130, 768, 771, 2048];

fn layernorm_rows(device: &Device) {
    let mut rng = rng("layernorm_rows");
    let k = Kernels::load(device).unwrap();
    let dev = |v: &[f32]| Buffer::from_slice(device, v).unwrap();
    for c in WIDTHS {
        for off in [0, 1] {
            let n = rng.gen_range(1..20);
            let x = uniform(&mut rng, off + n * c, 2.0);
            let r = uniform(&mut rng, off + n * c, 2.0);
            let (w, b) = (uniform(&mut rng, c, 1.0), uniform(&mut rng, c, 0.5));
            let (xb, rb, wb, bb) = (dev(&x), dev(&r), dev(&w), dev(&b));
            let view = off..off + n * c;
            for residual in [false, true] {
                let what = format!("layernorm f32 residual {residual} n {n} c {c} offset {off}");
                let mut out = dev(&vec![POISON; off + n * c]);
                let mut res = dev(&vec![POISON; off + n * c]);
                let (mut mean, mut rstd) = (dev(&vec![POISON; n]), dev(&vec![POISON; n]));
                let (mut o, mut m, mut s) = (
                    out.view_mut(view.clone()).unwrap(),
                    mean.view_mut(..).unwrap(),
                    rstd.view_mut(..).unwrap(),
                );
                let (xv, wv, bv) =
                    (xb.view(view.clone()).unwrap(), wb.view(..).unwrap(), bb.view(..).unwrap());
                if residual {
                    let rv = rb.view(view.clone()).unwrap();
                    launch::layernorm_residual_forward(
                        &k,
                        &mut res.view_mut(view.clone()).unwrap(),
                        &mut o,
                        &mut m,
                        &mut s,
                        &xv,
                        &rv,
                        &wv,
                        &bv,
                        n,
                        c,
                    )
                    .unwrap();
                } else {
                    launch::layernorm_forward_row(&k, &mut o, &mut m, &mut s, &xv, &wv, &bv, n, c).unwrap();
                }
                let rr = residual.then(|| &r[view.clone()]);
                let (_, want, want_m, want_s) = layernorm_ref(&x[view.clone()], rr, &w, &b, c, |v| v);
                assert_close(&format!("{what}: out"), &out.to_vec().unwrap()[view.clone()], &want, 2e-6);
                assert_close(&format!("{what}: mean"), &mean.to_vec().unwrap(), &want_m, 2e-6);
                assert_close(&format!("{what}: rstd"), &rstd.to_vec().unwrap(), &want_s, 2e-6);
                if residual {
                    let got = res.to_vec().unwrap();
                    for (i, &g) in got[view.clone()].iter().enumerate() {
                        assert_eq!(g, x[off + i] + r[off + i], "{what}: res element {i}");
                    }
                }
            }
            // bf16: inputs rounded to bf16; outputs to one bf16 rounding of the f32 result.
            let (xh, rh) = (to_bf16(&x), to_bf16(&r));
            let (xhb, rhb) =
                (Buffer::from_slice(device, &xh).unwrap(), Buffer::from_slice(device, &rh).unwrap());
            for residual in [false, true] {
                let what = format!("layernorm bf16 residual {residual} n {n} c {c} offset {off}");
                let mut out = Buffer::from_slice(device, &vec![POISON_BF16; off + n * c]).unwrap();
                let mut res = Buffer::from_slice(device, &vec![POISON_BF16; off + n * c]).unwrap();
                let (mut mean, mut rstd) = (dev(&vec![POISON; n]), dev(&vec![POISON; n]));
                let (mut o, mut m, mut s) = (
                    out.view_mut(view.clone()).unwrap(),
                    mean.view_mut(..).unwrap(),
                    rstd.view_mut(..).unwrap(),
                );
                let (xv, wv, bv) =
                    (xhb.view(view.clone()).unwrap(), wb.view(..).unwrap(), bb.view(..).unwrap());
                if residual {
                    let rv = rhb.view(view.clone()).unwrap();
                    launch::layernorm_residual_forward_bf16(
                        &k,
                        &mut res.view_mut(view.clone()).unwrap(),
                        &mut o,
                        &mut m,
                        &mut s,
                        &xv,
                        &rv,
                        &wv,
                        &bv,
                        n,
                        c,
                    )
                    .unwrap();
                } else {
                    launch::layernorm_forward_row_bf16(&k, &mut o, &mut m, &mut s, &xv, &wv, &bv, n, c)
                        .unwrap();
                }
                let (xf, rf) = (from_bf16(&xh[view.clone()]), from_bf16(&rh[view.clone()]));
                let round = |v: f32| bf16::from_f32(v).to_f32();
                let (want_res, want, want_m, want_s) =
                    layernorm_ref(&xf, residual.then_some(&rf[..]), &w, &b, c, round);
                assert_each(
                    &format!("{what}: out"),
                    &from_bf16(&out.to_vec().unwrap()[view.clone()]),
                    &want,
                    1.0 / 256.0,
                    1e-5,
                );
                assert_close(&format!("{what}: mean"), &mean.to_vec().unwrap(), &want_m, 2e-6);
                assert_close(&format!("{what}: rstd"), &rstd.to_vec().unwrap(), &want_s, 2e-6);
                if residual {
                    let got = from_bf16(&res.to_vec().unwrap()[view.clone()]);
                    for (i, (&g, &want)) in got.iter().zip(&want_res).enumerate() {
                        assert_eq!(g as f64, want, "{what}: res element {i} is bf16(x + r)");
                    }
                }
            }
        }
    }
    // Wider rows than a warp holds are refused, except by the f32 wrapper, which takes them to
    // the scalar kernel.
    let c = 2056;
    let (x, w) = (uniform(&mut rng, 2 * c, 1.0), uniform(&mut rng, c, 1.0));
    let (mut out, mut mean, mut rstd) = (dev(&vec![POISON; 2 * c]), dev(&[POISON; 2]), dev(&[POISON; 2]));
    let (xb, wb) = (dev(&x), dev(&w));
    launch::layernorm_forward_row(
        &k,
        &mut out.view_mut(..).unwrap(),
        &mut mean.view_mut(..).unwrap(),
        &mut rstd.view_mut(..).unwrap(),
        &xb.view(..).unwrap(),
        &wb.view(..).unwrap(),
        &wb.view(..).unwrap(),
        2,
        c,
    )
    .unwrap();
    let (_, want, _, _) = layernorm_ref(&x, None, &w, &w, c, |v| v);
    assert_close("layernorm c 2056 (scalar kernel)", &out.to_vec().unwrap(), &want, 2e-6);
}

/// The bf16 forward's two kernels at the narrow one's edge: rows of 1023 (odd: the scalar
/// path) and 1024 channels take the narrow kernel (32 floats a lane), 1025 the wide one, each
/// from an aligned view and one a bf16 in; outputs poisoned, against the f64 reference.
fn layernorm_bf16_narrow_edge(device: &Device) {
    let mut rng = rng("layernorm_bf16_narrow_edge");
    let k = Kernels::load(device).unwrap();
    let dev = |v: &[f32]| Buffer::from_slice(device, v).unwrap();
    for (c, kernel) in [
        (1023, "layernorm_forward_row_bf16_narrow"),
        (1024, "layernorm_forward_row_bf16_narrow"),
        (1025, "layernorm_forward_row_bf16"),
    ] {
        assert_eq!(launch::layernorm_forward_row_bf16_kernel(c), kernel, "c {c}");
        for off in [0, 1] {
            let n = 3;
            let what = format!("layernorm bf16 n {n} c {c} offset {off}");
            let xh = to_bf16(&uniform(&mut rng, off + n * c, 2.0));
            let (w, b) = (uniform(&mut rng, c, 1.0), uniform(&mut rng, c, 0.5));
            let (xb, wb, bb) = (Buffer::from_slice(device, &xh).unwrap(), dev(&w), dev(&b));
            let mut out = Buffer::from_slice(device, &vec![POISON_BF16; off + n * c]).unwrap();
            let (mut mean, mut rstd) = (dev(&vec![POISON; n]), dev(&vec![POISON; n]));
            let view = off..off + n * c;
            launch::layernorm_forward_row_bf16(
                &k,
                &mut out.view_mut(view.clone()).unwrap(),
                &mut mean.view_mut(..).unwrap(),
                &mut rstd.view_mut(..).unwrap(),
                &xb.view(view.clone()).unwrap(),
                &wb.view(..).unwrap(),
                &bb.view(..).unwrap(),
                n,
                c,
            )
            .unwrap();
            if matches!(device, Device::Emu) {
                let stats = trident::runtime::last_launch_stats().expect("Emu counts its launches");
                assert_eq!(stats.kernel, kernel, "{what}");
            }
            let (_, want, want_m, want_s) =
                layernorm_ref(&from_bf16(&xh[view.clone()]), None, &w, &b, c, |v| v);
            let got = from_bf16(&out.to_vec().unwrap()[view.clone()]);
            assert_each(&format!("{what}: out"), &got, &want, 1.0 / 256.0, 1e-5);
            assert_close(&format!("{what}: mean"), &mean.to_vec().unwrap(), &want_m, 2e-6);
            assert_close(&format!("{what}: rstd"), &rstd.to_vec().unwrap(), &want_s, 2e-6);
        }
    }
}

fn crossentropy_v4(device: &Device) {
    let mut rng = rng("crossentropy_v4");
    let k = Kernels::load(device).unwrap();
    for (v, vp) in [(1, 1), (5, 8), (7, 7), (130, 131), (1000, 1024), (2051, 2056)] {
        for grad in [false, true] {
            let rows = rng.gen_range(1..6);
            let logits = uniform(&mut rng, rows * vp, 6.0);
            let targets: Vec<u32> = (0..rows).map(|_| rng.gen_range(0..v as u32)).collect();
            let mut lb = Buffer::from_slice(device, &logits).unwrap();
            let mut losses = Buffer::from_slice(device, &vec![POISON; rows]).unwrap();
            let tb = Buffer::from_slice(device, &targets).unwrap();
            let dloss = 1.0 / rows as f32;
            launch::crossentropy_v4(
                &k,
                &mut lb.view_mut(..).unwrap(),
                &mut losses.view_mut(..).unwrap(),
                &tb.view(..).unwrap(),
                rows,
                v,
                vp,
                grad.then_some(dloss),
            )
            .unwrap();
            let (mut want_loss, mut want_grad) = (vec![0.0; rows], vec![0.0; rows * vp]);
            for r in 0..rows {
                let row: Vec<f64> = logits[r * vp..r * vp + v].iter().map(|&x| x as f64).collect();
                let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = mx + row.iter().map(|x| (x - mx).exp()).sum::<f64>().ln();
                want_loss[r] = lse - row[targets[r] as usize];
                for i in 0..v {
                    let onehot = if i == targets[r] as usize { 1.0 } else { 0.0 };
                    want_grad[r * vp + i] = ((row[i] - lse).exp() - onehot) * dloss as f64;
                }
            }
            let what = format!("crossentropy rows {rows} v {v} vp {vp} grad {grad}");
            let tol = if matches!(device, Device::Cuda(_)) { 1e-4 } else { 1e-5 };
            assert_each(&format!("{what}: losses"), &losses.to_vec().unwrap(), &want_loss, tol, tol);
            let got = lb.to_vec().unwrap();
            if grad {
                assert_each(&format!("{what}: dlogits"), &got, &want_grad, tol, tol * dloss as f64);
            } else {
                assert_eq!(got, logits, "{what}: logits untouched without a gradient");
            }
        }
    }
}

/// Rounds `x` to `format`'s bits (nearest, ties to even, as `half` does).
fn to_half(format: HalfFormat, x: f32) -> u16 {
    match format {
        HalfFormat::Bf16 => bf16::from_f32(x).to_bits(),
        HalfFormat::F16 => f16::from_f32(x).to_bits(),
    }
}

/// `format`'s bits as f32.
fn from_half(format: HalfFormat, bits: u16) -> f32 {
    match format {
        HalfFormat::Bf16 => bf16::from_bits(bits).to_f32(),
        HalfFormat::F16 => f16::from_bits(bits).to_f32(),
    }
}

/// The 16-bit cross-entropy on views `off..` of poisoned buffers (offset 1: no row aligned,
/// every logit alone; 8: aligned where `vp` is a multiple of 8), against the f64 softmax of
/// the widened logits: losses to f32 accuracy, gradients to one rounding to the format (and
/// exactly zero on the padding), logits untouched without a gradient, and nothing outside the
/// view written.
fn crossentropy_v4_half(device: &Device) {
    let mut rng = rng("crossentropy_v4_half");
    let k = Kernels::load(device).unwrap();
    let shapes = [(1, 1), (5, 8), (7, 7), (13, 21), (130, 136), (1000, 1024), (2051, 2056)];
    for format in [HalfFormat::Bf16, HalfFormat::F16] {
        // Half an ulp, relative; below f16's normal range its subnormal spacing, absolute.
        let (half_ulp, tiny) = match format {
            HalfFormat::Bf16 => (1.0 / 256.0, 1e-38),
            HalfFormat::F16 => (1.0 / 2048.0, 3e-8),
        };
        for (v, vp) in shapes {
            for (grad, off) in [(false, 0), (true, 0), (true, 1), (true, 8)] {
                let rows = rng.gen_range(1..6);
                let logits: Vec<u16> =
                    uniform(&mut rng, rows * vp, 6.0).into_iter().map(|x| to_half(format, x)).collect();
                let targets: Vec<u32> = (0..rows).map(|_| rng.gen_range(0..v as u32)).collect();
                let mut init = vec![0x7E01u16; off];
                init.extend(&logits);
                init.extend([0x7E02u16; 3]);
                let mut lb = Buffer::from_slice(device, &init).unwrap();
                let mut losses = Buffer::from_slice(device, &vec![POISON; rows]).unwrap();
                let tb = Buffer::from_slice(device, &targets).unwrap();
                let dloss = 1.0 / rows as f32;
                launch::crossentropy_v4_half(
                    &k,
                    &mut lb.view_mut(off..off + rows * vp).unwrap(),
                    format,
                    &mut losses.view_mut(..).unwrap(),
                    &tb.view(..).unwrap(),
                    rows,
                    v,
                    vp,
                    grad.then_some(dloss),
                )
                .unwrap();
                let what =
                    format!("{format:?} crossentropy rows {rows} v {v} vp {vp} grad {grad} offset {off}");
                if matches!(device, Device::Emu) {
                    let stats = trident::runtime::last_launch_stats().expect("Emu counts its launches");
                    let kernel = match format {
                        HalfFormat::Bf16 => "crossentropy_v4_bf16",
                        HalfFormat::F16 => "crossentropy_v4_f16",
                    };
                    assert_eq!(stats.kernel, kernel, "{what}");
                }
                let (mut want_loss, mut want_grad) = (vec![0.0; rows], vec![0.0; rows * vp]);
                for r in 0..rows {
                    let row: Vec<f64> =
                        logits[r * vp..r * vp + v].iter().map(|&b| from_half(format, b) as f64).collect();
                    let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = mx + row.iter().map(|x| (x - mx).exp()).sum::<f64>().ln();
                    want_loss[r] = lse - row[targets[r] as usize];
                    for i in 0..v {
                        let onehot = if i == targets[r] as usize { 1.0 } else { 0.0 };
                        want_grad[r * vp + i] = ((row[i] - lse).exp() - onehot) * dloss as f64;
                    }
                }
                let tol = if matches!(device, Device::Cuda(_)) { 1e-4 } else { 1e-5 };
                assert_each(&format!("{what}: losses"), &losses.to_vec().unwrap(), &want_loss, tol, tol);
                let all = lb.to_vec().unwrap();
                assert_eq!(&all[..off], &init[..off], "{what}: written before the view");
                assert_eq!(
                    &all[off + rows * vp..],
                    &init[off + rows * vp..],
                    "{what}: written after the view"
                );
                let got = &all[off..off + rows * vp];
                if grad {
                    let wide: Vec<f32> = got.iter().map(|&b| from_half(format, b)).collect();
                    // One rounding of the f32 gradient (itself within `tol` of the f64 one).
                    assert_each(&format!("{what}: dlogits"), &wide, &want_grad, half_ulp + tol, tiny);
                    for r in 0..rows {
                        assert!(
                            got[r * vp + v..(r + 1) * vp].iter().all(|&b| b == 0),
                            "{what}: padding row {r}"
                        );
                    }
                } else {
                    assert_eq!(got, &logits[..], "{what}: logits untouched without a gradient");
                }
            }
        }
    }
}

/// The 16-bit bias gradient on views `off..` of `dout` (1: unaligned, every value alone; 8:
/// aligned where `oc` is a multiple of 8), accumulated onto random `dbias`, against f64 column
/// sums of the widened values: row counts around the 64-row blocks, widths around the
/// 256-column blocks and the 8-value groups.
fn bias_backward_half(device: &Device) {
    let mut rng = rng("bias_backward_half");
    let k = Kernels::load(device).unwrap();
    for format in [HalfFormat::Bf16, HalfFormat::F16] {
        for (rows, oc) in [(1, 1), (3, 7), (64, 8), (65, 24), (130, 264), (200, 520), (9, 2051)] {
            for off in [0, 1, 8] {
                let dout: Vec<u16> =
                    uniform(&mut rng, rows * oc, 2.0).into_iter().map(|x| to_half(format, x)).collect();
                let mut init = vec![0x7E01u16; off];
                init.extend(&dout);
                let db0 = uniform(&mut rng, oc, 1.0);
                let xb = Buffer::from_slice(device, &init).unwrap();
                // One poisoned element past `dbias`: the kernel must not reach it.
                let mut dbh = db0.clone();
                dbh.push(POISON);
                let mut db = Buffer::from_slice(device, &dbh).unwrap();
                launch::bias_backward_half(
                    &k,
                    &mut db.view_mut(..oc).unwrap(),
                    &xb.view(off..off + rows * oc).unwrap(),
                    format,
                    rows,
                    oc,
                )
                .unwrap();
                let what = format!("{format:?} bias_backward rows {rows} oc {oc} offset {off}");
                if matches!(device, Device::Emu) {
                    let stats = trident::runtime::last_launch_stats().expect("Emu counts its launches");
                    let kernel = match format {
                        HalfFormat::Bf16 => "bias_backward_bf16",
                        HalfFormat::F16 => "bias_backward_f16",
                    };
                    assert_eq!(stats.kernel, kernel, "{what}");
                }
                let want: Vec<f64> = (0..oc)
                    .map(|j| {
                        db0[j] as f64
                            + (0..rows).map(|r| from_half(format, dout[r * oc + j]) as f64).sum::<f64>()
                    })
                    .collect();
                let got = db.to_vec().unwrap();
                assert_eq!(got[oc].to_bits(), POISON.to_bits(), "{what}: written past dbias");
                // f32 sums of at most `rows + 1` terms of magnitude at most 2.
                assert_each(&what, &got[..oc], &want, 1e-6, 2.0 * (rows + 1) as f64 * f32::EPSILON as f64);
            }
        }
    }
}

fn adamw_chunks(device: &Device) {
    let mut rng = rng("adamw_chunks");
    let k = Kernels::load(device).unwrap();
    for (n, off) in [(5, 0), (1003, 0), (1003, 1), (40_000, 4), (40_001, 0)] {
        // Random pieces with gaps (elements no piece names must stay as they were), cut at
        // arbitrary offsets and crossing the chunk size.
        let mut pieces = Vec::new();
        let mut s = 0;
        while s < n {
            let e = (s + rng.gen_range(1..=n.min(20_000))).min(n);
            if rng.gen_bool(0.8) {
                pieces.push((s..e, rng.gen_bool(0.5)));
            }
            s = e;
        }
        let (p, g) = (uniform(&mut rng, off + n, 1.0), uniform(&mut rng, off + n, 0.1));
        let m = uniform(&mut rng, off + n, 0.01);
        let v: Vec<f32> = uniform(&mut rng, off + n, 1e-3).iter().map(|x| x.abs()).collect();
        let h = AdamW {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            step: rng.gen_range(1..20),
            grad_scale: 0.7,
        };
        let dev = |x: &[f32]| Buffer::from_slice(device, x).unwrap();
        let (mut pb, gb, mut mb, mut vb) = (dev(&p), dev(&g), dev(&m), dev(&v));
        let r = off..off + n;
        launch::adamw_chunks(
            &k,
            &mut pb.view_mut(r.clone()).unwrap(),
            &mut mb.view_mut(r.clone()).unwrap(),
            &mut vb.view_mut(r.clone()).unwrap(),
            &gb.view(r.clone()).unwrap(),
            &pieces,
            &h,
        )
        .unwrap();
        let (gp, gm, gv) = (pb.to_vec().unwrap(), mb.to_vec().unwrap(), vb.to_vec().unwrap());
        let mut decays = vec![None; n];
        for (r, d) in &pieces {
            for i in r.clone() {
                decays[i] = Some(*d);
            }
        }
        for i in 0..off + n {
            let what = format!("adamw_chunks n {n} offset {off} element {i}");
            match (i >= off).then(|| decays[i - off]).flatten() {
                None => assert!(
                    gp[i] == p[i] && gm[i] == m[i] && gv[i] == v[i],
                    "{what}: outside every piece, changed"
                ),
                Some(d) => {
                    let wd = if d { h.weight_decay as f64 } else { 0.0 };
                    let hr = refs::AdamW {
                        lr: h.lr as f64,
                        beta1: h.beta1 as f64,
                        beta2: h.beta2 as f64,
                        eps: h.eps as f64,
                        weight_decay: wd,
                        grad_scale: h.grad_scale as f64,
                        step: h.step as i32,
                    };
                    let (wp, wm, wv) = refs::adamw(p[i] as f64, g[i] as f64, m[i] as f64, v[i] as f64, &hr);
                    // Relative to the value before the step as well as after: an update that
                    // cancels most of a parameter leaves f32 rounding of the larger old value.
                    let close = |got: f32, want: f64, old: f32| {
                        (got as f64 - want).abs() <= 1e-5 * (want.abs() + (old as f64).abs()) + 1e-9
                    };
                    assert!(
                        close(gp[i], wp, p[i]) && close(gm[i], wm, m[i]) && close(gv[i], wv, v[i]),
                        "{what}: got ({}, {}, {}), want ({wp}, {wm}, {wv})",
                        gp[i],
                        gm[i],
                        gv[i]
                    );
                }
            }
        }
    }
}

fn sum_squares_ranges(device: &Device) {
    let mut rng = rng("sum_squares_ranges");
    let k = Kernels::load(device).unwrap();
    for n in [1, 7, 1030, 70_001] {
        for off in [0, 1] {
            let x = uniform(&mut rng, off + n, 1.0);
            let xb = Buffer::from_slice(device, &x).unwrap();
            let view = xb.view(off..).unwrap();
            let mut ranges = vec![0..n];
            if n > 10 {
                ranges = vec![0..3, 5..n / 2, n / 2 + 1..n];
            }
            let got = launch::sum_squares_ranges(&k, &view, &ranges).unwrap();
            let want: f64 = ranges
                .iter()
                .flat_map(|r| x[off + r.start..off + r.end].iter())
                .map(|&v| (v as f64) * (v as f64))
                .sum();
            assert!((got - want).abs() <= 1e-5 * want, "n {n} offset {off}: got {got}, want {want}");
        }
    }
    // Ranges outside the view are refused.
    let xb = Buffer::from_slice(device, &[1.0f32; 8]).unwrap();
    assert!(launch::sum_squares_ranges(&k, &xb.view(..).unwrap(), &[2..9]).is_err());
}

kernel_tests!(
    add_v4,
    gelu_v4,
    bf16_elementwise,
    layernorm_rows,
    layernorm_bf16_narrow_edge,
    crossentropy_v4,
    crossentropy_v4_half,
    bias_backward_half,
    adamw_chunks,
    sum_squares_ranges
);
