//! What Trident's tests share, in one place:
//!
//! - [`device_tests!`], [`kernel_tests!`] and [`host_tests!`]: a test written once as a function
//!   of the device becomes one `#[test]` per device (`cpu`, `emu`, and `cuda`, which is skipped
//!   with a message where no GPU is usable and fails instead under `TRIDENT_REQUIRE_CUDA=1`);
//! - [`rel_err`] and [`assert_close`]: the norm-wise relative error against an f64 reference, in
//!   which a NaN or infinite output always fails; [`assert_each`], a bound per element;
//! - [`reference`](mod@reference): the f64 references of the ops (GeLU, LayerNorm, GEMM and the linear layer,
//!   causal attention, cross-entropy, AdamW) and central differences for their gradients;
//! - [`rng`] and [`uniform`]: seeded random data, the seed printed so that a failure can be
//!   repeated;
//! - [`POISON`] and [`POISON_BF16`]: what outputs hold before a kernel runs.
//!
//! The kit depends on no Trident crate: the device macros take the `Device` type by path
//! (`trident_runtime::Device` unless told otherwise), so the runtime's own unit tests use it too.

mod compare;
mod devices;
mod poison;
mod random;
pub mod reference;

pub use compare::{assert_close, assert_each, f64s, rel_err};
pub use devices::{cuda_or_skip, cuda_required};
pub use poison::{POISON, POISON_BF16};
pub use random::{rng, uniform};
