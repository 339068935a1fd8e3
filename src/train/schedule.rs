//! Learning-rate schedules with Megatron-LM's names: linear warmup from 0 to `--lr` over
//! `--lr-warmup-iters`, then `constant`, `linear` or `cosine` decay to `--min-lr` at the last
//! iteration.

use std::str::FromStr;

/// How the learning rate falls from `--lr` to `--min-lr` after the warmup
/// (`--lr-decay-style`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecayStyle {
    /// No decay: `--lr` after the warmup, until the end.
    Constant,
    /// Linearly to `--min-lr` at the last iteration.
    Linear,
    /// Along half a cosine period to `--min-lr` at the last iteration.
    Cosine,
}

impl FromStr for DecayStyle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(Self::Constant),
            "linear" => Ok(Self::Linear),
            "cosine" => Ok(Self::Cosine),
            _ => Err(format!("unknown --lr-decay-style `{s}`: use constant, linear or cosine")),
        }
    }
}

/// The learning rate of every iteration: warmup, then decay ([`lr`](Self::lr)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrSchedule {
    /// The peak rate, reached at the end of the warmup (`--lr`).
    pub max_lr: f32,
    /// The rate at the end of the decay and after it (`--min-lr`).
    pub min_lr: f32,
    /// Iterations of linear warmup from `max_lr / warmup_iters` to `max_lr`
    /// (`--lr-warmup-iters`; 0: none).
    pub warmup_iters: u64,
    /// Iteration at which the decay reaches `min_lr` (the run's length).
    pub decay_iters: u64,
    /// The decay's shape (`--lr-decay-style`).
    pub style: DecayStyle,
}

impl LrSchedule {
    /// The learning rate of 0-based iteration `iter`.
    pub fn lr(&self, iter: u64) -> f32 {
        if iter < self.warmup_iters {
            return self.max_lr * (iter + 1) as f32 / self.warmup_iters as f32;
        }
        if self.style == DecayStyle::Constant {
            return self.max_lr;
        }
        let span = self.decay_iters.saturating_sub(self.warmup_iters).max(1);
        let ratio = ((iter - self.warmup_iters) as f32 / span as f32).min(1.0);
        let coeff = match self.style {
            DecayStyle::Linear => 1.0 - ratio,
            _ => 0.5 * (1.0 + (std::f32::consts::PI * ratio).cos()),
        };
        self.min_lr + coeff * (self.max_lr - self.min_lr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_decay_to_min() {
        let s = LrSchedule {
            max_lr: 1.0,
            min_lr: 0.1,
            warmup_iters: 10,
            decay_iters: 110,
            style: DecayStyle::Cosine,
        };
        assert!((s.lr(0) - 0.1).abs() < 1e-6);
        assert!((s.lr(9) - 1.0).abs() < 1e-6);
        assert!((s.lr(60) - 0.55).abs() < 1e-5);
        assert!((s.lr(110) - 0.1).abs() < 1e-6 && (s.lr(500) - 0.1).abs() < 1e-6);
        let l = LrSchedule { style: DecayStyle::Linear, ..s };
        assert!((l.lr(35) - 0.775).abs() < 1e-5);
        let c = LrSchedule { style: DecayStyle::Constant, ..s };
        assert_eq!(c.lr(100), 1.0);
        assert!("step".parse::<DecayStyle>().is_err());
    }
}
