use trident_runtime::{DeviceKind, RuntimeError};

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{kernel}: {what} has {got} elements, expected {expected}")]
    Length { kernel: &'static str, what: &'static str, got: usize, expected: usize },
    #[error("{kernel}: {what} needs {needed} elements but its view has {got}")]
    TooShort { kernel: &'static str, what: &'static str, needed: usize, got: usize },
    #[error("{kernel}: {what}")]
    Shape { kernel: &'static str, what: String },
    #[error("{what} = {value} does not fit the kernel's 32-bit index")]
    TooLarge { what: &'static str, value: usize },
    #[error("a view on {view} was passed to kernels loaded on {kernels}")]
    WrongDevice { view: DeviceKind, kernels: DeviceKind },
}
