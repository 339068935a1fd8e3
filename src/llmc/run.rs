//! Trident's side of the comparison: the reference trainer's run on a work directory's files,
//! and a reader for the losses llm.c prints.

use trident_runtime::Device;

use super::reference::{
    reference_settings, REFERENCE_BATCH, REFERENCE_EVAL_BATCHES, REFERENCE_EVAL_INTERVAL, REFERENCE_SEQ_LEN,
    REFERENCE_STEPS,
};
use super::{LlmcError, Workdir};
use crate::checkpoint::read_llmc_model;
use crate::train::Trainer;
use trident_data::{DataLoader, DataOrder, Dataset, TokenizerKind, DEFAULT_VAL_FRACTION};

/// Per-step training losses (step 0 first) and the validation losses with the step before
/// whose update they were measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Losses {
    /// Training loss of each step, step 0 first.
    pub train: Vec<f32>,
    /// `(step, validation loss)`, measured before that step's update.
    pub val: Vec<(u64, f32)>,
}

/// Trains the work directory's model on its shards as `train_gpt2.c` does: the same steps,
/// settings, batch order and validation points.
pub fn train_like_llmc(files: &Workdir, device: &Device) -> Result<Losses, LlmcError> {
    let (config, params) = read_llmc_model(&files.model)?;
    let paths = [files.train.clone(), files.val.clone()];
    let data = Dataset::shards(&paths, TokenizerKind::Bytes, DEFAULT_VAL_FRACTION)?;
    let (b, t) = (REFERENCE_BATCH, REFERENCE_SEQ_LEN);
    // The seed is unused: llm.c's order seeds its own generator.
    let mut train = DataLoader::new(data.train, b, t, 0, true)?.with_order(DataOrder::Llmc)?;
    let mut val = DataLoader::new(data.val, b, t, 0, false)?.with_order(DataOrder::Llmc)?;
    let mut trainer = Trainer::single(device, config, &params, reference_settings())?;
    let mut losses = Losses::default();
    for step in 0..REFERENCE_STEPS {
        if step % REFERENCE_EVAL_INTERVAL == 0 {
            val.reset();
            losses.val.push((step, trainer.evaluate(&mut val, REFERENCE_EVAL_BATCHES)?));
        }
        losses.train.push(trainer.step(&mut train)?.loss);
    }
    Ok(losses)
}

/// The losses in `train_gpt2`'s output: lines `step N: train loss X ...` and `val loss X`
/// (each validation line belongs to the step whose line follows it).
pub fn parse_llmc_output(text: &str) -> Result<Losses, LlmcError> {
    let mut losses = Losses::default();
    let number = |line: &str, s: &str| {
        s.parse::<f32>().map_err(|_| LlmcError::Output(format!("no number in the line `{line}`")))
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("val loss ") {
            losses.val.push((losses.train.len() as u64, number(line, rest.trim())?));
        } else if let Some(rest) = line.strip_prefix("step ") {
            let Some((step, rest)) = rest.split_once(": train loss ") else { continue };
            if step.parse::<usize>().ok() != Some(losses.train.len()) {
                return Err(LlmcError::Output(format!("the line `{line}` is out of order")));
            }
            let value = rest.split_whitespace().next().unwrap_or("");
            losses.train.push(number(line, value)?);
        }
    }
    if losses.train.is_empty() {
        return Err(LlmcError::Output("no `step N: train loss X` lines".into()));
    }
    Ok(losses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_train_gpt2_output() {
        let text = "num_parameters: 10\nval loss 5.5\nstep 0: train loss 5.25 (took 1.0 ms)\n\
                    step 1: train loss 5.0 (took 1.0 ms)\nval loss 4.75\ngenerating:\n---\nstep 7 of it\n\
                    step 2: train loss 4.5 (took 1.0 ms)\n";
        let losses = parse_llmc_output(text).unwrap();
        assert_eq!(losses.train, [5.25, 5.0, 4.5]);
        assert_eq!(losses.val, [(0, 5.5), (2, 4.75)]);
        assert!(parse_llmc_output("step 1: train loss 3.0\n").is_err());
        assert!(parse_llmc_output("hello\n").is_err());
        assert!(parse_llmc_output("step 0: train loss x\n").is_err());
    }
}
