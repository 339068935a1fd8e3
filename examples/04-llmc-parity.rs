//! Trains the same model on the same data as llm.c's reference CPU trainer and compares the
//! losses step by step.
//!
//! ```sh
//! cargo run --release --example 04-llmc-parity -- write DIR
//! #   then, in DIR, run llm.c's train_gpt2 (built from your llm.c checkout) and keep its output:
//! #   (cd DIR && /path/to/llm.c/train_gpt2 > llmc.txt)
//! cargo run --release --example 04-llmc-parity -- compare DIR DIR/llmc.txt
//! ```
//!
//! `write` puts into DIR the files `train_gpt2` reads: `gpt2_124M.bin` (a 3-layer, 128-wide
//! GPT-2 initialised by Trident), the byte-level token shards
//! `dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin` and `gpt2_tokenizer.bin`.
//! `compare` trains Trident on them with llm.c's settings and batch order, on the CPU, and
//! prints both runs' losses and their relative differences.

use std::path::PathBuf;

use trident::llmc::{parse_llmc_output, train_like_llmc, write_workdir, Workdir, WorkdirSpec};
use trident::runtime::Device;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", dir] => {
            let spec = WorkdirSpec::default();
            let files = write_workdir(&PathBuf::from(dir), &spec)?;
            println!(
                "wrote {}, {}, {} and {}",
                files.model.display(),
                files.tokenizer.display(),
                files.train.display(),
                files.val.display()
            );
            println!("model: {:?}, seed {}", spec.config, spec.seed);
            println!("now run llm.c's train_gpt2 in {dir} and save what it prints");
        }
        ["compare", dir, llmc_output] => {
            let reference = parse_llmc_output(&std::fs::read_to_string(llmc_output)?)?;
            let ours = train_like_llmc(&Workdir::in_dir(&PathBuf::from(dir)), &Device::Cpu)?;
            let rel = |a: f32, b: f32| ((a as f64 - b as f64) / b as f64).abs();
            let mut worst = 0.0f64;
            println!("{:>5} {:>10} {:>10} {:>9}", "step", "llm.c", "trident", "rel diff");
            for (step, (&theirs, &mine)) in reference.train.iter().zip(&ours.train).enumerate() {
                worst = worst.max(rel(mine, theirs));
                println!("{step:>5} {theirs:>10.6} {mine:>10.6} {:>9.1e}", rel(mine, theirs));
            }
            for (&(step, theirs), &(_, mine)) in reference.val.iter().zip(&ours.val) {
                println!(
                    "val before step {step:>2}: llm.c {theirs:.6}, trident {mine:.6}, rel diff {:.1e}",
                    rel(mine, theirs)
                );
            }
            if reference.train.len() != ours.train.len() || reference.val.len() != ours.val.len() {
                return Err(format!(
                    "llm.c printed {} train and {} val losses, Trident has {} and {}",
                    reference.train.len(),
                    reference.val.len(),
                    ours.train.len(),
                    ours.val.len()
                )
                .into());
            }
            println!("largest per-step relative difference of the training loss: {worst:.1e}");
        }
        _ => return Err("usage: 04-llmc-parity write DIR | compare DIR LLMC_OUTPUT".into()),
    }
    Ok(())
}
