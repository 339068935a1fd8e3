//! The `simt` selftest kernels on `Emu` and, where there is one, on `Cuda`, against the same
//! references: shuffles, votes, fast math, atomics, shared memory, `cp.async`, and `mma.sync`
//! with fragments from every `ldmatrix` form. Passing on both is what ties the emulator's
//! semantics (fragment layouts above all) to the hardware's.

use rand::Rng;
use trident_dev_kernels::selftest::{
    HOST_KERNELS, PIPELINE_THREADS, PIPELINE_TILE, WARP_OPS_DYNAMIC_SMEM, WARP_OPS_OUTPUTS, WARP_OPS_THREADS,
};
use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
use trident_runtime::{set_block_order, Arg, BlockOrder, Buffer, Device, LaunchConfig, Module, ModuleSource};
use trident_testkit::{assert_close, kernel_tests, rng, uniform, POISON};

/// The selftest kernels: in the dev module's PTX, with their own host table.
static SELFTEST: &[&[trident_runtime::HostKernel]] = &[HOST_KERNELS];

fn load(device: &Device) -> Module {
    let source = ModuleSource::new("selftest", trident_dev::PTX.unwrap_or_default(), SELFTEST)
        .with_cubins(trident_dev::CUBINS);
    device.load_module(&source).unwrap()
}

fn one_block(threads: u32, dynamic_smem_bytes: u32) -> LaunchConfig {
    LaunchConfig { grid: [1, 1, 1], block: [threads, 1, 1], dynamic_smem_bytes }
}

fn mma(device: &Device) {
    let module = load(device);
    let mut rng = rng("selftest mma");
    for scale in [1.0, 30.0] {
        let a: Vec<u16> = uniform(&mut rng, 256, scale).into_iter().map(f32_to_bf16).collect();
        let b: Vec<u16> = uniform(&mut rng, 128, scale).into_iter().map(f32_to_bf16).collect();
        let c = uniform(&mut rng, 128, scale);
        let (da, db, dc) = (
            Buffer::from_slice(device, &a).unwrap(),
            Buffer::from_slice(device, &b).unwrap(),
            Buffer::from_slice(device, &c).unwrap(),
        );
        let mut d = Buffer::from_slice(device, &[POISON; 512]).unwrap();
        let args = [
            da.view(..).unwrap().arg(),
            db.view(..).unwrap().arg(),
            dc.view(..).unwrap().arg(),
            d.view_mut(..).unwrap().arg_mut(),
        ];
        // SAFETY: the buffers have the sizes selftest_mma documents.
        unsafe { module.function("selftest_mma").unwrap().launch(&one_block(32, 0), &args) }.unwrap();
        let want: Vec<f64> = (0..128)
            .map(|i| {
                let (row, col) = (i / 8, i % 8);
                let dot: f64 = (0..16)
                    .map(|k| f64::from(bf16_to_f32(a[row * 16 + k])) * f64::from(bf16_to_f32(b[k * 8 + col])))
                    .sum();
                dot + f64::from(c[i])
            })
            .collect();
        let got = d.to_vec().unwrap();
        let paths =
            ["ldmatrix_x4 + x2_trans", "ldmatrix_x4_trans + x2", "ldmatrix_x1 + x1_trans", "layout formulas"];
        for (path, name) in paths.iter().enumerate() {
            assert_close(&format!("mma via {name} (scale {scale})"), &got[path * 128..][..128], &want, 1e-5);
        }
    }
}

fn warp_ops(device: &Device) {
    let module = load(device);
    let mut rng = rng("selftest warp ops");
    let n = WARP_OPS_THREADS as usize;
    let x = uniform(&mut rng, n, 1.0);
    let dx = Buffer::from_slice(device, &x).unwrap();
    let mut out = Buffer::from_slice(device, &vec![POISON; n * WARP_OPS_OUTPUTS]).unwrap();
    let mut total = Buffer::from_slice(device, &[0f32]).unwrap();
    let args = [
        dx.view(..).unwrap().arg(),
        out.view_mut(..).unwrap().arg_mut(),
        total.view_mut(..).unwrap().arg_mut(),
    ];
    let cfg = one_block(WARP_OPS_THREADS, WARP_OPS_DYNAMIC_SMEM);
    // SAFETY: the buffers have the sizes selftest_warp_ops documents.
    unsafe { module.function("selftest_warp_ops").unwrap().launch(&cfg, &args) }.unwrap();
    let got = out.to_vec().unwrap();
    let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
    assert_close("global atomic sum", &total.to_vec().unwrap(), &[sum], 1e-5);
    // The GPU's approximate ex2/tanh/rsqrt/lg2 are good to about 2^-11 (tanh) or better.
    let fast_math_tol = if matches!(device, Device::Cuda(_)) { 2e-3 } else { 1e-6 };
    for t in 0..n {
        let (w, lane) = (t / 32 * 32, t % 32);
        let at = |l: usize| f64::from(x[w + l]);
        let warp = &x[w..w + 32];
        let v = f64::from(x[t]);
        let exact = [
            at((lane + 1) % 32),
            if lane >= 1 { at(lane - 1) } else { v },
            if lane + 2 < 32 { at(lane + 2) } else { v },
            at(lane ^ 3),
            at(31 - lane),
            if lane >= 4 { at(lane - 4) } else { v },
            if lane + 5 < 32 { at(lane + 5) } else { v },
            at(lane ^ 16),
            f64::from(u8::from(warp.iter().all(|&y| y > -0.9))),
            f64::from(u8::from(warp.iter().any(|&y| y > 0.9))),
            warp.iter().filter(|&&y| y > 0.0).count() as f64,
        ];
        let row = &got[t * WARP_OPS_OUTPUTS..(t + 1) * WARP_OPS_OUTPUTS];
        assert_close(&format!("thread {t}: shuffles and votes"), &row[..11], &exact, 0.0);
        let fast = [v.exp2(), v.exp(), v.tanh(), 1.0 / (v.abs() + 0.5).sqrt(), (v.abs() + 0.5).log2()];
        assert_close(&format!("thread {t}: fast math"), &row[11..16], &fast, fast_math_tol);
        let rounded = [v.abs().sqrt(), v.mul_add(3.0, 0.25), v.max(0.0), v.min(0.0)];
        assert_close(&format!("thread {t}: sqrt, fma, max, min"), &row[16..20], &rounded, 1e-7);
        let rest = [
            lane as f64,
            f64::from(x[n - 1 - t]),
            f64::from(x[n - 1 - t]) * 2.0,
            f64::from(bf16_to_f32(f32_to_bf16(x[t]))),
            f64::from(WARP_OPS_THREADS * 100 + 1),
        ];
        assert_close(&format!("thread {t}: lane, shared memory, bf16, dims"), &row[20..25], &rest, 0.0);
        assert_close(&format!("thread {t}: shared atomic sum"), &row[25..], &[sum], 1e-5);
    }
}

fn async_copy(device: &Device) {
    let module = load(device);
    let mut rng = rng("selftest cp.async");
    let (threads, tile) = (PIPELINE_THREADS as usize, PIPELINE_TILE as usize);
    let n = rng.gen_range(2 * threads..4 * tile);
    // cp.async needs a 16-byte aligned source; host buffers are only f32-aligned.
    let pad = 3;
    let x = uniform(&mut rng, n + pad, 1.0);
    let dx = Buffer::from_slice(device, &x).unwrap();
    let skip = (0..=pad).find(|&k| dx.view(k..).unwrap().addr() % 16 == 0).expect("a 16-byte aligned start");
    let x = &x[skip..skip + n];
    let mut out = Buffer::from_slice(device, &vec![POISON; 2 * threads]).unwrap();
    let args =
        [dx.view(skip..skip + n).unwrap().arg(), Arg::from(n as u32), out.view_mut(..).unwrap().arg_mut()];
    // SAFETY: the buffers have the sizes selftest_async_copy documents.
    unsafe { module.function("selftest_async_copy").unwrap().launch(&one_block(PIPELINE_THREADS, 0), &args) }
        .unwrap();
    let at = |i: usize| if i < n { f64::from(x[i]) } else { 0.0 };
    let mut want: Vec<f64> = (0..threads)
        .map(|t| (0..n.div_ceil(tile)).map(|k| at(k * tile + t) + at(k * tile + tile - 1 - t)).sum())
        .collect();
    want.extend((0..threads).map(|t| {
        let o = threads - 1 - t;
        at(2 * o) + at(2 * o + 1) + at(o)
    }));
    assert_close(&format!("cp.async pipeline n={n}"), &out.to_vec().unwrap(), &want, 1e-6);
}

/// A "last block" reduction across the grid (`selftest_last_block`: partials, a fence, an
/// ordered atomic count, a fence): the last block sums every block's partial in block order,
/// bit for bit whatever order the blocks run in, and leaves the counter 0 for the next launch.
/// On `Emu`, leaving out either fence is reported as a race between blocks.
fn last_block(device: &Device) {
    let module = load(device);
    let f = module.function("selftest_last_block").unwrap();
    let blocks = 7usize;
    let values: Vec<f32> = (0..32 * blocks).map(|i| (i as f32 * 0.37).sin()).collect();
    let want: Vec<f32> =
        (0..32).map(|t| (0..blocks).fold(0.0f32, |s, b| s + 2.0 * values[32 * b + t])).collect();
    let input = Buffer::from_slice(device, &values).unwrap();
    let mut partial = Buffer::<f32>::uninit(device, 32 * blocks).unwrap();
    let mut counter = Buffer::<u32>::zeros(device, 1).unwrap();
    let mut out = Buffer::from_slice(device, &[POISON; 32]).unwrap();
    let cfg = LaunchConfig { grid: [blocks as u32, 1, 1], block: [32, 1, 1], dynamic_smem_bytes: 0 };
    let mut launch = |out: &mut Buffer<f32>, counter: &mut Buffer<u32>, fences: u32| {
        let args = [
            input.view(..).unwrap().arg(),
            partial.view_mut(..).unwrap().arg_mut(),
            counter.view_mut(..).unwrap().arg_mut(),
            out.view_mut(..).unwrap().arg_mut(),
            fences.into(),
        ];
        // SAFETY: the buffers have the sizes the kernel documents for this grid.
        unsafe { f.launch(&cfg, &args) }
    };
    // Three launches on one counter: each finds it 0, as the one before left it.
    for order in [BlockOrder::Forward, BlockOrder::Reverse, BlockOrder::Shuffled(7)] {
        out.copy_from_slice(&[POISON; 32]).unwrap();
        let previous = set_block_order(order);
        let result = launch(&mut out, &mut counter, 3);
        set_block_order(previous);
        result.unwrap();
        let got = out.to_vec().unwrap();
        assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "{order:?}: {got:?}");
        assert_eq!(counter.to_vec().unwrap(), [0], "{order:?}: the counter is reset");
    }
    if !matches!(device, Device::Emu) {
        return;
    }
    for fences in [0, 1, 2] {
        counter.copy_from_slice(&[0]).unwrap();
        let error = launch(&mut out, &mut counter, fences).unwrap_err().to_string();
        assert!(error.contains("in different blocks"), "fences {fences}: {error}");
    }
}

kernel_tests!(mma, warp_ops, async_copy, last_block);

/// On `Emu` a kernel's accesses through a pointer argument are bounded by the view passed for
/// it, not only by its buffer: `selftest_global_ops` reads 128 floats of `input`, so a view of
/// 64 floats at the start of a larger buffer is refused, naming the parameter and the view.
#[test]
fn emu_bounds_accesses_by_the_view_an_argument_came_from() {
    let device = Device::Emu;
    let module = load(&device);
    let f = module.function("selftest_global_ops").unwrap();
    // 16-byte aligned start: the buffer's storage is aligned for vector loads.
    let input = Buffer::from_slice(&device, &[1f32; 256]).unwrap();
    let mut out = Buffer::from_slice(&device, &[0f32; 224]).unwrap();
    let mut total = Buffer::from_slice(&device, &[0f32; 2]).unwrap();
    let mut launch = |len: usize| {
        let args = [
            input.view(..len).unwrap().arg(),
            out.view_mut(..).unwrap().arg_mut(),
            total.view_mut(..).unwrap().arg_mut(),
        ];
        // SAFETY: under test: the emulator checks every access against the views.
        unsafe { f.launch(&one_block(32, 0), &args) }
    };
    launch(128).unwrap();
    let error = launch(64).unwrap_err().to_string();
    for part in [
        "selftest_global_ops",
        "parameter 0 `input: Global<f32>`",
        "outside the 256-byte view",
        "thread (16, 0, 0)",
    ] {
        assert!(error.contains(part), "no `{part}` in: {error}");
    }
}

/// A buffer allocated uninitialized on `Emu` holds no data until something writes it: a
/// kernel reading it fails (as compute-sanitizer's initcheck reports); after an upload the
/// same launch passes.
#[test]
fn emu_refuses_reads_of_uninitialized_buffers() {
    let device = Device::Emu;
    let module = load(&device);
    let f = module.function("selftest_global_ops").unwrap();
    let mut input = Buffer::<f32>::uninit(&device, 128).unwrap();
    let mut out = Buffer::<f32>::uninit(&device, 224).unwrap();
    let mut total = Buffer::from_slice(&device, &[0f32; 2]).unwrap();
    let mut launch = |input: &Buffer<f32>| {
        let args = [
            input.view(..).unwrap().arg(),
            out.view_mut(..).unwrap().arg_mut(),
            total.view_mut(..).unwrap().arg_mut(),
        ];
        // SAFETY: every view has the lengths the kernel reads and writes.
        unsafe { f.launch(&one_block(32, 0), &args) }
    };
    let error = launch(&input).unwrap_err().to_string();
    for part in ["selftest_global_ops", "thread (0, 0, 0)", "never written", "Buffer<f32>[128]"] {
        assert!(error.contains(part), "no `{part}` in: {error}");
    }
    input.copy_from_slice(&[0.5; 128]).unwrap();
    launch(&input).unwrap();
}
