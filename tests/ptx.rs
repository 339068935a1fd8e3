//! Assembles the embedded PTX with `ptxas` for sm_90: every kernel must assemble, the kernels
//! in `NO_SPILL` and the tensor-core GEMM main loops must not spill, and every host kernel must have its PTX entry. Writes a table
//! of registers, spills, shared memory and barriers per kernel to `target/tmp/ptxas-report.md`.
//!
//! `ptxas` is found through `TRIDENT_PTXAS`, then `PATH`, then the `nvidia-cuda-nvcc-cu12`
//! Python wheel. Where none exists the test says it skipped, except under `CI` where it fails.
//! The SASS of the tensor-core attention kernels is then read back with `cuobjdump`
//! (`TRIDENT_CUOBJDUMP`, `PATH`, or a CUDA wheel beside the one `ptxas` came from): their main
//! loops must issue `HMMA` (tensor cores), `LDGSTS` (`cp.async`) and `LDSM` (`ldmatrix`), and
//! touch no local memory (`LDL`/`STL`).

use std::path::PathBuf;
use std::process::Command;

#[derive(Debug, Default)]
struct Report {
    registers: u32,
    spill_stores: u32,
    spill_loads: u32,
    stack: u32,
    smem: u32,
    barriers: u32,
}

/// The number before `unit` in `line` (`"24 bytes spill stores"`, `"Used 40 registers"`).
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.rsplit(|c: char| !c.is_ascii_digit()).find(|s| !s.is_empty())?.parse().ok()
}

fn parse(log: &str) -> Vec<(String, Report)> {
    let mut out: Vec<(String, Report)> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push((name, Report::default()));
            continue;
        }
        let Some((_, r)) = out.last_mut() else { continue };
        if line.contains("spill stores") {
            r.stack = number_before(line, "bytes stack frame").unwrap_or(0);
            r.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            r.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("Used ") && line.contains("registers") {
            r.registers = number_before(line, " registers").unwrap_or(0);
            r.barriers = number_before(line, " barriers").unwrap_or(0);
            r.smem = number_before(line, " bytes smem").unwrap_or(0);
        }
    }
    out
}

#[test]
fn every_kernel_assembles_for_sm90() {
    let Some(ptxas) = trident_ptx_builder::find_ptxas() else {
        if std::env::var_os("CI").is_some() {
            panic!("ptxas not found under CI: install the nvidia-cuda-nvcc-cu12 wheel or set TRIDENT_PTXAS");
        }
        eprintln!("skipped: ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set TRIDENT_PTXAS)");
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("trident.ptx");
    std::fs::write(&ptx, trident::kernels::PTX.expect("built with the `cuda` feature")).unwrap();
    let out = Command::new(&ptxas)
        .args(["-arch=sm_90", "-v", "-o"])
        .arg(dir.join("trident.cubin"))
        .arg(&ptx)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ptxas rejected the PTX:\n{log}");

    let kernels = parse(&log);
    let mut table = String::from(
        "| kernel | registers | spill stores (B) | spill loads (B) | stack (B) | smem (B) | barriers |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (name, r) in &kernels {
        table += &format!(
            "| {name} | {} | {} | {} | {} | {} | {} |\n",
            r.registers, r.spill_stores, r.spill_loads, r.stack, r.smem, r.barriers
        );
    }
    std::fs::write(dir.join("ptxas-report.md"), &table).unwrap();
    eprintln!("{table}");

    for host in trident_kernels::HOST_KERNELS.iter().flat_map(|g| g.iter()) {
        assert!(
            kernels.iter().any(|(n, _)| n == host.name),
            "kernel `{}` runs on the emulator but has no PTX entry",
            host.name
        );
    }
    check_tensor_core_sass(&dir.join("trident.cubin"));
    for name in trident_kernels::NO_SPILL.iter().chain(trident_kernels::gemm_tc::KERNEL_NAMES) {
        let (_, r) = kernels
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("NO_SPILL names `{name}`, which the PTX lacks"));
        assert!(
            r.spill_stores == 0 && r.spill_loads == 0,
            "`{name}` spills: {} bytes stored, {} loaded",
            r.spill_stores,
            r.spill_loads
        );
    }
}

fn check_tensor_core_sass(cubin: &std::path::Path) {
    let Some(cuobjdump) = trident_ptx_builder::find_cuobjdump() else {
        if std::env::var_os("CI").is_some() {
            panic!("cuobjdump not found under CI: install the nvidia-cuda-cuobjdump wheel or set TRIDENT_CUOBJDUMP");
        }
        eprintln!("skipped the SASS check: cuobjdump not found (pip install nvidia-cuda-cuobjdump)");
        return;
    };
    for name in [
        "flash_attention_forward_hs64",
        "flash_attention_forward_hs128",
        "flash_attention_backward_hs64",
        "flash_attention_backward_hs128",
    ] {
        let out = Command::new(&cuobjdump)
            .args(["-sass", "-fun", name])
            .arg(cubin)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", cuobjdump.display()));
        assert!(out.status.success(), "cuobjdump failed on {name}: {}", String::from_utf8_lossy(&out.stderr));
        let sass = String::from_utf8_lossy(&out.stdout);
        let count = |op: &str| sass.lines().filter(|l| l.contains(op)).count();
        let (hmma, ldgsts, ldsm) = (count("HMMA.16816.F32.BF16"), count("LDGSTS"), count("LDSM"));
        eprintln!("{name}: {hmma} HMMA, {ldgsts} LDGSTS, {ldsm} LDSM");
        assert!(
            hmma > 0 && ldgsts > 0 && ldsm > 0,
            "{name}: {hmma} HMMA, {ldgsts} LDGSTS, {ldsm} LDSM in its SASS"
        );
        assert_eq!(count("LDL") + count("STL"), 0, "{name} touches local memory");
    }
}
