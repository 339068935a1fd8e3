use crate::DeviceKind;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("no CUDA driver could be loaded on this machine; use --device cpu or emu, or install the NVIDIA driver")]
    CudaUnavailable,
    #[error("CUDA driver call failed: {0}")]
    Cuda(String),
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
        "cannot allocate a {device:?} buffer of {len} elements ({}): not enough memory; lower the batch \
         (--micro-batch-size, --seq-length) or the model's size",
        bytes.map_or("more bytes than fit in usize".to_string(), |b| format!("{b} bytes"))
    )]
    OutOfMemory { device: DeviceKind, len: usize, bytes: Option<usize> },
    #[error("length mismatch: {what} has {got} elements, expected {expected}")]
    Length { what: &'static str, got: usize, expected: usize },
}

impl From<cudarc::driver::DriverError> for RuntimeError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        RuntimeError::Cuda(e.to_string())
    }
}

impl From<trident_simt::EmuError> for RuntimeError {
    fn from(e: trident_simt::EmuError) -> Self {
        RuntimeError::Emulator(Box::new(e))
    }
}
