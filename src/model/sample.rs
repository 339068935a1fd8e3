//! Autoregressive generation with temperature and top-k sampling.

use super::init::NormalRng;
use super::{Gpt, MicroActs, ModelError, Workspace};
use crate::ops::OpsContext;
use crate::parallel::TpGroup;

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
/// token runs `model` (a whole model: TP = PP = 1) over the last `window` tokens of the
/// context (at most the model's positions).
#[allow(clippy::too_many_arguments)]
pub fn generate(
    model: &Gpt,
    ctx: &OpsContext,
    window: usize,
    prompt: &[u32],
    max_new: usize,
    params: SamplingParams,
    rng: &mut NormalRng,
    stop: Option<u32>,
) -> Result<Vec<u32>, ModelError> {
    if prompt.is_empty() || window == 0 {
        return Err(ModelError::EmptyBatch { batch: 1, seq: prompt.len().min(window) });
    }
    let place = model.layout().place;
    if place.tp != 1 || place.pp != 1 {
        return Err(ModelError::State {
            what: format!(
                "sampling needs the whole model on one rank, not a share of tensor-parallel size {} and {} \
                 pipeline stages; load the checkpoint on one rank",
                place.tp, place.pp
            ),
        });
    }
    let window = window.min(model.config().max_seq_len);
    let device = ctx.device();
    let mut tp = TpGroup::single();
    // One workspace per context length (they grow until the window is full).
    let mut passes: Option<(Workspace, MicroActs)> = None;
    let mut tokens = prompt.to_vec();
    for _ in 0..max_new {
        let context = &tokens[tokens.len().saturating_sub(window)..];
        let t = context.len();
        if passes.as_ref().is_none_or(|(ws, _)| ws.seq() != t) {
            let ws = Workspace::new(device, model, 1, t)?;
            let acts = MicroActs::new(device, model, &ws)?;
            passes = Some((ws, acts));
        }
        let (ws, acts) = passes.as_mut().expect("made above");
        model.embed(ctx, &mut tp, ws, acts, context)?;
        model.forward(ctx, &mut tp, ws, acts, None, None)?;
        let logits = model.logits_at(ws, acts, 0, t - 1)?;
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
