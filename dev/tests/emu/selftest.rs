//! The selftest kernel that exercises every `simt` operation (and is assembled by ptxas in
//! the nvptx build), run on the emulator against host references.

use trident_dev_kernels::selftest::{
    GLOBAL_OPS_THREADS, PIPELINE_THREADS, PIPELINE_TILE, WARP_OPS_DYNAMIC_SMEM, WARP_OPS_OUTPUTS,
    WARP_OPS_THREADS,
};
use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
use trident_simt::LaunchConfig;

use crate::{lend, ptr, run_selftest};
use rand::Rng;
use trident_testkit::{rng, uniform};

#[test]
fn every_simt_operation_on_the_emulator() {
    let mut rng = rng("every_simt_operation");
    let n = WARP_OPS_THREADS as usize;
    let x = uniform(&mut rng, n, 1.0);
    let mut out = vec![f32::NAN; n * WARP_OPS_OUTPUTS];
    let mut total = [0f32];
    let _lent = (lend(&x), lend(&out), lend(&total));
    let cfg = LaunchConfig {
        dynamic_smem_bytes: WARP_OPS_DYNAMIC_SMEM,
        ..LaunchConfig::linear(1, WARP_OPS_THREADS)
    };
    run_selftest("selftest_warp_ops", cfg, &[x.as_ptr() as u64, ptr(&mut out), ptr(&mut total)]).unwrap();
    let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
    assert!((f64::from(total[0]) - sum).abs() < 1e-4, "global atomic sum");
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
            assert!((got - want).abs() <= tolerance, "thread {t} output {k}: {got} vs {want}");
        }
    }
}

#[test]
fn cp_async_pipeline_on_the_emulator() {
    let mut rng = rng("cp_async_pipeline");
    let threads = PIPELINE_THREADS as usize;
    let tile = PIPELINE_TILE as usize;
    for n in [2 * threads, tile, 3 * tile + 37] {
        // 16-byte aligned storage for the inputs.
        let mut storage = vec![[0f32; 4]; n.div_ceil(4)];
        let input = &mut storage.as_flattened_mut()[..n];
        input.copy_from_slice(&uniform(&mut rng, n, 1.0));
        let mut out = vec![f32::NAN; 2 * threads];
        let _lent = (lend(input), lend(&out));
        run_selftest(
            "selftest_async_copy",
            LaunchConfig::linear(1, PIPELINE_THREADS),
            &[input.as_ptr() as u64, n as u64, ptr(&mut out)],
        )
        .unwrap();
        let at = |i: usize| if i < n { f64::from(input[i]) } else { 0.0 };
        for t in 0..threads {
            let want: f64 =
                (0..n.div_ceil(tile)).map(|k| at(k * tile + t) + at(k * tile + tile - 1 - t)).sum();
            assert!((f64::from(out[t]) - want).abs() < 1e-5, "n {n} thread {t}: {} vs {want}", out[t]);
            let o = threads - 1 - t;
            let want = at(2 * o) + at(2 * o + 1) + at(o);
            assert!((f64::from(out[threads + t]) - want).abs() < 1e-5, "n {n} extra {t}");
        }
    }
}

#[test]
fn every_global_access_form() {
    /// Floats on a 128-byte boundary (the sector counts below assume it).
    #[repr(C, align(128))]
    struct Aligned<const N: usize>([f32; N]);
    let mut rng = rng("every_global_access_form");
    let input = Box::new(Aligned::<128>(std::array::from_fn(|_| rng.gen_range(-1.0f32..1.0))));
    let mut out = Box::new(Aligned([f32::NAN; 224]));
    let mut total = [0f32; 2];
    let _lent = (lend(&input.0), lend(&out.0), lend(&total));
    let stats = run_selftest(
        "selftest_global_ops",
        LaunchConfig::linear(1, GLOBAL_OPS_THREADS),
        &[input.0.as_ptr() as u64, ptr(&mut out.0), ptr(&mut total)],
    )
    .unwrap();
    let (x, out) = (&input.0, &out.0);
    for t in 0..32 {
        for k in 0..4 {
            assert_eq!(out[4 * t + k], 2.0 * x[4 * t + k], "v4 at {t}.{k}");
        }
        assert_eq!(&out[128 + 2 * t..130 + 2 * t], &x[2 * t..2 * t + 2], "v2 at {t}");
        assert_eq!(out[192 + t], x[t], "nc at {t}");
    }
    let sum: f64 = x[..32].iter().map(|&v| f64::from(v)).sum();
    for got in total {
        assert!((f64::from(got) - sum).abs() < 1e-4, "{got} vs {sum}");
    }
    // Loads: two coalesced 16-byte requests of 16 sectors, one of 8 bytes (8 sectors), one of
    // 4 bytes (4 sectors). Atomics: two requests on one word, 1 sector each.
    assert_eq!(stats.global_loads.requests, 4);
    assert_eq!(stats.global_loads.sectors, 16 + 16 + 8 + 4);
    assert_eq!(stats.global_loads.bytes_requested, 32 * (16 + 16 + 8 + 4));
    assert_eq!(stats.global_atomics.requests, 2);
    assert_eq!(stats.global_atomics.sectors, 2);
    assert_eq!(stats.warp_instructions.global_atomic, 2);
}
