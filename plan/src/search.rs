//! `--search`: every valid layout, ranked, and why the best one wins.

use crate::Recompute;

use super::{check_layout, check_problem, evaluate, Layout, PipelineCache, Plan, Problem};

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
    if check_problem(problem).is_err() {
        return Vec::new();
    }
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
            let Some(dp) =
                tp.checked_mul(pp).filter(|&tpp| tpp > 0 && world % tpp == 0).map(|tpp| world / tpp)
            else {
                continue;
            };
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
                // Any chunk count the stage's layers allow, down to one layer a chunk.
                None if pp > 1 => divisors(model.layers / pp),
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
    check_problem(problem)?;
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

/// Why `best` beats `other`: the two components that differ the most, in seconds.
pub fn difference(best: &Plan, other: &Plan) -> String {
    let mut deltas: Vec<(&str, f64)> = other
        .time
        .components()
        .iter()
        .zip(best.time.components())
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

/// The settings [`explain`] varies one at a time, as its lines name them.
pub const SETTINGS: [&str; 7] = [
    "tensor parallelism",
    "pipeline parallelism",
    "micro-batch size",
    "recomputation",
    "interleaving",
    "sequence parallelism",
    "ZeRO-1",
];

/// Each of [`SETTINGS`] of `l`, as a comparable number; `None` where the setting does not
/// apply (sequence parallelism without TP, ZeRO-1 without DP, interleaving without PP), so
/// that it counts as equal to anything. The data-parallel size is not a setting: it follows
/// from TP and PP.
fn settings(l: &Layout) -> [Option<usize>; 7] {
    [
        Some(l.tp),
        Some(l.pp),
        Some(l.micro_batch),
        Some(l.recompute as usize),
        (l.pp > 1).then_some(l.virtual_stages),
        (l.tp > 1).then_some(usize::from(l.sequence_parallel)),
        (l.dp > 1).then_some(usize::from(l.distributed_optimizer)),
    ]
}

/// Whether setting `i` of `a` and `b` differs (both apply and differ).
fn setting_differs(i: usize, a: &Layout, b: &Layout) -> bool {
    let (x, y) = (settings(a)[i], settings(b)[i]);
    match i {
        // TP and PP change which settings apply; compare them whatever the others do.
        0 | 1 => x != y,
        _ => matches!((x, y), (Some(x), Some(y)) if x != y),
    }
}

/// The settings in which `a` and `b` differ, by name.
pub fn differing_settings(a: &Layout, b: &Layout) -> Vec<&'static str> {
    (0..SETTINGS.len()).filter(|&i| setting_differs(i, a, b)).map(|i| SETTINGS[i]).collect()
}

/// What the winner of a search is compared with for one setting.
#[derive(Clone, Copy, Debug)]
pub enum Alternative<'a> {
    /// The fastest fitting layout that differs from the winner in this setting alone.
    Only(&'a Plan),
    /// None of those fits: the smallest of them.
    OnlyTooBig(&'a Plan),
    /// No valid layout differs in this setting alone: the fastest fitting one that differs
    /// in it (and in others).
    Nearest(&'a Plan),
}

/// For each of [`SETTINGS`] (by index), what the winner of `ranked` is compared with: the
/// fastest fitting layout that differs from it in that setting alone (every other setting
/// held, the data-parallel size following from TP and PP), or what comes nearest. `None`
/// where no layout differs in the setting (it was pinned, or nothing else divides).
pub fn alternatives(ranked: &Ranked) -> Vec<(usize, Alternative<'_>)> {
    let Some(best) = ranked.fitting.first() else { return Vec::new() };
    let b = best.layout;
    let only = |i: usize, l: &Layout| differing_settings(&b, l) == [SETTINGS[i]];
    (0..SETTINGS.len())
        .filter_map(|i| {
            let alt = if let Some(p) = ranked.fitting.iter().find(|p| only(i, &p.layout)) {
                Alternative::Only(p)
            } else if let Some(p) = ranked.too_big.iter().find(|p| only(i, &p.layout)) {
                Alternative::OnlyTooBig(p)
            } else {
                Alternative::Nearest(ranked.fitting.iter().find(|p| setting_differs(i, &b, &p.layout))?)
            };
            Some((i, alt))
        })
        .collect()
}

/// The explanation of the winner: for each setting, [`alternatives`] and what it costs.
pub fn explain(ranked: &Ranked) -> Vec<String> {
    let Some(best) = ranked.fitting.first() else { return Vec::new() };
    alternatives(ranked)
        .into_iter()
        .map(|(i, alt)| {
            let dim = SETTINGS[i];
            match alt {
                Alternative::Only(other) => format!("other {dim}: {}", difference(best, other)),
                Alternative::OnlyTooBig(big) => format!(
                    "other {dim}: nothing else the same fits; the smallest, {}, needs {:.1} GiB per GPU",
                    big.layout.label(),
                    big.memory.total() / trident_hardware::GIB
                ),
                Alternative::Nearest(other) => {
                    let also: Vec<&str> =
                        differing_settings(&best.layout, &other.layout).into_iter().filter(|d| *d != dim).collect();
                    format!(
                        "other {dim}: no valid layout differs in it alone; the fastest that differs in it (and in \
                         {}): {}",
                        also.join(", "),
                        difference(best, other)
                    )
                }
            }
        })
        .collect()
}

/// The source guide's rules of thumb, checked on the winner of `ranked` (which must have one
/// fitting layout; none gives no lines): TP = GPUs per node (and, when that loses, the fastest
/// layout that has it, differing from the winner in TP alone where one fits, and what it loses
/// by), and PP at most a quarter of the layers.
pub fn recommendations(problem: &Problem, ranked: &Ranked) -> Vec<String> {
    let Some(best) = ranked.fitting.first() else { return Vec::new() };
    let (l, gpn, layers) = (best.layout, problem.cluster.gpus_per_node, problem.model.layers);
    let tp = if l.tp == gpn {
        format!("TP = GPUs per node ({gpn}): yes")
    } else {
        // The fastest with TP = GPUs per node and every other setting of the winner, if any.
        let only_tp = |p: &&Plan| p.layout.tp == gpn && differing_settings(&l, &p.layout) == [SETTINGS[0]];
        match ranked
            .fitting
            .iter()
            .find(only_tp)
            .or_else(|| ranked.fitting.iter().find(|p| p.layout.tp == gpn))
        {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::problem;
    use crate::Precision;

    /// Interleaving is searched up to one layer a chunk, not up to a fixed count.
    #[test]
    fn interleaving_goes_up_to_one_layer_a_chunk() {
        // 96 layers over 2 stages: 48 a stage, so chunk counts up to 48.
        let p = problem("gpt3-175b", "a100-80gb", 64, 1536, Precision::Bf16, true);
        let space = Space { tp: Some(8), pp: Some(2), micro_batch: Some(1), ..Space::default() };
        let vs: std::collections::BTreeSet<usize> =
            layouts(&p, &space).iter().map(|l| l.virtual_stages).collect();
        assert_eq!(vs.into_iter().collect::<Vec<_>>(), [1, 2, 3, 4, 6, 8, 12, 16, 24, 48]);
    }

    /// Each setting can be held: a 2021 stack (no sequence parallelism, no distributed
    /// optimizer, no interleaving, full recomputation) searched as it was.
    #[test]
    fn pinned_settings_stay_as_pinned() {
        let p = problem("megatron-18b", "a100-80gb", 256, 1024, Precision::Fp16, false);
        let space = Space {
            sequence_parallel: Some(false),
            distributed_optimizer: Some(false),
            virtual_stages: Some(1),
            recompute: Some(Recompute::Full),
            ..Space::default()
        };
        let all = layouts(&p, &space);
        assert!(all.len() > 20, "{}", all.len());
        for l in &all {
            assert!(!l.sequence_parallel && !l.distributed_optimizer, "{l:?}");
            assert_eq!((l.virtual_stages, l.recompute), (1, Recompute::Full), "{l:?}");
        }
        let free = layouts(&p, &Space::default());
        assert!(free.iter().any(|l| l.sequence_parallel) && free.iter().any(|l| l.distributed_optimizer));
        assert!(free.iter().any(|l| l.virtual_stages > 1) && free.len() > 4 * all.len());
    }

    /// Each "why it wins" line compares the winner with the fastest layout that differs in the
    /// one setting it names, every other setting the same; the line of a setting that was held
    /// fixed is absent.
    #[test]
    fn each_alternative_differs_in_its_setting_alone() {
        let p = problem("megatron-18b", "a100-80gb", 256, 1024, Precision::Fp16, false);
        let space = Space { distributed_optimizer: Some(false), ..Space::default() };
        let ranked = search(&p, &space).unwrap();
        let best = ranked.fitting[0].layout;
        let alts = alternatives(&ranked);
        assert!(alts.len() >= 5, "{alts:?}");
        let mut only = 0;
        for (i, alt) in &alts {
            assert_ne!(SETTINGS[*i], "ZeRO-1", "a pinned setting has no alternative");
            match alt {
                Alternative::Only(other) => {
                    only += 1;
                    assert_eq!(
                        differing_settings(&best, &other.layout),
                        [SETTINGS[*i]],
                        "{:?}",
                        other.layout
                    );
                    // It is the fastest such layout.
                    let first = ranked
                        .fitting
                        .iter()
                        .find(|q| differing_settings(&best, &q.layout) == [SETTINGS[*i]])
                        .unwrap();
                    assert_eq!(first.layout, other.layout);
                    assert!(other.time.total >= ranked.fitting[0].time.total);
                }
                Alternative::OnlyTooBig(big) => {
                    assert_eq!(differing_settings(&best, &big.layout), [SETTINGS[*i]]);
                    assert!(!big.fits);
                }
                Alternative::Nearest(other) => {
                    assert!(differing_settings(&best, &other.layout).contains(&SETTINGS[*i]));
                    assert!(!ranked
                        .fitting
                        .iter()
                        .any(|q| differing_settings(&best, &q.layout) == [SETTINGS[*i]]));
                }
            }
        }
        assert!(only >= 4, "{alts:?}");
        let lines = explain(&ranked);
        assert_eq!(lines.len(), alts.len());
        assert!(lines.iter().all(|l| l.starts_with("other ")), "{lines:?}");
    }

    /// Settings that do not apply count as equal: SP without TP, ZeRO-1 without DP,
    /// interleaving without PP.
    #[test]
    fn settings_that_do_not_apply_do_not_differ() {
        let a = Layout {
            tp: 1,
            pp: 1,
            dp: 8,
            micro_batch: 1,
            recompute: Recompute::None,
            sequence_parallel: false,
            virtual_stages: 1,
            distributed_optimizer: true,
        };
        let b = Layout { tp: 8, dp: 1, sequence_parallel: true, distributed_optimizer: false, ..a };
        assert_eq!(differing_settings(&a, &b), ["tensor parallelism"]);
        let c = Layout { pp: 8, dp: 1, virtual_stages: 4, distributed_optimizer: false, ..a };
        assert_eq!(differing_settings(&a, &c), ["pipeline parallelism"]);
        let d = Layout { recompute: Recompute::Selective, micro_batch: 2, ..a };
        assert_eq!(differing_settings(&a, &d), ["micro-batch size", "recomputation"]);
    }
}
