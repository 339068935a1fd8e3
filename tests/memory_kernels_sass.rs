//! The 128-bit memory-bound kernels' machine code for sm_90: their vector accesses assemble to
//! `LDG.E.128` and `STG.E.128` (16 bytes per thread per instruction), with no spills and no
//! local memory.
//!
//! Needs `ptxas` (wheel `nvidia-cuda-nvcc-cu12`) and `cuobjdump` (wheel
//! `nvidia-cuda-cuobjdump`), found as `tests/gemm_tc_sass.rs` finds them; where either is
//! missing the test says it skipped, except under `CI`.

use std::path::PathBuf;
use std::process::Command;

/// Kernels, and the least 128-bit loads and stores each must hold.
const KERNELS: [(&str, usize, usize); 14] = [
    ("add_v4_f32", 2, 1),
    ("add_bf16", 2, 1),
    ("gelu_forward_v4_f32", 1, 1),
    ("gelu_backward_bf16", 2, 1),
    ("layernorm_forward_row_f32", 3, 1),
    ("layernorm_forward_row_bf16_narrow", 3, 1),
    ("layernorm_residual_forward_bf16", 4, 2),
    ("crossentropy_v4_f32", 2, 1),
    ("crossentropy_v4_bf16", 2, 1),
    ("crossentropy_v4_f16", 2, 1),
    ("bias_backward_bf16", 1, 0),
    ("bias_backward_f16", 1, 0),
    ("adamw_chunks_f32", 4, 3),
    ("sum_squares_chunks_f32", 1, 0),
];

#[test]
fn vector_accesses_are_128_bit() {
    let (Some(ptxas), Some(cuobjdump)) =
        (trident_ptx_builder::find_ptxas(), trident_ptx_builder::find_cuobjdump())
    else {
        if std::env::var_os("CI").is_some() {
            panic!("ptxas or cuobjdump not found under CI: install nvidia-cuda-nvcc-cu12 and nvidia-cuda-cuobjdump");
        }
        eprintln!(
            "skipped: ptxas or cuobjdump not found (pip install nvidia-cuda-nvcc-cu12 nvidia-cuda-cuobjdump)"
        );
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("memory_kernels_sass");
    std::fs::create_dir_all(&dir).unwrap();
    let (ptx, cubin) = (dir.join("trident.ptx"), dir.join("memory.cubin"));
    std::fs::write(&ptx, trident::kernels::PTX.expect("built with the `cuda` feature")).unwrap();
    let names: Vec<&str> = KERNELS.iter().map(|k| k.0).collect();
    let out = Command::new(&ptxas)
        .args(["-arch=sm_90", "-v", "-e", &names.join(","), "-o"])
        .arg(&cubin)
        .arg(&ptx)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ptxas rejected the PTX:\n{log}");
    for (name, loads, stores) in KERNELS {
        let at = log
            .find(&format!("entry function '{name}'"))
            .unwrap_or_else(|| panic!("{name} not compiled:\n{log}"));
        let props = log[at..].lines().find(|l| l.contains("spill stores")).expect("a properties line");
        assert!(props.contains(" 0 bytes spill stores, 0 bytes spill loads"), "{name} spills: {props}");

        let out = Command::new(&cuobjdump).args(["-sass", "-fun", name]).arg(&cubin).output().unwrap();
        assert!(out.status.success(), "cuobjdump failed for {name}");
        let sass = String::from_utf8_lossy(&out.stdout);
        let count = |op: &str| sass.lines().filter(|l| l.contains(op)).count();
        assert!(count("LDL") + count("STL") == 0, "{name} uses local memory");
        // `LDG.E.128` and `LDG.E.128.CONSTANT` (a read-only load) alike.
        assert!(
            count("LDG.E.128") >= loads,
            "{name}: {} 128-bit loads, want {loads}:\n{sass}",
            count("LDG.E.128")
        );
        assert!(
            count("STG.E.128") >= stores,
            "{name}: {} 128-bit stores, want {stores}:\n{sass}",
            count("STG.E.128")
        );
    }
}
