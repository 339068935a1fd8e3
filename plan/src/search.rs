//! `--search`: every valid layout, ranked, and why the best one wins.

use crate::Recompute;

use super::{check_layout, evaluate, IterTime, Layout, PipelineCache, Plan, Problem};

/// Dimensions the search may vary; `Some` fixes one (the flag was given).
#[derive(Clone, Copy, Debug, Default)]
pub struct Space {
    /// Tensor-parallel size.
    pub tp: Option<usize>,
    /// Pipeline stages.
    pub pp: Option<usize>,
    /// Sequences per micro-batch.
    pub micro_batch: Option<usize>,
    /// Activation recomputation.
    pub recompute: Option<Recompute>,
    /// Sequence parallelism.
    pub sequence_parallel: Option<bool>,
    /// Model chunks per stage.
    pub virtual_stages: Option<usize>,
    /// ZeRO-1.
    pub distributed_optimizer: Option<bool>,
}

/// The search's outcome.
pub struct Ranked {
    /// Layouts that fit, fastest first.
    pub fitting: Vec<Plan>,
    /// Valid layouts that do not fit, least memory first.
    pub too_big: Vec<Plan>,
    /// Layouts considered (valid ones).
    pub considered: usize,
}

fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|d| n % d == 0).collect()
}

/// Every layout of `space` that [`check_layout`] accepts.
pub fn layouts(problem: &Problem, space: &Space) -> Vec<Layout> {
    let world = problem.cluster.world();
    let model = &problem.model;
    let mut out = Vec::new();
    let tps: Vec<usize> = match space.tp {
        Some(t) => vec![t],
        None => {
            divisors(world).into_iter().filter(|t| model.heads % t == 0 && model.hidden % t == 0).collect()
        }
    };
    for &tp in &tps {
        let pps: Vec<usize> = match space.pp {
            Some(p) => vec![p],
            None => {
                divisors(world / tp.min(world).max(1)).into_iter().filter(|p| model.layers % p == 0).collect()
            }
        };
        for &pp in &pps {
            if world % (tp * pp) != 0 {
                continue;
            }
            let dp = world / (tp * pp);
            if problem.global_batch % dp != 0 {
                continue;
            }
            let mbs: Vec<usize> = match space.micro_batch {
                Some(b) => vec![b],
                None => {
                    [1, 2, 4, 8, 16].into_iter().filter(|b| (problem.global_batch / dp) % b == 0).collect()
                }
            };
            let recomputes = match space.recompute {
                Some(r) => vec![r],
                None => vec![Recompute::None, Recompute::Selective, Recompute::Full],
            };
            let sps = match space.sequence_parallel {
                Some(s) => vec![s],
                None if tp > 1 => vec![true, false],
                None => vec![false],
            };
            let vs: Vec<usize> = match space.virtual_stages {
                Some(v) => vec![v],
                None if pp > 1 => (1..=8).filter(|v| (model.layers / pp) % v == 0).collect(),
                None => vec![1],
            };
            let zeros = match space.distributed_optimizer {
                Some(z) => vec![z],
                None if dp > 1 => vec![false, true],
                None => vec![false],
            };
            for &micro_batch in &mbs {
                for &recompute in &recomputes {
                    for &sequence_parallel in &sps {
                        for &virtual_stages in &vs {
                            for &distributed_optimizer in &zeros {
                                let l = Layout {
                                    tp,
                                    pp,
                                    dp,
                                    micro_batch,
                                    recompute,
                                    sequence_parallel,
                                    virtual_stages,
                                    distributed_optimizer,
                                };
                                if check_layout(problem, &l).is_ok() {
                                    out.push(l);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Evaluates every layout of `space` and ranks them.
pub fn search(problem: &Problem, space: &Space) -> Result<Ranked, String> {
    let mut cache = PipelineCache::default();
    let candidates = layouts(problem, space);
    let considered = candidates.len();
    let mut fitting = Vec::new();
    let mut too_big = Vec::new();
    for l in candidates {
        let plan = evaluate(problem, &l, &mut cache)?;
        if plan.fits {
            fitting.push(plan);
        } else {
            too_big.push(plan);
        }
    }
    fitting.sort_by(|a, b| {
        a.time.total.total_cmp(&b.time.total).then(a.memory.total().total_cmp(&b.memory.total()))
    });
    too_big.sort_by(|a, b| a.memory.total().total_cmp(&b.memory.total()));
    Ok(Ranked { fitting, too_big, considered })
}

/// The time components, named, for comparisons.
fn components(t: &IterTime) -> [(&'static str, f64); 7] {
    [
        ("compute", t.compute),
        ("recomputation", t.recompute),
        ("TP communication", t.tp_comm),
        ("PP communication", t.pp_comm),
        ("pipeline bubble", t.bubble),
        ("exposed DP communication", t.dp_exposed),
        ("optimizer step", t.optimizer),
    ]
}

/// Why `best` beats `other`: the two components that differ the most, in seconds.
pub fn difference(best: &Plan, other: &Plan) -> String {
    let mut deltas: Vec<(&str, f64)> = components(&other.time)
        .iter()
        .zip(components(&best.time))
        .map(|((name, o), (_, b))| (*name, o - b))
        .filter(|(_, d)| d.abs() > 1e-4 * best.time.total)
        .collect();
    deltas.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    let parts: Vec<String> = deltas
        .iter()
        .take(2)
        .map(|(name, d)| format!("{name} {}{}", if *d >= 0.0 { "+" } else { "-" }, seconds(d.abs())))
        .collect();
    format!(
        "{} is {:.1}% slower ({}): {}",
        other.layout.label(),
        100.0 * (other.time.total / best.time.total - 1.0),
        seconds(other.time.total),
        if parts.is_empty() { "no component differs".to_string() } else { parts.join(", ") }
    )
}

/// `s` seconds as `1.23 s`, `12.3 ms` or `123 us`.
pub fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} us", s * 1e6)
    }
}

/// For each dimension, the fastest fitting layout that differs from the best in it, and what
/// that costs: the explanation of the winner.
pub fn explain(ranked: &Ranked) -> Vec<String> {
    let Some(best) = ranked.fitting.first() else { return Vec::new() };
    let b = best.layout;
    let dims = [
        "tensor parallelism",
        "pipeline parallelism",
        "micro-batch size",
        "recomputation",
        "interleaving",
        "sequence parallelism",
        "ZeRO-1",
    ];
    let differs = |dim: usize, l: &Layout| match dim {
        0 => l.tp != b.tp,
        1 => l.pp != b.pp,
        2 => l.micro_batch != b.micro_batch,
        3 => l.recompute != b.recompute,
        4 => l.virtual_stages != b.virtual_stages,
        5 => (l.sequence_parallel && l.tp > 1) != (b.sequence_parallel && b.tp > 1),
        _ => l.distributed_optimizer != b.distributed_optimizer,
    };
    let mut lines = Vec::new();
    for (i, dim) in dims.iter().enumerate() {
        if let Some(other) = ranked.fitting.iter().find(|p| differs(i, &p.layout)) {
            lines.push(format!("other {dim}: {}", difference(best, other)));
        } else if let Some(big) = ranked.too_big.iter().find(|p| differs(i, &p.layout)) {
            lines.push(format!(
                "other {dim}: nothing fits; the smallest, {}, needs {:.1} GiB per GPU",
                big.layout.label(),
                big.memory.total() / trident_hardware::GIB
            ));
        }
    }
    lines
}

/// The source guide's rules of thumb, checked on the winner of `ranked` (which must have one
/// fitting layout; none gives no lines): TP = GPUs per node (and, when that loses, the fastest
/// layout that has it and what it loses by), and PP at most a quarter of the layers.
pub fn recommendations(problem: &Problem, ranked: &Ranked) -> Vec<String> {
    let Some(best) = ranked.fitting.first() else { return Vec::new() };
    let (l, gpn, layers) = (best.layout, problem.cluster.gpus_per_node, problem.model.layers);
    let tp = if l.tp == gpn {
        format!("TP = GPUs per node ({gpn}): yes")
    } else {
        match ranked.fitting.iter().find(|p| p.layout.tp == gpn) {
            Some(other) => {
                format!("TP = GPUs per node ({gpn}): no, TP {} wins: {}", l.tp, difference(best, other))
            }
            None => format!("TP = GPUs per node ({gpn}): no layout with TP {gpn} fits or divides the model"),
        }
    };
    let pp = if l.pp * 4 <= layers {
        format!("PP at most a quarter of the layers ({}): yes, PP {}", layers / 4, l.pp)
    } else {
        format!(
            "PP at most a quarter of the layers ({}): no, PP {} (fewer stages do not fit or are slower)",
            layers / 4,
            l.pp
        )
    };
    vec![tp, pp]
}
