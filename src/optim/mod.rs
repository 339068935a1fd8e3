//! AdamW over the parameters a rank owns (ZeRO-1 is a smaller range of the same update), and
//! global gradient-norm clipping.

mod adamw;
mod clip;

pub use adamw::{AdamW, AdamWConfig};
pub use clip::clip_scale;
