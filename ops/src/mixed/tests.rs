//! The mixed-precision ops against the `Cpu`'s f32 ops, on and off the tensor cores, and the
//! conversions' bits.

use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
use trident_runtime::Buffer;

use super::convert::{host_narrow, host_widen};
use super::*;
use crate::OpsContext;

/// Seeded normal values (Box-Muller over `StdRng`).
struct NormalRng(rand::rngs::StdRng);

impl NormalRng {
    fn new(seed: u64) -> Self {
        Self(rand::SeedableRng::seed_from_u64(seed))
    }

    fn next_normal(&mut self) -> f64 {
        use rand::Rng;
        let (u, v): (f64, f64) = (1.0 - self.0.gen::<f64>(), self.0.gen());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// `n` normal values of scale `scale`, rounded to bf16 (kept as f32).
fn values(r: &mut NormalRng, n: usize, scale: f64) -> Vec<f32> {
    (0..n).map(|_| bf16_to_f32(f32_to_bf16((r.next_normal() * scale) as f32))).collect()
}

fn bf16_operand(b: &Buffer<u16>) -> Operand<'_> {
    Operand::Half(b.view(..).unwrap(), HalfFormat::Bf16)
}

fn f32_operand(b: &Buffer<f32>) -> Operand<'_> {
    Operand::F32(b.view(..).unwrap())
}

/// What one linear layer gives: the output and input gradient (as f32 values), the weight
/// and bias gradients, and the kernels launched.
struct Linear {
    out: Vec<f32>,
    dinp: Vec<f32>,
    dw: Vec<f32>,
    db: Vec<f32>,
    launches: std::collections::HashMap<&'static str, u64>,
}

/// Forward with bias and residual, then backward (onto gradients that start at 1), of an
/// `[n, ic] x [oc, ic]^T` layer on `device`: bf16 buffers where `half`, else f32 buffers
/// of the same values with the outputs rounded as the `Cpu` stores them.
fn linear(device: &Device, half: bool, (n, ic, oc): (usize, usize, usize)) -> Linear {
    let ctx = OpsContext::new(device).unwrap();
    let r = &mut NormalRng::new(5);
    let (x, w, bias) = (values(r, n * ic, 1.0), values(r, oc * ic, 0.2), values(r, oc, 0.1));
    let (res, dy) = (values(r, n * oc, 1.0), values(r, n * oc, 1.0));
    let bf16 = |v: &[f32]| v.iter().map(|x| f32_to_bf16(*x)).collect::<Vec<u16>>();
    let half_buf = |v: &[f32]| Buffer::from_slice(device, &bf16(v)).unwrap();
    let f32_buf = |v: &[f32]| Buffer::<f32>::from_slice(device, v).unwrap();
    let bias = f32_buf(&bias);
    let (mut dw, mut db) = (f32_buf(&vec![1.0; oc * ic]), f32_buf(&vec![1.0; oc]));
    let (out, dinp) = if half {
        let f = HalfFormat::Bf16;
        let (x, w, res, dy) = (half_buf(&x), half_buf(&w), half_buf(&res), half_buf(&dy));
        let (mut out, mut dinp) =
            (Buffer::<u16>::zeros(device, n * oc).unwrap(), Buffer::<u16>::zeros(device, n * ic).unwrap());
        let op = bf16_operand;
        let mut o = OperandMut::Half(out.view_mut(..).unwrap(), f);
        let b = Some(bias.view(..).unwrap());
        linear_forward(&ctx, &mut o, op(&x), op(&w), b, Some(op(&res)), n, ic, oc).unwrap();
        let mut d = OperandMut::Half(dinp.view_mut(..).unwrap(), f);
        let (mut dwv, mut dbv) = (dw.view_mut(..).unwrap(), db.view_mut(..).unwrap());
        linear_backward(&ctx, &mut d, &mut dwv, Some(&mut dbv), op(&dy), op(&x), op(&w), n, ic, oc).unwrap();
        let widen = |b: Buffer<u16>| b.to_vec().unwrap().into_iter().map(bf16_to_f32).collect::<Vec<_>>();
        (widen(out), widen(dinp))
    } else {
        let (x, w, res, dy) = (f32_buf(&x), f32_buf(&w), f32_buf(&res), f32_buf(&dy));
        let (mut out, mut dinp) = (f32_buf(&vec![0.0; n * oc]), f32_buf(&vec![0.0; n * ic]));
        let op = f32_operand;
        let mut o = OperandMut::F32(out.view_mut(..).unwrap());
        let b = Some(bias.view(..).unwrap());
        linear_forward(&ctx, &mut o, op(&x), op(&w), b, Some(op(&res)), n, ic, oc).unwrap();
        let mut d = OperandMut::F32(dinp.view_mut(..).unwrap());
        let (mut dwv, mut dbv) = (dw.view_mut(..).unwrap(), db.view_mut(..).unwrap());
        linear_backward(&ctx, &mut d, &mut dwv, Some(&mut dbv), op(&dy), op(&x), op(&w), n, ic, oc).unwrap();
        for b in [&mut out, &mut dinp] {
            crate::round_to(&ctx, &mut b.view_mut(..).unwrap(), HalfFormat::Bf16).unwrap();
        }
        (out.to_vec().unwrap(), dinp.to_vec().unwrap())
    };
    let launches = ctx.kernels().map(|k| k.launch_counts()).unwrap_or_default();
    Linear { out, dinp, dw: dw.to_vec().unwrap(), db: db.to_vec().unwrap(), launches }
}

/// Elementwise within `ulps` of bf16's spacing at each value (f32 sums in another order
/// flip a rounding now and then: one spacing) plus `abs`.
fn assert_near(what: &str, got: &[f32], want: &[f32], ulps: f64, abs: f64) {
    trident_testkit::assert_each(what, got, &trident_testkit::f64s(want), ulps / 128.0, abs);
}

fn launched(l: &Linear, prefix: &str) -> u64 {
    l.launches.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, n)| n).sum()
}

/// bf16 buffers on `Emu` run on the tensor-core GEMM (widths multiples of 8) or on the f32
/// GEMM between conversions (an input width of 20), and agree with the `Cpu`'s f32 buffers
/// of the same rounded values: the outputs within one bf16 rounding, the f32 gradients
/// within f32 sums' reordering.
#[test]
fn bf16_linear_layers_agree_with_the_cpu_on_the_tensor_cores_and_off_them() {
    for (shape, tensor_cores) in [((24, 32, 48), true), ((24, 20, 48), false)] {
        let want = linear(&Device::Cpu, false, shape);
        let got = linear(&Device::Emu, true, shape);
        let case = format!("{shape:?}");
        assert_near(&format!("{case} out"), &got.out, &want.out, 1.0, 0.0);
        assert_near(&format!("{case} dinp"), &got.dinp, &want.dinp, 1.0, 0.0);
        assert_near(&format!("{case} dweight"), &got.dw, &want.dw, 0.0, 1e-4);
        assert_near(&format!("{case} dbias"), &got.db, &want.db, 0.0, 1e-4);
        let (tc, f32_gemm) =
            (launched(&got, "gemm_tc_bf16_"), launched(&got, "gemm_") - launched(&got, "gemm_tc"));
        if tensor_cores {
            assert_eq!((tc, f32_gemm), (3, 0), "{case}: {:?}", got.launches);
        } else {
            assert_eq!((tc, f32_gemm), (0, 3), "{case}: {:?}", got.launches);
        }
    }
}

/// The conversions keep the bits the host's rounding gives, on every device, and widening
/// gives the values back exactly.
fn conversions_round_and_widen_exactly(device: &Device) {
    let r = &mut NormalRng::new(9);
    let x: Vec<f32> = (0..1000).map(|i| (r.next_normal() * 10f64.powi(i % 10 - 5)) as f32).collect();
    for format in [HalfFormat::Bf16, HalfFormat::F16] {
        let want: Vec<u16> = x.iter().map(|v| host_narrow(format)(*v)).collect();
        let ctx = OpsContext::new(device).unwrap();
        let src = Buffer::from_slice(device, &x).unwrap();
        let mut half = Buffer::<u16>::zeros(device, x.len()).unwrap();
        convert(
            &ctx,
            &mut OperandMut::Half(half.view_mut(..).unwrap(), format),
            Operand::F32(src.view(..).unwrap()),
        )
        .unwrap();
        assert_eq!(half.to_vec().unwrap(), want, "{format:?} on {}", device.kind());
        let mut back = Buffer::<f32>::zeros(device, x.len()).unwrap();
        let h = Operand::Half(half.view(..).unwrap(), format);
        convert(&ctx, &mut OperandMut::F32(back.view_mut(..).unwrap()), h).unwrap();
        let exact: Vec<f32> = want.iter().map(|b| host_widen(format)(*b)).collect();
        assert_eq!(back.to_vec().unwrap(), exact);
        let other = match format {
            HalfFormat::Bf16 => HalfFormat::F16,
            HalfFormat::F16 => HalfFormat::Bf16,
        };
        let mut wrong = Buffer::<u16>::zeros(device, x.len()).unwrap();
        let err = convert(&ctx, &mut OperandMut::Half(wrong.view_mut(..).unwrap(), other), h);
        assert!(err.is_err(), "{format:?} into {other:?} is refused");
    }
}

trident_testkit::device_tests!(conversions_round_and_widen_exactly);

/// On `Emu`, bf16 LayerNorm (f32 rows in) and GeLU run the bf16 kernels alone (no conversion
/// launches) and store the bits of the f32 op followed by the host's rounding: the conversion
/// path's bits, and the `Cpu`'s rounding of the same f32 values.
#[test]
fn bf16_layernorm_and_gelu_launch_the_bf16_kernels_and_round_as_the_conversions() {
    let device = Device::Emu;
    let (ctx, f32_ctx) = (OpsContext::new(&device).unwrap(), OpsContext::new(&device).unwrap());
    let r = &mut NormalRng::new(13);
    let narrow = |v: &[f32]| v.iter().map(|x| f32_to_bf16(*x)).collect::<Vec<u16>>();
    let f32_buf = |v: &[f32]| Buffer::<f32>::from_slice(&device, v).unwrap();
    // C = 52 takes the 16-byte groups, C = 50 the element-wise path.
    for c in [52, 50] {
        let n = 5;
        let x: Vec<f32> = values(r, n * c, 2.0).iter().map(|v| v + 0.5).collect();
        let (w, b) = (f32_buf(&values(r, c, 1.0)), f32_buf(&values(r, c, 0.1)));
        let xb = f32_buf(&x);
        let (mut out, mut mean, mut rstd) = (
            Buffer::<u16>::zeros(&device, n * c).unwrap(),
            Buffer::<f32>::zeros(&device, n).unwrap(),
            Buffer::<f32>::zeros(&device, n).unwrap(),
        );
        layernorm_forward(
            &ctx,
            &mut OperandMut::Half(out.view_mut(..).unwrap(), HalfFormat::Bf16),
            &mut mean.view_mut(..).unwrap(),
            &mut rstd.view_mut(..).unwrap(),
            xb.view(..).unwrap(),
            w.view(..).unwrap(),
            b.view(..).unwrap(),
            n,
            c,
        )
        .unwrap();
        let (mut want, mut wm, mut ws) = (
            Buffer::<f32>::zeros(&device, n * c).unwrap(),
            Buffer::<f32>::zeros(&device, n).unwrap(),
            Buffer::<f32>::zeros(&device, n).unwrap(),
        );
        crate::layernorm_forward(
            &f32_ctx,
            &mut want.view_mut(..).unwrap(),
            &mut wm.view_mut(..).unwrap(),
            &mut ws.view_mut(..).unwrap(),
            xb.view(..).unwrap(),
            w.view(..).unwrap(),
            b.view(..).unwrap(),
            n,
            c,
        )
        .unwrap();
        assert_eq!(out.to_vec().unwrap(), narrow(&want.to_vec().unwrap()), "layernorm, C = {c}");
        assert_eq!(
            (mean.to_vec().unwrap(), rstd.to_vec().unwrap()),
            (wm.to_vec().unwrap(), ws.to_vec().unwrap())
        );
    }

    // 1003 elements: whole groups of 8 and a remainder.
    let n = 1003;
    let (x, dy) = (values(r, n, 2.0), values(r, n, 1.0));
    let (xh, mut out, mut d) = (
        Buffer::from_slice(&device, &narrow(&x)).unwrap(),
        Buffer::<u16>::zeros(&device, n).unwrap(),
        Buffer::from_slice(&device, &narrow(&dy)).unwrap(),
    );
    gelu_forward(
        &ctx,
        &mut OperandMut::Half(out.view_mut(..).unwrap(), HalfFormat::Bf16),
        bf16_operand(&xh),
        n,
    )
    .unwrap();
    gelu_backward(
        &ctx,
        &mut OperandMut::Half(d.view_mut(..).unwrap(), HalfFormat::Bf16),
        bf16_operand(&xh),
        n,
    )
    .unwrap();
    let (xf, mut y, mut g) = (f32_buf(&x), f32_buf(&x), f32_buf(&dy));
    crate::gelu_forward(&f32_ctx, &mut y.view_mut(..).unwrap(), xf.view(..).unwrap(), n).unwrap();
    crate::gelu_backward(&f32_ctx, &mut g.view_mut(..).unwrap(), xf.view(..).unwrap(), n).unwrap();
    assert_eq!(out.to_vec().unwrap(), narrow(&y.to_vec().unwrap()), "gelu forward");
    assert_eq!(d.to_vec().unwrap(), narrow(&g.to_vec().unwrap()), "gelu backward");

    let want = std::collections::HashMap::from([
        ("layernorm_forward_row_f32_bf16", 2),
        ("gelu_forward_bf16", 1),
        ("gelu_backward_bf16", 1),
    ]);
    assert_eq!(ctx.kernels().unwrap().launch_counts(), want);
}
