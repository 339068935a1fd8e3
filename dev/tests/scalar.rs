//! The scalar first generations of GeLU and cross-entropy (`trident_dev::scalar`) on `Emu`
//! (and `Cuda` when present) against f64 references, outputs poisoned first; cross-entropy's
//! gradient also against finite differences of the f64 loss.

use rand::Rng;
use trident_dev::scalar;
use trident_runtime::{Buffer, Device};
use trident_testkit::reference::{self as refs, weighted_differences};
use trident_testkit::{assert_close, f64s, kernel_tests, rng, uniform, POISON};

/// Tolerance of ops through `tanh`: the GPU's `tanh.approx.f32` is good to about 2^-11.
fn tanh_tol(device: &Device) -> f64 {
    if matches!(device, Device::Cuda(_)) {
        2e-3
    } else {
        1e-5
    }
}

/// Tolerance of kernels through the GPU's approximate `ex2`/`lg2` versus the emulator's exact
/// functions.
fn approx_tol(device: &Device, emu: f64) -> f64 {
    if matches!(device, Device::Cuda(_)) {
        emu.max(1e-4)
    } else {
        emu
    }
}

fn buf(device: &Device, data: &[f32]) -> Buffer<f32> {
    Buffer::from_slice(device, data).unwrap()
}

fn poisoned(device: &Device, n: usize) -> Buffer<f32> {
    buf(device, &vec![POISON; n])
}

fn gelu(device: &Device) {
    let k = trident_dev::load(device).unwrap();
    let mut rng = rng("gelu");
    let n = rng.gen_range(1..20_000);
    let x = uniform(&mut rng, n, 6.0);
    let dout = uniform(&mut rng, n, 1.0);
    let dx = Buffer::from_slice(device, &x).unwrap();
    let ddout = Buffer::from_slice(device, &dout).unwrap();
    let mut y = Buffer::from_slice(device, &vec![POISON; n]).unwrap();
    let mut dinp = Buffer::from_slice(device, &vec![POISON; n]).unwrap();
    scalar::gelu_forward(&k, &mut y.view_mut(..).unwrap(), &dx.view(..).unwrap()).unwrap();
    scalar::gelu_backward(
        &k,
        &mut dinp.view_mut(..).unwrap(),
        &dx.view(..).unwrap(),
        &ddout.view(..).unwrap(),
    )
    .unwrap();
    let want_y: Vec<f64> = x.iter().map(|&v| refs::gelu(v as f64)).collect();
    let want_d: Vec<f64> = x.iter().zip(&dout).map(|(&v, &g)| refs::gelu_grad(v as f64) * g as f64).collect();
    assert_close("gelu forward", &y.to_vec().unwrap(), &want_y, tanh_tol(device));
    assert_close("gelu backward", &dinp.to_vec().unwrap(), &want_d, tanh_tol(device));
}

fn crossentropy(device: &Device) {
    let k = trident_dev::load(device).unwrap();
    let mut rng = rng("crossentropy");
    let (rows, v): (usize, usize) = (rng.gen_range(1..30), rng.gen_range(2..700));
    let vp = v.div_ceil(64) * 64;
    let logits = uniform(&mut rng, rows * vp, 4.0);
    let targets: Vec<u32> = (0..rows).map(|_| rng.gen_range(0..v as u32)).collect();
    let dt = Buffer::from_slice(device, &targets).unwrap();
    let want = refs::cross_entropy(&f64s(&logits), &targets, v, vp);
    let dloss = 1.0 / rows as f32;

    let mut l = buf(device, &logits);
    let mut losses = poisoned(device, rows);
    scalar::crossentropy(
        &k,
        &mut l.view_mut(..).unwrap(),
        &mut losses.view_mut(..).unwrap(),
        &dt.view(..).unwrap(),
        rows,
        v,
        vp,
        None,
    )
    .unwrap();
    assert_close("crossentropy loss", &losses.to_vec().unwrap(), &want, approx_tol(device, 1e-6));
    assert_eq!(l.to_vec().unwrap(), logits, "without a gradient the logits stay");

    scalar::crossentropy(
        &k,
        &mut l.view_mut(..).unwrap(),
        &mut losses.view_mut(..).unwrap(),
        &dt.view(..).unwrap(),
        rows,
        v,
        vp,
        Some(dloss),
    )
    .unwrap();
    // d(mean loss)/d logits, by the closed form (checked against finite differences below).
    let mut want_g = vec![0.0f64; rows * vp];
    for r in 0..rows {
        let row = &logits[r * vp..r * vp + v];
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = row.iter().map(|&x| (x as f64 - m).exp()).sum();
        for i in 0..v {
            want_g[r * vp + i] = ((row[i] as f64 - m).exp() / z
                - if i == targets[r] as usize { 1.0 } else { 0.0 })
                * dloss as f64;
        }
    }
    assert_close("crossentropy dlogits", &l.to_vec().unwrap(), &want_g, approx_tol(device, 1e-5));

    // Finite differences on a tiny case.
    let (rows, v, vp) = (2, 5, 8);
    let logits: Vec<f64> = uniform(&mut rng, rows * vp, 2.0).iter().map(|&x| x as f64).collect();
    let targets = [1u32, 4];
    let fd =
        weighted_differences(&logits, &[dloss as f64; 2], 1e-6, |x| refs::cross_entropy(x, &targets, v, vp));
    let mut l = buf(device, &logits.iter().map(|&x| x as f32).collect::<Vec<_>>());
    let mut losses = poisoned(device, rows);
    scalar::crossentropy(
        &k,
        &mut l.view_mut(..).unwrap(),
        &mut losses.view_mut(..).unwrap(),
        &Buffer::from_slice(device, &targets).unwrap().view(..).unwrap(),
        rows,
        v,
        vp,
        Some(dloss),
    )
    .unwrap();
    assert_close("crossentropy finite differences", &l.to_vec().unwrap(), &fd, 1e-4);
}

kernel_tests!(gelu, crossentropy);
