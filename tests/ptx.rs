//! The machine code `build.rs` assembled with `ptxas` (one cubin per architecture from sm_80 to
//! sm_90, embedded as `trident::kernels::CUBINS`, with each `ptxas -v` report): every kernel
//! assembled for every architecture, the kernels in `NO_SPILL` and the tensor-core GEMM main
//! loops do not spill on any, and every host kernel has its entry. Writes a table of registers,
//! spills, shared memory and barriers per kernel to `target/tmp/ptxas-report-<arch>.md` (and
//! sm_90's to `target/tmp/ptxas-report.md`).
//!
//! Where `ptxas` was missing at build time the tests say they skipped, except under `CI` where
//! they fail. `cuobjdump` (`TRIDENT_CUOBJDUMP`, `PATH`, or the `nvidia-cuda-cuobjdump` wheel)
//! then lists each cubin's architecture and reads back the SASS of the tensor-core attention
//! kernels: their main loops must issue `HMMA` (tensor cores), `LDGSTS` (`cp.async`) and `LDSM`
//! (`ldmatrix`), and touch no local memory (`LDL`/`STL`).

use std::path::PathBuf;
use std::process::Command;

use trident_ptx_builder::checks::parse_report as parse;

/// The architectures `build.rs` assembles the PTX for.
const ARCHS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90"];

/// The build's machine code, or the reason it has none: skipped where `ptxas` was missing at
/// build time, except under `CI`, which installs it.
fn built_reports() -> Option<&'static [(&'static str, &'static str)]> {
    if let Some(why) = trident::kernels::NO_CUBINS {
        assert!(std::env::var_os("CI").is_none(), "no cubins were built under CI: {why}");
        eprintln!("skipped: {why}");
        return None;
    }
    Some(trident::kernels::PTXAS_REPORTS)
}

#[test]
fn the_build_assembled_every_kernel_for_every_architecture_from_sm80() {
    let Some(reports) = built_reports() else { return };
    let archs: Vec<&str> = reports.iter().map(|r| r.0).collect();
    assert_eq!(archs, ARCHS, "the architectures ptxas assembled");
    let cubins: Vec<&str> = trident::kernels::CUBINS.iter().map(|c| c.0).collect();
    assert_eq!(cubins, ARCHS, "the embedded cubins");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    for (arch, log) in reports {
        let kernels = parse(log);
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
        std::fs::write(dir.join(format!("ptxas-report-{arch}.md")), &table).unwrap();
        if *arch == "sm_90" {
            std::fs::write(dir.join("ptxas-report.md"), &table).unwrap();
        }
        // The Hopper-only kernels are in the sm_90a module (`tests/gemm_hopper_sass.rs`).
        let sm80_module = |name: &str| !trident_kernels::gemm_hopper::KERNEL_NAMES.contains(&name);
        for host in
            trident_kernels::HOST_KERNELS.iter().flat_map(|g| g.iter()).filter(|h| sm80_module(h.name))
        {
            assert!(
                kernels.iter().any(|(n, _)| n == host.name),
                "kernel `{}` runs on the emulator but has no {arch} machine code",
                host.name
            );
        }
        for name in trident_kernels::NO_SPILL.iter().chain(trident_kernels::gemm_tc::KERNEL_NAMES) {
            let (_, r) = kernels
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("NO_SPILL names `{name}`, which the {arch} code lacks"));
            assert!(
                r.spill_stores == 0 && r.spill_loads == 0,
                "`{name}` spills on {arch}: {} bytes stored, {} loaded",
                r.spill_stores,
                r.spill_loads
            );
        }
    }
    let Some(cuobjdump) = find_cuobjdump() else { return };
    for arch in ARCHS {
        let cubin = dir.join(format!("trident.{arch}.cubin"));
        std::fs::write(&cubin, trident::kernels::cubin(arch).expect("an embedded cubin inflates")).unwrap();
        let out = Command::new(&cuobjdump).arg("-lelf").arg(&cubin).output().unwrap();
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && listing.contains(&format!(".{arch}.cubin")),
            "cuobjdump -lelf: {listing}"
        );
    }
    check_tensor_core_sass(&dir.join("trident.sm_90.cubin"));
}

/// `cuobjdump`, or `None` where it is missing (outside `CI`).
fn find_cuobjdump() -> Option<PathBuf> {
    let found = trident_ptx_builder::find_cuobjdump();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "cuobjdump not found under CI: install the nvidia-cuda-cuobjdump wheel or set TRIDENT_CUOBJDUMP"
        );
        eprintln!("skipped the cuobjdump checks: cuobjdump not found (pip install nvidia-cuda-cuobjdump)");
    }
    found
}

#[test]
fn the_ptx_targets_sm80_so_that_every_later_gpu_can_jit_it() {
    let ptx = trident::kernels::PTX.expect("built with the `cuda` feature");
    let header: Vec<&str> =
        ptx.lines().filter(|l| l.starts_with(".target") || l.starts_with(".version")).collect();
    assert_eq!(header, [".version 7.8", ".target sm_80"]);
}

fn check_tensor_core_sass(cubin: &std::path::Path) {
    let Some(cuobjdump) = find_cuobjdump() else { return };
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
