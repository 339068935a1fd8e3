//! Ops at the edges of their domain, on every device.

use trident::ops::{gelu_backward, gelu_forward, OpsContext};
use trident::runtime::{Buffer, Device};
use trident_testkit::device_tests;

/// Far from zero GeLU is the identity or zero, and its derivative 1 or 0: finite, even where
/// `x^3` overflows f32 (past about 7e12). A NaN stays NaN.
fn gelu_saturates_far_from_zero(device: &Device) {
    let ctx = OpsContext::new(device).unwrap();
    let x = [10.0f32, 11.0, 1e6, 8e12, 1e20, f32::MAX, -10.0, -11.0, -1e6, -8e12, -1e20, f32::MIN, f32::NAN];
    let n = x.len();
    let inp = Buffer::from_slice(device, &x).unwrap();
    let mut out = Buffer::from_slice(device, &[0.0; 13]).unwrap();
    gelu_forward(&ctx, &mut out.view_mut(..).unwrap(), inp.view(..).unwrap(), n).unwrap();
    let dout = [0.5f32; 13];
    let mut d = Buffer::from_slice(device, &dout).unwrap();
    gelu_backward(&ctx, &mut d.view_mut(..).unwrap(), inp.view(..).unwrap(), n).unwrap();
    let (y, dx) = (out.to_vec().unwrap(), d.to_vec().unwrap());
    assert!(
        y[n - 1].is_nan() && dx[n - 1].is_nan(),
        "NaN in, {} and {} out on {}",
        y[n - 1],
        dx[n - 1],
        device.kind()
    );
    for i in 0..n - 1 {
        let (want_y, want_dx) = if x[i] > 0.0 { (x[i], 0.5) } else { (0.0, 0.0) };
        let at = format!("x = {:e} on {}", x[i], device.kind());
        assert!((y[i] - want_y).abs() <= 1e-6 * want_y.abs() + 1e-30, "gelu({at}) = {}", y[i]);
        assert!((dx[i] - want_dx).abs() <= 1e-6, "gelu'({at}) * 0.5 = {}", dx[i]);
    }
}

device_tests!(gelu_saturates_far_from_zero);
