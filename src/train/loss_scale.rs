//! fp16's loss scaling, with Megatron-LM's flags and semantics (its `ConstantGradScaler` and
//! `DynamicGradScaler`): the loss gradient is multiplied by the scale before the backward pass
//! so that small gradients survive fp16, and the weight gradients divided by it before the
//! update. A step whose gradients hold an infinity or a NaN is skipped (no update, the
//! learning-rate schedule and AdamW's step count stand still); under the dynamic scaler every
//! overflow spends one unit of hysteresis, and when none is left the scale halves (down to the
//! minimum); `window` clean steps in a row double it and restore the hysteresis.

/// `--loss-scale`, `--initial-loss-scale`, `--min-loss-scale`, `--loss-scale-window`,
/// `--hysteresis` (Megatron-LM's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossScaleConfig {
    /// A fixed scale (`--loss-scale`); `None`: dynamic.
    pub fixed: Option<f32>,
    /// The dynamic scale to start from (`--initial-loss-scale`, 2^32).
    pub initial: f32,
    /// The dynamic scale never halves below this (`--min-loss-scale`, 1).
    pub min: f32,
    /// Clean steps in a row after which the dynamic scale doubles (`--loss-scale-window`,
    /// 1000).
    pub window: u64,
    /// Overflowing steps allowed before the dynamic scale halves (`--hysteresis`, 2).
    pub hysteresis: u32,
}

impl Default for LossScaleConfig {
    fn default() -> Self {
        Self { fixed: None, initial: 4_294_967_296.0, min: 1.0, window: 1000, hysteresis: 2 }
    }
}

/// The scaler's state (saved in checkpoints, so that a resumed run scales as the
/// uninterrupted one).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LossScaler {
    /// The factor the loss gradient is multiplied by in the next step.
    pub scale: f32,
    /// Clean steps since the last overflow or growth.
    pub growth_tracker: u64,
    /// Overflows left before the scale backs off.
    pub hysteresis_tracker: u32,
    dynamic: bool,
    min: f32,
    window: u64,
    hysteresis: u32,
}

impl LossScaler {
    /// A scaler at its starting point: the fixed scale, or the dynamic one at
    /// `config.initial` with a full hysteresis.
    pub fn new(config: &LossScaleConfig) -> Self {
        match config.fixed {
            Some(scale) => Self {
                scale,
                growth_tracker: 0,
                hysteresis_tracker: 0,
                dynamic: false,
                min: scale,
                window: 0,
                hysteresis: 0,
            },
            None => Self {
                scale: config.initial,
                growth_tracker: 0,
                hysteresis_tracker: config.hysteresis,
                dynamic: true,
                min: config.min,
                window: config.window,
                hysteresis: config.hysteresis,
            },
        }
    }

    /// After a step: `found_inf` when its gradients overflowed.
    pub fn update(&mut self, found_inf: bool) {
        if !self.dynamic {
            return;
        }
        if found_inf {
            self.growth_tracker = 0;
            self.hysteresis_tracker = self.hysteresis_tracker.saturating_sub(1);
            if self.hysteresis_tracker == 0 {
                self.scale = (self.scale * 0.5).max(self.min);
            }
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker == self.window {
                self.growth_tracker = 0;
                self.hysteresis_tracker = self.hysteresis;
                self.scale *= 2.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Megatron-LM's `DynamicGradScaler.update`, step by step: overflows spend hysteresis
    /// first, then halve the scale (not below the minimum); a window of clean steps doubles it
    /// and restores the hysteresis.
    #[test]
    fn the_dynamic_scaler_backs_off_and_grows_as_megatrons_does() {
        let mut s = LossScaler::new(&LossScaleConfig {
            fixed: None,
            initial: 1024.0,
            min: 256.0,
            window: 3,
            hysteresis: 2,
        });
        let mut seen = Vec::new();
        for inf in [true, true, true, false, false, false, true, false, true, true, true, true] {
            s.update(inf);
            seen.push((s.scale, s.hysteresis_tracker, s.growth_tracker));
        }
        assert_eq!(
            seen,
            [
                (1024.0, 1, 0), // first overflow: hysteresis 2 -> 1, the scale stays
                (512.0, 0, 0),  // second: none left, halve
                (256.0, 0, 0),  // third: halve again
                (256.0, 0, 1),
                (256.0, 0, 2),
                (512.0, 2, 0), // three clean steps: double, hysteresis restored
                (512.0, 1, 0),
                (512.0, 1, 1),
                (256.0, 0, 0),
                (256.0, 0, 0), // the minimum holds
                (256.0, 0, 0),
                (256.0, 0, 0),
            ]
        );
        let mut fixed = LossScaler::new(&LossScaleConfig { fixed: Some(128.0), ..Default::default() });
        fixed.update(true);
        assert_eq!(fixed.scale, 128.0);
    }
}
