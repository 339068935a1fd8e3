//! Every kernel's barriers and warp collectives in the PTX, held to the reviewed table
//! `kernels/collectives.tsv`.
//!
//! `bar.sync` (= `barrier.sync.aligned`), `mma.sync.aligned` and `ldmatrix.sync.aligned` must be
//! executed by every thread of the block (of the warp) at the *same instruction* (PTX ISA,
//! "Parallel Synchronization and Communication Instructions: bar, barrier" and the `.aligned`
//! qualifier of `mma`/`ldmatrix`). Rust's inline assembly cannot mark them convergent, so a
//! compiler pass that duplicates code, such as rustc's MIR jump threading
//! (rust-lang/rust#137086, turned off for the kernels by `trident-ptx-builder`), may copy one
//! into both arms of a divergent branch: the PTX then has more of them than the source reaches,
//! and threads wait at different copies, which hangs or corrupts on a GPU. The emulator runs
//! the source, not the PTX, so it cannot see this.
//!
//! This test counts, per function of the PTX (kernel entries and the device functions they
//! call), each barrier and warp collective, and fails when the counts differ from the table,
//! which states what the source reaches after unrolling and inlining and is reviewed with
//! every change to it: a kernel whose count of `bar.sync` grows without a new `sync_threads()`
//! in its source is the duplication above. `TRIDENT_UPDATE_COLLECTIVES=1` rewrites the table.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The instructions counted, by the prefix their PTX mnemonic starts with.
const COUNTED: &[(&str, &str)] = &[
    ("bar.sync", "bar.sync"),
    ("barrier.sync", "bar.sync"),
    ("bar.warp.sync", "bar.warp.sync"),
    ("shfl.sync", "shfl.sync"),
    ("vote.sync", "vote.sync"),
    ("mma.sync", "mma.sync"),
    ("ldmatrix.sync", "ldmatrix"),
];

/// The columns of the table, in order.
const COLUMNS: &[&str] = &["bar.sync", "bar.warp.sync", "shfl.sync", "vote.sync", "mma.sync", "ldmatrix"];

/// Counts per function name, for the functions that have any.
fn count(ptx: &str) -> BTreeMap<String, [u32; 6]> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, [u32; 6])> = None;
    for line in ptx.lines() {
        let t = line.trim();
        if let Some(name) = function_name(t) {
            if let Some((n, c)) = current.take() {
                if c.iter().any(|&x| x > 0) {
                    out.insert(n, c);
                }
            }
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
            let i = COLUMNS.iter().position(|c| *c == column).expect("a column of the table");
            counts[i] += 1;
        }
    }
    if let Some((n, c)) = current {
        if c.iter().any(|&x| x > 0) {
            out.insert(n, c);
        }
    }
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

fn format(counts: &BTreeMap<String, [u32; 6]>) -> String {
    let mut out = String::from(
        "# Barriers and warp collectives per PTX function, as the source reaches them (checked by\n\
         # tests/ptx_collectives.rs; a change must be reviewed against the kernel's source).\n\
         # Regenerate: TRIDENT_UPDATE_COLLECTIVES=1 cargo test --test ptx_collectives\n",
    );
    out += &format!("# function\t{}\n", COLUMNS.join("\t"));
    for (name, c) in counts {
        let cells: Vec<String> = c.iter().map(u32::to_string).collect();
        out += &format!("{name}\t{}\n", cells.join("\t"));
    }
    out
}

#[test]
fn every_functions_barriers_and_collectives_match_the_reviewed_table() {
    let ptx = trident::kernels::PTX.expect("built with the `cuda` feature");
    let fresh = format(&count(ptx));
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels").join("collectives.tsv");
    if std::env::var("TRIDENT_UPDATE_COLLECTIVES").is_ok_and(|v| v == "1") {
        std::fs::write(&table, &fresh).unwrap();
        eprintln!("wrote {}", table.display());
        return;
    }
    let checked_in = std::fs::read_to_string(&table).unwrap_or_default();
    let rows = |t: &str| -> BTreeMap<String, String> {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('\t').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect()
    };
    let (want, got) = (rows(&checked_in), rows(&fresh));
    let mut diffs = Vec::new();
    for name in want.keys().chain(got.keys()).collect::<std::collections::BTreeSet<_>>() {
        let (w, g) = (want.get(name), got.get(name));
        if w != g {
            diffs.push(format!(
                "{name}: table {} / PTX {}",
                w.map_or("-", String::as_str),
                g.map_or("-", String::as_str)
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "the PTX's barriers and warp collectives ({}) differ from kernels/collectives.tsv:\n  {}\n\
         A count that grew without a new barrier or collective in the source is a duplicated \
         `.aligned` instruction; if the source changed, regenerate the table with \
         TRIDENT_UPDATE_COLLECTIVES=1 and review the diff.",
        COLUMNS.join(", "),
        diffs.join("\n  ")
    );
}

#[test]
fn a_barrier_copied_into_both_arms_of_a_branch_is_counted_twice() {
    // What jump threading makes of `if tid == 0 { .. } sync_threads();`: the barrier in each arm.
    let threaded = ".visible .entry k(\n.param .u64 k_param_0\n)\n{\n\tsetp.eq.s32 %p1, %r1, 0;\n\
                    \t@%p1 bra $L1;\n\tbar.sync 0;\n\tret;\n$L1:\n\tst.global.u32 [%rd1], 1;\n\
                    \tbar.sync 0;\n\tret;\n}\n";
    let straight = ".visible .entry k(\n.param .u64 k_param_0\n)\n{\n\tsetp.eq.s32 %p1, %r1, 0;\n\
                    \t@!%p1 bra $L1;\n\tst.global.u32 [%rd1], 1;\n$L1:\n\tbar.sync 0;\n\tret;\n}\n";
    assert_eq!(count(threaded)["k"][0], 2);
    assert_eq!(count(straight)["k"][0], 1);
    let warp = ".func (.param .b32 r) f(\n.param .b32 a\n)\n{\n\tshfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;\n\
                \t@%p2 vote.sync.ballot.b32 %r3, %p1, -1;\n}\n";
    assert_eq!(count(warp)["f"], [0, 0, 1, 1, 0, 0]);
}
