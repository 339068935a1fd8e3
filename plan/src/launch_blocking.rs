//! `CUDA_LAUNCH_BLOCKING=1`: every kernel launch waits until the kernel has finished, so the GPU
//! sits idle while the host prepares each next kernel (framework dispatch, the launch itself,
//! the wait's round trip). Asynchronous launches hide that host time behind the kernels already
//! queued; blocking ones add it once per kernel. A layer launches the same kernels whatever the
//! micro-batch, so the cost is a fixed time per layer and micro-batch: it weighs most at
//! micro-batch 1, which is why runs with blocking launches gain more from larger micro-batches
//! than the GEMM shapes alone explain.
//!
//! Runs that set it: BigScience's BLOOM training on Jean Zay, whose script keeps
//! `export CUDA_LAUNCH_BLOCKING=1` because the job hung without it (`train/tr11-176B-ml/
//! tr11-176B-ml.slurm` in the bigscience-workshop repository), as did its topology benchmarks
//! at 40 to 48 nodes (the chronicles' prequel, "dealing with JZ hanging on the large model":
//! asynchronous launches hung at 320 GPUs and more).
//!
//! The idle time per layer is calibrated on one measurement that is not a row of the
//! validation table: the same prequel measured a 200B model (80 layers, hidden 14400, 96
//! heads, vocabulary 250k, sequence 2048) on 80 A100s as TP 8 x PP 10, micro-batch 1, global
//! batch 512, at 97.20 TFLOP/s with asynchronous launches and 91.04 with blocking ones. Its
//! iteration is `hardware FLOPs / (80 x 97.20 TFLOP/s)` (full recomputation), the blocking
//! launches add `97.20 / 91.04 - 1` of it, and the critical path of its 1F1B pipeline runs
//! `(m + p - 1)` micro-batch slots of a stage's 8 layers: [`forward_idle_per_layer`] is that
//! time per layer and micro-batch, divided among the forward (1), the recomputed forward (1)
//! and the backward (2, a gradient kernel for the input and one for the weight of each
//! forward kernel). BigScience's TFLOP/s of that week came from an estimator about 3% below
//! Megatron-LM's count (the prequel says so), which moves the figure by as much.

use crate::{flops, ModelShape, Recompute};

/// The calibration run (see the module docs): `[layers, hidden, heads, vocabulary, sequence]`.
const SHAPE: [usize; 5] = [80, 14400, 96, 250_000, 2048];
/// Its GPUs, pipeline stages and global batch (one data-parallel replica, micro-batch 1).
const GPUS: usize = 80;
const STAGES: usize = 10;
const BATCH: usize = 512;
/// TFLOP/s per GPU it measured with asynchronous and with blocking launches.
const ASYNC_RATE: f64 = 97.20e12;
const BLOCKING_RATE: f64 = 91.04e12;

/// Seconds the GPU idles per layer and micro-batch in one forward pass under blocking launches
/// (about 30 kernels at about 30 us each); a backward costs twice this, a recomputed forward
/// once more.
pub fn forward_idle_per_layer() -> f64 {
    let [layers, hidden, heads, vocab, seq_len] = SHAPE;
    let model = ModelShape {
        name: "bigscience-200b".into(),
        layers,
        hidden,
        heads,
        vocab,
        seq_len,
        global_batch: BATCH,
    };
    let work = flops::hardware_flops(&model, vocab, BATCH, Recompute::Full);
    let iteration = work / (GPUS as f64 * ASYNC_RATE);
    let idle = iteration * (ASYNC_RATE / BLOCKING_RATE - 1.0);
    let slots = (BATCH + STAGES - 1) * (layers / STAGES);
    // Forward, recomputed forward and backward: 1 + 1 + 2 forward passes' worth of kernels.
    idle / slots as f64 / 4.0
}

/// Forward passes' worth of kernels that `recompute` reruns before each backward: a whole
/// forward (full), the attention core's five kernels of the forward's thirty (selective: the
/// scores' batched GEMM, the fused masked softmax, dropout, the second batched GEMM and the
/// copy that puts the heads back together), none.
pub fn recomputed_passes(recompute: Recompute) -> f64 {
    match recompute {
        Recompute::Full => 1.0,
        Recompute::Selective => 5.0 / 30.0,
        Recompute::None => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calibration by hand: `96 B s L h^2 (1 + s / 6h + V / 16 L h)` FLOPs with
    /// B 512, s 2048, L 80, h 14400, V 250000 is 1.7321e18; at 80 x 97.20 TFLOP/s that is
    /// 222.75 s; blocking launches add 6.766% of it, 15.07 s, over (512 + 9) x 8 layer slots:
    /// 3.62 ms per layer and micro-batch, 0.904 ms per forward pass.
    #[test]
    fn calibration_by_hand() {
        let flops: f64 = 96.0
            * 512.0
            * 2048.0
            * 80.0
            * 14400.0
            * 14400.0
            * (1.0 + 2048.0 / (6.0 * 14400.0) + 250000.0 / (16.0 * 80.0 * 14400.0));
        assert!((flops / 1.7321e18 - 1.0).abs() < 1e-4, "{flops:e}");
        let iteration = flops / (80.0 * 97.20e12);
        let per_slot: f64 = iteration * (97.20 / 91.04 - 1.0) / (521.0 * 8.0);
        assert!((per_slot / 3.62e-3 - 1.0).abs() < 0.01, "{per_slot}");
        assert!((forward_idle_per_layer() / (per_slot / 4.0) - 1.0).abs() < 1e-9);
    }
}
