//! The checks of a [`Problem`] before anything is computed from it: sizes within what the
//! planner's integer products can hold, a GPU count that does not overflow, floats finite and
//! in range, and the hardware figures in range. Each refusal names the flag (or the hardware
//! entry and field) to change.

use super::Problem;

/// The most any size (layers, hidden, heads, vocabulary, sequence, batch, parallel sizes,
/// GPUs) may be: far above every real run, and far enough below `usize::MAX` that a product
/// of two sizes cannot overflow (`2^24 x 2^24 = 2^48`).
pub const MAX_SIZE: usize = 1 << 24;

/// Checks that `value` of `flag` is a size the planner takes: at least 1, at most
/// [`MAX_SIZE`].
pub fn check_size(flag: &str, value: usize) -> Result<(), String> {
    if value == 0 {
        return Err(format!("{flag} must be at least 1"));
    }
    if value > MAX_SIZE {
        return Err(format!("{flag} {value} is larger than the planner takes ({MAX_SIZE})"));
    }
    Ok(())
}

/// `a x b` for two sizes, or an error naming both flags when the product overflows or
/// passes [`MAX_SIZE`].
pub fn checked_product(a: (&str, usize), b: (&str, usize)) -> Result<usize, String> {
    a.1.checked_mul(b.1).filter(|&p| p <= MAX_SIZE).ok_or_else(|| {
        format!("{} {} x {} {} is larger than the planner takes ({MAX_SIZE})", a.0, a.1, b.0, b.1)
    })
}

/// Checks a float flag: finite, and positive (or, with `zero_ok`, at least 0).
pub fn check_float(flag: &str, value: f64, zero_ok: bool) -> Result<(), String> {
    if value.is_finite() && (value > 0.0 || (zero_ok && value == 0.0)) {
        return Ok(());
    }
    let what = if zero_ok { "a finite number >= 0" } else { "a finite number > 0" };
    Err(format!("{flag} must be {what}, not {value}"))
}

/// Checks everything of `problem` that does not depend on the layout; the error names the
/// flag, or the hardware entry and field.
pub fn check_problem(problem: &Problem) -> Result<(), String> {
    let m = &problem.model;
    for (flag, v) in [
        ("--num-layers", m.layers),
        ("--hidden-size", m.hidden),
        ("--num-attention-heads", m.heads),
        ("--vocab-size", m.vocab),
        ("--seq-length", m.seq_len),
        ("--global-batch-size", problem.global_batch),
        ("--gpus-per-node", problem.cluster.gpus_per_node),
        ("--nodes", problem.cluster.nodes),
    ] {
        check_size(flag, v)?;
    }
    if m.hidden % m.heads != 0 {
        return Err(format!("--num-attention-heads {} must divide --hidden-size {}", m.heads, m.hidden));
    }
    checked_product(("--nodes", problem.cluster.nodes), ("--gpus-per-node", problem.cluster.gpus_per_node))?;
    check_float("--reserve-gib", problem.options.reserve_gib, true)?;
    let c = &problem.cluster;
    c.gpu.check()?;
    c.intra.check()?;
    c.inter.check()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{layouts, search, Space};
    use crate::tests::{layout, problem};
    use crate::{evaluate, memory, PipelineCache, Precision, Recompute};

    fn base() -> Problem {
        problem("gpt3-175b", "a100-80gb", 64, 64, Precision::Bf16, true)
    }

    /// A problem changed by `change` is refused by every entry point, naming `needle`,
    /// without a panic.
    fn refused(change: impl Fn(&mut Problem), needle: &str) {
        let mut p = base();
        change(&mut p);
        let e = check_problem(&p).unwrap_err();
        assert!(e.contains(needle), "{needle}: {e}");
        let l = layout(8, 8, 1, 1, Recompute::None, false, 1);
        let e = evaluate(&p, &l, &mut PipelineCache::default()).unwrap_err();
        assert!(e.contains(needle), "{needle}: {e}");
        assert!(memory(&p, &l, 64, &mut PipelineCache::default()).is_err(), "{needle}");
        let e = search(&p, &Space::default()).err().expect("search refuses");
        assert!(e.contains(needle), "{needle}: {e}");
        assert!(layouts(&p, &Space::default()).is_empty(), "{needle}");
    }

    #[test]
    fn bad_sizes_are_refused_naming_the_flag() {
        refused(|p| p.global_batch = 0, "--global-batch-size must be at least 1");
        refused(|p| p.model.vocab = usize::MAX, "--vocab-size");
        refused(|p| p.model.seq_len = MAX_SIZE + 1, "--seq-length");
        refused(|p| p.model.layers = 0, "--num-layers");
        refused(|p| p.model.heads = 7, "--num-attention-heads 7 must divide --hidden-size");
        refused(|p| p.cluster.nodes = usize::MAX, "--nodes");
        // 2^13 x 2^12 = 2^25 GPUs: each size in range, the product not.
        refused(
            |p| {
                p.cluster.nodes = 1 << 13;
                p.cluster.gpus_per_node = 1 << 12;
            },
            "--nodes 8192 x --gpus-per-node 4096",
        );
        refused(|p| p.cluster.gpus_per_node = 0, "--gpus-per-node");
    }

    #[test]
    fn bad_floats_and_hardware_figures_are_refused_naming_them() {
        refused(|p| p.options.reserve_gib = -5.0, "--reserve-gib");
        refused(|p| p.options.reserve_gib = f64::NAN, "--reserve-gib");
        refused(|p| p.options.reserve_gib = f64::INFINITY, "--reserve-gib");
        refused(|p| p.cluster.gpu.bf16_tflops = Some(-312.0), "bf16_tflops");
        refused(|p| p.cluster.gpu.memory_gib = f64::NAN, "memory_gib");
        refused(|p| p.cluster.gpu.gemm_efficiency = 0.0, "gemm_efficiency");
        refused(|p| p.cluster.inter.gb_s = f64::INFINITY, "gb_s");
        refused(|p| p.cluster.intra.latency_us = -1.0, "latency_us");
    }

    /// `--reserve-gib=-5` made a layout that does not fit report as fitting; now no reserve
    /// below 0 gets that far, and 0 is the least.
    #[test]
    fn a_negative_reserve_cannot_make_a_layout_fit() {
        let mut p = base();
        p.options.reserve_gib = 0.0;
        let l = layout(8, 8, 1, 1, Recompute::None, false, 1);
        let plan = evaluate(&p, &l, &mut PipelineCache::default()).unwrap();
        assert_eq!(plan.memory.reserved, 0.0);
        p.options.reserve_gib = -5.0;
        assert!(evaluate(&p, &l, &mut PipelineCache::default()).is_err());
    }

    #[test]
    fn bad_layouts_overflow_nothing_and_name_the_flag() {
        let p = base();
        let mut cache = PipelineCache::default();
        for (l, needle) in [
            (layout(usize::MAX, 2, 1, 1, Recompute::None, false, 1), "--tensor-model-parallel-size"),
            (
                layout(1 << 20, 1 << 20, 1, 1, Recompute::None, false, 1),
                "--tensor-model-parallel-size 1048576 x",
            ),
            (layout(8, 8, 1, usize::MAX, Recompute::None, false, 1), "--micro-batch-size"),
            (layout(8, 8, 1, 1 << 24, Recompute::None, false, 1), "--global-batch-size 64 is not a multiple"),
            (layout(8, 8, 0, 1, Recompute::None, false, 1), "the data-parallel size"),
            (
                layout(8, 8, 1, 1, Recompute::None, false, usize::MAX),
                "--num-layers-per-virtual-pipeline-stage",
            ),
            (layout(8, 0, 8, 1, Recompute::None, false, 1), "--pipeline-model-parallel-size"),
        ] {
            let e = evaluate(&p, &l, &mut cache).unwrap_err();
            assert!(e.contains(needle), "{l:?}: {e}");
            assert!(memory(&p, &l, 1, &mut cache).is_err(), "{l:?}");
        }
        // A fixed size past everything in the search space gives no layout, not a panic.
        let space = Space { tp: Some(usize::MAX), pp: Some(usize::MAX), ..Space::default() };
        assert!(layouts(&p, &space).is_empty());
    }

    /// A batch of millions of micro-batches per pipeline is refused before its schedule is
    /// built step by step.
    #[test]
    fn a_schedule_too_long_to_simulate_is_refused() {
        let mut p = base();
        p.global_batch = MAX_SIZE;
        let l = layout(8, 8, 1, 1, Recompute::None, false, 1);
        let e = evaluate(&p, &l, &mut PipelineCache::default()).unwrap_err();
        assert!(e.contains("--global-batch-size 16777216") && e.contains("--micro-batch-size"), "{e}");
        // A large micro-batch brings it back within the bound.
        let l = layout(8, 8, 1, 1 << 12, Recompute::Full, false, 1);
        assert!(check_layout_ok(&p, &l));
    }

    fn check_layout_ok(p: &Problem, l: &crate::Layout) -> bool {
        crate::check_layout(p, l).is_ok()
    }

    #[test]
    fn the_checks_name_flags_in_their_messages() {
        assert_eq!(check_size("--nodes", 0).unwrap_err(), "--nodes must be at least 1");
        assert!(check_size("--nodes", MAX_SIZE).is_ok());
        assert!(checked_product(("--a", usize::MAX), ("--b", 2)).unwrap_err().contains("--a"));
        assert_eq!(checked_product(("--a", 3), ("--b", 5)), Ok(15));
        assert!(check_float("--x", 0.0, true).is_ok());
        assert!(check_float("--x", 0.0, false).unwrap_err().contains("> 0"));
        assert!(check_float("--x", f64::NEG_INFINITY, true).is_err());
    }
}
