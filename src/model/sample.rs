//! Autoregressive generation with temperature and top-k sampling.

use super::init::NormalRng;
use super::{Gpt, ModelError, Workspace};
use crate::ops::OpsContext;

/// How the next token is chosen from the logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 picks the most likely token (greedy).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
}

/// Picks a token from `logits` (`u` uniform in (0, 1]).
pub fn pick_token(logits: &[f32], params: SamplingParams, u: f64) -> u32 {
    let argmax =
        || logits.iter().enumerate().fold(0, |best, (i, &x)| if x > logits[best] { i } else { best });
    if params.temperature <= 0.0 {
        return argmax() as u32;
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    if params.top_k > 0 && params.top_k < logits.len() {
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        order.truncate(params.top_k);
    }
    let m = order.iter().map(|&i| logits[i]).fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> =
        order.iter().map(|&i| (((logits[i] - m) / params.temperature) as f64).exp()).collect();
    let mut target = u * weights.iter().sum::<f64>();
    for (&i, w) in order.iter().zip(&weights) {
        target -= w;
        if target <= 0.0 {
            return i as u32;
        }
    }
    *order.last().expect("a vocabulary has tokens") as u32
}

/// Appends up to `max_new` tokens to `prompt`, stopping early after `stop` when given. Each
/// token runs the model over the last `ws.seq()` tokens of the context.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    model: &Gpt,
    ctx: &OpsContext,
    ws: &mut Workspace,
    prompt: &[u32],
    max_new: usize,
    params: SamplingParams,
    rng: &mut NormalRng,
    stop: Option<u32>,
) -> Result<Vec<u32>, ModelError> {
    if prompt.is_empty() {
        return Err(ModelError::EmptyBatch { batch: 1, seq: 0 });
    }
    let mut tokens = prompt.to_vec();
    for _ in 0..max_new {
        let window = &tokens[tokens.len().saturating_sub(ws.seq())..];
        model.forward(ctx, ws, window, 1, window.len())?;
        let logits = model.logits_at(ws, 0, window.len() - 1)?;
        let next = pick_token(&logits, params, rng.next_unit());
        tokens.push(next);
        if Some(next) == stop {
            break;
        }
    }
    Ok(tokens[prompt.len()..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_top_k_and_temperature() {
        let logits = [0.1, 3.0, 2.9, -1.0];
        let greedy = SamplingParams { temperature: 0.0, top_k: 0 };
        assert_eq!(pick_token(&logits, greedy, 0.5), 1);
        let top2 = SamplingParams { temperature: 1.0, top_k: 2 };
        let mut rng = NormalRng::new(3);
        let picks: Vec<u32> = (0..200).map(|_| pick_token(&logits, top2, rng.next_unit())).collect();
        assert!(picks.iter().all(|&p| p == 1 || p == 2));
        assert!(picks.contains(&1) && picks.contains(&2));
    }
}
