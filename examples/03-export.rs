//! Exports a trained checkpoint for other tools: a Hugging Face `transformers` directory
//! (`GPT2LMHeadModel`) and an llm.c model file, plus the model's own logits on a token sequence
//! so that the export can be checked against them (`scripts/check_hf_export.py` does).
//!
//! `cargo run --release --example 03-export -- CHECKPOINT OUT_DIR [--bf16] [TOKEN ...]`
//! (`--bf16`: the Hugging Face weights in bf16; the llm.c file stays fp32).

use std::path::PathBuf;

use trident::checkpoint::{export_hf_as, latest_checkpoint, write_llmc_model, Checkpoint};
use trident::model::Gpt;
use trident::ops::OpsContext;
use trident::runtime::Device;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(ck), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: 03-export CHECKPOINT OUT_DIR [--bf16] [TOKEN ...]".into());
    };
    let mut ck = PathBuf::from(ck);
    if let Some((_, latest)) = latest_checkpoint(&ck)? {
        ck = latest;
    }
    let mut args = args.peekable();
    let bf16 = args.next_if(|a| a == "--bf16").is_some();
    let tokens: Vec<u32> = args.map(|t| t.parse()).collect::<Result<_, _>>()?;
    let checkpoint = Checkpoint::<serde_json::Value>::load(&ck)?;
    let out = PathBuf::from(out);
    export_hf_as(&out.join("hf"), &checkpoint.config, &checkpoint.params, None, bf16)?;
    write_llmc_model(&out.join("model.bin"), &checkpoint.config, &checkpoint.params)?;

    let tokens = if tokens.is_empty() { vec![0, 1, 2, 3] } else { tokens };
    let device = Device::Cpu;
    let ctx = OpsContext::new(&device)?;
    let model = Gpt::from_params(&device, checkpoint.config, &checkpoint.params)?;
    let vocab = checkpoint.config.vocab_size;
    let logits: Vec<Vec<f32>> =
        model.logits(&ctx, &tokens, 1, tokens.len())?.chunks(vocab).map(<[f32]>::to_vec).collect();
    std::fs::write(
        out.join("logits.json"),
        serde_json::to_string(&serde_json::json!({ "tokens": tokens, "logits": logits }))?,
    )?;
    println!("wrote {0}/hf, {0}/model.bin and {0}/logits.json", out.display());
    Ok(())
}
