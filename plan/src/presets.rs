//! Model shapes by name: Trident's presets, the GPT-3 family and Megatron-LM's published
//! configurations.

/// A GPT (decoder-only, learned positions, 4h MLP, tied embeddings) by its shape.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ModelShape {
    /// The preset's name (`--model`).
    pub name: String,
    /// Transformer layers.
    pub layers: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Vocabulary before padding.
    pub vocab: usize,
    /// Tokens per training sequence.
    pub seq_len: usize,
    /// Sequences per optimizer step the shape was published with.
    pub global_batch: usize,
}

impl ModelShape {
    /// Parameters with the vocabulary padded to a multiple of `128 t` (Megatron-LM's
    /// `make_vocab_size_divisible_by` times the tensor-parallel size): per layer
    /// `12 h^2 + 13 h` (QKV, projection and the two MLP matrices with their biases, two layer
    /// norms), the word and position embeddings `(V + s) h`, and the final layer norm `2 h`.
    pub fn params(&self, tp: usize) -> f64 {
        let (l, h) = (self.layers as f64, self.hidden as f64);
        l * (12.0 * h * h + 13.0 * h) + (self.padded_vocab(tp) + self.seq_len) as f64 * h + 2.0 * h
    }

    /// The vocabulary padded to a multiple of `128 tp`, as Megatron-LM pads it.
    pub fn padded_vocab(&self, tp: usize) -> usize {
        self.vocab.next_multiple_of(128 * tp.max(1))
    }
}

/// `(name, layers, hidden, heads, vocab, seq_len, global batch, where it is published)`.
type Row = (&'static str, usize, usize, usize, usize, usize, usize, &'static str);

/// GPT-3: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (context 2048,
/// the GPT-2 vocabulary of 50257, batch in tokens / 2048). Megatron: Narayanan et al. 2021,
/// "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Table 1
/// (sequence 2048, vocabulary 51200), and Korthikanti et al. 2022, "Reducing Activation
/// Recomputation in Large Transformer Models", Table 3 (the 22B).
pub const PRESETS: &[Row] = &[
    ("nano", 2, 128, 4, 256, 256, 8, "Trident's --model nano (byte vocabulary)"),
    ("tiny", 4, 256, 4, 256, 256, 8, "Trident's --model tiny (byte vocabulary)"),
    ("small", 6, 384, 6, 256, 512, 8, "Trident's --model small (byte vocabulary)"),
    ("gpt2-124m", 12, 768, 12, 50257, 1024, 512, "GPT-2 small (Radford et al. 2019); llm.c's batch"),
    ("gpt3-125m", 12, 768, 12, 50257, 2048, 256, "Brown et al. 2020, Table 2.1"),
    ("gpt3-350m", 24, 1024, 16, 50257, 2048, 256, "Brown et al. 2020, Table 2.1"),
    ("gpt3-760m", 24, 1536, 16, 50257, 2048, 256, "Brown et al. 2020, Table 2.1"),
    // The table prints 24 heads of 128 for d_model 2048; 16 heads of 128 is the consistent shape.
    ("gpt3-1.3b", 24, 2048, 16, 50257, 2048, 512, "Brown et al. 2020, Table 2.1"),
    ("gpt3-2.7b", 32, 2560, 32, 50257, 2048, 512, "Brown et al. 2020, Table 2.1"),
    ("gpt3-6.7b", 32, 4096, 32, 50257, 2048, 1024, "Brown et al. 2020, Table 2.1"),
    // The table prints d_model 5140 with 40 heads of 128; 40 x 128 = 5120.
    ("gpt3-13b", 40, 5120, 40, 50257, 2048, 1024, "Brown et al. 2020, Table 2.1"),
    ("gpt3-175b", 96, 12288, 96, 50257, 2048, 1536, "Brown et al. 2020, Table 2.1"),
    ("megatron-1.7b", 24, 2304, 24, 51200, 2048, 512, "Narayanan et al. 2021, Table 1"),
    ("megatron-3.6b", 30, 3072, 32, 51200, 2048, 512, "Narayanan et al. 2021, Table 1"),
    ("megatron-7.5b", 36, 4096, 32, 51200, 2048, 512, "Narayanan et al. 2021, Table 1"),
    ("megatron-18b", 40, 6144, 48, 51200, 2048, 1024, "Narayanan et al. 2021, Table 1"),
    ("megatron-22b", 48, 6144, 64, 51200, 2048, 4, "Korthikanti et al. 2022, Table 3"),
    ("megatron-39b", 48, 8192, 64, 51200, 2048, 1536, "Narayanan et al. 2021, Table 1"),
    ("megatron-76b", 60, 10240, 80, 51200, 2048, 1792, "Narayanan et al. 2021, Table 1"),
    ("megatron-145b", 80, 12288, 96, 51200, 2048, 2304, "Narayanan et al. 2021, Table 1"),
    ("megatron-310b", 96, 16384, 128, 51200, 2048, 2160, "Narayanan et al. 2021, Table 1"),
    // Also MT-NLG 530B's shape (Smith et al. 2022).
    ("megatron-530b", 105, 20480, 128, 51200, 2048, 2520, "Narayanan et al. 2021, Table 1"),
    ("megatron-1t", 128, 25600, 160, 51200, 2048, 3072, "Narayanan et al. 2021, Table 1"),
];

/// The preset called `name`, or an error listing them.
pub fn preset(name: &str) -> anyhow::Result<ModelShape> {
    let lower = name.to_ascii_lowercase();
    PRESETS
        .iter()
        .find(|r| r.0 == lower)
        .map(|&(name, layers, hidden, heads, vocab, seq_len, global_batch, _)| ModelShape {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            vocab,
            seq_len,
            global_batch,
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unknown --model {name:?}; the presets are: {} (or give --num-layers, --hidden-size and \
                 --num-attention-heads)",
                preset_names().join(", ")
            )
        })
}

/// Every preset's name, for error messages.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|r| r.0).collect()
}
