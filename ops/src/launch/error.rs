//! [`LaunchError`]: why a launch wrapper refused its arguments, or the launch failed.

use trident_runtime::{DeviceKind, RuntimeError};

/// Why a launch wrapper refused its arguments (before anything ran), or the launch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The runtime refused the launch (argument types, configuration) or the kernel faulted.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A view's length differs from what the shape implies.
    #[error("{kernel}: {what} has {got} elements, expected {expected}")]
    Length {
        /// The kernel or wrapper.
        kernel: &'static str,
        /// The argument.
        what: &'static str,
        /// Its length, elements.
        got: usize,
        /// The length the shape implies.
        expected: usize,
    },
    /// A view holds fewer elements than the kernel would touch (GEMM strides and batches).
    #[error("{kernel}: {what} needs {needed} elements but its view has {got}")]
    TooShort {
        /// The kernel.
        kernel: &'static str,
        /// The operand.
        what: &'static str,
        /// Elements the kernel touches, up to the last one.
        needed: usize,
        /// Elements the view has.
        got: usize,
    },
    /// A shape the kernel does not support.
    #[error("{kernel}: {what}")]
    Shape {
        /// The kernel.
        kernel: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A size past the kernel's 32-bit indices (or one whose product overflows).
    #[error("{what} = {value} does not fit the kernel's 32-bit index")]
    TooLarge {
        /// The size.
        what: &'static str,
        /// Its value (`usize::MAX` where a product overflowed).
        value: usize,
    },
    /// The kernels were asked for on `Cuda`, but this build has no PTX.
    #[error("trident-ops was built without its `cuda` feature: the PTX module is absent; enable it to run on CUDA")]
    NoPtx,
    /// A view on another device than the kernels.
    #[error("a view on {view} was passed to kernels loaded on {kernels}")]
    WrongDevice {
        /// The view's device.
        view: DeviceKind,
        /// The kernels' device.
        kernels: DeviceKind,
    },
}
