use trident_hardware::{Hardware, Scope};

use super::search::{explain, search, Space};
use super::*;

pub(crate) fn cluster(gpu: &str, nodes: usize, inter: &str) -> Cluster {
    let hw = Hardware::builtin();
    let gpu = hw.gpu(gpu).unwrap().clone();
    let intra = hw.link(&gpu.gpu_link).unwrap().clone();
    Cluster { gpu, gpus_per_node: 8, nodes, intra, inter: hw.link(inter).unwrap().clone(), nics_per_node: 8 }
}

pub(crate) fn problem(
    model: &str,
    gpu: &str,
    gpus: usize,
    batch: usize,
    precision: Precision,
    fused: bool,
) -> Problem {
    let inter = if gpu.starts_with("a100") || gpu == "v100" { "ib-hdr" } else { "ib-ndr" };
    Problem {
        model: preset(model).unwrap(),
        global_batch: batch,
        cluster: cluster(gpu, gpus / 8, inter),
        options: Options {
            precision,
            fused_attention: fused,
            overlap_grad_reduce: false,
            overlap_param_gather: false,
            tp_comm_overlap: false,
            overlap_p2p_communication: false,
            gradient_accumulation_fusion: true,
            launch_blocking: false,
            scatter_gather_tensors_in_pipeline: true,
            reserve_gib: 1.0,
        },
    }
}

pub(crate) fn layout(
    tp: usize,
    pp: usize,
    dp: usize,
    mb: usize,
    recompute: Recompute,
    sp: bool,
    v: usize,
) -> Layout {
    Layout {
        tp,
        pp,
        dp,
        micro_batch: mb,
        recompute,
        sequence_parallel: sp,
        virtual_stages: v,
        distributed_optimizer: false,
    }
}

#[test]
fn the_guides_2_8_tb_for_175b_in_fp32() {
    // 175e9 parameters x (4 + 4 + 8) bytes: 700 GB weights, 700 GB gradients, 1400 GB Adam.
    let (w, g, o) = Precision::Fp32.state_bytes();
    assert_eq!((175e9 * w, 175e9 * g, 175e9 * o), (700e9, 700e9, 1400e9));
    assert_eq!(175e9 * (w + g + o), 2.8e12);
    // The planner's own count for GPT-3 175B on one GPU matches the same bytes per parameter.
    let p = problem("gpt3-175b", "a100-80gb", 8, 8, Precision::Fp32, true);
    let mut cache = PipelineCache::default();
    let one = Problem { cluster: Cluster { gpus_per_node: 1, nodes: 1, ..p.cluster.clone() }, ..p.clone() };
    let mem = memory(&one, &layout(1, 1, 1, 1, Recompute::None, false, 1), 8, &mut cache).unwrap();
    let n = one.model.params(1);
    assert!((n / 175e9 - 1.0).abs() < 0.005, "{n}");
    assert_eq!(mem[0].params, 4.0 * n);
    assert_eq!(mem[0].grads, 4.0 * n);
    assert_eq!(mem[0].optimizer, 8.0 * n);
    let state_tb = (mem[0].params + mem[0].grads + mem[0].optimizer) / 1e12;
    assert!((state_tb - 2.8).abs() < 0.02, "{state_tb} TB");
}

#[test]
fn the_guides_288_v100_years_imply_28_percent_of_peak() {
    // 6 N D = 6 x 175e9 x 300e9 = 3.15e23 FLOPs (Brown et al. 2020 report 3.14e23).
    assert_eq!(training_flops(175e9, 300e9), 3.15e23);
    let eff = implied_efficiency(175e9, 300e9, 125e12, 288.0);
    assert!((eff - 0.2773).abs() < 0.001, "{eff}");
}

#[test]
fn activations_follow_korthikanti_table_2() {
    let m = preset("gpt3-175b").unwrap();
    let (s, h) = (2048.0, 12288.0);
    let sbh = s * h; // b = 1
    let a_over = 5.0 * 96.0 * s / h; // 5 a s / h = 80
    let act = |sp, r, fused| layer_activation_bytes(&m, 1, 8, sp, r, fused, Precision::Bf16);
    assert_eq!(act(false, Recompute::None, false), sbh * (10.0 + 24.0 / 8.0 + a_over / 8.0));
    assert_eq!(act(true, Recompute::None, false), sbh * (34.0 + a_over) / 8.0);
    assert_eq!(act(false, Recompute::Selective, false), sbh * (10.0 + 24.0 / 8.0));
    assert_eq!(act(true, Recompute::Selective, false), sbh * 34.0 / 8.0);
    assert_eq!(act(false, Recompute::Full, false), 2.0 * sbh);
    assert_eq!(act(true, Recompute::Full, false), 2.0 * sbh / 8.0);
    // A fused attention kernel keeps no s x s scores.
    assert_eq!(act(true, Recompute::None, true), act(true, Recompute::Selective, false));
    // fp32 activations take twice the bytes.
    assert_eq!(
        layer_activation_bytes(&m, 1, 8, true, Recompute::Full, false, Precision::Fp32),
        4.0 * sbh / 8.0
    );
}

#[test]
fn stage_activations_count_the_micro_batches_the_schedule_holds() {
    let p = problem("megatron-1t", "a100-80gb", 512, 512, Precision::Bf16, false);
    let l = layout(8, 64, 1, 1, Recompute::Selective, true, 1);
    let mut cache = PipelineCache::default();
    let stages = memory(&p, &l, 512, &mut cache).unwrap();
    let per_layer =
        layer_activation_bytes(&p.model, 1, 8, true, Recompute::Selective, false, Precision::Bf16);
    // 1F1B: stage r holds p - r micro-batches of its 2 layers; the middle stages have no extras.
    for r in [1, 10, 40, 62] {
        assert_eq!(stages[r].activations, (64 - r) as f64 * 2.0 * per_layer, "stage {r}");
    }
    // Korthikanti et al.: the first stage holds L layers' worth, whatever p is.
    let sbh = 2048.0 * 25600.0;
    assert_eq!(stages[0].activations, 128.0 * per_layer + 64.0 * sbh / 8.0);
    // Interleaved with 2 chunks: the first stage holds 2 (p-1) + (v-1) p + 1 chunks of 1 layer.
    let li = Layout { virtual_stages: 2, ..l };
    let stages = memory(&p, &li, 512, &mut cache).unwrap();
    let chunks = 2 * 63 + 64 + 1;
    assert_eq!(stages[0].activations, chunks as f64 * per_layer + chunks as f64 * sbh / 8.0);
}

#[test]
fn ring_costs_reproduce_the_nccl_tests_bus_bandwidth() {
    let link = Link {
        name: "test".into(),
        gb_s: 100.0,
        latency_us: 0.0,
        efficiency: 0.5,
        scope: Scope::IntraNode,
        source: String::new(),
    };
    for n in [2, 4, 8, 64] {
        let bytes = 1e9;
        let algbw = bytes / ring_all_reduce(bytes, n, &link);
        let busbw = algbw * 2.0 * (n - 1) as f64 / n as f64;
        assert!((busbw - 50e9).abs() < 1.0, "n {n}: all-reduce busbw {busbw}");
        let algbw = bytes / ring_all_gather(bytes, n, &link);
        assert!((algbw * (n - 1) as f64 / n as f64 - 50e9).abs() < 1.0, "n {n}: all-gather");
    }
    let slow = Link { latency_us: 10.0, ..link };
    // 2 (n - 1) latency terms for the all-reduce.
    assert!((ring_all_reduce(0.0, 8, &slow) - 14.0 * 10e-6).abs() < 1e-12);
    assert_eq!(ring_all_reduce(1e9, 1, &slow), 0.0);
}

#[test]
fn the_bubble_comes_from_the_schedule_simulation() {
    let p = problem("megatron-145b", "a100-80gb", 1536, 2304, Precision::Fp16, false);
    let l = layout(8, 8, 24, 1, Recompute::Full, false, 1);
    let plan = evaluate(&p, &l, &mut PipelineCache::default()).unwrap();
    let m = plan.micro_batches as f64;
    assert_eq!(plan.micro_batches, 96);
    // Uniform stages: the 1F1B makespan is (m + p - 1) (f + b), so the bubble is (p - 1) (f + b).
    let expected = 7.0 * (plan.stage_forward + plan.stage_backward);
    assert!((plan.time.bubble / expected - 1.0).abs() < 1e-3, "{} vs {expected}", plan.time.bubble);
    let sum: f64 = plan.time.components().iter().map(|(_, s)| s).sum();
    assert!((sum / plan.time.total - 1.0).abs() < 1e-9);
    assert!(
        (plan.time.bubble / (plan.time.bubble + m * (plan.stage_forward + plan.stage_backward))
            - 7.0 / 103.0)
            .abs()
            < 1e-3
    );
    // Interleaving 2 chunks halves the bubble and doubles the pipeline sends.
    let li = Layout { virtual_stages: 2, ..l };
    let inter = evaluate(&p, &li, &mut PipelineCache::default()).unwrap();
    assert!(
        (inter.time.bubble / plan.time.bubble - 0.5).abs() < 0.01,
        "{} vs {}",
        inter.time.bubble,
        plan.time.bubble
    );
    assert!((inter.time.pp_comm / plan.time.pp_comm - 2.0).abs() < 1e-9);
}

/// Published per-GPU throughput, configuration as published; the planner within 15%.
/// Narayanan et al. 2021, Table 1 (A100 80 GB, fp16, full recomputation, Megatron-LM's
/// unfused attention; `(model, TP, PP, GPUs, TFLOP/s per GPU)`, FLOPs counted with
/// recomputation). The micro-batch is not in the table: the best of 1, 2, 4, 8 that fits.
#[test]
fn narayanan_2021_table_1_within_15_percent() {
    let rows = [
        ("megatron-1.7b", 1, 1, 32, 137.0),
        ("megatron-3.6b", 2, 1, 64, 138.0),
        ("megatron-7.5b", 4, 1, 128, 142.0),
        ("megatron-18b", 8, 1, 256, 135.0),
        ("megatron-39b", 8, 2, 512, 138.0),
        ("megatron-76b", 8, 4, 1024, 140.0),
        ("megatron-145b", 8, 8, 1536, 148.0),
        ("megatron-310b", 8, 16, 1920, 155.0),
        ("megatron-530b", 8, 35, 2520, 163.0),
        ("megatron-1t", 8, 64, 3072, 163.0),
    ];
    let mut cache = PipelineCache::default();
    for (model, tp, pp, gpus, published) in rows {
        let batch = preset(model).unwrap().global_batch;
        let p = problem(model, "a100-80gb", gpus, batch, Precision::Fp16, false);
        let best = [1, 2, 4, 8]
            .into_iter()
            .filter_map(|mb| {
                evaluate(&p, &layout(tp, pp, gpus / (tp * pp), mb, Recompute::Full, false, 1), &mut cache)
                    .ok()
            })
            .filter(|plan| plan.fits)
            .max_by(|a, b| a.hardware_tflops_per_gpu.total_cmp(&b.hardware_tflops_per_gpu))
            .unwrap_or_else(|| panic!("{model}: no micro-batch fits"));
        let err = best.hardware_tflops_per_gpu / published - 1.0;
        assert!(
            err.abs() < 0.15,
            "{model}: {:.1} TFLOP/s vs {published} published",
            best.hardware_tflops_per_gpu
        );
    }
}

/// Korthikanti et al. 2022, Table 5: selective recomputation with sequence parallelism on A100
/// 80 GB, bf16, micro-batch 1; `(model, PP, GPUs = global batch, MFU, iteration seconds)`.
#[test]
fn korthikanti_2022_mfu_within_15_percent() {
    let rows = [
        ("megatron-22b", 1, 8, 0.415, 1.10),
        ("gpt3-175b", 8, 64, 0.514, 13.75),
        ("megatron-530b", 35, 280, 0.560, 37.83),
        ("megatron-1t", 64, 512, 0.563, 71.49),
    ];
    for (model, pp, gpus, mfu, seconds) in rows {
        let batch = if model == "megatron-22b" { 4 } else { gpus };
        let p = problem(model, "a100-80gb", gpus, batch, Precision::Bf16, false);
        let l = layout(8, pp, gpus / (8 * pp), 1, Recompute::Selective, true, 1);
        let plan = evaluate(&p, &l, &mut PipelineCache::default()).unwrap();
        assert!(plan.fits, "{model}");
        assert!((plan.mfu / mfu - 1.0).abs() < 0.15, "{model}: MFU {:.3} vs {mfu}", plan.mfu);
        assert!(
            (plan.time.total / seconds - 1.0).abs() < 0.15,
            "{model}: {:.2} s vs {seconds}",
            plan.time.total
        );
    }
}

/// Published H100 runs (bf16, DGX H100 nodes of 8 with NVLink 4 and one NDR InfiniBand port
/// per GPU), as GPT shapes of the same depth, width, heads, vocabulary and sequence, with the
/// published TP, PP, DP and global batch; micro-batch 1, sequence parallelism, selective
/// recomputation, ZeRO-1 and the interleaved schedule with 2 layers per virtual stage for
/// every row (one rule, not chosen per row). MFU, each run's against its own model's FLOPs:
/// Nemotron-4 340B (NVIDIA 2024, Table 2: 96 layers, hidden 18432, 96 heads, vocabulary
/// 256000, sequence 4096, TP 8, PP 12) and Llama 3 405B (Dubey et al. 2024, Table 4: 126
/// layers, here 128 so that PP 16 divides them; hidden 16384, 128 heads, vocabulary 128256,
/// sequence 8192, TP 8, PP 16, 16M tokens a batch).
#[test]
fn published_h100_runs_mfu_within_15_percent() {
    let rows = [
        ("nemotron-4-340b", 96, 18432, 96, 256000, 4096, 12, 1536, 768, 0.424),
        ("nemotron-4-340b", 96, 18432, 96, 256000, 4096, 12, 3072, 1536, 0.423),
        ("nemotron-4-340b", 96, 18432, 96, 256000, 4096, 12, 6144, 2304, 0.410),
        ("llama-3-405b", 128, 16384, 128, 128256, 8192, 16, 8192, 2048, 0.43),
        ("llama-3-405b", 128, 16384, 128, 128256, 8192, 16, 16384, 2048, 0.41),
    ];
    for (name, layers, hidden, heads, vocab, seq, pp, gpus, batch, mfu) in rows {
        let model =
            ModelShape { name: name.into(), layers, hidden, heads, vocab, seq_len: seq, global_batch: batch };
        let p = Problem {
            model,
            global_batch: batch,
            cluster: cluster("h100-sxm", gpus / 8, "ib-ndr"),
            options: Options {
                precision: Precision::Bf16,
                fused_attention: true,
                overlap_grad_reduce: false,
                overlap_param_gather: false,
                tp_comm_overlap: false,
                overlap_p2p_communication: false,
                gradient_accumulation_fusion: true,
                launch_blocking: false,
                scatter_gather_tensors_in_pipeline: true,
                reserve_gib: 1.0,
            },
        };
        let v = layers / pp / 2;
        let l = Layout {
            distributed_optimizer: true,
            ..layout(8, pp, gpus / (8 * pp), 1, Recompute::Selective, true, v)
        };
        let plan = evaluate(&p, &l, &mut PipelineCache::default()).unwrap();
        assert!((plan.mfu / mfu - 1.0).abs() < 0.15, "{name} on {gpus}: MFU {:.3} vs {mfu}", plan.mfu);
    }
}

#[test]
fn gpt3_175b_on_1024_a100s_near_the_published_140_tflops() {
    // Narayanan et al. 2021, section 5.1: GPT-3 175B, batch 1536, 1024 A100s, 140 TFLOP/s per
    // GPU with the 2021 setup (fp16, full recomputation, no sequence parallelism), on the
    // layout the guide's table gives for it: TP 8 (a node), PP 16, DP 8.
    let p = problem("gpt3-175b", "a100-80gb", 1024, 1536, Precision::Fp16, false);
    let mut cache = PipelineCache::default();
    let best = [1, 2, 4]
        .into_iter()
        .map(|mb| evaluate(&p, &layout(8, 16, 8, mb, Recompute::Full, false, 1), &mut cache).unwrap())
        .filter(|plan| plan.fits)
        .max_by(|a, b| a.hardware_tflops_per_gpu.total_cmp(&b.hardware_tflops_per_gpu))
        .unwrap();
    assert_eq!(best.layout.micro_batch, 1, "the smallest micro-batch has the smallest bubble");
    let err = best.hardware_tflops_per_gpu / 140.0 - 1.0;
    assert!(err.abs() < 0.15, "{}: {:.1}", best.layout.label(), best.hardware_tflops_per_gpu);
    // 300B tokens: the paper estimates 34 days.
    let days = best.days_for(300e9);
    assert!((days / 34.0 - 1.0).abs() < 0.15, "{days:.1} days");
}

#[test]
fn search_on_the_guides_cluster_follows_its_rules_or_says_why() {
    // The guide's thousand-GPU example: GPT-3 175B on 128 DGX A100 nodes.
    let p = problem("gpt3-175b", "a100-80gb", 1024, 1536, Precision::Bf16, true);
    let ranked = search(&p, &Space::default()).unwrap();
    assert!(ranked.fitting.len() > 100, "{}", ranked.fitting.len());
    let best = &ranked.fitting[0];
    assert!(best.fits && best.layout.tp * best.layout.pp * best.layout.dp == 1024);
    // PP at most a quarter of the layers, and TP inside a node.
    assert!(best.layout.pp <= 96 / 4, "{}", best.layout.label());
    assert!(best.layout.tp <= 8, "{}", best.layout.label());
    for w in ranked.fitting.windows(2) {
        assert!(w[0].time.total <= w[1].time.total);
    }
    let why = explain(&ranked);
    let tp_line = why.iter().find(|l| l.starts_with("other tensor parallelism")).expect("a TP alternative");
    assert!(tp_line.contains("slower") && tp_line.contains("TP communication"), "{tp_line}");
    // TP beyond a node crosses InfiniBand: far slower than the best.
    let cross = ranked.fitting.iter().find(|p| p.layout.tp == 16).expect("a TP 16 layout fits");
    assert!(cross.time.tp_comm > 3.0 * best.time.tp_comm);
}

#[test]
fn bad_layouts_name_the_flag() {
    let p = problem("gpt3-175b", "a100-80gb", 64, 64, Precision::Bf16, true);
    let mut cache = PipelineCache::default();
    let err = |l: Layout, cache: &mut PipelineCache| evaluate(&p, &l, cache).unwrap_err();
    let e = err(layout(8, 4, 1, 1, Recompute::None, false, 1), &mut cache);
    assert!(e.contains("does not divide the 64 GPUs"), "{e}");
    let e = err(layout(64, 1, 1, 1, Recompute::None, false, 1), &mut cache);
    assert!(e.contains("--num-attention-heads 96"), "{e}");
    let e = err(layout(1, 64, 1, 1, Recompute::None, false, 1), &mut cache);
    assert!(e.contains("--num-layers 96"), "{e}");
    let e = err(layout(8, 8, 1, 3, Recompute::None, false, 1), &mut cache);
    assert!(e.contains("--global-batch-size 64"), "{e}");
    let e = err(layout(8, 8, 1, 1, Recompute::None, false, 5), &mut cache);
    assert!(e.contains("chunks"), "{e}");
    let v100 = problem("gpt3-175b", "v100", 64, 64, Precision::Bf16, true);
    let e = evaluate(&v100, &layout(8, 8, 1, 1, Recompute::None, false, 1), &mut cache).unwrap_err();
    assert!(e.contains("no bf16"), "{e}");
}

#[test]
fn a_model_too_big_for_the_cluster_fits_nowhere() {
    let p = problem("gpt3-175b", "v100", 8, 8, Precision::Fp16, true);
    let ranked = search(&p, &Space::default()).unwrap();
    assert!(ranked.fitting.is_empty());
    // 175B x 20 bytes over 8 GPUs, even with ZeRO-1: more than 32 GiB each.
    let least = &ranked.too_big[0];
    assert!(least.memory.total() > 2.0 * least.memory_limit, "{}", least.memory.total());
}

#[test]
fn the_timeline_picture_shows_the_simulated_bubble() {
    let p = problem("megatron-145b", "a100-80gb", 1536, 2304, Precision::Fp16, false);
    // A short pipeline, so the bubble is wide: 8 stages, 8 micro-batches.
    let p = Problem { global_batch: 192, ..p };
    let plan =
        evaluate(&p, &layout(8, 8, 24, 1, Recompute::Full, false, 1), &mut PipelineCache::default()).unwrap();
    assert_eq!(plan.micro_batches, 8);
    let c = picture::timeline_picture(&p, &plan).unwrap();
    // Stage 0's row: idle pixels over the pipeline's pixels is the idle fraction.
    let y = 60 + 10;
    let count = |color| (0..c.width).filter(|&x| c.get(x, y) == color).count() as f64;
    let (idle, f, b) = (count(picture::IDLE), count(picture::FORWARD), count(picture::BACKWARD));
    let simulated = 7.0 / 15.0;
    assert!((idle / (idle + f + b) - simulated).abs() < 0.02, "{} vs {simulated}", idle / (idle + f + b));
    let m = picture::memory_picture(&[&plan]);
    let bar: usize = (0..m.width).filter(|&x| picture::COMPONENT_COLORS.contains(&m.get(x, 60 + 14))).count();
    let expected = 760.0 * plan.memory.total() / (plan.memory.total().max(plan.memory_limit) * 1.05);
    assert!((bar as f64 - expected).abs() <= 3.0, "{bar} vs {expected}");
}

/// Model FLOPs as Megatron-LM counts them: 72 B s l h^2 (1 + s / 6h + V / 12 l h) whatever the
/// recomputation (the LM head's 6 B s h V once, forward and backward), and full recomputation
/// adding exactly one more forward of the layers, not of the head.
#[test]
fn model_flops_count_the_lm_head_once_and_recomputation_only_the_layers() {
    let p = problem("megatron-1.7b", "a100-80gb", 32, 64, Precision::Fp16, false);
    let m = preset("megatron-1.7b").unwrap();
    let mut cache = PipelineCache::default();
    let none = evaluate(&p, &layout(1, 1, 32, 1, Recompute::None, false, 1), &mut cache).unwrap();
    let full = evaluate(&p, &layout(1, 1, 32, 1, Recompute::Full, false, 1), &mut cache).unwrap();
    let (b, s, l, h) = (64.0, m.seq_len as f64, m.layers as f64, m.hidden as f64);
    let layers = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h));
    let head = none.model_flops - layers;
    // The head's forward and backward: 6 B s h V, V the padded vocabulary (at least V).
    let v = head / (6.0 * b * s * h);
    let v = v.round();
    assert!(v >= m.vocab as f64 && v < m.vocab as f64 + 1024.0, "vocabulary in the head term: {v}");
    assert_eq!(none.model_flops, none.hardware_flops);
    assert!((full.model_flops / none.model_flops - 1.0).abs() < 1e-12);
    let recomputed = full.hardware_flops - full.model_flops;
    assert!(
        (recomputed / (layers / 3.0) - 1.0).abs() < 1e-9,
        "full recomputation adds one forward of the layers"
    );
}

/// Blocking launches cost a fixed time per layer and micro-batch: the iteration's idle is
/// `m x layers per stage x (1 + 2 + 1) x` the forward's idle under full recomputation, it
/// halves when the micro-batch doubles (half the micro-batches), and the schedule's span grows
/// by more than it (the bubble's slots idle too).
#[test]
fn launch_blocking_is_a_fixed_cost_per_layer_and_micro_batch() {
    let mut p = problem("megatron-145b", "a100-80gb", 1536, 2304, Precision::Fp16, false);
    let l = layout(8, 8, 24, 1, Recompute::Full, false, 1);
    let free = evaluate(&p, &l, &mut PipelineCache::default()).unwrap();
    assert_eq!(free.time.launch_idle, 0.0);
    p.options.launch_blocking = true;
    let blocking = evaluate(&p, &l, &mut PipelineCache::default()).unwrap();
    let per_pass = launch_blocking::forward_idle_per_layer();
    let expected = 96.0 * (80.0 / 8.0) * 4.0 * per_pass;
    assert!((blocking.time.launch_idle / expected - 1.0).abs() < 1e-9, "{}", blocking.time.launch_idle);
    assert!(blocking.time.total - free.time.total > expected);
    let l2 = layout(8, 8, 24, 2, Recompute::Full, false, 1);
    let blocking2 = evaluate(&p, &l2, &mut PipelineCache::default()).unwrap();
    assert!((blocking2.time.launch_idle / (expected / 2.0) - 1.0).abs() < 1e-9);
    // Selective recomputation reruns only the attention core's kernels.
    let sel =
        evaluate(&p, &layout(8, 8, 24, 1, Recompute::Selective, false, 1), &mut PipelineCache::default())
            .unwrap();
    assert!((sel.time.launch_idle / (96.0 * 10.0 * (3.0 + 5.0 / 30.0) * per_pass) - 1.0).abs() < 1e-9);
}
