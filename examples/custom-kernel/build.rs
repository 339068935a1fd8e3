//! Compiles `kernels/` to PTX with the nightly its `rust-toolchain.toml` pins (installed
//! through rustup when missing); the library embeds `$OUT_DIR/custom_kernels.ptx`.

fn main() {
    trident_ptx_builder::PtxBuild::new("kernels")
        .arch("sm_90")
        .output("custom_kernels.ptx")
        // The kernels inline `trident_kernels::simt`: its changes rebuild the PTX too.
        .watch("../../kernels/src")
        .build()
        .unwrap_or_else(|e| trident_ptx_builder::fail(&e));
}
