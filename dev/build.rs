//! Compiles `kernels/` (`trident-dev-kernels`) to PTX with the nightly its
//! `rust-toolchain.toml` pins, as `trident-ops` compiles the production kernels: sm_80 at PTX
//! ISA 7.8, machine code for the same architectures, `$OUT_DIR/trident_dev.ptx` and
//! `$OUT_DIR/trident_dev.machine.rs` for the library to embed. Without the `cuda` feature it
//! does nothing.

/// The architectures that get machine code, as for the production module.
#[cfg(feature = "cuda")]
const CUBINS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    trident_ptx_builder::PtxBuild::new("kernels")
        .arch("sm_80")
        .target_feature("+ptx78")
        .cubins(CUBINS)
        .output("trident_dev.ptx")
        // The kernels inline `trident_kernels::simt` and its device functions.
        .watch("../kernels/src")
        .build()
        .unwrap_or_else(|e| trident_ptx_builder::fail(&e));
}
