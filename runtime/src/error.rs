use crate::DeviceKind;

/// What went wrong in the runtime. Driver errors are kept as the error's source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    #[error("no CUDA driver or GPU could be found on this machine")]
    CudaUnavailable,
    #[error("a CUDA driver call failed")]
    Cuda(#[from] cudarc::driver::DriverError),
    /// A launch, or with `TRIDENT_CUDA_SYNC=1` the kernel's run, failed.
    #[error("kernel `{kernel}` failed{}", if *.waited { " (TRIDENT_CUDA_SYNC=1 waited for it)" } else { " to launch" })]
    Kernel {
        kernel: String,
        /// Whether the failure was seen by waiting for the kernel to finish.
        waited: bool,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("the {0:?} device runs no kernels; its ops have CPU implementations")]
    NoKernels(DeviceKind),
    #[error("module `{module}` has no kernel `{name}`")]
    NoSuchKernel { module: &'static str, name: String },
    #[error("kernel `{kernel}` takes {expected} arguments ({params}), the launch passed {got}")]
    ArgCount { kernel: &'static str, expected: usize, got: usize, params: String },
    #[error("{0}")]
    Emulator(Box<trident_simt::EmuError>),
    #[error("buffer on {buffer:?} used with a {device:?} operation; copy it to that device first")]
    WrongDevice { buffer: DeviceKind, device: DeviceKind },
    #[error("range {start}..{end} is out of bounds for a buffer of {len} elements")]
    OutOfBounds { start: usize, end: usize, len: usize },
    #[error("ranges {a:?} and {b:?} overlap; a mutable view needs its own elements")]
    Overlap { a: std::ops::Range<usize>, b: std::ops::Range<usize> },
    #[error("{0:?} buffers do not live in host memory; copy the data to the device instead")]
    NotHostMemory(DeviceKind),
    #[error(
        "cannot allocate a {device:?} buffer of {len} elements ({}): not enough memory; a smaller batch \
         or model needs less",
        bytes.map_or("more bytes than fit in usize".to_string(), |b| format!("{b} bytes"))
    )]
    OutOfMemory { device: DeviceKind, len: usize, bytes: Option<usize> },
    #[error("length mismatch: {what} has {got} elements, expected {expected}")]
    Length { what: &'static str, got: usize, expected: usize },
}

impl From<trident_simt::EmuError> for RuntimeError {
    fn from(e: trident_simt::EmuError) -> Self {
        RuntimeError::Emulator(Box::new(e))
    }
}
