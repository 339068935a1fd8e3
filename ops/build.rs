//! With the `cuda` feature (the default), builds the workspace's `kernels/` for
//! `nvptx64-nvidia-cuda` with the nightly pinned in `kernels/rust-toolchain.toml` (installed
//! through rustup when missing), hands the PTX to the library as `$OUT_DIR/trident.ptx`, and
//! assembles it with `ptxas` into a cubin for every architecture from sm_80 on
//! (`$OUT_DIR/trident.machine.rs` embeds them). The work is `trident-ptx-builder`'s, which a
//! crate of one's own kernels uses the same way. Without the feature it does nothing: no
//! nightly, no nested build.
//!
//! The PTX targets sm_80, the oldest architecture whose instructions the kernels use
//! (`cp.async`, `ldmatrix`, bf16 `mma.sync`), at PTX ISA 7.8, so that the same text assembles
//! for every later one and the driver can JIT it for architectures newer than the cubins.

/// The architectures that get machine code: A100 (sm_80), A10/A40/RTX 30 (sm_86), L4/L40S/
/// RTX 40 (sm_89), H100/H200 (sm_90).
#[cfg(feature = "cuda")]
const CUBINS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    trident_ptx_builder::PtxBuild::new("../kernels")
        .arch("sm_80")
        .target_feature("+ptx78")
        .cubins(CUBINS)
        .output("trident.ptx")
        .build()
        .unwrap_or_else(|e| trident_ptx_builder::fail(&e));
}
