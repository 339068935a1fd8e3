//! Keeps `perfmodel/resources.tsv` — every kernel's registers and static shared memory per
//! `ptxas` target, which the time model reads — in step with the embedded machine code. Reads
//! the tables the builds made from their `ptxas -v` reports (`trident::kernels::RESOURCES`, and
//! `trident_dev::RESOURCES` for the scalar generations and designs the benchmark predicts) for
//! each target the model predicts (sm_80 for A100, sm_86 for the RTX A6000, sm_90 for
//! H100/H200, and sm_90a for the kernels only the Hopper module has) and fails when the
//! checked-in table differs.
//! `TRIDENT_UPDATE_RESOURCES=1` rewrites the table instead.
//!
//! Where `ptxas` was missing at build time the test says it skipped, except under `CI`.

use std::path::PathBuf;

use trident_perfmodel::resources;

const TARGETS: &[&str] = &["sm_80", "sm_86", "sm_90"];

#[test]
fn checked_in_kernel_resources_match_ptxas() {
    if let Some(why) = trident::kernels::NO_CUBINS {
        assert!(std::env::var_os("CI").is_none(), "no ptxas reports were built under CI: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    // The build's table, read from its `ptxas -v` reports by trident-ptx-builder.
    let mut built = resources::parse(trident::kernels::RESOURCES).expect("the build's resource table parses");
    if trident_dev::NO_CUBINS.is_none() {
        built
            .extend(resources::parse(trident_dev::RESOURCES).expect("the dev build's resource table parses"));
    }
    let mut rows: Vec<_> = built.into_iter().filter(|r| TARGETS.contains(&r.arch.as_str())).collect();
    // The kernels only the sm_90a module has (wgmma, TMA, setmaxnreg), under sm_90a: the model
    // reads them there for Hopper ([`trident_perfmodel::Arch::specific_ptx_arch`]).
    let hopper_only: Vec<_> = resources::parse(trident::kernels::RESOURCES_SM90A)
        .expect("the sm_90a build's resource table parses")
        .into_iter()
        .filter(|r| r.arch == "sm_90a" && !rows.iter().any(|s| s.kernel == r.kernel))
        .collect();
    assert!(
        trident::kernels::NO_CUBINS_SM90A.is_some()
            || hopper_only.iter().any(|r| r.kernel.starts_with("gemm_hopper_")),
        "the sm_90a build reported no gemm_hopper"
    );
    rows.extend(hopper_only);
    for arch in TARGETS {
        assert!(rows.iter().any(|r| r.arch == *arch), "the build reported no {arch} kernels");
    }
    let fresh = resources::format(&rows);
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("perfmodel").join("resources.tsv");
    if std::env::var("TRIDENT_UPDATE_RESOURCES").is_ok_and(|v| v == "1") {
        std::fs::write(&table, &fresh).unwrap();
        eprintln!("wrote {}", table.display());
        return;
    }
    let checked_in = resources::parse(resources::RESOURCES_TSV).expect("resources.tsv parses");
    let fresh_rows = resources::parse(&fresh).unwrap();
    assert!(
        checked_in == fresh_rows,
        "perfmodel/resources.tsv is stale (a kernel changed): regenerate it with \
         `TRIDENT_UPDATE_RESOURCES=1 cargo test --test kernel_resources` and commit it.\n\
         ptxas now reports:\n{fresh}"
    );
}
