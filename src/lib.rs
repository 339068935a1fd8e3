//! Trident: a GPU kernel and collectives runtime, and a GPT trainer on top of it.
pub mod kernels;
pub mod model;
pub mod ops;
pub mod optim;
