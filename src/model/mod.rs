//! The GPT-2 model: configuration, parameter layout, forward and backward.

pub mod config;
pub mod layout;

pub use config::{ConfigError, GptConfig};
pub use layout::{ParamLayout, ParamTensor};
