//! The Hopper GEMM (`trident_kernels::gemm_hopper`): the tensor-core GEMM's bf16 `A B^T`
//! (a linear layer's forward, [`GemmTc`] with `trans_b`) on `wgmma` and TMA, for compute
//! capability 9.0, where [`gemm_tc()`](super::gemm_tc()) hands such GEMMs to it
//! ([`dispatches_to_gemm_hopper`]). Same views, checks and epilogue (bias, GeLU, residual,
//! accumulate, GeLU gradient) as the tensor-core GEMM; no split-K (the grid is persistent).
//!
//! The operands reach the kernel as tensor maps with the fields of the driver's
//! `cuTensorMapEncodeTiled`, built here on the host ([`operand_map_fields`]): bf16, the
//! stored `rows x K` matrix innermost-K, boxes of 64 x 128 (A) and 64 x 256 (B), the 128-byte
//! swizzle, zero fill out of bounds. They are checked by `trident_simt::TensorMap::new` (the
//! driver's rules, naming a broken field); on `Cuda` the driver encodes them and they are
//! uploaded (the kernel reads them from global memory), on `Emu` the kernel reads the checked
//! maps themselves.

use trident_kernels::gemm_hopper::{self, BK, BM, BN, SMEM_BYTES, THREADS};
use trident_kernels::trident_simt::{
    L2Promotion, OobFill, Swizzle, TensorDataType, TensorMap, TensorMapFields,
};
use trident_runtime::{Buffer, Device, LaunchConfig, View, ViewMut};

use super::gemm_tc::{check_gemm, Checked, GemmTc, GemmTcOutput};
use super::{to_u32, HalfFormat, Kernels, LaunchError, Result, Transpose};

const KERNEL: &str = "gemm_hopper";

/// SMs the persistent grid covers where the device cannot say (`Emu`): an H100 SXM's.
pub const EMU_SMS: usize = 132;

/// Whether `spec` is a GEMM the Hopper kernel computes: bf16 inputs, A stored `m x k` and B
/// `n x k` (a linear layer's forward), and `k > 0` (a tensor map has no empty dimension).
pub fn gemm_hopper_supports(spec: &GemmTc) -> bool {
    spec.input == HalfFormat::Bf16
        && spec.trans_a == Transpose::No
        && spec.trans_b == Transpose::Yes
        && spec.k > 0
}

/// The variable that, set to `0`, keeps [`gemm_tc()`](super::gemm_tc()) on the tensor-core
/// GEMM on Hopper too (to compare the two on one GPU, or to step around the Hopper kernel).
pub const GEMM_HOPPER_VAR: &str = "TRIDENT_GEMM_HOPPER";

/// Whether a value of [`GEMM_HOPPER_VAR`] leaves the dispatch on: anything but `0`, or unset.
fn dispatch_allowed(value: Option<&str>) -> bool {
    value.is_none_or(|v| v.trim() != "0")
}

/// Whether [`gemm_tc()`](super::gemm_tc()) on `device` runs `spec` on the Hopper kernel: a
/// `Cuda` device of compute capability 9.0 (where the sm_90a module is loaded), a GEMM it
/// supports ([`gemm_hopper_supports`]), no fixed tensor-core plan, and [`GEMM_HOPPER_VAR`]
/// not `0` (read once per process).
pub fn dispatches_to_gemm_hopper(device: &Device, spec: &GemmTc) -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let hopper = matches!(device, Device::Cuda(gpu) if crate::kernels::uses_sm90a(gpu.compute_capability()));
    hopper
        && spec.plan.is_none()
        && gemm_hopper_supports(spec)
        && *ALLOWED.get_or_init(|| dispatch_allowed(std::env::var(GEMM_HOPPER_VAR).ok().as_deref()))
}

/// The fields of the tensor map of a stored `rows x k` bf16 operand with leading dimension
/// `ld` at `address`, in boxes of 64 (K) x `box_rows`, as the kernel reads it (see the module
/// documentation).
pub fn operand_map_fields<'a>(
    address: u64,
    rows: usize,
    k: usize,
    ld: usize,
    dims: &'a mut [u64; 2],
    strides: &'a mut [u64; 1],
    box_rows: usize,
) -> TensorMapFields<'a> {
    *dims = [k as u64, rows as u64];
    *strides = [(ld * 2) as u64];
    TensorMapFields {
        data_type: TensorDataType::Bf16,
        global_address: address,
        global_dims: dims,
        global_strides: strides,
        box_dims: if box_rows == BM { &[BK as u32, BM as u32] } else { &[BK as u32, BN as u32] },
        element_strides: &[1, 1],
        swizzle: Swizzle::B128,
        l2_promotion: L2Promotion::B256,
        oob_fill: OobFill::Zero,
    }
}

/// Runs `spec` on the Hopper kernel: `c = epilogue(a b^T)` as [`gemm_tc()`](super::gemm_tc())
/// computes it, with a persistent grid of at most one block per SM. Checks the views as the
/// tensor-core GEMM does, and the GEMM against [`gemm_hopper_supports`].
pub fn gemm_hopper<O: GemmTcOutput>(
    k: &Kernels,
    c: &mut ViewMut<O>,
    a: &View<u16>,
    b: &View<u16>,
    bias: Option<&View<f32>>,
    residual: Option<&View<O>>,
    spec: &GemmTc,
) -> Result<()> {
    let checked = check_gemm(k, c, a, b, bias, residual, spec)?;
    if !gemm_hopper_supports(spec) {
        return Err(LaunchError::Shape {
            kernel: KERNEL,
            what: format!(
                "the Hopper GEMM computes bf16 A (m x k) times B^T (B stored n x k) with k > 0, not \
                 {:?} with A transposed {:?}, B transposed {:?}, k = {}",
                spec.input, spec.trans_a, spec.trans_b, spec.k
            ),
        });
    }
    if spec.m == 0 || spec.n == 0 {
        return Ok(());
    }
    launch(k, c, a, b, bias, residual, spec, &checked)
}

/// The launch, once [`check_gemm`] passed and the GEMM is one the kernel computes.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch<O: GemmTcOutput>(
    k: &Kernels,
    c: &mut ViewMut<O>,
    a: &View<u16>,
    b: &View<u16>,
    bias: Option<&View<f32>>,
    residual: Option<&View<O>>,
    spec: &GemmTc,
    checked: &Checked,
) -> Result<()> {
    let Checked { lda, ldb, ldc, flags } = *checked;
    let (mut dims_a, mut dims_b, mut strides_a, mut strides_b) = ([0; 2], [0; 2], [0; 1], [0; 1]);
    let fields_a = operand_map_fields(a.addr(), spec.m, spec.k, lda, &mut dims_a, &mut strides_a, BM);
    let fields_b = operand_map_fields(b.addr(), spec.n, spec.k, ldb, &mut dims_b, &mut strides_b, BN);
    let bad_map = |what: &str, e: trident_kernels::trident_simt::Fault| LaunchError::Shape {
        kernel: KERNEL,
        what: format!("the tensor map of {what}: {e}"),
    };
    let map_a = TensorMap::new(&fields_a).map_err(|e| bad_map("A", e))?;
    let map_b = TensorMap::new(&fields_b).map_err(|e| bad_map("B", e))?;
    let tiles = spec.m.div_ceil(BM) * spec.n.div_ceil(BN);
    let (sms, uploaded) = match k.device() {
        Device::Cuda(gpu) => {
            let mut words = gpu.encode_tensor_map(&fields_a)?.to_vec();
            words.extend_from_slice(&gpu.encode_tensor_map(&fields_b)?);
            // Uploaded on the default stream; the launch's stream waits for it.
            let maps = Buffer::from_slice(k.device(), &words)?;
            k.after_default_stream()?;
            (gpu.sm_count()?, Some(maps))
        }
        _ => (EMU_SMS, None),
    };
    let (arg_a, arg_b) = match &uploaded {
        // A CUtensorMap is 16 words: A's at the start, B's after it.
        Some(maps) => {
            let base = maps.view(..)?.addr();
            (base, base + 128)
        }
        // The emulator's kernels read the checked maps, which outlive its (synchronous) launch.
        None => (std::ptr::from_ref(&map_a) as u64, std::ptr::from_ref(&map_b) as u64),
    };
    let cfg = LaunchConfig {
        grid: [to_u32("blocks", tiles.min(sms))?, 1, 1],
        block: [THREADS, 1, 1],
        dynamic_smem_bytes: SMEM_BYTES,
    };
    let name = format!("gemm_hopper_bf16_nt_{}", O::NAME);
    let name = gemm_hopper::KERNEL_NAMES
        .iter()
        .copied()
        .find(|k| *k == name)
        .ok_or_else(|| LaunchError::Shape { kernel: KERNEL, what: format!("no kernel {name} is built") })?;
    let args = [
        c.arg_mut(),
        arg_a.into(),
        arg_b.into(),
        bias.map_or(trident_runtime::Arg::null::<f32>(), |v| v.arg()),
        match residual {
            Some(v) => v.arg(),
            // C as the residual: each element is read by the thread that writes it, before it
            // writes it.
            None if spec.accumulate => c.as_view().arg(),
            None => trident_runtime::Arg::null::<O>(),
        },
        to_u32("m", spec.m)?.into(),
        to_u32("n", spec.n)?.into(),
        to_u32("k", spec.k)?.into(),
        to_u32("ldc", ldc)?.into(),
        to_u32("ldr", ldc)?.into(),
        flags.into(),
    ];
    // SAFETY: the maps describe A and B as checked (rows of `ld` elements, 16-byte aligned,
    // within their views), so every TMA box reads inside them or is filled; C, the bias and
    // the residual were checked against m, n and ldc.
    unsafe { k.launch(name, &cfg, &args)? };
    if uploaded.is_some() {
        // The maps are freed on the default stream when dropped: after the launch.
        k.before_default_stream()?;
    }
    drop(uploaded);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};

    /// Reproducible bf16 values in [-1, 1).
    fn values(seed: u64, n: usize) -> Vec<u16> {
        (0..n as u64)
            .map(|i| {
                let x =
                    (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                f32_to_bf16(((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
            })
            .collect()
    }

    #[test]
    fn the_wrapper_runs_the_hopper_gemm_on_emu_with_the_tensor_cores_epilogue() {
        let (m, n, kk) = (136, 300, 80);
        let device = Device::Emu;
        let k = Kernels::load(&device).unwrap();
        let (a, b) = (values(1, m * kk), values(2, n * kk));
        let bias: Vec<f32> = (0..n).map(|i| i as f32 / n as f32 - 0.5).collect();
        let (ab, bb, biasb) = (
            Buffer::from_slice(&device, &a).unwrap(),
            Buffer::from_slice(&device, &b).unwrap(),
            Buffer::from_slice(&device, &bias).unwrap(),
        );
        let mut c = Buffer::from_slice(&device, &vec![f32::NAN; m * n]).unwrap();
        let spec = GemmTc::new(m, n, kk, HalfFormat::Bf16).trans_b();
        let (av, bv, biasv) = (ab.view(..).unwrap(), bb.view(..).unwrap(), biasb.view(..).unwrap());
        gemm_hopper(&k, &mut c.view_mut(..).unwrap(), &av, &bv, Some(&biasv), None, &spec).unwrap();
        assert_eq!(k.launch_counts().get("gemm_hopper_bf16_nt_f32"), Some(&1));
        let got = c.to_vec().unwrap();
        for row in 0..m {
            for col in 0..n {
                let (mut want, mut scale) = (f64::from(bias[col]), 1.0);
                for x in 0..kk {
                    let p = f64::from(bf16_to_f32(a[row * kk + x])) * f64::from(bf16_to_f32(b[col * kk + x]));
                    want += p;
                    scale += p.abs();
                }
                let g = f64::from(got[row * n + col]);
                assert!((g - want).abs() <= 1e-5 * scale, "C[{row}, {col}] = {g}, want {want}");
            }
        }
        // What it does not compute is refused, naming the kernel.
        let f16 = GemmTc::new(m, n, kk, HalfFormat::F16).trans_b();
        let error = gemm_hopper(&k, &mut c.view_mut(..).unwrap(), &av, &bv, None, None, &f16).unwrap_err();
        assert!(error.to_string().contains("Hopper GEMM computes bf16"), "{error}");
    }

    #[test]
    fn only_bf16_forward_gemms_are_supported_and_emu_never_dispatches() {
        let nt = GemmTc::new(8, 8, 8, HalfFormat::Bf16).trans_b();
        assert!(gemm_hopper_supports(&nt));
        assert!(!gemm_hopper_supports(&GemmTc::new(8, 8, 8, HalfFormat::Bf16)));
        assert!(!gemm_hopper_supports(&GemmTc::new(8, 8, 8, HalfFormat::F16).trans_b()));
        assert!(!gemm_hopper_supports(&GemmTc::new(8, 8, 0, HalfFormat::Bf16).trans_b()));
        // Only a capability 9.0 GPU loads the sm_90a module: the emulator runs gemm_tc's own.
        assert!(!dispatches_to_gemm_hopper(&Device::Emu, &nt));
        assert!(dispatch_allowed(None) && dispatch_allowed(Some("1")));
        assert!(!dispatch_allowed(Some("0")) && !dispatch_allowed(Some(" 0\n")));
    }
}
