//! Launch rules of a real GPU the emulator enforces: the 48 KiB shared-memory opt-in,
//! vector shared accesses aligned to their width, and `.aligned` collectives executed from one
//! call site by every lane (and every warp, for the barrier).

use trident_kernels::simt::*;
use trident_kernels::static_shared;
use trident_simt::{
    launch_with_attributes, BlockSample, EmuError, Fault, HostKernel, KernelAttributes, LaunchConfig,
    LaunchStats,
};

use crate::{lend, run};

fn run_with(
    entry: fn(&[u64]),
    cfg: LaunchConfig,
    attributes: KernelAttributes,
) -> Result<LaunchStats, EmuError> {
    let kernel = HostKernel { name: "test_kernel", params: &[], param_names: &[], entry };
    // SAFETY: the kernels here take no arguments and touch only shared memory.
    unsafe { launch_with_attributes(&kernel, &cfg, &attributes, &[], &[], BlockSample::All) }
}

/// 16 bytes of static shared memory beside the dynamic window, as `gemm_tc_*_s` has.
fn static_beside_dynamic(_: &[u64]) {
    let flags = static_shared!(FLAGS, u32, 4);
    // SAFETY: the launch gives at least one byte of dynamic shared memory.
    let window = unsafe { dynamic_shared::<u32>(0, 1) };
    if thread_idx_x() == 0 {
        flags.store(0, 1);
        window.store(0, 2);
    }
}

#[test]
fn static_plus_dynamic_over_48_kib_needs_the_opt_in() {
    let cfg = LaunchConfig { dynamic_smem_bytes: 48 * 1024, ..LaunchConfig::linear(2, 64) };
    let error = run_with(static_beside_dynamic, cfg, KernelAttributes::default()).unwrap_err();
    assert!(matches!(error, EmuError::InvalidLaunch { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(
            "cannot launch kernel `test_kernel`: 49168 bytes of shared memory per block (16 static + \
             49152 dynamic) exceed the 49152 a block may use without opting in (cuFuncSetAttribute \
             MAX_DYNAMIC_SHARED_SIZE_BYTES)"
        ) && message.contains("FLAGS@"),
        "{message}"
    );
    // 48 KiB less the static size fits without the opt-in.
    let fits = LaunchConfig { dynamic_smem_bytes: 48 * 1024 - 16, ..cfg };
    run_with(static_beside_dynamic, fits, KernelAttributes::default()).unwrap();
    // With the opt-in it launches; the launch may ask for less than the attribute.
    for limit in [48 * 1024, 200 * 1024] {
        let attributes = KernelAttributes { max_dynamic_smem_bytes: Some(limit), ..Default::default() };
        run_with(static_beside_dynamic, cfg, attributes).unwrap();
    }
    // More than the opt-in, or an opt-in that leaves no room for the static bytes, is refused.
    let attributes = KernelAttributes { max_dynamic_smem_bytes: Some(48 * 1024 - 4), ..Default::default() };
    let error = run_with(static_beside_dynamic, cfg, attributes).unwrap_err();
    assert!(error.to_string().contains("more than the 49148 the kernel opted in to"), "{error}");
    let attributes = KernelAttributes { max_dynamic_smem_bytes: Some(227 * 1024), ..Default::default() };
    let error = run_with(static_beside_dynamic, cfg, attributes).unwrap_err();
    assert!(error.to_string().contains("16 bytes of static shared memory plus the 232448"), "{error}");
    // Dynamic shared memory alone above 48 KiB is refused before any block runs.
    let big = LaunchConfig { dynamic_smem_bytes: 64 * 1024, ..cfg };
    let error = run(|_| {}, big, &[]).unwrap_err();
    assert!(error.to_string().contains("65536 bytes of dynamic shared memory exceed the 49152"), "{error}");
}

/// A `[u32; 4]` (alignment 4, read with one 16-byte `ld.shared.v4.b32`) at byte offset 4.
fn misaligned_v4_dynamic(_: &[u64]) {
    // SAFETY: the window lies within the launch's 64 bytes.
    let v = unsafe { dynamic_shared::<[u32; 4]>(4, 2) };
    v.store(0, [1, 2, 3, 4]);
}

fn misaligned_v4_cast(_: &[u64]) {
    let s = static_shared!(S, u32, 16);
    let _ = s.sub(1, 8).cast::<[u32; 4]>();
}

fn misaligned_v2_cast(_: &[u64]) {
    let s = static_shared!(S, u32, 16);
    let _ = s.sub(1, 4).cast::<[u32; 2]>();
}

/// Aligned vector views are fine, and so are 4-byte elements at 4-byte offsets.
fn aligned_vectors(_: &[u64]) {
    let s = static_shared!(S, u32, 16);
    let t = thread_idx_x() as usize;
    s.sub(4, 8).cast::<[u32; 4]>().store(t, [t as u32; 4]);
    sync_threads();
    let _ = s.sub(2, 4).cast::<[u32; 2]>().load(1 - t);
    let _ = s.sub(1, 4).load(t);
}

#[test]
fn vector_shared_accesses_must_be_aligned_to_their_width() {
    let cfg = LaunchConfig { dynamic_smem_bytes: 64, ..LaunchConfig::linear(1, 1) };
    for (entry, width) in
        [(misaligned_v4_dynamic as fn(&[u64]), 16), (misaligned_v4_cast, 16), (misaligned_v2_cast, 8)]
    {
        let error = run(entry, cfg, &[]).unwrap_err();
        let Some(Fault::BadOperand { site, detail }) = error.fault() else { panic!("{error}") };
        assert!(site.file().ends_with("launch_rules.rs"), "names the kernel line: {error}");
        let instruction = if width == 16 { "ld.shared.v4.b32" } else { "ld.shared.b64" };
        assert!(
            detail.contains("need an address aligned to their width")
                && detail.contains(instruction)
                && detail.contains("Addresses as Operands"),
            "{error}"
        );
    }
    run(aligned_vectors, LaunchConfig::linear(1, 2), &[]).unwrap();
}

/// Lanes below 16 reach the mma at one line, the others at another.
#[allow(clippy::if_same_then_else, reason = "two call sites of one instruction are the point")]
fn mma_from_two_sites(_: &[u64]) {
    if lane_id() < 16 {
        mma_m16n8k16_bf16([0; 4], [0; 2], [0.0; 4]);
    } else {
        mma_m16n8k16_bf16([0; 4], [0; 2], [0.0; 4]);
    }
}

/// As [`mma_from_two_sites`] for `ldmatrix`.
#[allow(clippy::if_same_then_else, reason = "two call sites of one instruction are the point")]
fn ldmatrix_from_two_sites(_: &[u64]) {
    let s = static_shared!(S, u16, 256);
    let lane = lane_id() as usize;
    for i in (lane..256).step_by(32) {
        s.store(i, 0);
    }
    sync_threads();
    let row = (lane % 8) * 8;
    if lane % 2 == 0 {
        ldmatrix_x4(s, row);
    } else {
        ldmatrix_x4(s, row);
    }
}

#[test]
fn aligned_warp_instructions_need_one_call_site() {
    for entry in [mma_from_two_sites as fn(&[u64]), ldmatrix_from_two_sites] {
        let error = run(entry, LaunchConfig::linear(1, 32), &[]).unwrap_err();
        let Some(Fault::WarpCollective { site, detail }) = error.fault() else { panic!("{error}") };
        assert!(site.file().ends_with("launch_rules.rs"), "{error}");
        assert!(
            detail.contains(".aligned")
                && detail.contains("different call sites")
                && detail.contains("launch_rules.rs:"),
            "{error}"
        );
        // The other site is named too.
        assert_eq!(error.to_string().matches("launch_rules.rs:").count(), 2, "{error}");
    }
}

/// Shuffles, votes and `sync_warp` are not `.aligned`: lanes may meet from different sites.
#[allow(clippy::if_same_then_else, reason = "two call sites of one instruction are the point")]
fn shuffle_from_two_sites(_: &[u64]) {
    let lane = lane_id();
    let got = if lane < 16 { shfl_xor_u32(FULL_MASK, lane, 16) } else { shfl_xor_u32(FULL_MASK, lane, 16) };
    assert_eq!(got, lane ^ 16);
    if lane < 8 {
        sync_warp(FULL_MASK);
    } else {
        sync_warp(FULL_MASK);
    }
}

#[test]
fn non_aligned_collectives_may_meet_from_different_sites() {
    run(shuffle_from_two_sites, LaunchConfig::linear(1, 32), &[]).unwrap();
}

/// Warp 0 waits at one `sync_threads`, warp 1 at another.
#[allow(clippy::if_same_then_else, reason = "two barrier call sites are the point")]
fn barrier_per_warp(_: &[u64]) {
    if thread_idx_x() / 32 == 0 {
        sync_threads();
    } else {
        sync_threads();
    }
}

#[test]
fn warps_reaching_the_barrier_from_different_sites_are_refused() {
    let error = run(barrier_per_warp, LaunchConfig::linear(1, 64), &[]).unwrap_err();
    let Some(Fault::DivergentBarrier { site, other_site, .. }) = error.fault() else { panic!("{error}") };
    assert_ne!(site.line(), other_site.line());
    assert!(error.to_string().contains("barrier.sync.aligned"), "{error}");
}

/// Vector global accesses at element 1 of a 16-byte aligned buffer: 4-byte aligned only.
fn misaligned_global_vectors(args: &[u64]) {
    let (x, y) = (Global::from_ptr(args[0] as *const f32), GlobalMut::from_ptr(args[1] as *mut f32));
    // SAFETY: elements 1..5 lie in both buffers; `args[2]` picks the access.
    unsafe {
        match args[2] {
            0 => {
                let _ = x.load_v2(1);
            }
            1 => {
                let _ = x.load_nc_v4(1);
            }
            2 => y.store_v2(1, [0.0; 2]),
            _ => y.store_v4(1, [0.0; 4]),
        }
    }
}

#[test]
fn vector_global_accesses_must_be_aligned_to_their_width() {
    let x = vec![[0f32; 4]; 4];
    let mut y = vec![[0f32; 4]; 4];
    let _lent = (lend(&x), lend(&y));
    for (which, width) in [(0, 8), (1, 16), (2, 8), (3, 16)] {
        let args = [x.as_ptr() as u64, y.as_mut_ptr() as u64, which];
        let error = run(misaligned_global_vectors, LaunchConfig::linear(1, 1), &args).unwrap_err();
        assert!(matches!(error.fault(), Some(Fault::BadOperand { .. })), "{error}");
        assert!(error.to_string().contains(&format!("not {width}-byte aligned")), "{error}");
    }
}
