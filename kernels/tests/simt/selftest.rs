//! The selftest kernel that exercises every `simt` operation (and is assembled by ptxas in
//! the nvptx build), run on the emulator against host references.

use trident_kernels::selftest::{self, WARP_OPS_DYNAMIC_SMEM, WARP_OPS_OUTPUTS, WARP_OPS_THREADS};
use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
use trident_simt::LaunchConfig;

use crate::rng::{seed, Rng};
use crate::{ptr, run};

fn warp_ops(args: &[u64]) {
    // SAFETY: the test passes buffers of the sizes warp_ops documents.
    unsafe { selftest::warp_ops(args[0] as *const f32, args[1] as *mut f32, args[2] as *mut f32) }
}

#[test]
fn every_simt_operation_on_the_emulator() {
    let seed = seed("every_simt_operation");
    let mut rng = Rng::new(seed);
    let n = WARP_OPS_THREADS as usize;
    let x = rng.vec(n);
    let mut out = vec![f32::NAN; n * WARP_OPS_OUTPUTS];
    let mut total = [0f32];
    let cfg = LaunchConfig {
        dynamic_smem_bytes: WARP_OPS_DYNAMIC_SMEM,
        ..LaunchConfig::linear(1, WARP_OPS_THREADS)
    };
    run(warp_ops, cfg, &[x.as_ptr() as u64, ptr(&mut out), ptr(&mut total)]).unwrap();
    let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
    assert!((f64::from(total[0]) - sum).abs() < 1e-4, "seed {seed}: global atomic sum");
    for t in 0..n {
        let (w, lane) = (t / 32 * 32, t % 32);
        let at = |l: usize| x[w + l];
        let warp = &x[w..w + 32];
        let v = x[t];
        let want: [f32; WARP_OPS_OUTPUTS] = [
            at((lane + 1) % 32),
            if lane >= 1 { at(lane - 1) } else { v },
            if lane + 2 < 32 { at(lane + 2) } else { v },
            at(lane ^ 3),
            at(31 - lane),
            if lane >= 4 { at(lane - 4) } else { v },
            if lane + 5 < 32 { at(lane + 5) } else { v },
            at(lane ^ 16),
            f32::from(u8::from(warp.iter().all(|&y| y > -0.9))),
            f32::from(u8::from(warp.iter().any(|&y| y > 0.9))),
            warp.iter().filter(|&&y| y > 0.0).count() as f32,
            v.exp2(),
            v.exp(),
            v.tanh(),
            1.0 / (v.abs() + 0.5).sqrt(),
            (v.abs() + 0.5).log2(),
            v.abs().sqrt(),
            v.mul_add(3.0, 0.25),
            v.max(0.0),
            v.min(0.0),
            lane as f32,
            x[n - 1 - t],
            x[n - 1 - t] * 2.0,
            bf16_to_f32(f32_to_bf16(v)),
            (WARP_OPS_THREADS * 100 + 1) as f32,
            sum as f32,
        ];
        for (k, (got, want)) in
            out[t * WARP_OPS_OUTPUTS..(t + 1) * WARP_OPS_OUTPUTS].iter().zip(want).enumerate()
        {
            let tolerance = if k == WARP_OPS_OUTPUTS - 1 { 1e-4 } else { 1e-6 * want.abs().max(1.0) };
            assert!((got - want).abs() <= tolerance, "seed {seed} thread {t} output {k}: {got} vs {want}");
        }
    }
}
