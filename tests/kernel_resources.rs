//! Keeps `perfmodel/resources.tsv` — every kernel's registers and static shared memory per
//! `ptxas` target, which the time model reads — in step with the embedded machine code. Reads
//! the `ptxas -v` reports `build.rs` kept for each target the model predicts (sm_80 for A100,
//! sm_86 for the RTX A6000, sm_90 for H100/H200) and fails when the checked-in table differs.
//! `TRIDENT_UPDATE_RESOURCES=1` rewrites the table instead.
//!
//! Where `ptxas` was missing at build time the test says it skipped, except under `CI`.

use std::path::PathBuf;

use trident_perfmodel::resources::{self, ResourceRow};
use trident_perfmodel::Resources;

const TARGETS: &[&str] = &["sm_80", "sm_86", "sm_90"];

/// The number before `unit` in `line`.
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.rsplit(|c: char| !c.is_ascii_digit()).find(|s| !s.is_empty())?.parse().ok()
}

/// Rows of one `ptxas -v` log.
fn parse_log(log: &str, arch: &str) -> Vec<ResourceRow> {
    let mut rows: Vec<ResourceRow> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            rows.push(ResourceRow {
                kernel: rest.split('\'').next().unwrap_or_default().to_string(),
                arch: arch.to_string(),
                resources: Resources { registers: 0, static_smem: 0 },
            });
        } else if let (Some(row), true) = (rows.last_mut(), line.contains("Used ")) {
            row.resources.registers = number_before(line, " registers").unwrap_or(0);
            row.resources.static_smem = number_before(line, " bytes smem").unwrap_or(0);
        }
    }
    rows
}

#[test]
fn checked_in_kernel_resources_match_ptxas() {
    if let Some(why) = trident::kernels::NO_CUBINS {
        assert!(std::env::var_os("CI").is_none(), "no ptxas reports were built under CI: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let mut rows = Vec::new();
    for arch in TARGETS {
        let (_, log) = trident::kernels::PTXAS_REPORTS
            .iter()
            .find(|(a, _)| a == arch)
            .unwrap_or_else(|| panic!("the build assembled no {arch} code"));
        let found = parse_log(log, arch);
        assert!(!found.is_empty(), "ptxas -arch={arch} reported no kernels:\n{log}");
        rows.extend(found);
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
