//! The kernels' registers and static shared memory per `ptxas` target, checked in as
//! `resources.tsv` so that the model works where no `ptxas` is installed. The root crate's
//! test `kernel_resources` regenerates the file from the embedded PTX and fails when the
//! checked-in copy is stale.

use crate::arch::ModelError;
use crate::model::Resources;

/// The checked-in table: `kernel<TAB>arch<TAB>registers<TAB>static_smem_bytes` per line,
/// `#` comments.
pub const RESOURCES_TSV: &str = include_str!("../resources.tsv");

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRow {
    /// The kernel's PTX entry name.
    pub kernel: String,
    /// The architecture it was assembled for (`sm_90`).
    pub arch: String,
    /// What `ptxas -v` reported.
    pub resources: Resources,
}

/// The rows of a table in the `resources.tsv` format; malformed lines are errors naming the
/// line.
pub fn parse(text: &str) -> Result<Vec<ResourceRow>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad =
            || format!("resources.tsv line {}: expected kernel, arch, registers, smem: {line:?}", i + 1);
        if f.len() != 4 {
            return Err(bad());
        }
        rows.push(ResourceRow {
            kernel: f[0].to_string(),
            arch: f[1].to_string(),
            resources: Resources {
                registers: f[2].parse().map_err(|_| bad())?,
                static_smem: f[3].parse().map_err(|_| bad())?,
            },
        });
    }
    Ok(rows)
}

/// Formats rows as `resources.tsv` (sorted by kernel, then arch).
pub fn format(rows: &[ResourceRow]) -> String {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| (&a.kernel, &a.arch).cmp(&(&b.kernel, &b.arch)));
    let mut out = String::from(
        "# Registers per thread and static shared memory per block of every kernel, from `ptxas -v`\n\
         # for each target the time model predicts. Generated: TRIDENT_UPDATE_RESOURCES=1 cargo test\n\
         # --test kernel_resources (a stale copy fails that test).\n",
    );
    for r in rows {
        out += &format!("{}\t{}\t{}\t{}\n", r.kernel, r.arch, r.resources.registers, r.resources.static_smem);
    }
    out
}

/// The checked-in resources of `kernel` for `ptxas -arch` `arch`.
pub fn lookup(kernel: &str, arch: &str) -> Result<Resources, ModelError> {
    let rows = parse(RESOURCES_TSV).expect("the checked-in resources.tsv parses");
    rows.iter()
        .find(|r| r.kernel == kernel && r.arch == arch)
        .map(|r| r.resources)
        .ok_or_else(|| ModelError::NoResources { kernel: kernel.to_string(), arch: arch.to_string() })
}
