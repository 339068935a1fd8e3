//! Assembles the example's PTX with `ptxas` for sm_90. The kernels use dynamic shared memory,
//! whose symbol `trident_kernels::kernels!` declares in this crate's PTX: without that
//! declaration `ptxas` rejects the module ("Unknown symbol"), which the test also checks.
//!
//! `ptxas` is found through `TRIDENT_PTXAS`, then `PATH`, then the `nvidia-cuda-nvcc-cu12`
//! Python wheel. Without it the test is skipped, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn assemble(ptxas: &Path, ptx: &str, name: &str) -> Output {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (file, cubin) = (dir.join(format!("{name}.ptx")), dir.join(format!("{name}.cubin")));
    std::fs::write(&file, ptx).unwrap();
    Command::new(ptxas)
        .args(["-arch=sm_90", "-v"])
        .arg(&file)
        .arg("-o")
        .arg(&cubin)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()))
}

fn log(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn the_example_ptx_assembles_and_declares_its_dynamic_shared_memory() {
    let ptx = custom_kernel::PTX;
    for entry in ["saxpy_f32", "block_sum_f32", "reverse_tiles_f32"] {
        assert!(ptx.contains(&format!(".entry {entry}(")), "no entry {entry} in the PTX");
    }
    // Trident's own kernels are not in this crate's module.
    assert!(!ptx.contains(".entry add_f32("));
    const DECLARATION: &str = ".extern .shared .align 16 .b8 trident_dynamic_smem[];";
    assert!(ptx.contains(DECLARATION), "the PTX does not declare the dynamic shared memory");

    let Some(ptxas) = trident_ptx_builder::find_ptxas() else {
        if std::env::var_os("CI").is_some() {
            panic!("ptxas not found under CI: install the nvidia-cuda-nvcc-cu12 wheel or set TRIDENT_PTXAS");
        }
        eprintln!("skipped: ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set TRIDENT_PTXAS)");
        return;
    };
    let out = assemble(&ptxas, ptx, "custom_kernels");
    assert!(out.status.success(), "ptxas rejected the PTX:\n{}", log(&out));
    assert!(log(&out).contains("block_sum_f32"), "{}", log(&out));

    // The declaration is what makes it assemble: the same module without it is rejected.
    let without = ptx.replace(DECLARATION, "");
    let out = assemble(&ptxas, &without, "custom_kernels_undeclared");
    assert!(!out.status.success(), "ptxas accepted a module without the declaration");
    assert!(log(&out).contains("trident_dynamic_smem"), "{}", log(&out));
}
