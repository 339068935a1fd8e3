//! FLOPs of a training step in the two conventions the plan and the trainer print: model
//! FLOPs as Megatron-LM's `num_floating_point_operations` counts them (recomputation not
//! counted, so that layouts compare on the same work), and hardware FLOPs (what the GPUs
//! execute, recomputation included).
//!
//! Per layer and sequence of `s` tokens, a forward costs `24 s h^2` in the four GEMMs (QKV
//! `6`, projection `2`, MLP `16`) and `4 s^2 h` in the attention core (`Q K^T` and `A V`,
//! causal masking not halved); the LM head's logits `2 s h V`. A backward costs twice its
//! forward. Hence per sequence `72 s L h^2 (1 + s / 6h + V / 12 L h)`: Narayanan et al. 2021
//! (appendix, eq. 3) write the full-recomputation count, `96 s L h^2 (1 + s / 6h + V / 16 L h)`,
//! in which the layers' forward runs twice but the head's once; without recomputation the
//! layers' `96` is `72` and the head's `6 s h V` stays, which is `V / 12 L h` of the `72`.
//! Megatron-LM's `num_floating_point_operations` is `12 B s L h^2 (2 + s / h + 4 + V / 2 L h)`
//! for this model (equal query and key-value heads, MLP of `4 h`, no gating), the same number.

use super::{ModelShape, Recompute};

/// Model FLOPs of `sequences` sequences of `model` (forward and backward, no recomputation),
/// with `vocab` the vocabulary as the model holds it (Megatron-LM counts the padded one).
pub fn model_flops(model: &ModelShape, vocab: usize, sequences: usize) -> f64 {
    let (b, s, l, h, v) =
        (sequences as f64, model.seq_len as f64, model.layers as f64, model.hidden as f64, vocab as f64);
    72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))
}

/// FLOPs the GPUs execute for the same work: [`model_flops`] plus what `recompute` reruns
/// before each backward (full: every layer's forward, `24 s L h^2 (1 + s / 6h)` per sequence;
/// selective: the attention core's forward, `4 s^2 h L`; the LM head is never rerun).
pub fn hardware_flops(model: &ModelShape, vocab: usize, sequences: usize, recompute: Recompute) -> f64 {
    let (b, s, l, h) = (sequences as f64, model.seq_len as f64, model.layers as f64, model.hidden as f64);
    let rerun = match recompute {
        Recompute::None => 0.0,
        Recompute::Selective => 4.0 * b * s * s * h * l,
        Recompute::Full => 24.0 * b * s * l * h * h * (1.0 + s / (6.0 * h)),
    };
    model_flops(model, vocab, sequences) + rerun
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;

    /// GPT-3 175B (L 96, h 12288, s 2048, V 51200 padded) on a batch of 1536, by hand:
    /// `72 x 1536 x 2048 x 96 x 12288^2 = 3.2831e18` times
    /// `1 + 2048 / 73728 + 51200 / 14155776 = 1.031394` gives `3.3862e18` FLOPs a step (about
    /// `6 N` a token: `6 x 175e9 x 1536 x 2048 = 3.30e18`); with full recomputation
    /// `96 / 72 x 3.2831e18 x (1 + 2048 / 73728 + 51200 / 18874368) = 4.5110e18`.
    #[test]
    fn gpt3_175b_by_hand() {
        let m = preset("gpt3-175b").unwrap();
        let vocab = 51200;
        let base = 72.0 * 1536.0 * 2048.0 * 96.0 * 12288.0 * 12288.0;
        let factor = 1.0 + 2048.0 / 73728.0 + 51200.0 / 14155776.0;
        let flops = model_flops(&m, vocab, 1536);
        assert!((flops / (base * factor) - 1.0).abs() < 1e-12, "{flops:e}");
        assert!((flops / 3.3862e18 - 1.0).abs() < 1e-4, "{flops:e}");
        // V / 16 L h with the 72 (a wrong pairing) would count 0.09% less on this model.
        let wrong = base * (1.0 + 2048.0 / 73728.0 + 51200.0 / 18874368.0);
        assert!(flops / wrong - 1.0 > 8e-4, "{}", flops / wrong);
        let full = hardware_flops(&m, vocab, 1536, Recompute::Full);
        let paper = 96.0 / 72.0 * base * (1.0 + 2048.0 / 73728.0 + 51200.0 / 18874368.0);
        assert!((full / paper - 1.0).abs() < 1e-12, "{full:e} vs {paper:e}");
        assert!((full / 4.5110e18 - 1.0).abs() < 1e-4, "{full:e}");
        assert_eq!(hardware_flops(&m, vocab, 1536, Recompute::None), flops);
        let sel = hardware_flops(&m, vocab, 1536, Recompute::Selective);
        assert_eq!(sel - flops, 4.0 * 1536.0 * 2048.0 * 2048.0 * 12288.0 * 96.0);
    }

    /// Megatron-LM's own form of the count, `12 B s L h^2 (2 + s / h + 4 + V / 2 L h)`, on
    /// the 1.7B of Narayanan et al. 2021: the same number.
    #[test]
    fn megatron_lms_form_gives_the_same_number() {
        let m = preset("megatron-1.7b").unwrap();
        let (b, s, l, h, v) = (512.0, 2048.0, 24.0, 2304.0, 51200.0);
        let megatron = 12.0 * b * s * l * h * h * (2.0 + s / h + 4.0 + v / (2.0 * l * h));
        let ours = model_flops(&m, 51200, 512);
        assert!((ours / megatron - 1.0).abs() < 1e-12, "{ours:e} vs {megatron:e}");
    }
}
