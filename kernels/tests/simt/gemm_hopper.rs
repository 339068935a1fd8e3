//! The Hopper GEMM (`trident_kernels::gemm_hopper`) on the emulator: shapes that divide no
//! tile against an f64 reference, output poisoned with NaN first, with the epilogue's
//! fusions, its `wgmma` and TMA traffic counted exactly; each planted protocol bug fails
//! naming the place.

use trident_kernels::gemm_hopper::{self, plant, Shape, BK, BM, BN, SMEM_BYTES, STAGE_BYTES, THREADS};
use trident_kernels::gemm_tc::{Epilogue, BIAS, GELU, RESIDUAL};
use trident_kernels::simt::{Global, GlobalMut, TensorMapRef};
use trident_simt::{
    launch_with_attributes, AccessKind, BlockSample, EmuError, Fault, HostKernel, KernelArg,
    KernelAttributes, L2Promotion, LaunchConfig, LaunchStats, OobFill, Swizzle, TensorDataType, TensorMap,
    TensorMapFields,
};

use crate::lend;

/// Launches `kernel` with the opt-in to [`SMEM_BYTES`] of dynamic shared memory (as the
/// launcher sets `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
///
/// # Safety
///
/// `args` are `kernel`'s parameters: lent buffers, maps that outlive the launch, sizes.
unsafe fn launch(kernel: &HostKernel, blocks: u32, args: &[u64]) -> Result<LaunchStats, EmuError> {
    let cfg = LaunchConfig { grid: [blocks, 1, 1], block: [THREADS, 1, 1], dynamic_smem_bytes: SMEM_BYTES };
    let attributes = KernelAttributes { max_dynamic_smem_bytes: Some(SMEM_BYTES), ..Default::default() };
    // SAFETY: forwarded from the caller.
    unsafe { launch_with_attributes(kernel, &cfg, &attributes, args, &[], BlockSample::All) }
}

/// A reproducible value in [-1, 1), rounded to bf16 (bits).
fn bf16_value(seed: u64, i: usize) -> u16 {
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    let v = (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
    half::bf16::from_f32(v).to_bits()
}

fn widen(bits: u16) -> f64 {
    f64::from(half::bf16::from_bits(bits).to_f32())
}

/// The tensor map of a row-major `rows x k` bf16 operand with leading dimension `ld`, as the
/// kernel expects it: box 64 of K by `box_rows`, 128-byte swizzle, zero fill.
fn operand_map(data: &[u16], rows: usize, k: usize, ld: usize, box_rows: usize) -> TensorMap {
    TensorMap::new(&TensorMapFields {
        data_type: TensorDataType::Bf16,
        global_address: data.as_ptr() as u64,
        global_dims: &[k as u64, rows as u64],
        global_strides: &[(ld * 2) as u64],
        box_dims: &[BK as u32, box_rows as u32],
        element_strides: &[1, 1],
        swizzle: Swizzle::B128,
        l2_promotion: L2Promotion::B256,
        oob_fill: OobFill::Zero,
    })
    .unwrap()
}

/// One problem: operands, bias, residual and the flags.
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    a: Vec<u16>,
    b: Vec<u16>,
    bias: Vec<f32>,
    residual: Vec<f32>,
    flags: u32,
}

impl Problem {
    fn new(m: usize, n: usize, k: usize, flags: u32) -> Problem {
        Problem {
            m,
            n,
            k,
            a: (0..m * k).map(|i| bf16_value(1, i)).collect(),
            b: (0..n * k).map(|i| bf16_value(2, i)).collect(),
            bias: (0..n).map(|i| widen(bf16_value(3, i)) as f32).collect(),
            residual: (0..m * n).map(|i| widen(bf16_value(4, i)) as f32).collect(),
            flags,
        }
    }

    /// The f64 reference of element (row, col) and the sum of |products| that bounds the
    /// rounding of the f32 accumulation.
    fn reference(&self, row: usize, col: usize) -> (f64, f64) {
        let (mut dot, mut scale) = (0.0, 0.0);
        for kk in 0..self.k {
            let p = widen(self.a[row * self.k + kk]) * widen(self.b[col * self.k + kk]);
            dot += p;
            scale += p.abs();
        }
        let mut v = dot;
        if self.flags & BIAS != 0 {
            v += f64::from(self.bias[col]);
        }
        if self.flags & GELU != 0 {
            v = 0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh());
        }
        if self.flags & RESIDUAL != 0 {
            v += f64::from(self.residual[row * self.n + col]);
        }
        (v, scale)
    }

    /// The tiles of the problem.
    fn tiles(&self) -> usize {
        self.m.div_ceil(BM) * self.n.div_ceil(BN)
    }
}

/// The kernel with a plant: decodes the entries' arguments and runs `gemm_block`.
fn planted<const PLANT: u32>(args: &[u64]) {
    let c = <GlobalMut<f32> as KernelArg>::from_arg(args[0], 0);
    let bias = <Global<f32> as KernelArg>::from_arg(args[3], 3);
    let residual = <Global<f32> as KernelArg>::from_arg(args[4], 4);
    let (m, n, k) = (args[5] as usize, args[6] as usize, args[7] as usize);
    let e = Epilogue {
        c,
        ldc: args[8] as usize,
        bias,
        residual,
        ldr: args[9] as usize,
        flags: args[10] as u32,
        m,
        n,
    };
    // SAFETY: the test passes TensorMaps of lent buffers that outlive the launch, and lends C,
    // the bias and the residual.
    unsafe {
        gemm_hopper::gemm_block::<f32, PLANT>(
            TensorMapRef::from_address(args[1]),
            TensorMapRef::from_address(args[2]),
            Shape { m, n, k },
            e,
        )
    }
}

/// Runs the f32-output kernel (or `kernel`, a planted copy of it) on `p` with a grid of
/// `blocks`; returns C.
fn run_f32(
    p: &Problem,
    blocks: u32,
    kernel: Option<fn(&[u64])>,
) -> Result<(Vec<f32>, LaunchStats), EmuError> {
    let mut c = vec![f32::NAN; p.m * p.n];
    let (ma, mb) = (operand_map(&p.a, p.m, p.k, p.k, BM), operand_map(&p.b, p.n, p.k, p.k, BN));
    let _lent = (lend(&p.a), lend(&p.b), lend(&p.bias), lend(&p.residual), lend(&c));
    let args = [
        c.as_mut_ptr() as u64,
        std::ptr::from_ref(&ma) as u64,
        std::ptr::from_ref(&mb) as u64,
        p.bias.as_ptr() as u64,
        p.residual.as_ptr() as u64,
        p.m as u64,
        p.n as u64,
        p.k as u64,
        p.n as u64,
        p.n as u64,
        u64::from(p.flags),
    ];
    let planted;
    let kernel = match kernel {
        Some(entry) => {
            planted = HostKernel { name: "planted", params: &[], param_names: &[], entry };
            &planted
        }
        None => &gemm_hopper::HOST_KERNELS[0],
    };
    // SAFETY: the words are the kernel's parameters: lent buffers, maps that outlive the
    // launch, and the sizes they hold.
    let stats = unsafe { launch(kernel, blocks, &args)? };
    drop(_lent);
    Ok((c, stats))
}

/// Checks C against the reference; `rel` is the output's own rounding (0 for f32).
fn check(p: &Problem, c: &[f32], rel: f64, what: &str) {
    for row in 0..p.m {
        for col in 0..p.n {
            let got = f64::from(c[row * p.n + col]);
            let (want, scale) = p.reference(row, col);
            let tol = 1e-5 * (scale + 1.0) + rel * want.abs();
            assert!(
                (got - want).abs() <= tol,
                "{what}: C[{row}, {col}] = {got}, want {want} (tolerance {tol})"
            );
        }
    }
}

/// `wgmma` warp instructions of a launch: 4 per slice per consumer warp (2 warpgroups of 4).
fn wgmma_warp_instructions(p: &Problem) -> u64 {
    (p.tiles() * p.k.div_ceil(BK) * 4 * 8) as u64
}

#[test]
fn the_hopper_gemm_matches_an_f64_reference_on_shapes_that_divide_no_tile() {
    // (M, N, K, flags, blocks): K tails (136 = 2 x 64 + 8), odd N, a ring that wraps inside
    // a tile (K = 520: 9 slices through 4 stages), persistent blocks walking several tiles.
    for (m, n, k, flags, blocks) in [
        (200, 300, 136, BIAS, 2),
        (64, 45, 8, 0, 1),
        (100, 260, 520, BIAS | GELU, 1),
        (130, 520, 72, RESIDUAL, 4),
    ] {
        let p = Problem::new(m, n, k, flags);
        let (c, stats) = run_f32(&p, blocks, None).unwrap();
        check(&p, &c, 0.0, &format!("{m} x {n} x {k}"));
        assert_eq!(stats.warp_instructions.wgmma, wgmma_warp_instructions(&p), "{m} x {n} x {k}");
        // Two TMA loads per slice of every tile, each landing a whole stage (fill included);
        // the in-bounds bytes read are each tile's A row panel and B column panel, once.
        let slices = (p.tiles() * k.div_ceil(BK)) as u64;
        let (tiles_m, tiles_n) = (m.div_ceil(BM) as u64, n.div_ceil(BN) as u64);
        assert_eq!(stats.tma_loads.requests, 2 * slices, "{m} x {n} x {k}");
        assert_eq!(stats.tma_shared_bytes, slices * STAGE_BYTES as u64, "{m} x {n} x {k}");
        let panels = 2 * k as u64 * (m as u64 * tiles_n + n as u64 * tiles_m);
        assert_eq!(stats.tma_loads.bytes_requested, panels, "{m} x {n} x {k}");
        // The tensor pipe's work: every tile's full 128 x 256 x 64 slices, padding included.
        assert_eq!(stats.wgmma_macs, slices * (BM * BN * BK) as u64, "{m} x {n} x {k}");
    }
}

#[test]
fn the_bf16_output_applies_bias_gelu_and_residual() {
    let p = Problem::new(150, 270, 88, BIAS | GELU | RESIDUAL);
    let residual: Vec<u16> = p.residual.iter().map(|&r| half::bf16::from_f32(r).to_bits()).collect();
    let mut c = vec![0x7FC0u16; p.m * p.n];
    let (ma, mb) = (operand_map(&p.a, p.m, p.k, p.k, BM), operand_map(&p.b, p.n, p.k, p.k, BN));
    let _lent = (lend(&p.a), lend(&p.b), lend(&p.bias), lend(&residual), lend(&c));
    let args = [
        c.as_mut_ptr() as u64,
        std::ptr::from_ref(&ma) as u64,
        std::ptr::from_ref(&mb) as u64,
        p.bias.as_ptr() as u64,
        residual.as_ptr() as u64,
        p.m as u64,
        p.n as u64,
        p.k as u64,
        p.n as u64,
        p.n as u64,
        u64::from(p.flags),
    ];
    // SAFETY: as in `run_f32`.
    unsafe { launch(&gemm_hopper::HOST_KERNELS[1], 2, &args) }.unwrap();
    drop(_lent);
    assert_eq!(gemm_hopper::HOST_KERNELS[1].name, "gemm_hopper_bf16_nt_b16");
    let c: Vec<f32> = c.iter().map(|&b| half::bf16::from_bits(b).to_f32()).collect();
    // bf16 output: half an ulp of 2^-8 relative.
    check(&p, &c, 1.0 / 256.0, "bf16 output");
}

#[test]
fn refilling_a_stage_before_the_consumers_released_it_is_refused() {
    let p = Problem::new(100, 260, 520, 0);
    let error = run_f32(&p, 1, Some(planted::<{ plant::NO_EMPTY_WAIT }>)).unwrap_err();
    let message = error.to_string();
    // A consumer warpgroup's wgmma read of stage 0 (reported as a read by the thread that
    // completed the warpgroup's instruction), then the producer's TMA refill of it, which
    // waited for no release.
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{message}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Read, AccessKind::TmaLoad), "{message}");
    assert_eq!(later.thread.0[0], 0, "the producer is thread 0: {message}");
    assert!(earlier.thread.0[0] >= 128, "a consumer read it: {message}");
    for site in [earlier.site, later.site] {
        assert!(site.file().ends_with("gemm_hopper/mod.rs"), "names the kernel's lines: {message}");
    }
}

#[test]
fn reading_the_accumulator_before_wait_group_is_refused() {
    let p = Problem::new(64, 45, 8, 0);
    let error = run_f32(&p, 1, Some(planted::<{ plant::READ_BEFORE_WAIT }>)).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error.fault(), Some(Fault::Wgmma { .. })), "{message}");
    assert!(
        message.contains("read of a wgmma accumulator") && message.contains("gemm_hopper/mod.rs"),
        "{message}"
    );
}

#[test]
fn padding_past_k_is_never_read_and_surplus_blocks_do_nothing() {
    // A and B with leading dimension K + 24, the padding NaN: the maps' K bound makes TMA fill
    // the last slice's tail with zeros instead of reading it. A grid of 5 blocks for 2 tiles:
    // 3 blocks find no tile and leave.
    let p = Problem::new(70, 300, 40, BIAS);
    let ld = p.k + 24;
    let pad = |x: &[u16], rows: usize| -> Vec<u16> {
        (0..rows * ld).map(|i| if i % ld < p.k { x[(i / ld) * p.k + i % ld] } else { 0x7FC0 }).collect()
    };
    let (a, b) = (pad(&p.a, p.m), pad(&p.b, p.n));
    let mut c = vec![f32::NAN; p.m * p.n];
    let (ma, mb) = (operand_map(&a, p.m, p.k, ld, BM), operand_map(&b, p.n, p.k, ld, BN));
    let _lent = (lend(&a), lend(&b), lend(&p.bias), lend(&p.residual), lend(&c));
    let args = [
        c.as_mut_ptr() as u64,
        std::ptr::from_ref(&ma) as u64,
        std::ptr::from_ref(&mb) as u64,
        p.bias.as_ptr() as u64,
        p.residual.as_ptr() as u64,
        p.m as u64,
        p.n as u64,
        p.k as u64,
        p.n as u64,
        p.n as u64,
        u64::from(p.flags),
    ];
    // SAFETY: as in `run_f32`.
    let stats = unsafe { launch(&gemm_hopper::HOST_KERNELS[0], 5, &args) }.unwrap();
    drop(_lent);
    check(&p, &c, 0.0, "padded operands");
    assert_eq!(stats.warp_instructions.wgmma, wgmma_warp_instructions(&p));
}
