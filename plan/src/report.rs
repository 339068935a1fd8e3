//! The plan as a terminal table and as JSON.

use serde::Serialize;
use serde_json::{json, Value};
use trident_hardware::GIB;

use super::search::seconds;
use super::{recompute_name, Layout, Plan, Problem};

/// Serialises a layout with `trident train`'s flag names.
pub fn ser_layout<S: serde::Serializer>(l: &Layout, s: S) -> Result<S::Ok, S::Error> {
    json!({
        "tensor_model_parallel_size": l.tp,
        "pipeline_model_parallel_size": l.pp,
        "data_parallel_size": l.dp,
        "micro_batch_size": l.micro_batch,
        "recompute_granularity": recompute_name(l.recompute),
        "sequence_parallel": l.sequence_parallel && l.tp > 1,
        "virtual_stages": l.virtual_stages,
        "use_distributed_optimizer": l.distributed_optimizer,
        "label": l.label(),
    })
    .serialize(s)
}

/// What a run costs: tokens to train, and prices.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Costing {
    /// Tokens to train.
    pub tokens: f64,
    /// US dollars per GPU-hour, if given.
    pub price_per_gpu_hour: Option<f64>,
    /// `(name, price of one node)`, amortised over `amortize_years`.
    pub node_prices: Vec<(String, f64)>,
    /// Years a node's price is spread over.
    pub amortize_years: f64,
}

impl Costing {
    /// `(what, dollars)` for training `self.tokens` with `plan` on `gpus` GPUs in `nodes` nodes.
    pub fn costs(&self, plan: &Plan, gpus: usize, nodes: usize) -> Vec<(String, f64)> {
        let days = plan.days_for(self.tokens);
        let mut out = Vec::new();
        if let Some(price) = self.price_per_gpu_hour {
            out.push((format!("at ${price}/GPU-hour"), price * gpus as f64 * days * 24.0));
        }
        for (name, price) in &self.node_prices {
            let share = days / (self.amortize_years * 365.25);
            out.push((
                format!("{name} nodes at ${price:.0} each, {} years' amortisation", self.amortize_years),
                price * nodes as f64 * share,
            ));
        }
        out
    }
}

fn gib(b: f64) -> f64 {
    b / GIB
}

/// Bytes in GiB, or MiB below one GiB.
pub fn size(b: f64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b / GIB)
    } else {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    }
}

/// FLOP/s in TFLOP/s, or GFLOP/s below one TFLOP/s.
pub fn rate(flops: f64) -> String {
    if flops >= 1e12 {
        format!("{:.1} TFLOP/s", flops / 1e12)
    } else {
        format!("{:.2} GFLOP/s", flops / 1e9)
    }
}

/// The ranked table: one line per plan.
pub fn table(plans: &[&Plan]) -> String {
    let mut out = format!(
        "{:>3}  {:<32} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>11}\n",
        "#",
        "layout",
        "mem GiB",
        "iter",
        "compute",
        "recomp",
        "TP",
        "PP",
        "bubble",
        "DP",
        "TFLOP/s",
        "MFU",
        "tokens/s"
    );
    for (i, p) in plans.iter().enumerate() {
        let t = &p.time;
        out.push_str(&format!(
            "{:>3}  {:<32} {:>8.1}{} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>5.1}% {:>11.0}\n",
            i + 1,
            p.layout.label(),
            gib(p.memory.total()),
            if p.fits { ' ' } else { '!' },
            seconds(t.total),
            seconds(t.compute),
            seconds(t.recompute),
            seconds(t.tp_comm),
            seconds(t.pp_comm),
            seconds(t.bubble),
            seconds(t.dp_exposed + t.optimizer),
            if p.model_tflops_per_gpu >= 1.0 {
                format!("{:.1}", p.model_tflops_per_gpu)
            } else {
                format!("{:.4}", p.model_tflops_per_gpu)
            },
            100.0 * p.mfu,
            p.tokens_per_s,
        ));
    }
    out
}

/// One plan in full: memory and time by component, throughput, days and cost.
pub fn detail(problem: &Problem, plan: &Plan, costing: &Costing) -> String {
    let c = &problem.cluster;
    let m = &plan.memory;
    let mut out = format!(
        "{} on {} x {} ({} nodes of {}), {} micro-batches of {} per pipeline\n",
        plan.layout.label(),
        c.world(),
        c.gpu.name,
        c.nodes,
        c.gpus_per_node,
        plan.micro_batches,
        plan.layout.micro_batch,
    );
    out.push_str(&format!(
        "  memory per GPU (stage {}): {} of {}{}\n",
        m.stage,
        size(m.total()),
        size(plan.memory_limit),
        if plan.fits { "" } else { "  DOES NOT FIT" }
    ));
    for (name, bytes) in m.components() {
        out.push_str(&format!("    {name:<13} {:>12}\n", size(bytes)));
    }
    let t = &plan.time;
    out.push_str(&format!("  time per iteration: {}\n", seconds(t.total)));
    for (name, s) in t.components() {
        if name == "launch idle" && s == 0.0 {
            continue; // only runs with blocking launches have it
        }
        out.push_str(&format!("    {name:<24} {:>10} {:>5.1}%\n", seconds(s), 100.0 * s / t.total));
    }
    out.push_str(&format!(
        "    (DP reduction {} in all, on {}; TP on {}; PP on {})\n",
        seconds(t.dp_comm),
        if plan.layout.tp * plan.layout.dp <= c.gpus_per_node { &c.intra.name } else { &c.inter.name },
        if plan.layout.tp <= c.gpus_per_node { &c.intra.name } else { &c.inter.name },
        if plan.layout.tp * plan.layout.dp * plan.layout.pp <= c.gpus_per_node {
            &c.intra.name
        } else {
            &c.inter.name
        },
    ));
    out.push_str(&format!(
        "  per GPU: {} of model FLOPs (Megatron-LM's count), MFU {:.1}%; {} of hardware FLOPs (recomputation \
         included), HFU {:.1}%; {:.0} tokens/s\n",
        rate(plan.model_tflops_per_gpu * 1e12),
        100.0 * plan.mfu,
        rate(plan.hardware_tflops_per_gpu * 1e12),
        100.0 * plan.hfu,
        plan.tokens_per_s
    ));
    if costing.tokens > 0.0 {
        out.push_str(&format!("  {:.3e} tokens: {:.1} days", costing.tokens, plan.days_for(costing.tokens)));
        let costs = costing.costs(plan, c.world(), c.nodes);
        for (what, usd) in &costs {
            out.push_str(&format!("; ${:.3}M {what}", usd / 1e6));
        }
        out.push('\n');
    }
    out
}

/// One plan as JSON.
pub fn plan_json(problem: &Problem, plan: &Plan, costing: &Costing) -> Value {
    let c = &problem.cluster;
    let mut v = serde_json::to_value(plan).expect("plans serialize");
    v["memory_total_bytes"] = json!(plan.memory.total());
    if costing.tokens > 0.0 {
        v["days"] = json!(plan.days_for(costing.tokens));
        v["cost_usd"] = costing
            .costs(plan, c.world(), c.nodes)
            .into_iter()
            .map(|(what, usd)| json!({ "basis": what, "usd": usd }))
            .collect();
    }
    v
}

/// The problem's inputs as JSON.
pub fn problem_json(problem: &Problem) -> Value {
    let c = &problem.cluster;
    json!({
        "model": problem.model,
        "parameters": problem.model.params(1),
        "global_batch_size": problem.global_batch,
        "gpu": c.gpu,
        "gpus_per_node": c.gpus_per_node,
        "nodes": c.nodes,
        "intra_node_link": c.intra,
        "inter_node_link": c.inter,
        "options": problem.options,
    })
}
