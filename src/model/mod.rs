//! The GPT-2 model: configuration, parameter layout, initialisation, activation arena, forward
//! and backward.

pub mod activations;
pub mod config;
mod error;
mod gpt;
pub mod init;
pub mod layout;
mod pass;
pub mod sample;

pub use activations::{Act, ActivationLayout, Workspace};
pub use config::{ConfigError, GptConfig};
pub use error::ModelError;
pub use gpt::Gpt;
pub use init::gpt2_init;
pub use layout::{ParamLayout, ParamTensor};
pub use sample::{generate, pick_token, SamplingParams};

#[cfg(test)]
mod tests;
