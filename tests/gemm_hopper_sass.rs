//! The sm_90a module `build.rs` compiled beside the sm_80 one (`trident::kernels::PTX_SM90A`)
//! and the cubin `ptxas` assembled from it: the PTX targets sm_90a at PTX ISA 8.0 and holds
//! the Hopper GEMM, which the sm_80 module does not, with its `.aligned` instructions each
//! where the source has it; the Hopper GEMM kernels do not spill,
//! fit 384 threads in the register file at launch, and their SASS issues `HGMMA` (`wgmma`),
//! `UTMALDG` (TMA loads), `SYNCS` (mbarrier operations) and `USETMAXREG` (`setmaxnreg`), with
//! no local-memory access.
//!
//! Needs the cubin (`ptxas` at build time, wheel `nvidia-cuda-nvcc-cu12`) and `cuobjdump`
//! (wheel `nvidia-cuda-cuobjdump`); where either is missing the test says it skipped, except
//! under `CI`.

use std::path::PathBuf;
use std::process::Command;

use trident_kernels::gemm_hopper::{KERNEL_NAMES, THREADS};
use trident_ptx_builder::checks::parse_report;

#[test]
fn the_sm90a_module_targets_sm90a_and_alone_holds_the_hopper_gemm() {
    let ptx = trident::kernels::PTX_SM90A.expect("built with the `cuda` feature");
    let header: Vec<&str> =
        ptx.lines().filter(|l| l.starts_with(".target") || l.starts_with(".version")).collect();
    assert_eq!(header, [".version 8.0", ".target sm_90a"]);
    let sm80 = trident::kernels::PTX.expect("built with the `cuda` feature");
    for name in KERNEL_NAMES {
        let entry = format!(".entry {name}(");
        assert!(ptx.contains(&entry), "the sm_90a module lacks {name}");
        assert!(!sm80.contains(&entry), "the sm_80 module holds {name}");
    }
    // Every other kernel is in both, so that a capability 9.0 device loads only this one.
    let entries = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter_map(|l| l.split(".entry ").nth(1))
            .map(|l| l.split('(').next().unwrap_or_default().to_string())
            .filter(|n| !KERNEL_NAMES.contains(&n.as_str()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(entries(ptx), entries(sm80));
    for name in KERNEL_NAMES {
        let body = ptx.split(&format!(".entry {name}(")).nth(1).unwrap();
        let body = body.split(".entry ").next().unwrap();
        // `build.rs` bounds the Hopper GEMM's threads at THREADS, so that ptxas knows the
        // register count at entry and honours `setmaxnreg`.
        let header = &body[..body.find('{').unwrap()];
        assert!(header.contains(&format!(".maxntid {THREADS}, 1, 1")), "{name}: {header}");
        // The `.aligned` instructions, which every thread of the warpgroup (block, warp) must
        // reach at the same instruction, appear exactly as often as the source reaches them
        // after unrolling (4 k16 steps per slice): none was duplicated into divergent branches
        // (see `trident_ptx_builder::checks`).
        for (op, want) in [
            ("wgmma.mma_async.sync.aligned", 4),
            ("wgmma.fence.sync.aligned", 1),
            ("wgmma.commit_group.sync.aligned", 1),
            ("wgmma.wait_group.sync.aligned", 2),
            ("setmaxnreg.inc.sync.aligned", 1),
            ("setmaxnreg.dec.sync.aligned", 1),
            ("bar.sync", 1),
            ("elect.sync", 1),
        ] {
            assert_eq!(body.matches(op).count(), want, "{name}: `{op}`");
        }
    }
}

#[test]
fn the_hopper_gemm_is_hgmma_utmaldg_syncs_without_spills() {
    if let Some(why) = trident::kernels::NO_CUBINS_SM90A {
        assert!(std::env::var_os("CI").is_none(), "no cubins were built under CI: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let reports = trident::kernels::PTXAS_REPORTS_SM90A;
    assert_eq!(reports.iter().map(|r| r.0).collect::<Vec<_>>(), ["sm_90a"]);
    let kernels = parse_report(reports[0].1);
    for name in KERNEL_NAMES {
        let (_, r) =
            kernels.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no report for {name}"));
        eprintln!("{name}: {} registers, {} bytes stack", r.registers, r.stack);
        assert!(
            r.spill_stores == 0 && r.spill_loads == 0,
            "{name} spills: {} bytes stored, {} loaded",
            r.spill_stores,
            r.spill_loads
        );
        // At launch every thread has the kernel's count; setmaxnreg moves them afterwards.
        assert!(r.registers * THREADS <= 65536, "{name}: {} registers x {THREADS} threads", r.registers);
    }

    let Some(cuobjdump) = trident_ptx_builder::find_cuobjdump() else {
        assert!(std::env::var_os("CI").is_none(), "cuobjdump not found under CI");
        eprintln!("skipped the SASS checks: cuobjdump not found (pip install nvidia-cuda-cuobjdump)");
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let cubin = dir.join("trident.sm_90a.cubin");
    std::fs::write(&cubin, trident::kernels::cubin("sm_90a").expect("an embedded cubin inflates")).unwrap();
    for name in KERNEL_NAMES {
        let out = Command::new(&cuobjdump).args(["-sass", "-fun", name]).arg(&cubin).output().unwrap();
        assert!(out.status.success(), "cuobjdump failed on {name}: {}", String::from_utf8_lossy(&out.stderr));
        let sass = String::from_utf8_lossy(&out.stdout);
        let count = |op: &str| sass.lines().filter(|l| l.contains(op)).count();
        let (hgmma, utmaldg, syncs, setmaxreg) =
            (count("HGMMA.64x256x16.F32.BF16"), count("UTMALDG.2D"), count("SYNCS"), count("USETMAXREG"));
        eprintln!("{name}: {hgmma} HGMMA, {utmaldg} UTMALDG, {syncs} SYNCS, {setmaxreg} USETMAXREG");
        // Four k16 steps per slice, unrolled; the two operand loads per slice.
        assert!(hgmma >= 4, "{name}: {hgmma} HGMMA.64x256x16.F32.BF16");
        assert!(utmaldg >= 2, "{name}: {utmaldg} UTMALDG.2D");
        assert!(syncs > 0 && setmaxreg >= 2, "{name}: {syncs} SYNCS, {setmaxreg} USETMAXREG");
        assert_eq!(count("LDL") + count("STL"), 0, "{name} touches local memory");
    }
}
