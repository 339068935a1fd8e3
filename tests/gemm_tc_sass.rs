//! The tensor-core GEMM's machine code for sm_90: main-loop kernels of every layout, input,
//! output and tile assemble with `ptxas` without spilling, and each one's K loop (the backward branch whose body holds the `mma`s) is made
//! of `HMMA.16816.F32` (bf16 or f16), `LDSM` (`ldmatrix`), `LDGSTS` (`cp.async`) and one
//! `BAR.SYNC`, with no local-memory access; the split-K tail has its fences (`MEMBAR.ALL.GPU`)
//! and one arrival count (`ATOMG.E.ADD`).
//!
//! Needs `ptxas` (wheel `nvidia-cuda-nvcc-cu12`) and `cuobjdump` (wheel
//! `nvidia-cuda-cuobjdump`); found through `TRIDENT_PTXAS` / `TRIDENT_CUOBJDUMP`, `PATH`, then
//! the wheels. Where either is missing the test says it skipped, except under `CI`.

use std::path::PathBuf;
use std::process::Command;

/// One SASS instruction: its address, opcode text, and a branch target if it is a branch.
struct Instr {
    addr: u64,
    text: String,
    target: Option<u64>,
}

/// The instructions of one function in `cuobjdump -sass` output.
fn parse_sass(sass: &str) -> Vec<Instr> {
    let mut out = Vec::new();
    for line in sass.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("/*") else { continue };
        let Some((addr, text)) = rest.split_once("*/") else { continue };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        let text = text.split("/*").next().unwrap_or_default().trim().to_string();
        let target = text
            .split_once("BRA ")
            .and_then(|(_, t)| t.trim_end_matches([' ', ';']).strip_prefix("0x"))
            .and_then(|t| u64::from_str_radix(t, 16).ok());
        out.push(Instr { addr, text, target });
    }
    out
}

#[test]
fn main_loops_are_hmma_ldsm_ldgsts_without_spills() {
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
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gemm_tc_sass");
    std::fs::create_dir_all(&dir).unwrap();
    let (ptx, cubin) = (dir.join("trident.ptx"), dir.join("gemm_tc.cubin"));
    std::fs::write(&ptx, trident::kernels::PTX.expect("built with the `cuda` feature")).unwrap();
    // Every layout, both input types, both outputs and both block tiles; `tests/ptx.rs`
    // checks every variant for spills.
    let kernels = [
        "gemm_tc_bf16_nt_b16_l",
        "gemm_tc_bf16_nn_f32_l",
        "gemm_tc_bf16_tn_f32_l",
        "gemm_tc_f16_nt_f32_s",
        "gemm_tc_f16_nn_b16_s",
        "gemm_tc_f16_tn_b16_s",
    ];
    assert!(kernels.iter().all(|k| trident_kernels::gemm_tc::KERNEL_NAMES.contains(k)));
    let out = Command::new(&ptxas)
        .args(["-arch=sm_90", "-v", "-e", &kernels.join(","), "-o"])
        .arg(&cubin)
        .arg(&ptx)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ptxas rejected the PTX:\n{log}");
    // "Compiling entry function 'name'" is followed by its "N bytes spill stores, M bytes spill
    // loads" line.
    for name in kernels {
        let at = log
            .find(&format!("entry function '{name}'"))
            .unwrap_or_else(|| panic!("{name} not compiled:\n{log}"));
        let props = log[at..].lines().find(|l| l.contains("spill stores")).expect("a properties line");
        assert!(props.contains(" 0 bytes spill stores, 0 bytes spill loads"), "{name} spills: {props}");
    }

    for name in kernels {
        let out = Command::new(&cuobjdump).args(["-sass", "-fun", name]).arg(&cubin).output().unwrap();
        assert!(out.status.success(), "cuobjdump failed for {name}");
        let code = parse_sass(&String::from_utf8_lossy(&out.stdout));
        assert!(!code.is_empty(), "no SASS for {name}");
        assert!(
            !code.iter().any(|i| i.text.contains("LDL") || i.text.contains("STL")),
            "{name} uses local memory"
        );
        // The split-K tail (outside the K loop): the fences and the arrival count of the last
        // block reduction, and its cp.async reads of the other partials.
        let ops = |op: &str| code.iter().filter(|i| i.text.contains(op)).count();
        assert!(ops("MEMBAR.ALL.GPU") >= 2, "{name}: fence.acq_rel.gpu before and after the count");
        assert_eq!(ops("ATOMG.E.ADD"), 1, "{name}: one arrival count");
        // The K loop: the backward branch whose body holds the HMMAs.
        let hmmas = |body: &[&Instr]| body.iter().filter(|i| i.text.contains("HMMA.16816.F32")).count();
        let body = code
            .iter()
            .filter_map(|b| b.target.filter(|&t| t < b.addr).map(|t| (t, b.addr)))
            .map(|(start, end)| code.iter().filter(|i| i.addr >= start && i.addr <= end).collect::<Vec<_>>())
            .max_by_key(|body| hmmas(body))
            .unwrap_or_else(|| panic!("{name} has no loop"));
        let count = |op: &str| body.iter().filter(|i| i.text.contains(op)).count();
        let dtype = if name.contains("_bf16_") { "HMMA.16816.F32.BF16" } else { "HMMA.16816.F32" };
        assert_eq!(hmmas(&body), 64, "{name}: 4 x 8 tiles x 2 k16 steps per slice");
        assert_eq!(count(dtype), 64, "{name}: HMMA of the input type");
        if !name.contains("_bf16_") {
            assert_eq!(count(".BF16"), 0, "{name}: f16 inputs");
        }
        assert!(count("LDSM") >= 16, "{name}: ldmatrix in the loop: {}", count("LDSM"));
        assert!(count("LDGSTS") >= 1, "{name}: cp.async in the loop");
        assert_eq!(count("BAR.SYNC"), 1, "{name}: one barrier per slice");
    }
}
