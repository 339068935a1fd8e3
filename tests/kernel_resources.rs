//! Keeps `perfmodel/resources.tsv` — every kernel's registers and static shared memory per
//! `ptxas` target, which the time model reads — in step with the embedded PTX. Assembles the
//! PTX for each target the model predicts (sm_80 for A100, sm_86 for the RTX A6000, sm_90 for
//! H100/H200; the module is built for sm_90 and uses nothing newer than sm_80, so its
//! `.target` line is lowered for the older ones) and fails when the checked-in table differs.
//! `TRIDENT_UPDATE_RESOURCES=1` rewrites the table instead.
//!
//! `ptxas` is found as in `tests/ptx.rs`: `TRIDENT_PTXAS`, `PATH`, then the
//! `nvidia-cuda-nvcc-cu12` wheel; where none exists the test says it skipped, except under `CI`.

use std::path::PathBuf;
use std::process::Command;

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
    let Some(ptxas) = trident_ptx_builder::find_ptxas() else {
        assert!(std::env::var_os("CI").is_none(), "ptxas not found under CI: install nvidia-cuda-nvcc-cu12");
        eprintln!("skipped: ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set TRIDENT_PTXAS)");
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kernel-resources");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rows = Vec::new();
    for arch in TARGETS {
        let ptx = trident::kernels::PTX.expect("built with the `cuda` feature").replacen(
            ".target sm_90",
            &format!(".target {arch}"),
            1,
        );
        let path = dir.join(format!("trident-{arch}.ptx"));
        std::fs::write(&path, ptx).unwrap();
        let out = Command::new(&ptxas)
            .args([&format!("-arch={arch}"), "-v", "-o"])
            .arg(dir.join(format!("trident-{arch}.cubin")))
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
        let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ptxas -arch={arch} rejected the PTX:\n{log}");
        let found = parse_log(&log, arch);
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
