/// The factor that brings a gradient of norm `norm` down to `max_norm` (Megatron-LM's
/// `max_norm / (norm + 1e-6)`), or 1 when it is already within it or clipping is off
/// (`max_norm <= 0`).
pub fn clip_scale(norm: f32, max_norm: f32) -> f32 {
    if max_norm > 0.0 && norm > max_norm {
        max_norm / (norm + 1e-6)
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_scales_only_large_gradients() {
        assert_eq!(clip_scale(0.5, 1.0), 1.0);
        assert_eq!(clip_scale(5.0, 0.0), 1.0);
        let s = clip_scale(4.0, 1.0);
        assert!((s * 4.0 - 1.0).abs() < 1e-6, "{s}");
    }
}
