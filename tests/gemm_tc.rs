//! The tensor-core GEMM on `Emu` (and `Cuda` when present) against an f64 reference of the
//! rounded inputs: random shapes that divide no tile, every layout a linear layer needs, both
//! input types, both outputs, both block tiles, split-K, and every epilogue, with the output
//! (padding included) poisoned first. Then the exact counters of the main loop: the `mma` and
//! `ldmatrix` counts, and no shared-memory bank conflict in any `ldmatrix` or `cp.async`.
//!
//! Tolerance per element: `r |want| + 1e-5 x magnitude`, where the magnitude is the sum of the
//! terms' absolute values (`|a||b|` products, bias, residual) and `r` the output's rounding
//! (0 for f32, 2^-8 for bf16, 2^-11 for f16); f32 accumulation in any order is well inside
//! 1e-5 of the magnitude at these K, and the GPU's `tanh.approx` (about 2^-11) adds 2e-3.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use trident::launch::{
    self, GemmTc, GemmTcOutput, GemmTcPlan, GemmTcWorkspace, HalfFormat, Kernels, LaunchError,
};
use trident::runtime::{last_launch_stats, set_block_order, BlockOrder, Buffer, Device};
use trident_kernels::gemm_tc::Config;
use trident_kernels::gemm_tc::{BK, CONFIGS, LARGE, SMALL};
use trident_kernels::simt::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use trident_testkit::{kernel_tests, reference, rng};

fn round(t: HalfFormat, x: f32) -> u16 {
    match t {
        HalfFormat::Bf16 => f32_to_bf16(x),
        HalfFormat::F16 => f32_to_f16(x),
    }
}

fn widen(t: HalfFormat, bits: u16) -> f32 {
    match t {
        HalfFormat::Bf16 => bf16_to_f32(bits),
        HalfFormat::F16 => f16_to_f32(bits),
    }
}

/// `n` random 16-bit values in [-scale, scale).
fn random_half(rng: &mut StdRng, t: HalfFormat, n: usize, scale: f32) -> Vec<u16> {
    (0..n).map(|_| round(t, rng.gen_range(-scale..scale))).collect()
}

/// Test access to an output's values and poison.
trait Out: GemmTcOutput + Copy + PartialEq + std::fmt::Debug {
    const POISON: Self;
    /// Relative rounding of the output for input type `t`.
    fn rounding(t: HalfFormat) -> f64;
    fn value(self, t: HalfFormat) -> f64;
    fn from_value(t: HalfFormat, v: f32) -> Self;
    fn is_poison(self) -> bool;
}

impl Out for f32 {
    const POISON: f32 = f32::NAN;
    fn rounding(_: HalfFormat) -> f64 {
        0.0
    }
    fn value(self, _: HalfFormat) -> f64 {
        f64::from(self)
    }
    fn from_value(_: HalfFormat, v: f32) -> f32 {
        v
    }
    fn is_poison(self) -> bool {
        self.is_nan()
    }
}

impl Out for u16 {
    /// NaN in both bf16 and f16.
    const POISON: u16 = 0xFFFF;
    fn rounding(t: HalfFormat) -> f64 {
        match t {
            HalfFormat::Bf16 => 2f64.powi(-8),
            HalfFormat::F16 => 2f64.powi(-11),
        }
    }
    fn value(self, t: HalfFormat) -> f64 {
        f64::from(widen(t, self))
    }
    fn from_value(t: HalfFormat, v: f32) -> u16 {
        round(t, v)
    }
    fn is_poison(self) -> bool {
        self == 0xFFFF
    }
}

/// One random case: layout, types, epilogue and plan fixed by the caller, shape at random.
#[derive(Clone, Copy, Debug)]
struct Case {
    trans_a: bool,
    trans_b: bool,
    input: HalfFormat,
    bias: bool,
    gelu: bool,
    residual: bool,
    /// `C += ...`: C starts from the residual's values and the epilogue adds them.
    accumulate: bool,
    /// `C = ... x gelu'(x)`, the residual's values as `x`.
    gelu_grad: bool,
    plan: Option<GemmTcPlan>,
}

/// Runs `case` (on `workspace` when given) on random data of that shape, with C poisoned
/// first, and checks every element against the f64 reference; returns C.
fn run_case<O: Out>(
    device: &Device,
    k: &Kernels,
    rng: &mut StdRng,
    case: Case,
    (m, n, kk): (usize, usize, usize),
    workspace: Option<&mut GemmTcWorkspace>,
) -> Vec<O> {
    let t = case.input;
    let round8 = |x: usize| x.div_ceil(8) * 8;
    // Stored shapes; leading dimensions are multiples of 8 with a random pad.
    let (a_rows, a_cols) = if case.trans_a { (kk, m) } else { (m, kk) };
    let (b_rows, b_cols) = if case.trans_b { (n, kk) } else { (kk, n) };
    let lda = round8(a_cols) + 8 * rng.gen_range(0..2);
    let ldb = round8(b_cols) + 8 * rng.gen_range(0..2);
    let ldc = n + rng.gen_range(0..3);
    let a = random_half(rng, t, a_rows * lda, 1.0);
    let b = random_half(rng, t, b_rows * ldb, 1.0);
    let bias: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let residual: Vec<O> = (0..m * ldc).map(|_| O::from_value(t, rng.gen_range(-2.0..2.0))).collect();

    let mut spec = GemmTc::new(m, n, kk, t).leading_dims(lda, ldb, ldc);
    if case.trans_a {
        spec = spec.trans_a();
    }
    if case.trans_b {
        spec = spec.trans_b();
    }
    if case.gelu {
        spec = spec.gelu();
    }
    if case.accumulate {
        spec = spec.accumulate();
    }
    if case.gelu_grad {
        spec = spec.gelu_grad();
    }
    if let Some(plan) = case.plan {
        spec = spec.with_plan(plan);
    }
    let (da, db) = (Buffer::from_slice(device, &a).unwrap(), Buffer::from_slice(device, &b).unwrap());
    let dbias = Buffer::from_slice(device, &bias).unwrap();
    let dres = Buffer::from_slice(device, &residual).unwrap();
    let initial = if case.accumulate { residual.clone() } else { vec![O::POISON; m * ldc] };
    let mut dc = Buffer::from_slice(device, &initial).unwrap();
    let (vbias, vres) = (dbias.view(..).unwrap(), dres.view(..).unwrap());
    let (va, vb, mut vc) = (da.view(..).unwrap(), db.view(..).unwrap(), dc.view_mut(..).unwrap());
    let (bias_view, residual_view) =
        (case.bias.then_some(&vbias), (case.residual || case.gelu_grad).then_some(&vres));
    match workspace {
        Some(ws) => launch::gemm_tc_with_workspace(k, &mut vc, &va, &vb, bias_view, residual_view, &spec, ws),
        None => launch::gemm_tc(k, &mut vc, &va, &vb, bias_view, residual_view, &spec),
    }
    .unwrap_or_else(|e| panic!("{case:?} {m}x{n}x{kk}: {e}"));
    let got = dc.to_vec().unwrap();

    let at =
        |i: usize, p: usize| f64::from(widen(t, if case.trans_a { a[p * lda + i] } else { a[i * lda + p] }));
    let bt =
        |p: usize, j: usize| f64::from(widen(t, if case.trans_b { b[j * ldb + p] } else { b[p * ldb + j] }));
    let gelu_tol = if matches!(device, Device::Cuda(_)) { 2e-3 } else { 0.0 };
    for i in 0..m {
        for j in 0..ldc {
            let g = got[i * ldc + j];
            if j >= n {
                let untouched = if case.accumulate { g == initial[i * ldc + j] } else { g.is_poison() };
                assert!(untouched, "{case:?} {m}x{n}x{kk}: C[{i}][{j}] past n was written: {g:?}");
                continue;
            }
            let (mut want, mut magnitude) = (0.0f64, 0.0f64);
            for p in 0..kk {
                let term = at(i, p) * bt(p, j);
                want += term;
                magnitude += term.abs();
            }
            if case.bias {
                want += f64::from(bias[j]);
                magnitude += f64::from(bias[j]).abs();
            }
            if case.gelu {
                want = reference::gelu(want);
                magnitude = 1.2 * magnitude + gelu_tol;
            }
            if case.residual || case.accumulate {
                let r = residual[i * ldc + j].value(t);
                want += r;
                magnitude += r.abs();
            }
            if case.gelu_grad {
                let g = reference::gelu_grad(residual[i * ldc + j].value(t));
                want *= g;
                magnitude *= g.abs() + gelu_tol;
            }
            let tol = O::rounding(t) * want.abs() + 1e-5 * magnitude;
            let v = g.value(t);
            assert!(
                (v - want).abs() <= tol,
                "{case:?} {m}x{n}x{kk} (lda {lda} ldb {ldb} ldc {ldc}): C[{i}][{j}] = {v}, want {want} (tol {tol})"
            );
        }
    }
    got
}

/// Shapes that divide no tile size (M, N not multiples of 64, K not of 32) and need a second
/// block along M or N about half of the time.
fn random_shape(rng: &mut StdRng) -> (usize, usize, usize) {
    let odd = |rng: &mut StdRng, lo: usize, hi: usize| loop {
        let v = rng.gen_range(lo..hi);
        if v % 32 != 0 {
            break v;
        }
    };
    (odd(rng, 1, 200), odd(rng, 1, 300), odd(rng, 1, 110))
}

fn gemm_tc_matches_f64_reference(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("gemm_tc");
    let layouts = [(false, true), (false, false), (true, false)];
    let mut i = 0usize;
    for (trans_a, trans_b) in layouts {
        for input in [HalfFormat::Bf16, HalfFormat::F16] {
            for f32_out in [true, false] {
                // Cycle the 8 epilogues, the 2 tiles and split-K over the 12 cases.
                let (bias, gelu, residual) = (i & 1 != 0, i & 2 != 0, i & 4 != 0);
                let config = CONFIGS[i % 2];
                let shape = random_shape(&mut rng);
                let splits = if (i / 2) % 2 == 1 { 2 } else { 1 };
                let k_split = shape.2.div_ceil(BK).div_ceil(splits) * BK;
                let plan = GemmTcPlan { config, splits: shape.2.div_ceil(k_split), k_split };
                // The weight gradient's form (A transposed, f32 out) accumulates into C.
                let accumulate = trans_a && f32_out && i % 3 != 2;
                // The MLP's backward form (neither transposed, 16-bit out) carries on through
                // GeLU's derivative.
                let gelu_grad = !trans_a && !trans_b && !f32_out && !gelu;
                let residual = residual && !accumulate && !gelu_grad;
                let case = Case {
                    trans_a,
                    trans_b,
                    input,
                    bias,
                    gelu,
                    residual,
                    accumulate,
                    gelu_grad,
                    plan: Some(plan),
                };
                if f32_out {
                    run_case::<f32>(device, &k, &mut rng, case, shape, None);
                } else {
                    run_case::<u16>(device, &k, &mut rng, case, shape, None);
                }
                i += 1;
            }
        }
    }
    // The wrapper's own plan, and degenerate sizes: one row, K = 1, K = 0 (the epilogue of 0).
    let case = |plan| Case {
        trans_a: false,
        trans_b: true,
        input: HalfFormat::Bf16,
        bias: true,
        gelu: false,
        residual: false,
        accumulate: false,
        gelu_grad: false,
        plan,
    };
    run_case::<f32>(device, &k, &mut rng, case(None), (150, 100, 72), None);
    run_case::<u16>(device, &k, &mut rng, case(None), (1, 9, 1), None);
    run_case::<f32>(device, &k, &mut rng, case(None), (5, 3, 0), None);
}

/// A plan of `splits` K ranges of `k_split` slices' worth on `config`.
fn split_plan(config: Config, splits: usize, k_split_slices: usize) -> GemmTcPlan {
    GemmTcPlan { config, splits, k_split: k_split_slices * BK }
}

/// Split-K in one launch (each tile's last block sums the partials) against the f64
/// reference: 2 to 8 splits, shapes that divide no tile, both tiles and outputs, the
/// epilogues cycled; the last split's range is short, and with 8 splits empty.
fn gemm_tc_split_k_matches_f64_reference(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("gemm_tc split-k");
    for splits in 2..=8usize {
        let i = splits - 2;
        let (bias, gelu, residual) = (i & 1 != 0, i & 2 != 0, i & 4 != 0);
        let (trans_a, trans_b) = [(true, false), (false, true), (false, false)][i % 3];
        let input = if i % 4 == 3 { HalfFormat::F16 } else { HalfFormat::Bf16 };
        let (m, n, _) = random_shape(&mut rng);
        // One slice per split, the last one short by 1 to 31 elements; 8 splits over 7 slices
        // leave the last one nothing to reduce (its partial is zeros).
        let kk = if splits == 8 { 7 * BK - 5 } else { splits * BK - rng.gen_range(1..BK) };
        let plan = split_plan(CONFIGS[i % 2], splits, 1);
        // f32 outputs accumulate every other time: the last block adds C after the partials.
        let accumulate = i % 2 == 0 && i % 4 != 0;
        let gelu_grad = i == 5;
        let (gelu, residual) = (gelu && !gelu_grad, residual && !accumulate && !gelu_grad);
        let case =
            Case { trans_a, trans_b, input, bias, gelu, residual, accumulate, gelu_grad, plan: Some(plan) };
        if i % 2 == 0 {
            run_case::<f32>(device, &k, &mut rng, case, (m, n, kk), None);
        } else {
            run_case::<u16>(device, &k, &mut rng, case, (m, n, kk), None);
        }
    }
}

/// One workspace for several launches: every launch's last blocks leave the arrival counters
/// 0, so the next launch (another shape and split count that fit) is right without a memset.
fn gemm_tc_split_k_workspace_is_reused(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("gemm_tc workspace");
    let big = split_plan(SMALL, 4, 2);
    let mut ws = GemmTcWorkspace::new(&k, 150, 200, &big).unwrap();
    let case = |plan| Case {
        trans_a: true,
        trans_b: false,
        input: HalfFormat::Bf16,
        bias: true,
        gelu: false,
        residual: false,
        accumulate: false,
        gelu_grad: false,
        plan: Some(plan),
    };
    for (shape, plan) in
        [((150, 200, 250), big), ((150, 200, 230), big), ((70, 130, 90), split_plan(SMALL, 3, 1))]
    {
        assert!(ws.fits(shape.0, shape.1, &plan));
        run_case::<f32>(device, &k, &mut rng, case(plan), shape, Some(&mut ws));
    }
    // A workspace too small for the plan is refused before anything runs.
    let mut small = GemmTcWorkspace::new(&k, 64, 64, &split_plan(SMALL, 2, 1)).unwrap();
    let a = Buffer::from_slice(device, &vec![0u16; 150 * 256]).unwrap();
    let b = Buffer::from_slice(device, &vec![0u16; 256 * 200]).unwrap();
    let mut c = Buffer::<f32>::zeros(device, 150 * 200).unwrap();
    let spec = GemmTc::new(150, 200, 256, HalfFormat::Bf16).with_plan(big);
    let err = launch::gemm_tc_with_workspace(
        &k,
        &mut c.view_mut(..).unwrap(),
        &a.view(..).unwrap(),
        &b.view(..).unwrap(),
        None,
        None::<&trident::runtime::View<f32>>,
        &spec,
        &mut small,
    )
    .unwrap_err();
    assert!(err.to_string().contains("split-K workspace"), "{err}");
}

/// The split-K sum is in split order whichever block of a tile arrives last: the outputs of
/// launches that hand out their blocks forward, reversed and shuffled (and, on a multi-core
/// host, on several workers at once) are bit for bit the same, for both tiles and outputs.
fn gemm_tc_split_k_is_independent_of_block_order(device: &Device) {
    if !matches!(device, Device::Emu) {
        return;
    }
    let k = Kernels::load(device).unwrap();
    for (config, f32_out) in [(SMALL, true), (LARGE, false)] {
        let case = Case {
            trans_a: true,
            trans_b: false,
            input: HalfFormat::Bf16,
            bias: true,
            gelu: true,
            residual: false,
            accumulate: f32_out,
            gelu_grad: false,
            plan: Some(split_plan(config, 6, 1)),
        };
        let shape = (130, 150, 6 * BK - 3);
        let seed: u64 = rng("gemm_tc block order").gen();
        let mut outputs = Vec::new();
        for order in
            [BlockOrder::Forward, BlockOrder::Reverse, BlockOrder::Shuffled(11), BlockOrder::Shuffled(12)]
        {
            // The same data every time: the generator restarts from one seed.
            let mut rng = StdRng::seed_from_u64(seed);
            let previous = set_block_order(order);
            let bits: Vec<u32> = if f32_out {
                run_case::<f32>(device, &k, &mut rng, case, shape, None).iter().map(|v| v.to_bits()).collect()
            } else {
                run_case::<u16>(device, &k, &mut rng, case, shape, None)
                    .iter()
                    .map(|&v| u32::from(v))
                    .collect()
            };
            set_block_order(previous);
            outputs.push((order, bits));
        }
        for (order, bits) in &outputs[1..] {
            let first = bits.iter().zip(&outputs[0].1).position(|(a, b)| a != b);
            assert!(
                first.is_none(),
                "{} {order:?}: the output differs from forward order's at {first:?}: {:?}",
                config.suffix,
                first.map(|i| (bits[i], outputs[0].1[i]))
            );
        }
    }
}

/// Exact counters of one full-tile launch per layout and tile: every `ldmatrix` and `cp.async`
/// request takes one wavefront per 128 bytes (no bank conflict), and the `mma`/`ldmatrix`
/// counts are those of the loop nest.
fn gemm_tc_main_loop_is_conflict_free(device: &Device) {
    if !matches!(device, Device::Emu) {
        return;
    }
    let k = Kernels::load(device).unwrap();
    for config in [LARGE, SMALL] {
        for (trans_a, trans_b) in [(false, true), (false, false), (true, false)] {
            let (m, n, kk) = (config.bm() as usize, config.bn() as usize, 3 * BK);
            let a = Buffer::from_slice(device, &vec![f32_to_bf16(0.5); m * kk]).unwrap();
            let b = Buffer::from_slice(device, &vec![f32_to_bf16(0.25); kk * n]).unwrap();
            let mut c = Buffer::<f32>::uninit(device, m * n).unwrap();
            let mut spec = GemmTc::new(m, n, kk, HalfFormat::Bf16).with_plan(GemmTcPlan {
                config,
                splits: 1,
                k_split: kk,
            });
            if trans_a {
                spec = spec.trans_a();
            }
            if trans_b {
                spec = spec.trans_b();
            }
            launch::gemm_tc(
                &k,
                &mut c.view_mut(..).unwrap(),
                &a.view(..).unwrap(),
                &b.view(..).unwrap(),
                None,
                None,
                &spec,
            )
            .unwrap();
            let s = last_launch_stats().expect("the emulator counted the launch");
            let what = format!("{} trans_a {trans_a} trans_b {trans_b}", config.suffix);
            let warps = u64::from(config.threads() / 32);
            let k_tiles = (kk / BK) as u64;
            assert_eq!(
                s.warp_instructions.mma,
                warps * k_tiles * 64,
                "{what}: 4 x 8 tiles x 2 k16 steps per slice"
            );
            assert_eq!(
                s.warp_instructions.ldmatrix,
                warps * k_tiles * 16,
                "{what}: 8 x4 loads per operand per slice"
            );
            assert_eq!(
                s.shared_loads.requests, s.warp_instructions.ldmatrix,
                "{what}: ldmatrix is the only shared load"
            );
            assert_eq!(
                s.shared_loads.wavefronts * 128,
                s.shared_loads.bytes,
                "{what}: ldmatrix bank conflicts"
            );
            assert_eq!(
                s.shared_stores.wavefronts * 128,
                s.shared_stores.bytes,
                "{what}: cp.async bank conflicts"
            );
            let copies = ((m + n) * kk / 8) as u64;
            assert_eq!(s.shared_stores.bytes, 16 * copies, "{what}: every chunk of A and B copied once");
            // Slice t's copies are waited for min(t, stages - 2) barriers after they were
            // issued: the ring's depth, as the time model reads it.
            let per_slice = copies / k_tiles;
            let mut overlap = [0u64; 4];
            for t in 0..k_tiles {
                overlap[(t as usize).min(config.stages as usize - 2)] += per_slice;
            }
            assert_eq!(s.async_copies_by_overlap, overlap, "{what}: copies by barriers in flight");
            assert!(
                c.to_vec().unwrap().iter().all(|&v| v == (0.5 * 0.25 * kk as f64) as f32),
                "{what}: values"
            );

            // A 16-bit output goes through shared memory: its pair stores and row loads are
            // conflict-free as well, and its global stores are whole 16-byte chunks.
            let mut c16 = Buffer::<u16>::uninit(device, m * n).unwrap();
            let (va, vb) = (a.view(..).unwrap(), b.view(..).unwrap());
            launch::gemm_tc(&k, &mut c16.view_mut(..).unwrap(), &va, &vb, None, None, &spec).unwrap();
            let s = last_launch_stats().expect("the emulator counted the launch");
            assert_eq!(s.shared_loads.requests, warps * (k_tiles * 16 + 16), "{what}: b16 loads");
            assert_eq!(
                s.shared_loads.wavefronts * 128,
                s.shared_loads.bytes,
                "{what}: b16 ldmatrix and row loads"
            );
            assert_eq!(
                s.shared_stores.wavefronts * 128,
                s.shared_stores.bytes,
                "{what}: b16 cp.async and pairs"
            );
            assert_eq!(s.global_stores.bytes_requested, 2 * (m * n) as u64, "{what}: b16 output bytes");
            assert_eq!(
                s.global_stores.sectors * 32,
                s.global_stores.bytes_requested,
                "{what}: whole sectors"
            );
            let want = f32_to_bf16((0.5 * 0.25 * kk as f64) as f32);
            assert!(c16.to_vec().unwrap().iter().all(|&v| v == want), "{what}: b16 values");
        }
    }
}

fn gemm_tc_checks_its_arguments(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let a = Buffer::from_slice(device, &vec![0u16; 64 * 64]).unwrap();
    let mut c = Buffer::from_slice(device, &vec![0f32; 64 * 64]).unwrap();
    let run = |c: &mut Buffer<f32>, spec: GemmTc| {
        let (a, b) = (a.view(..).unwrap(), a.view(..).unwrap());
        launch::gemm_tc::<f32>(&k, &mut c.view_mut(..).unwrap(), &a, &b, None, None, &spec)
    };
    let err = run(&mut c, GemmTc::new(64, 64, 60, HalfFormat::Bf16).trans_b()).unwrap_err();
    assert!(err.to_string().contains("not a multiple of 8"), "{err}");
    let err = run(&mut c, GemmTc::new(64, 64, 64, HalfFormat::Bf16).trans_a().trans_b()).unwrap_err();
    assert!(err.to_string().contains("both transposed"), "{err}");
    let err = run(&mut c, GemmTc::new(64, 72, 64, HalfFormat::F16)).unwrap_err();
    assert!(matches!(err, LaunchError::TooShort { what: "B", .. }), "{err}");
    let plan = GemmTcPlan { config: LARGE, splits: 1, k_split: 32 };
    let err = run(&mut c, GemmTc::new(64, 64, 64, HalfFormat::Bf16).with_plan(plan)).unwrap_err();
    assert!(err.to_string().contains("does not cover"), "{err}");
    // A view starting 8 bytes into its buffer is not 16-byte aligned for cp.async.
    let err = launch::gemm_tc::<f32>(
        &k,
        &mut c.view_mut(..).unwrap(),
        &a.view(4..).unwrap(),
        &a.view(..).unwrap(),
        None,
        None,
        &GemmTc::new(8, 8, 8, HalfFormat::Bf16),
    )
    .unwrap_err();
    assert!(err.to_string().contains("16-byte aligned"), "{err}");
    // C += ... reads C as the residual: another residual is refused.
    let r = Buffer::from_slice(device, &vec![0f32; 64 * 64]).unwrap();
    let err = launch::gemm_tc::<f32>(
        &k,
        &mut c.view_mut(..).unwrap(),
        &a.view(..).unwrap(),
        &a.view(..).unwrap(),
        None,
        Some(&r.view(..).unwrap()),
        &GemmTc::new(64, 64, 64, HalfFormat::Bf16).accumulate(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no residual"), "{err}");
    // GeLU's derivative needs GeLU's input as the residual.
    let err = run(&mut c, GemmTc::new(64, 64, 64, HalfFormat::Bf16).gelu_grad()).unwrap_err();
    assert!(err.to_string().contains("GeLU's input"), "{err}");
}

kernel_tests!(
    gemm_tc_matches_f64_reference,
    gemm_tc_split_k_matches_f64_reference,
    gemm_tc_split_k_workspace_is_reused,
    gemm_tc_split_k_is_independent_of_block_order,
    gemm_tc_main_loop_is_conflict_free,
    gemm_tc_checks_its_arguments
);

#[test]
fn plans_fill_the_gpu() {
    // Large shapes: the large tile, no split.
    for (m, n, k) in [(4096, 4096, 4096), (16384, 2304, 768), (16384, 768, 3072), (16384, 3072, 768)] {
        let p = launch::plan_gemm_tc(m, n, k);
        assert_eq!((p.config, p.splits), (LARGE, 1), "{m}x{n}x{k}");
    }
    // Weight gradients with few output tiles and a long K: split-K, covering K in whole slices.
    for (m, n, k) in [(768, 768, 16384), (64, 64, 8192)] {
        let p = launch::plan_gemm_tc(m, n, k);
        assert!(p.splits > 1, "{m}x{n}x{k}: {p:?}");
        assert_eq!(p.k_split % BK, 0);
        assert!(p.splits * p.k_split >= k && (p.splits - 1) * p.k_split < k, "{p:?}");
    }
}
