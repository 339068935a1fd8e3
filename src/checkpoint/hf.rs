//! Export to a directory that Hugging Face `transformers` loads as `GPT2LMHeadModel`:
//! `config.json` and `model.safetensors` with GPT-2's tensor names.
//!
//! HF's GPT-2 uses `Conv1D` layers, which store weights `[in, out]`; llm.c stores `[out, in]`,
//! so every matrix is transposed. The LM head is tied to `wte` and not written; `wte` keeps only
//! the `vocab_size` real rows (no padding).

use std::io::Write;
use std::path::Path;

use super::atomic::write_file_atomically;
use super::tensors::{write_tensors_as, F32View};
use super::CheckpointError;
use crate::model::{GptConfig, ParamLayout, ParamTensor};

/// Writes `dir/config.json` and `dir/model.safetensors`. `eos_token_id` is the tokenizer's
/// end-of-text token (50256 for GPT-2's), used for `bos_token_id` and `eos_token_id`.
pub fn export_hf(
    dir: &Path,
    config: &GptConfig,
    params: &[f32],
    eos_token_id: Option<u32>,
) -> Result<(), CheckpointError> {
    export_hf_as(dir, config, params, eos_token_id, false)
}

/// [`export_hf`], the weights written in bf16 when `bf16` (`torch_dtype` `bfloat16`; the
/// fp32 master weights rounded to nearest), else in fp32.
pub fn export_hf_as(
    dir: &Path,
    config: &GptConfig,
    params: &[f32],
    eos_token_id: Option<u32>,
    bf16: bool,
) -> Result<(), CheckpointError> {
    let layout = ParamLayout::new(*config);
    if params.len() != layout.len() {
        return Err(CheckpointError::WrongLength {
            what: "the parameter buffer",
            expected: layout.len(),
            found: params.len(),
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
    let mut hf = hf_config(config, eos_token_id);
    if bf16 {
        hf["torch_dtype"] = "bfloat16".into();
    }
    let json = serde_json::to_vec_pretty(&hf)
        .map_err(|source| CheckpointError::Json { path: dir.join("config.json"), cause: source })?;
    let tensors = hf_tensors(&layout, params);
    // safetensors writes the file itself; write it beside the target and rename it over.
    let target = dir.join("model.safetensors");
    let tmp = dir.join(format!(".model.safetensors.tmp-{}", std::process::id()));
    let metadata = [("format".to_owned(), "pt".to_owned())].into();
    write_tensors_as(&tmp, tensors, metadata, bf16)?;
    std::fs::rename(&tmp, &target).map_err(|e| CheckpointError::io(&target, e))?;
    write_file_atomically(&dir.join("config.json"), |w| w.write_all(&json))
}

fn hf_config(c: &GptConfig, eos_token_id: Option<u32>) -> serde_json::Value {
    let mut config = serde_json::json!({
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": c.vocab_size,
        "n_positions": c.max_seq_len,
        "n_ctx": c.max_seq_len,
        "n_embd": c.channels,
        "n_layer": c.num_layers,
        "n_head": c.num_heads,
        "n_inner": null,
        // llm.c's GELU is the tanh approximation, which HF calls gelu_new.
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "initializer_range": 0.02,
        "scale_attn_weights": true,
        "tie_word_embeddings": true,
        "torch_dtype": "float32",
    });
    // Explicit nulls where the tokenizer has no end-of-text token: left out, transformers
    // would assume GPT-2's 50256, outside a small vocabulary.
    config["bos_token_id"] = eos_token_id.into();
    config["eos_token_id"] = eos_token_id.into();
    config
}

/// For a matrix, llm.c's `[out, in]` shape in multiples of the hidden size.
type MatrixShape = Option<(usize, usize)>;

/// Per-layer tensors: HF name, llm.c tensor, and the shape of matrices.
const LAYER_TENSORS: [(&str, ParamTensor, MatrixShape); 12] = [
    ("ln_1.weight", ParamTensor::Ln1W, None),
    ("ln_1.bias", ParamTensor::Ln1B, None),
    ("attn.c_attn.weight", ParamTensor::QkvW, Some((3, 1))),
    ("attn.c_attn.bias", ParamTensor::QkvB, None),
    ("attn.c_proj.weight", ParamTensor::AttnProjW, Some((1, 1))),
    ("attn.c_proj.bias", ParamTensor::AttnProjB, None),
    ("ln_2.weight", ParamTensor::Ln2W, None),
    ("ln_2.bias", ParamTensor::Ln2B, None),
    ("mlp.c_fc.weight", ParamTensor::FcW, Some((4, 1))),
    ("mlp.c_fc.bias", ParamTensor::FcB, None),
    ("mlp.c_proj.weight", ParamTensor::FcProjW, Some((1, 4))),
    ("mlp.c_proj.bias", ParamTensor::FcProjB, None),
];

/// `[rows, cols]` row-major -> `[cols, rows]`.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; m.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = m[r * cols + c];
        }
    }
    t
}

fn hf_tensors<'a>(layout: &ParamLayout, params: &'a [f32]) -> Vec<(String, F32View<'a>)> {
    let c = &layout.config;
    let ch = c.channels;
    let whole = |t: ParamTensor| &params[layout.range(t)];
    let layer = |t: ParamTensor, l: usize| &params[layout.layer_range(t, l)];
    let borrowed = |shape: Vec<usize>, data: &'a [f32]| F32View { shape, data: data.into() };
    let mut out = vec![
        (
            "wte.weight".to_owned(),
            borrowed(vec![c.vocab_size, ch], &whole(ParamTensor::Wte)[..c.vocab_size * ch]),
        ),
        ("wpe.weight".to_owned(), borrowed(vec![c.max_seq_len, ch], whole(ParamTensor::Wpe))),
        ("ln_f.weight".to_owned(), borrowed(vec![ch], whole(ParamTensor::LnfW))),
        ("ln_f.bias".to_owned(), borrowed(vec![ch], whole(ParamTensor::LnfB))),
    ];
    for l in 0..c.num_layers {
        for &(name, t, matrix) in &LAYER_TENSORS {
            let data = layer(t, l);
            let view = match matrix {
                Some((out_mult, in_mult)) => {
                    let (rows, cols) = (out_mult * ch, in_mult * ch);
                    F32View { shape: vec![cols, rows], data: transpose(data, rows, cols).into() }
                }
                None => borrowed(vec![data.len()], data),
            };
            out.push((format!("h.{l}.{name}"), view));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::SafeTensors;
    use trident_data::SplitMix64;

    #[test]
    fn writes_gpt2_names_shapes_and_transposed_weights() {
        let seed = 0x4f;
        let config = GptConfig::new(24, 40, 2, 2, 8, 64).unwrap();
        let layout = ParamLayout::new(config);
        let mut rng = SplitMix64::new(seed);
        let params: Vec<f32> = (0..layout.len()).map(|_| rng.next_f32() - 0.5).collect();
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("hf");
        export_hf(&dir, &config, &params, None).unwrap();

        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        assert_eq!(json["model_type"], "gpt2");
        assert_eq!(json["vocab_size"], 40);
        assert_eq!(json["n_positions"], 24);
        assert_eq!(json["n_embd"], 8);
        assert_eq!(json["n_layer"], 2);
        assert_eq!(json["n_head"], 2);
        assert!(json["eos_token_id"].is_null());

        let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(meta.metadata().as_ref().unwrap()["format"], "pt");
        let st = SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(st.len(), 4 + 12 * 2);
        let get = |name: &str, idx: &[usize]| {
            let t = st.tensor(name).unwrap();
            let flat = idx.iter().zip(t.shape()).fold(0, |acc, (&i, &d)| acc * d + i);
            f32::from_le_bytes(t.data()[4 * flat..4 * flat + 4].try_into().unwrap())
        };
        let shape = |name: &str| st.tensor(name).unwrap().shape().to_vec();
        assert_eq!(shape("wte.weight"), vec![40, 8]);
        assert_eq!(shape("wpe.weight"), vec![24, 8]);
        assert_eq!(shape("h.1.attn.c_attn.weight"), vec![8, 24]);
        assert_eq!(shape("h.1.attn.c_attn.bias"), vec![24]);
        assert_eq!(shape("h.0.attn.c_proj.weight"), vec![8, 8]);
        assert_eq!(shape("h.0.mlp.c_fc.weight"), vec![8, 32]);
        assert_eq!(shape("h.0.mlp.c_proj.weight"), vec![32, 8]);
        assert_eq!(shape("ln_f.bias"), vec![8]);

        // HF [in, out] element (i, o) is llm.c's [out, in] element (o, i).
        let ch = 8;
        for (name, t, inner) in [
            ("h.1.attn.c_attn.weight", ParamTensor::QkvW, ch),
            ("h.1.mlp.c_fc.weight", ParamTensor::FcW, ch),
            ("h.1.mlp.c_proj.weight", ParamTensor::FcProjW, 4 * ch),
            ("h.1.attn.c_proj.weight", ParamTensor::AttnProjW, ch),
        ] {
            let src = &params[layout.layer_range(t, 1)];
            let (i, o) = (inner - 1, 5);
            assert_eq!(get(name, &[i, o]), src[o * inner + i], "{name}");
            assert_eq!(get(name, &[2, 3]), src[3 * inner + 2], "{name}");
        }
        assert_eq!(get("wte.weight", &[39, 7]), params[39 * 8 + 7]);
        let ln2b = &params[layout.layer_range(ParamTensor::Ln2B, 1)];
        assert_eq!(get("h.1.ln_2.bias", &[3]), ln2b[3]);
        let wpe = &params[layout.range(ParamTensor::Wpe)];
        assert_eq!(get("wpe.weight", &[23, 1]), wpe[23 * 8 + 1]);
    }

    #[test]
    fn gpt2_vocabulary_gets_its_end_of_text_token() {
        let config = GptConfig::new(8, 50257, 1, 1, 4, 128).unwrap();
        let params = vec![0.25; ParamLayout::new(config).len()];
        let dir = tempfile::tempdir().unwrap();
        export_hf(dir.path(), &config, &params, Some(50256)).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap()).unwrap();
        assert_eq!(json["eos_token_id"], 50256);
        assert!(export_hf(dir.path(), &config, &params[1..], None).is_err());
    }

    #[test]
    fn bf16_on_request_rounds_every_weight_to_nearest() {
        let config = GptConfig::new(8, 40, 1, 2, 8, 64).unwrap();
        let mut rng = SplitMix64::new(9);
        let params: Vec<f32> = (0..ParamLayout::new(config).len()).map(|_| rng.next_f32() - 0.5).collect();
        let (f32_dir, bf16_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        export_hf(f32_dir.path(), &config, &params, None).unwrap();
        export_hf_as(bf16_dir.path(), &config, &params, None, true).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(bf16_dir.path().join("config.json")).unwrap()).unwrap();
        assert_eq!(json["torch_dtype"], "bfloat16");
        let (a, b) = (
            std::fs::read(f32_dir.path().join("model.safetensors")).unwrap(),
            std::fs::read(bf16_dir.path().join("model.safetensors")).unwrap(),
        );
        let (full, half) = (SafeTensors::deserialize(&a).unwrap(), SafeTensors::deserialize(&b).unwrap());
        for name in ["h.0.attn.c_attn.weight", "wte.weight", "ln_f.bias"] {
            let (x, y) = (full.tensor(name).unwrap(), half.tensor(name).unwrap());
            assert_eq!(y.dtype(), safetensors::Dtype::BF16);
            assert_eq!(x.shape(), y.shape(), "{name}");
            for (f, h) in x.data().chunks_exact(4).zip(y.data().chunks_exact(2)) {
                let f = f32::from_le_bytes(f.try_into().unwrap());
                let h = u16::from_le_bytes(h.try_into().unwrap());
                assert_eq!(h, half::bf16::from_f32(f).to_bits(), "{name}: {f}");
            }
        }
    }
}
