//! GPT-2 initialisation from a seeded generator.

use super::{ParamLayout, ParamTensor};

/// Standard deviation of GPT-2's weight initialisation.
pub const INIT_STD: f32 = 0.02;

/// A small seeded generator of normal deviates (SplitMix64 + Box-Muller).
pub struct NormalRng {
    state: u64,
    spare: Option<f64>,
}

impl NormalRng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed, spare: None }
    }

    /// The next 64 uniformly distributed bits (one SplitMix64 step).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn next_unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal deviate.
    pub fn next_normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let (u, v) = (self.next_unit(), self.next_unit());
        let r = (-2.0 * u.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * v;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

/// GPT-2 initial parameters in `layout` order: weights and embeddings normal(0, 0.02), the
/// residual projections (`attprojw`, `fcprojw`) scaled by `1/sqrt(2 L)`, biases 0, LayerNorm
/// weights 1. The token embedding's padded rows (past the vocabulary) stay 0: no token reads
/// them and their logits are masked.
pub fn gpt2_init(layout: &ParamLayout, seed: u64) -> Vec<f32> {
    let cfg = &layout.config;
    let mut params = vec![0.0f32; layout.len()];
    let mut rng = NormalRng::new(seed);
    let residual_std = INIT_STD / (2.0 * cfg.num_layers as f32).sqrt();
    for t in ParamTensor::ALL {
        let range = layout.range(t);
        let values = &mut params[range];
        match t {
            ParamTensor::Ln1W | ParamTensor::Ln2W | ParamTensor::LnfW => values.fill(1.0),
            ParamTensor::Ln1B
            | ParamTensor::Ln2B
            | ParamTensor::LnfB
            | ParamTensor::QkvB
            | ParamTensor::AttnProjB
            | ParamTensor::FcB
            | ParamTensor::FcProjB => {}
            ParamTensor::Wte => {
                let real = cfg.vocab_size * cfg.channels;
                values[..real].iter_mut().for_each(|x| *x = (rng.next_normal() as f32) * INIT_STD);
            }
            ParamTensor::AttnProjW | ParamTensor::FcProjW => {
                values.iter_mut().for_each(|x| *x = (rng.next_normal() as f32) * residual_std)
            }
            ParamTensor::Wpe | ParamTensor::QkvW | ParamTensor::FcW => {
                values.iter_mut().for_each(|x| *x = (rng.next_normal() as f32) * INIT_STD)
            }
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GptConfig;

    #[test]
    fn init_has_gpt2_statistics() {
        let cfg = GptConfig::new(64, 100, 2, 2, 64, 128).unwrap();
        let layout = ParamLayout::new(cfg);
        let p = gpt2_init(&layout, 7);
        let std_of = |t: ParamTensor| {
            let v = &p[layout.range(t)];
            (v.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
        };
        assert!((std_of(ParamTensor::FcW) - 0.02).abs() < 0.001, "fcw std {}", std_of(ParamTensor::FcW));
        assert!(
            (std_of(ParamTensor::FcProjW) - 0.01).abs() < 0.0005,
            "fcprojw std {}",
            std_of(ParamTensor::FcProjW)
        );
        assert!(p[layout.range(ParamTensor::LnfW)].iter().all(|&x| x == 1.0));
        assert!(p[layout.range(ParamTensor::QkvB)].iter().all(|&x| x == 0.0));
        let wte = &p[layout.range(ParamTensor::Wte)];
        assert!(wte[100 * 64..].iter().all(|&x| x == 0.0), "padded rows stay zero");
        assert_eq!(p, gpt2_init(&layout, 7), "same seed, same parameters");
        assert_ne!(p, gpt2_init(&layout, 8));
    }
}
