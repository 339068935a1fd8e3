//! With the `cuda` feature (the default), builds the workspace's `kernels/` for
//! `nvptx64-nvidia-cuda` with the nightly pinned in `kernels/rust-toolchain.toml` (installed
//! through rustup when missing) twice, side by side:
//!
//! - `$OUT_DIR/trident.ptx`, every kernel but the Hopper-only ones, for sm_80 at PTX ISA 7.8,
//!   assembled with `ptxas` into a cubin for every architecture from sm_80 on
//!   (`$OUT_DIR/trident.machine.rs` embeds them);
//! - `$OUT_DIR/trident_sm90a.ptx`, the same kernels and the Hopper-only ones (`wgmma`, TMA,
//!   `setmaxnreg`: `kernels/src/gemm_hopper/`), for sm_90a at PTX ISA 8.0, assembled for
//!   sm_90a (`$OUT_DIR/trident_sm90a.machine.rs`). The kernels crate selects the Hopper-only
//!   code with `cfg(target_feature = "sm_90a")`, which `-Ctarget-cpu=sm_90a` sets.
//!
//! The work is `trident-ptx-builder`'s, which a crate of one's own kernels uses the same way.
//! Without the feature it does nothing: no nightly, no nested build.
//!
//! The sm_80 PTX targets the oldest architecture whose instructions the kernels use
//! (`cp.async`, `ldmatrix`, bf16 `mma.sync`), so that the same text assembles for every later
//! one and the driver can JIT it for architectures newer than the cubins. An `sm_90a` module
//! runs only on compute capability 9.0 (PTX ISA, "Architecture-specific features"), where the
//! runtime loads it instead. The two nested builds each compile mostly on one core (one
//! codegen unit), so they run in parallel threads and the second costs little wall time.

/// The architectures that get machine code of the sm_80 module: A100 (sm_80), A10/A40/RTX 30
/// (sm_86), L4/L40S/RTX 40 (sm_89), H100/H200 (sm_90).
#[cfg(feature = "cuda")]
const CUBINS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    {
        use trident_ptx_builder::PtxBuild;
        let sm80 = PtxBuild::new("../kernels")
            .arch("sm_80")
            .target_feature("+ptx78")
            .cubins(CUBINS)
            .output("trident.ptx");
        let sm90a = PtxBuild::new("../kernels")
            .arch("sm_90a")
            .target_feature("+ptx80")
            .cubins(&["sm_90a"])
            // 384 = trident_kernels::gemm_hopper::THREADS (`tests/gemm_hopper_sass.rs` checks
            // it): ptxas honours the GEMM's `setmaxnreg` only with the count at entry known.
            .max_threads("gemm_hopper_", 384)
            .output("trident_sm90a.ptx");
        let results = std::thread::scope(|s| {
            let hopper = s.spawn(|| sm90a.build());
            let first = sm80.build();
            [first, hopper.join().expect("the sm_90a build thread panicked")]
        });
        for result in results {
            result.unwrap_or_else(|e| trident_ptx_builder::fail(&e));
        }
    }
}
