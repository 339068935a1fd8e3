//! `trident plan`'s flags for the time model beyond the layout: Megatron-LM's overlap flags, the
//! stack's fusions, the cluster as built (`--cluster`, `--nics-per-node`), and `--validate`
//! (the planner against published runs); and the lines the plan prints about them.

use anyhow::bail;
use clap::Args;
use trident_hardware::{Gpu, Hardware, Link};

use trident_plan::network::{cluster_preset, CLUSTER_PRESETS};
use trident_plan::{compute, Plan, Problem};

/// Flags of the time model (Megatron-LM's names where it has the flag).
#[derive(Args, Debug, Clone, Default)]
pub struct ModelFlags {
    /// With --use-distributed-optimizer: all-gather the updated weights bucket by bucket during
    /// the next forward.
    #[arg(long)]
    pub overlap_param_gather: bool,
    /// With --sequence-parallel: pipeline the TP all-gathers and reduce-scatters with the GEMMs
    /// beside them (Transformer Engine's userbuffers).
    #[arg(long)]
    pub tp_comm_overlap: bool,
    /// Interleaved schedule: pipeline sends and receives on their own stream.
    #[arg(long)]
    pub overlap_p2p_communication: bool,
    /// Accumulate each micro-batch's gradients by a separate pass (as DeepSpeed's engine does),
    /// not inside the weight-gradient GEMMs.
    #[arg(long)]
    pub no_gradient_accumulation_fusion: bool,
    /// Send the whole activation from every TP rank to the next stage (as DeepSpeed's pipeline
    /// engine does), not 1/TP of it from each.
    #[arg(long)]
    pub no_scatter_gather_tensors_in_pipeline: bool,
    /// Every kernel launch waits for the kernel (the run sets CUDA_LAUNCH_BLOCKING=1, as
    /// BigScience's BLOOM runs did): the GPU idles while the host prepares each next kernel.
    #[arg(long)]
    pub launch_blocking: bool,
    /// A cluster as built: dgx-a100, dgx-h100, roce-h100, jean-zay-a100 (GPU, node, NICs).
    #[arg(long, conflicts_with_all = ["gpu", "intra_node_link", "inter_node_link", "gpus_per_node"])]
    pub cluster: Option<String>,
    /// NICs per node for the compute fabric (default: one per GPU, or the --cluster's).
    #[arg(long)]
    pub nics_per_node: Option<usize>,
    /// Plan the published runs of plan/data/published_runs.json and print the table of errors.
    #[arg(long)]
    pub validate: bool,
}

/// The GPU, links, GPUs per node and NICs per node the flags give.
pub struct Built {
    /// The GPU.
    pub gpu: Gpu,
    /// In the node.
    pub intra: Link,
    /// One NIC.
    pub inter: Link,
    /// GPUs per node.
    pub gpus_per_node: usize,
    /// NICs per node.
    pub nics_per_node: usize,
}

impl ModelFlags {
    /// The cluster's parts: from `--cluster` when given, else from the other flags (`gpu`,
    /// `intra`, `inter` as they chose them), one NIC per GPU unless `--nics-per-node`.
    pub fn build(
        &self,
        hw: &Hardware,
        gpu: Gpu,
        intra: Link,
        inter: Link,
        gpus_per_node: usize,
    ) -> anyhow::Result<Built> {
        let mut built = match &self.cluster {
            Some(name) => {
                let Some(p) = cluster_preset(name) else {
                    bail!(
                        "--cluster {name} is not a preset; pick one of {}",
                        CLUSTER_PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
                    );
                };
                Built {
                    gpu: hw.gpu(p.gpu)?.clone(),
                    intra: hw.link(p.intra)?.clone(),
                    inter: hw.link(p.nic)?.clone(),
                    gpus_per_node: p.gpus_per_node,
                    nics_per_node: p.nics_per_node,
                }
            }
            None => Built { gpu, intra, inter, gpus_per_node, nics_per_node: gpus_per_node },
        };
        if let Some(n) = self.nics_per_node {
            if n == 0 || n > 1 << 10 {
                bail!("--nics-per-node must be between 1 and 1024, not {n}");
            }
            built.nics_per_node = n;
        }
        Ok(built)
    }
}

/// The plan's lines about the model's choices: which overlaps are on, and each GEMM's rate at
/// the layout's shapes ("qkv GEMM 2048 x 5376 x 14336: 66% of peak, shape curve ...").
pub fn describe(problem: &Problem, plan: &Plan) -> Vec<String> {
    let o = &problem.options;
    let l = &plan.layout;
    let mut lines = Vec::new();
    let on: Vec<&str> = [
        (o.overlap_grad_reduce, "--overlap-grad-reduce"),
        (o.overlap_param_gather && l.distributed_optimizer, "--overlap-param-gather"),
        (o.tp_comm_overlap && l.sequence_parallel && l.tp > 1, "--tp-comm-overlap"),
        (o.overlap_p2p_communication && l.virtual_stages > 1, "--overlap-p2p-communication"),
    ]
    .into_iter()
    .filter_map(|(b, name)| b.then_some(name))
    .collect();
    lines.push(if on.is_empty() {
        "overlap: none (every collective and send on the compute stream)".to_string()
    } else {
        format!(
            "overlap: {} (communication on its own stream, exposed where a computation waits for it)",
            on.join(", ")
        )
    });
    let c = &problem.cluster;
    lines.push(format!(
        "network: {} per node ({} GB/s per GPU share), {} inside nodes; all-reduces across nodes as NCCL's ring or tree, \
         whichever is faster",
        format_args!("{} x {}", c.nics_per_node, c.inter.name),
        format_args!("{:.1}", c.nic_share_per_gpu() / 1e9),
        c.intra.name
    ));
    if let Some(peak) = c.gpu.peak_flops(o.precision.units()) {
        let m = &problem.model;
        let rates = compute::layer_rates(
            &c.gpu,
            peak,
            l.micro_batch,
            m.seq_len,
            m.hidden,
            m.heads,
            l.tp,
            m.padded_vocab(l.tp),
        );
        lines.push(
            "compute rates at this layout's shapes (one micro-batch, rows x columns x reduction):".into(),
        );
        for r in rates.all() {
            lines.push(format!("  {}", r.describe()));
        }
    }
    lines
}

/// `--validate`: the table of published runs, their errors and the sweeps' order.
pub fn validate() -> anyhow::Result<()> {
    let v = trident_plan::validation::validate().map_err(anyhow::Error::msg)?;
    print!("{}", v.table());
    Ok(())
}
