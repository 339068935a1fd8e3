//! Activation recomputation: what the backward reruns instead of keeping, a choice of the
//! layout that the planner costs and the trainer runs.

/// Activation recomputation (`--recompute-granularity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Recompute {
    /// Keep every activation the backward needs; recompute nothing (no flag).
    #[default]
    None,
    /// Keep only each layer's input; rerun the whole layer's forward before its backward.
    Full,
    /// Keep everything but the attention output and its log-sum-exp; rerun attention.
    Selective,
}

impl std::str::FromStr for Recompute {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Recompute::None),
            "full" => Ok(Recompute::Full),
            "selective" => Ok(Recompute::Selective),
            _ => Err(format!("unknown --recompute-granularity {s:?}: use full or selective")),
        }
    }
}
