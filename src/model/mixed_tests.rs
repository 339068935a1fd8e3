//! Mixed precision on the kernel devices: under `--bf16` on `Emu` every linear layer runs on
//! the tensor-core GEMM and attention on flash attention, the loss on the bf16 logits (exact
//! launch counts per kernel), the tensors the products read and the logits are 16-bit
//! buffers, and the pass agrees with the `Cpu`'s, which stores the same roundings in f32
//! buffers.

use trident_runtime::Device;

use super::tensor::Act;
use super::*;
use crate::ops::{HalfFormat, OpsContext};
use crate::parallel::TpGroup;

/// One layer, one head of 64 channels (a flash-attention head size), 16 positions, a
/// vocabulary padded to 64: every GEMM dimension a multiple of 8.
fn config() -> GptConfig {
    GptConfig::new(16, 40, 1, 1, 64, 64).unwrap()
}

struct Pass {
    ctx: OpsContext,
    model: Gpt,
    ws: Workspace,
    acts: MicroActs,
}

/// A whole model of [`config`] in `precision` on `device`, after one forward (with the loss
/// gradient) and one backward over `b x t` tokens; returns the pass and its loss.
fn pass(device: &Device, precision: Precision, b: usize, t: usize) -> (Pass, f32) {
    let cfg = config();
    let params = gpt2_init(&ParamLayout::new(cfg), 3);
    let layout = ShardLayout::new(cfg, ShardPlace::SINGLE);
    let options = GptOptions { precision, ..Default::default() };
    let mut model = Gpt::new(device, layout, &params, options).unwrap();
    let ctx = OpsContext::new(device).unwrap();
    let mut ws = Workspace::new(device, &model, b, t).unwrap();
    let mut acts = MicroActs::new(device, &model, &ws).unwrap();
    let tp = &mut TpGroup::single();
    let n = b * t;
    let x: Vec<u32> = (0..n as u32).map(|i| (i * 7 + 3) % 40).collect();
    let y: Vec<u32> = (0..n as u32).map(|i| (i * 11 + 5) % 40).collect();
    model.embed(&ctx, tp, &mut ws, &mut acts, &x).unwrap();
    let loss = model.forward(&ctx, tp, &mut ws, &mut acts, Some(&y), Some(1.0 / n as f32)).unwrap().unwrap();
    model.backward(&ctx, tp, &mut ws, &mut acts, None, &mut |_, _| Ok(())).unwrap();
    (Pass { ctx, model, ws, acts }, loss)
}

/// Launches of kernels whose name starts with `prefix`.
fn launches(counts: &std::collections::HashMap<&'static str, u64>, prefix: &str) -> u64 {
    counts.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, n)| n).sum()
}

#[test]
fn bf16_on_emu_runs_the_tensor_cores_and_flash_attention_on_16_bit_buffers() {
    let (b, t) = (2, 16);
    let (mut emu, emu_loss) = pass(&Device::Emu, Precision::Bf16, b, t);
    let counts = emu.ctx.kernels().unwrap().launch_counts();
    let layers = config().num_layers as u64;
    // Forward: QKV, attention projection, FC, FC projection per layer, and the LM head;
    // backward: two products (input and weight gradients) for each.
    assert_eq!(launches(&counts, "gemm_tc_bf16_"), 12 * layers + 3, "{counts:?}");
    assert_eq!(launches(&counts, "gemm_tc_f16_"), 0);
    for f32_gemm in ["gemm_nn_f32", "gemm_nt_f32", "gemm_tn_f32", "gemm_tt_f32"] {
        assert_eq!(launches(&counts, f32_gemm), 0, "{f32_gemm} ran: {counts:?}");
    }
    assert_eq!(launches(&counts, "flash_attention_forward_hs64"), layers);
    assert_eq!(launches(&counts, "flash_attention_backward_hs64"), layers);
    assert_eq!(launches(&counts, "attention_"), 0, "the f32 attention ran: {counts:?}");
    // LayerNorm (ln1 and ln2 per layer, and the final one) writes its bf16 outputs from the
    // f32 residual stream, and GeLU reads and writes bf16, with the bf16 kernels: neither the
    // f32 kernels nor conversions around them run.
    assert_eq!(counts.get("layernorm_forward_row_f32_bf16"), Some(&(2 * layers + 1)), "{counts:?}");
    assert_eq!(counts.get("gelu_forward_bf16"), Some(&layers));
    // GeLU's backward runs in the epilogue of the FC projection's input-gradient GEMM.
    assert_eq!(counts.get("gelu_backward_bf16"), None, "{counts:?}");
    for f32_kernel in
        ["layernorm_forward_row_f32", "layernorm_forward_f32", "gelu_forward_v4_f32", "gelu_backward_v4_f32"]
    {
        assert_eq!(counts.get(f32_kernel), None, "{f32_kernel} ran: {counts:?}");
    }
    // The LM head writes bf16 logits and the loss reads them and writes their bf16 gradient
    // in place (the f32 kernel does not run). Nothing is rounded in place: the logits are
    // 16-bit buffers, and the residual stream and its gradient stay fp32 unrounded.
    assert_eq!(counts.get("crossentropy_v4_bf16"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("crossentropy_v4_f32"), None, "{counts:?}");
    assert_eq!(launches(&counts, "round_"), 0, "{counts:?}");
    // The bias gradients of the products whose output gradient is bf16 (QKV, FC) read it
    // directly; those of the products into the f32 residual stream sum f32.
    assert_eq!(counts.get("bias_backward_bf16"), Some(&(2 * layers)), "{counts:?}");
    assert_eq!(counts.get("bias_backward_f32"), Some(&(2 * layers)), "{counts:?}");
    // The conversions left narrow the f32 residual gradient for the backward GEMMs of the
    // attention and MLP projections (2 per layer); converting around LayerNorm (a narrowing
    // each) and GeLU (2 forward, 3 backward) made it 13, and the f32 logits' gradient (a
    // narrowing) and the bf16 bias gradients' inputs (2 widenings) 5.
    assert_eq!(launches(&counts, "convert_"), 2 * layers, "{counts:?}");
    // The 16-bit compute weights are refreshed from the master weights by one conversion.
    assert_eq!(emu.model.compute_weight_bytes(), 2 * emu.model.num_params());
    let refresh = OpsContext::new(&Device::Emu).unwrap();
    emu.model.sync_compute_weights(&refresh).unwrap();
    let once = std::collections::HashMap::from([("convert_f32_to_bf16", 1)]);
    assert_eq!(refresh.kernels().unwrap().launch_counts(), once);

    // The tensors the products read and write are 16-bit buffers.
    let bf16 = |a: &Act| matches!(a, Act::Half(_, HalfFormat::Bf16));
    let l = &emu.acts.layers[0];
    for (name, a) in
        [("ln1", &l.ln1), ("qkv", &l.qkv), ("ln2", &l.ln2), ("fch", &l.fch), ("fch_gelu", &l.fch_gelu)]
    {
        assert!(bf16(a), "{name} is not a bf16 buffer");
    }
    assert!(l.atty.as_ref().is_some_and(bf16), "the attention output is not a bf16 buffer");
    let head = emu.acts.head.as_ref().expect("a whole model keeps the head");
    assert!(bf16(&head.lnf) && bf16(&head.logits), "the head's lnf and logits are not bf16 buffers");
    let s = &emu.ws.scratch;
    assert!(bf16(&s.datty) && bf16(&s.dqkv) && bf16(&s.dfch), "the backward's 16-bit scratch");

    // The Cpu stores the same roundings in f32: the same pass up to the order of f32 sums and
    // the bf16 roundings that order flips now and then.
    let (cpu, cpu_loss) = pass(&Device::Cpu, Precision::Bf16, b, t);
    let rel = ((emu_loss - cpu_loss) / cpu_loss).abs();
    // Seen: 1.7e-5 for the loss, 3.8e-3 for the gradients' relative norm.
    assert!(rel <= 2e-4, "loss: emu {emu_loss}, cpu {cpu_loss} ({rel:.2e})");
    let (ge, gc) = (emu.model.grads().to_vec().unwrap(), cpu.model.grads().to_vec().unwrap());
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let diff: Vec<f32> = ge.iter().zip(&gc).map(|(a, b)| a - b).collect();
    let rel = norm(&diff) / norm(&gc);
    assert!(rel <= 1e-2, "gradients: relative difference {rel:.2e} between emu and cpu bf16");
    // 2 bytes saved per element of every 16-bit tensor, against the Cpu's f32 buffers: per
    // layer ln1, qkv, atty, ln2, fch, fch_gelu, then lnf, and the logits (padded vocabulary).
    let (n, c, vp) = (b * t, config().channels, config().padded_vocab_size);
    let saved_acts = 2 * n * c * (1 + 3 + 1 + 1 + 4 + 4 + 1) + 2 * n * vp;
    assert_eq!(cpu.acts.bytes() - emu.acts.bytes(), saved_acts);
    assert_eq!(cpu.ws.bytes() - emu.ws.bytes(), 2 * n * c * (1 + 3 + 4));
}

#[test]
fn fp16_on_emu_runs_the_f16_tensor_cores_and_the_f32_attention() {
    let (emu, emu_loss) = pass(&Device::Emu, Precision::Fp16, 1, 8);
    let counts = emu.ctx.kernels().unwrap().launch_counts();
    let layers = config().num_layers as u64;
    assert_eq!(launches(&counts, "gemm_tc_f16_"), 12 * layers + 3, "{counts:?}");
    assert_eq!(launches(&counts, "gemm_tc_bf16_"), 0);
    // Flash attention is built for bf16 only: fp16 attention widens its operands for the f32
    // kernel.
    assert_eq!(launches(&counts, "flash_attention_"), 0);
    assert_eq!(launches(&counts, "attention_forward_f32"), layers);
    // The f16 logits and their gradient, by the f16 loss kernel.
    assert_eq!(counts.get("crossentropy_v4_f16"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("bias_backward_f16"), Some(&(2 * layers)), "{counts:?}");
    let head = emu.acts.head.as_ref().expect("a whole model keeps the head");
    assert!(matches!(head.logits, Act::Half(_, HalfFormat::F16)), "the logits are not an f16 buffer");
    let (_, cpu_loss) = pass(&Device::Cpu, Precision::Fp16, 1, 8);
    let rel = ((emu_loss - cpu_loss) / cpu_loss).abs();
    assert!(rel <= 1e-3, "loss: emu {emu_loss}, cpu {cpu_loss} ({rel:.2e})");
}
