//! `wgmma` on the emulator: every shape and input type over a core-matrix layout
//! written by the threads and over 128-byte-swizzled tiles a TMA loaded, against a reference;
//! each planted misuse fails naming the place.

use trident_kernels::simt::*;
use trident_simt::{
    AccessKind, EmuError, Fault, L2Promotion, LaunchConfig, OobFill, Swizzle, TensorDataType, TensorMap,
    TensorMapFields,
};

use crate::{lend, ptr, run};

/// bf16 bits of small multiples of 1/4 (exact, and so are their products and sums).
fn value(i: usize) -> u16 {
    let x = ((i * 7 + i / 13) % 13) as f32 - 6.0;
    ((x * 0.25).to_bits() >> 16) as u16
}

fn f(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// How the kernel is broken.
const FINE: u64 = 0;
const NO_PROXY_FENCE: u64 = 1;
const NO_WGMMA_FENCE: u64 = 2;
const READ_BEFORE_WAIT: u64 = 3;

/// Writes a thread's accumulator (N = 2R) to the 64 x N row-major `out`.
fn write_d<const R: usize>(acc: &WgmmaAccumulator<R>, out: *mut f32) {
    let t = thread_idx_x() as usize;
    let (warp, lane) = (t / 32, t % 32);
    for j in 0..R / 4 {
        for v in 0..4 {
            let row = 16 * warp + lane / 4 + 8 * (v / 2);
            let col = 8 * j + 2 * (lane % 4) + v % 2;
            // SAFETY: 64 x 2R outputs.
            unsafe { *out.add(row * 2 * R + col) = acc.get(4 * j + v) };
        }
    }
}

/// 64 x 16 x 16: the threads write A (`args[0]`, 64 x 16) and B (`args[1]`, 16 x 16), both
/// K-major, into 8 x 16-byte core matrices (LBO 128, SBO 256), then one `wgmma`; D to `args[2]`.
fn core_matrices(args: &[u64]) {
    let (a, b, out, plant) = (args[0] as *const u16, args[1] as *const u16, args[2] as *mut f32, args[3]);
    // SAFETY: the launch has 2560 bytes of dynamic shared memory.
    let smem = unsafe { dynamic_shared::<u16>(0, 1280) };
    let t = thread_idx_x() as usize;
    let place = |row: usize, k: usize| ((row / 8) * 256 + (k / 8) * 128 + (row % 8) * 16 + (k % 8) * 2) / 2;
    for i in (t..64 * 16).step_by(128) {
        // SAFETY: 64 x 16 inputs.
        smem.store(place(i / 16, i % 16), unsafe { *a.add(i) });
    }
    for i in (t..16 * 16).step_by(128) {
        // SAFETY: 16 x 16 inputs.
        smem.store(1024 + place(i / 16, i % 16), unsafe { *b.add(i) });
    }
    if plant != NO_PROXY_FENCE {
        fence_proxy_async_shared_cta();
    }
    sync_threads();
    let mut acc = WgmmaAccumulator::<8>::zeroed();
    if plant != NO_WGMMA_FENCE {
        wgmma_fence();
    }
    wgmma_m64n16k16_bf16(
        &mut acc,
        matrix_descriptor(0, 128, 256, 0),
        matrix_descriptor(2048, 128, 256, 0),
        false,
    );
    wgmma_commit_group();
    if plant == READ_BEFORE_WAIT {
        acc.get(0);
    }
    wgmma_wait_group::<0>();
    write_d(&acc, out);
}

fn reference(a: &[u16], b: &[u16], n: usize, k: usize) -> Vec<f32> {
    (0..64 * n).map(|i| (0..k).map(|kk| f(a[(i / n) * k + kk]) * f(b[(i % n) * k + kk])).sum()).collect()
}

fn run_core(plant: u64, threads: u32) -> Result<Vec<f32>, EmuError> {
    let a: Vec<u16> = (0..64 * 16).map(value).collect();
    let b: Vec<u16> = (0..16 * 16).map(|i| value(3 * i + 1)).collect();
    let mut out = vec![f32::NAN; 64 * 16];
    let cfg = LaunchConfig { grid: [1, 1, 1], block: [threads, 1, 1], dynamic_smem_bytes: 2560 };
    run(core_matrices, cfg, &[a.as_ptr() as u64, b.as_ptr() as u64, ptr(&mut out), plant])?;
    assert_eq!(out, reference(&a, &b, 16, 16));
    Ok(out)
}

#[test]
fn wgmma_over_core_matrices_matches_the_reference() {
    run_core(FINE, 128).unwrap();
}

#[test]
fn wgmma_misuses_name_the_place() {
    let error = run_core(NO_PROXY_FENCE, 128).unwrap_err();
    let Some(Fault::AsyncProxyRace { write, read, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!((write.kind, read.kind), (AccessKind::Write, AccessKind::WgmmaRead), "{error}");
    for (plant, what) in
        [(NO_WGMMA_FENCE, "without a wgmma.fence"), (READ_BEFORE_WAIT, "read of a wgmma accumulator")]
    {
        let error = run_core(plant, 128).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error.fault(), Some(Fault::Wgmma { .. })), "{message}");
        assert!(message.contains(what) && message.contains("tests/simt/wgmma.rs"), "{message}");
    }
    let error = run_core(FINE, 64).unwrap_err();
    assert!(error.to_string().contains("whole warpgroups"), "{error}");
}

/// 64 x 64 x 64: thread 0 loads A (`args[0]`'s map) and B (`args[1]`'s) as 64 x 64 tiles with
/// the 128-byte swizzle, then four k-steps of `wgmma` walk the tiles (start address + 32 bytes
/// each, SBO 1024); D to `args[2]`.
fn swizzled_tiles(args: &[u64]) {
    // SAFETY: the test passes TensorMaps that outlive the launch.
    let (map_a, map_b) =
        unsafe { (TensorMapRef::from_address(args[0]), TensorMapRef::from_address(args[1])) };
    let out = args[2] as *mut f32;
    let swizzle = args[3] as u32;
    // SAFETY: the launch has 16392 bytes of dynamic shared memory.
    let (tiles, bars) = unsafe { (dynamic_shared::<u16>(0, 8192), dynamic_shared::<u64>(16384, 1)) };
    let t = thread_idx_x();
    if t == 0 {
        mbarrier_init(bars, 0, 1);
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(bars, 0, 16384);
        // SAFETY: the maps describe lent buffers.
        unsafe {
            tma_load_2d(tiles, 0, map_a, [0, 0], bars, 0);
            tma_load_2d(tiles, 4096, map_b, [0, 0], bars, 0);
        }
    }
    mbarrier_wait_parity(bars, 0, 0);
    let mut acc = WgmmaAccumulator::<32>::zeroed();
    wgmma_fence();
    for ks in 0..4 {
        let desc_a = matrix_descriptor(32 * ks, 16, 1024, swizzle);
        let desc_b = matrix_descriptor(8192 + 32 * ks, 16, 1024, swizzle);
        wgmma_m64n64k16_bf16(&mut acc, desc_a, desc_b, ks > 0);
    }
    wgmma_commit_group();
    wgmma_wait_group::<0>();
    write_d(&acc, out);
}

#[test]
fn wgmma_reads_tma_tiles_in_the_128_byte_swizzle() {
    let a: Vec<u16> = (0..64 * 64).map(value).collect();
    let b: Vec<u16> = (0..64 * 64).map(|i| value(5 * i + 2)).collect();
    let (_la, _lb) = (lend(&a), lend(&b));
    let map = |data: &[u16]| {
        TensorMap::new(&TensorMapFields {
            data_type: TensorDataType::Bf16,
            global_address: data.as_ptr() as u64,
            global_dims: &[64, 64],
            global_strides: &[128],
            box_dims: &[64, 64],
            element_strides: &[1, 1],
            swizzle: Swizzle::B128,
            l2_promotion: L2Promotion::B128,
            oob_fill: OobFill::Zero,
        })
        .unwrap()
    };
    let (ma, mb) = (map(&a), map(&b));
    let want = reference(&a, &b, 64, 64);
    let cfg = LaunchConfig { grid: [1, 1, 1], block: [128, 1, 1], dynamic_smem_bytes: 16392 };
    let run_with = |swizzle: u64| {
        let mut out = vec![f32::NAN; 64 * 64];
        let args = [std::ptr::from_ref(&ma) as u64, std::ptr::from_ref(&mb) as u64, ptr(&mut out), swizzle];
        let stats = run(swizzled_tiles, cfg, &args).unwrap();
        (out, stats)
    };
    let (out, stats) = run_with(1);
    assert_eq!(out, want);
    // Four wgmma per thread, one per warp each; 64 x 64 x 16 multiply-adds each.
    assert_eq!((stats.thread_instructions.wgmma, stats.warp_instructions.wgmma), (4 * 128, 4 * 4));
    assert_eq!(stats.wgmma_macs, 4 * 64 * 64 * 16);
    // A descriptor with the wrong swizzle reads the tiles in the wrong order.
    let (out, _) = run_with(0);
    assert_ne!(out, want, "a descriptor without the tiles' swizzle must not reproduce the product");
}

/// A 64 x N x 16 product of the core-matrix layout through one wrapper: the threads write A
/// (64 x 16) and B (N x 16), K-major, as 8 x 16-byte core matrices (LBO 128, SBO 256), then one
/// `wgmma` of the wrapper's shape; D to `args[2]`. Declared once per wrapper, so that every
/// shape and input type the API offers runs against the reference.
macro_rules! core_product {
    ($name:ident, $wgmma:ident, n = $n:literal, regs = $r:literal) => {
        fn $name(args: &[u64]) {
            let (a, b, out) = (args[0] as *const u16, args[1] as *const u16, args[2] as *mut f32);
            // SAFETY: the launch has 2048 + 32 N bytes of dynamic shared memory (A 2048, B 32 N).
            let smem = unsafe { dynamic_shared::<u16>(0, 1024 + 16 * $n) };
            let t = thread_idx_x() as usize;
            let place =
                |row: usize, k: usize| ((row / 8) * 256 + (k / 8) * 128 + (row % 8) * 16 + (k % 8) * 2) / 2;
            for i in (t..64 * 16).step_by(128) {
                // SAFETY: 64 x 16 inputs.
                smem.store(place(i / 16, i % 16), unsafe { *a.add(i) });
            }
            for i in (t..$n * 16).step_by(128) {
                // SAFETY: N x 16 inputs.
                smem.store(1024 + place(i / 16, i % 16), unsafe { *b.add(i) });
            }
            fence_proxy_async_shared_cta();
            sync_threads();
            let mut acc = WgmmaAccumulator::<$r>::zeroed();
            wgmma_fence();
            $wgmma(&mut acc, matrix_descriptor(0, 128, 256, 0), matrix_descriptor(2048, 128, 256, 0), false);
            wgmma_commit_group();
            wgmma_wait_group::<0>();
            write_d(&acc, out);
        }
    };
}

core_product!(product_n8_bf16, wgmma_m64n8k16_bf16, n = 8, regs = 4);
core_product!(product_n16_bf16, wgmma_m64n16k16_bf16, n = 16, regs = 8);
core_product!(product_n32_bf16, wgmma_m64n32k16_bf16, n = 32, regs = 16);
core_product!(product_n64_bf16, wgmma_m64n64k16_bf16, n = 64, regs = 32);
core_product!(product_n128_bf16, wgmma_m64n128k16_bf16, n = 128, regs = 64);
core_product!(product_n256_bf16, wgmma_m64n256k16_bf16, n = 256, regs = 128);
core_product!(product_n8_f16, wgmma_m64n8k16_f16, n = 8, regs = 4);
core_product!(product_n16_f16, wgmma_m64n16k16_f16, n = 16, regs = 8);
core_product!(product_n32_f16, wgmma_m64n32k16_f16, n = 32, regs = 16);
core_product!(product_n64_f16, wgmma_m64n64k16_f16, n = 64, regs = 32);
core_product!(product_n128_f16, wgmma_m64n128k16_f16, n = 128, regs = 64);
core_product!(product_n256_f16, wgmma_m64n256k16_f16, n = 256, regs = 128);

#[test]
fn every_wgmma_shape_and_input_type_matches_the_reference() {
    type Kernel = fn(&[u64]);
    let cases: [(Kernel, usize, bool); 12] = [
        (product_n8_bf16, 8, false),
        (product_n16_bf16, 16, false),
        (product_n32_bf16, 32, false),
        (product_n64_bf16, 64, false),
        (product_n128_bf16, 128, false),
        (product_n256_bf16, 256, false),
        (product_n8_f16, 8, true),
        (product_n16_f16, 16, true),
        (product_n32_f16, 32, true),
        (product_n64_f16, 64, true),
        (product_n128_f16, 128, true),
        (product_n256_f16, 256, true),
    ];
    for (kernel, n, is_f16) in cases {
        // The same values (multiples of 1/4, exact in both formats) in the input type's bits.
        let bits = |i: usize| {
            let x = f(value(i));
            if is_f16 {
                half::f16::from_f32(x).to_bits()
            } else {
                value(i)
            }
        };
        let a: Vec<u16> = (0..64 * 16).map(bits).collect();
        let b: Vec<u16> = (0..n * 16).map(|i| bits(3 * i + 1)).collect();
        let (a_bf16, b_bf16): (Vec<u16>, Vec<u16>) =
            ((0..64 * 16).map(value).collect(), (0..n * 16).map(|i| value(3 * i + 1)).collect());
        let mut out = vec![f32::NAN; 64 * n];
        let cfg =
            LaunchConfig { grid: [1, 1, 1], block: [128, 1, 1], dynamic_smem_bytes: 2048 + 32 * n as u32 };
        run(kernel, cfg, &[a.as_ptr() as u64, b.as_ptr() as u64, ptr(&mut out)]).unwrap();
        assert_eq!(out, reference(&a_bf16, &b_bf16, n, 16), "N = {n}, f16 {is_f16}");
    }
}
