//! What a kernels crate's tests check in the machine code and the PTX its build produced,
//! written once for every crate of kernels (Trident's own, `trident-dev`'s, one's own):
//!
//! - [`parse_report`]: a `ptxas -v` report, kernel by kernel (registers, spills, stack, shared
//!   memory, barriers), for the no-spill and resource checks;
//! - [`collective_counts`] and [`check_collectives_table`]: the barriers and warp collectives
//!   of each PTX function, held to a reviewed table.
//!
//! Why the second exists: `bar.sync` (= `barrier.sync.aligned`), `mma.sync.aligned` and
//! `ldmatrix.sync.aligned` must be executed by every thread of the block (of the warp) at the
//! *same instruction* (PTX ISA, "Parallel Synchronization and Communication Instructions: bar,
//! barrier" and the `.aligned` qualifier of `mma`/`ldmatrix`). Rust's inline assembly cannot
//! mark them convergent, so a compiler pass that duplicates code, such as rustc's MIR jump
//! threading (rust-lang/rust#137086, turned off by [`crate::PtxBuild`]), may copy one into both
//! arms of a divergent branch: the PTX then has more of them than the source reaches, and
//! threads wait at different copies, which hangs or corrupts on a GPU. The emulator runs the
//! source, not the PTX, so it cannot see this; the table states what the source reaches after
//! unrolling and inlining, and a count that grows without a new barrier in the source is the
//! duplication.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One kernel's line of a `ptxas -v` report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KernelReport {
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Bytes of stack frame.
    pub stack: u32,
    /// Bytes of static shared memory.
    pub smem: u32,
    /// Named barriers used.
    pub barriers: u32,
}

/// The number just before `unit` in `line` (`"24 bytes spill stores"`, `"Used 40 registers"`).
pub(crate) fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.rsplit(|c: char| !c.is_ascii_digit()).find(|s| !s.is_empty())?.parse().ok()
}

/// Each entry function of a `ptxas -v` report, in the report's order.
pub fn parse_report(log: &str) -> Vec<(String, KernelReport)> {
    let mut out: Vec<(String, KernelReport)> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push((name, KernelReport::default()));
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

/// The instructions counted, by the prefix their PTX mnemonic starts with, and their column.
const COUNTED: &[(&str, &str)] = &[
    ("bar.sync", "bar.sync"),
    ("barrier.sync", "bar.sync"),
    ("bar.warp.sync", "bar.warp.sync"),
    ("shfl.sync", "shfl.sync"),
    ("vote.sync", "vote.sync"),
    ("mma.sync", "mma.sync"),
    ("ldmatrix.sync", "ldmatrix"),
];

/// The columns of a collectives table, in order.
pub const COLUMNS: [&str; 6] =
    ["bar.sync", "bar.warp.sync", "shfl.sync", "vote.sync", "mma.sync", "ldmatrix"];

/// Counts of [`COLUMNS`] per PTX function (kernel entries and the device functions they call),
/// for the functions that have any.
pub fn collective_counts(ptx: &str) -> BTreeMap<String, [u32; 6]> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, [u32; 6])> = None;
    let close = |current: Option<(String, [u32; 6])>, out: &mut BTreeMap<_, _>| {
        if let Some((n, c)) = current {
            if c.iter().any(|&x| x > 0) {
                out.insert(n, c);
            }
        }
    };
    for line in ptx.lines() {
        let t = line.trim();
        if let Some(name) = function_name(t) {
            close(current.take(), &mut out);
            current = Some((name, [0; 6]));
            continue;
        }
        let Some((_, counts)) = current.as_mut() else { continue };
        // Drop a guard predicate (`@%p1 bar.sync 0;`).
        let instr = match t.strip_prefix('@') {
            Some(rest) => rest.split_once(char::is_whitespace).map_or("", |(_, i)| i.trim_start()),
            None => t,
        };
        if let Some(&(_, column)) = COUNTED.iter().find(|(prefix, _)| instr.starts_with(prefix)) {
            if let Some(i) = COLUMNS.iter().position(|c| *c == column) {
                counts[i] += 1;
            }
        }
    }
    close(current, &mut out);
    out
}

/// The function a line of PTX opens (`.visible .entry name(`, `.func (...) name(`), if any.
fn function_name(line: &str) -> Option<String> {
    if line.starts_with("//") || !(line.contains(".entry ") || line.contains(".func ")) {
        return None;
    }
    let head = line.split('(').find(|part| {
        let last = part.split_whitespace().last().unwrap_or("");
        !last.is_empty() && !last.starts_with('.') && last != ")"
    })?;
    Some(head.split_whitespace().last()?.to_string())
}

/// The table of `counts`, headed by how to regenerate it.
fn format_table(counts: &BTreeMap<String, [u32; 6]>, regenerate: &str) -> String {
    let mut out = String::from(
        "# Barriers and warp collectives per PTX function, as the source reaches them (a change\n\
         # must be reviewed against the kernel's source).\n",
    );
    out += &format!("# Regenerate: TRIDENT_UPDATE_COLLECTIVES=1 {regenerate}\n");
    out += &format!("# function\t{}\n", COLUMNS.join("\t"));
    for (name, c) in counts {
        let cells: Vec<String> = c.iter().map(u32::to_string).collect();
        out += &format!("{name}\t{}\n", cells.join("\t"));
    }
    out
}

/// Compares the PTX's counts with the reviewed table at `table`; with
/// `TRIDENT_UPDATE_COLLECTIVES=1` in the environment rewrites the table instead.
/// `regenerate` is the command that runs the calling test, for the messages.
///
/// # Errors
/// Every function whose counts differ from the table (or an I/O error writing it), as a
/// message for the test to fail with.
pub fn check_collectives_table(ptx: &str, table: &Path, regenerate: &str) -> Result<(), String> {
    let fresh = format_table(&collective_counts(ptx), regenerate);
    if std::env::var("TRIDENT_UPDATE_COLLECTIVES").is_ok_and(|v| v == "1") {
        std::fs::write(table, &fresh).map_err(|e| format!("writing {}: {e}", table.display()))?;
        eprintln!("wrote {}", table.display());
        return Ok(());
    }
    let checked_in = std::fs::read_to_string(table).unwrap_or_default();
    let rows = |t: &str| -> BTreeMap<String, String> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('\t').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect()
    };
    let (want, got) = (rows(&checked_in), rows(&fresh));
    let mut diffs = Vec::new();
    for name in want.keys().chain(got.keys()).collect::<BTreeSet<_>>() {
        let (w, g) = (want.get(name), got.get(name));
        if w != g {
            diffs.push(format!(
                "{name}: table {} / PTX {}",
                w.map_or("-", String::as_str),
                g.map_or("-", String::as_str)
            ));
        }
    }
    if diffs.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the PTX's barriers and warp collectives ({}) differ from {}:\n  {}\n\
         A count that grew without a new barrier or collective in the source is a duplicated \
         `.aligned` instruction; if the source changed, regenerate the table with \
         `TRIDENT_UPDATE_COLLECTIVES=1 {regenerate}` and review the diff.",
        COLUMNS.join(", "),
        table.display(),
        diffs.join("\n  ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_copied_into_both_arms_of_a_branch_is_counted_twice() {
        // What jump threading makes of `if tid == 0 { .. } sync_threads();`: the barrier in each arm.
        let threaded = ".visible .entry k(\n.param .u64 k_param_0\n)\n{\n\tsetp.eq.s32 %p1, %r1, 0;\n\
                        \t@%p1 bra $L1;\n\tbar.sync 0;\n\tret;\n$L1:\n\tst.global.u32 [%rd1], 1;\n\
                        \tbar.sync 0;\n\tret;\n}\n";
        let straight = ".visible .entry k(\n.param .u64 k_param_0\n)\n{\n\tsetp.eq.s32 %p1, %r1, 0;\n\
                        \t@!%p1 bra $L1;\n\tst.global.u32 [%rd1], 1;\n$L1:\n\tbar.sync 0;\n\tret;\n}\n";
        assert_eq!(collective_counts(threaded)["k"][0], 2);
        assert_eq!(collective_counts(straight)["k"][0], 1);
        let warp =
            ".func (.param .b32 r) f(\n.param .b32 a\n)\n{\n\tshfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;\n\
                    \t@%p2 vote.sync.ballot.b32 %r3, %p1, -1;\n}\n";
        assert_eq!(collective_counts(warp)["f"], [0, 0, 1, 1, 0, 0]);
    }

    #[test]
    fn a_report_gives_each_kernels_registers_and_spills() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                   ptxas info    : Function properties for k\n\
                   \x20   8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n";
        let r = &parse_report(log)[0];
        assert_eq!(r.0, "k");
        assert_eq!(
            r.1,
            KernelReport {
                registers: 40,
                spill_stores: 4,
                spill_loads: 12,
                stack: 8,
                smem: 2048,
                barriers: 1
            }
        );
    }
}
