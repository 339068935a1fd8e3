//! With the `cuda` feature (the default), builds the workspace's `kernels/` for
//! `nvptx64-nvidia-cuda` with the nightly pinned in `kernels/rust-toolchain.toml` (installed
//! through rustup when missing) and hands the PTX to the library as `$OUT_DIR/trident.ptx`.
//! The work is `trident-ptx-builder`'s, which a crate of one's own kernels uses the same way.
//! Without the feature it does nothing: no nightly, no nested build.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    trident_ptx_builder::PtxBuild::new("../kernels")
        .arch("sm_90")
        .output("trident.ptx")
        .build()
        .unwrap_or_else(|e| trident_ptx_builder::fail(&e));
}
