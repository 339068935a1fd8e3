//! The GPT-2 model, written once: configuration, parameter layouts (the whole model's and one
//! rank's share), initialisation, the transformer layer as the tensor-parallel layer (a group
//! of one is the single-rank case), the activations a pass keeps, and sampling.

pub mod activations;
pub mod config;
mod error;
mod gpt;
pub mod init;
mod layer;
pub mod layer_tensors;
pub mod layout;
mod precision;
pub mod sample;
mod shard;
mod tensor;
pub mod vocab;

pub use activations::{MicroActs, Workspace};
pub use config::{ConfigError, GptConfig};
pub use error::ModelError;
pub use gpt::{Gpt, GptOptions, LayerDone};
pub use init::gpt2_init;
pub use layout::{ParamLayout, ParamTensor};
pub use precision::Precision;
pub use sample::{generate, pick_token, SamplingParams};
pub use shard::{LocalTensor, ShardLayout, ShardPlace};

#[cfg(test)]
mod mixed_tests;
#[cfg(test)]
mod tests;
