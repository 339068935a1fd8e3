//! The dev module's machine code and PTX, checked as the production module's are: every dev
//! kernel assembled for every architecture `build.rs` targets, the scalar kernels of
//! `trident_dev_kernels::NO_SPILL` free of spills, and every function's barriers and warp
//! collectives held to the reviewed table `dev/collectives.tsv`.
//!
//! Where `ptxas` was missing at build time the machine-code test says it skipped, except under
//! `CI` where it fails.

use std::path::PathBuf;

use trident_ptx_builder::checks::{check_collectives_table, parse_report};

#[test]
fn every_dev_kernel_is_assembled_for_every_architecture_without_spills_where_it_must() {
    if let Some(why) = trident_dev::NO_CUBINS {
        assert!(std::env::var_os("CI").is_none(), "no cubins were built under CI: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let archs: Vec<&str> = trident_dev::PTXAS_REPORTS.iter().map(|r| r.0).collect();
    assert_eq!(archs, ["sm_80", "sm_86", "sm_89", "sm_90"], "the architectures ptxas assembled");
    for (arch, log) in trident_dev::PTXAS_REPORTS {
        let kernels = parse_report(log);
        for host in trident_dev_kernels::HOST_KERNELS.iter().flat_map(|g| g.iter()) {
            assert!(
                kernels.iter().any(|(n, _)| n == host.name),
                "kernel `{}` runs on the emulator but has no {arch} machine code",
                host.name
            );
        }
        for name in trident_dev_kernels::NO_SPILL {
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
}

#[test]
fn every_functions_barriers_and_collectives_match_the_reviewed_table() {
    let ptx = trident_dev::PTX.expect("built with the `cuda` feature");
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("collectives.tsv");
    if let Err(why) = check_collectives_table(ptx, &table, "cargo test -p trident-dev --test ptx") {
        panic!("{why}");
    }
}

#[test]
fn the_trainers_module_carries_none_of_the_dev_kernels() {
    let production = trident_ops::kernels::module_source();
    for dev in trident_dev_kernels::HOST_KERNELS.iter().flat_map(|g| g.iter()) {
        assert!(
            !production.host_kernels.iter().flat_map(|g| g.iter()).any(|k| k.name == dev.name),
            "`{}` is in both modules",
            dev.name
        );
        if let Some(ptx) = trident_ops::kernels::PTX {
            assert!(
                !ptx.contains(&format!(".entry {}(", dev.name)),
                "`{}` is in the trainer's PTX",
                dev.name
            );
        }
    }
}
