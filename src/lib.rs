//! Trident: a GPU kernel and collectives runtime, and a GPT trainer on top of it.
pub mod checkpoint;
pub mod cli;
pub mod data;
pub mod kernels;
pub mod metrics;
pub mod model;
pub mod ops;
pub mod optim;
pub mod plot;
pub mod progress;
pub mod train;
