//! `trident train --dry-run`: the training run's flags handed to the planner (`trident plan
//! --calibrate` with the run's model, batch, grid and precision).

use std::path::PathBuf;

use trident::model::{GptConfig, Precision};

use crate::plan::{run_with, PlanArgs, CALIBRATE_MAX_RANKS};
use crate::train_args::TrainArgs;

/// `trident train --dry-run`: the plan of the configured run on this machine (calibrated),
/// its `--world-size` ranks as one node, with the run's model (`config`), batch, grid,
/// interleaving and precision.
pub fn run(
    train: &TrainArgs,
    config: &GptConfig,
    seq_len: usize,
    micro_batch: usize,
    global_batch: usize,
    precision: Precision,
) -> anyhow::Result<()> {
    if train.world_size > CALIBRATE_MAX_RANKS {
        anyhow::bail!(
            "--dry-run plans --world-size {} as rank threads of this machine; it takes at most {CALIBRATE_MAX_RANKS}",
            train.world_size
        );
    }
    let args = PlanArgs {
        model: None,
        num_layers: Some(config.num_layers),
        hidden_size: Some(config.channels),
        num_attention_heads: Some(config.num_heads),
        vocab_size: Some(config.vocab_size),
        seq_length: Some(seq_len),
        global_batch_size: Some(global_batch),
        micro_batch_size: Some(micro_batch),
        tensor_model_parallel_size: Some(train.tensor_model_parallel_size),
        pipeline_model_parallel_size: Some(train.pipeline_model_parallel_size),
        num_layers_per_virtual_pipeline_stage: train.num_layers_per_virtual_pipeline_stage,
        use_distributed_optimizer: train.use_distributed_optimizer,
        recompute_granularity: train.recompute_granularity,
        sequence_parallel: train.sequence_parallel,
        // The trainer overlaps the DP reduction with the backward unless ZeRO-1 (the calibrated
        // simulation does the same; the plan's detail says so).
        overlap_grad_reduce: !train.use_distributed_optimizer,
        model_flags: Default::default(),
        bf16: precision == Precision::Bf16,
        fp16: precision == Precision::Fp16,
        tf32: false,
        unfused_attention: false,
        gpu: "local-cpu".into(),
        gpus_per_node: train.world_size.max(1),
        nodes: 1,
        intra_node_link: None,
        inter_node_link: None,
        hardware: None,
        reserve_gib: 0.0,
        search: false,
        top: 1,
        no_sequence_parallel: !train.sequence_parallel,
        no_distributed_optimizer: !train.use_distributed_optimizer,
        no_interleaving: train.num_layers_per_virtual_pipeline_stage.is_none(),
        train_tokens: 0.0,
        price_per_gpu_hour: None,
        node_price: Vec::new(),
        amortize_years: 3.0,
        json: false,
        plots: PathBuf::from("plan-plots"),
        no_plots: true,
        calibrate: true,
    };
    eprintln!(
        "trident train --dry-run: nothing is trained; timing this machine's kernels for the plan \
         first (a minute or more on a small CPU), then printing it"
    );
    run_with(args, Some(*config))
}
