//! Mixed precision's storage rounding, on every device.

use rayon::prelude::*;
use trident_kernels::simt::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use trident_runtime::{Device, ViewMut};

use super::{check, launch, OpsContext, Result};
pub use crate::launch::HalfFormat;

/// Rounds every element of `x` in place to the nearest `format` value, kept as f32 (ties to
/// even; f16 overflows to infinity): what a bf16 or f16 buffer would store. The same integer
/// arithmetic on the host and in the kernel, so `Cpu` and `Emu` store the same bits.
pub fn round_to(ctx: &OpsContext, x: &mut ViewMut<f32>, format: HalfFormat) -> Result<()> {
    const OP: &str = "round_to";
    check::devices(ctx, OP, &[("x", x.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let round: fn(f32) -> f32 = match format {
                HalfFormat::Bf16 => |v| bf16_to_f32(f32_to_bf16(v)),
                HalfFormat::F16 => |v| f16_to_f32(f32_to_f16(v)),
            };
            check::host_mut(OP, x)?
                .par_chunks_mut(1 << 14)
                .for_each(|c| c.iter_mut().for_each(|v| *v = round(*v)));
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::round_to(ctx.kernels()?, x, format)?),
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use trident_runtime::Buffer;

    use super::*;

    /// Every device stores the bits the host's rounding gives (the `Cpu`'s, bit for bit, NaN
    /// payloads included, and `half`'s), at the edges of both formats too: ties, subnormals,
    /// overflow to infinity, NaN.
    fn rounds_to_the_cpus_bits(device: &Device) {
        let mut values: Vec<f32> = vec![
            0.0,
            -0.0,
            1.0,
            1.0 + f32::EPSILON,
            1.0 + 1.0 / 256.0,
            1.0 + 3.0 / 256.0,
            65504.0,
            65519.0,
            65520.0,
            1e5,
            -1e5,
            6.0e-8,
            2.9e-8,
            1e-40,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let mut r = StdRng::seed_from_u64(7);
        values.extend((0..1000).map(|i| (r.gen_range(-3.0f64..3.0) * 10f64.powi(i % 12 - 6)) as f32));
        for format in [HalfFormat::Bf16, HalfFormat::F16] {
            let mut out = Vec::new();
            for device in [&Device::Cpu, device] {
                let ctx = OpsContext::new(device).unwrap();
                let mut x = Buffer::from_slice(device, &values).unwrap();
                round_to(&ctx, &mut x.view_mut(..).unwrap(), format).unwrap();
                out.push(x.to_vec().unwrap());
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out[0]), bits(&out[1]), "{format:?}: Cpu and {} differ", device.kind());
            for (x, y) in values.iter().zip(&out[0]) {
                let want = match format {
                    HalfFormat::Bf16 => half::bf16::from_f32(*x).to_f32(),
                    HalfFormat::F16 => half::f16::from_f32(*x).to_f32(),
                };
                assert!(
                    want.to_bits() == y.to_bits() || (want.is_nan() && y.is_nan()),
                    "{format:?}({x}) = {y}, want {want}"
                );
            }
        }
    }

    trident_testkit::device_tests!(rounds_to_the_cpus_bits);
}
