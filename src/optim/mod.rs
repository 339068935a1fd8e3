//! AdamW over the model's parameter buffer, and global gradient-norm clipping.

mod adamw;
mod clip;

pub use adamw::{AdamW, AdamWConfig};
pub use clip::{clip_scale, grad_norm};
