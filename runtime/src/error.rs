//! The runtime's error type.

use crate::DeviceKind;

/// What went wrong in the runtime. Driver errors are kept as the error's source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// [`Device::cuda`](crate::Device::cuda) found no driver, the driver would not initialise
    /// (its error code is in `why`), or fewer GPUs than the ordinal.
    #[error("no CUDA GPU can be used: {why}")]
    CudaUnavailable {
        /// What was missing or what the driver answered.
        why: String,
    },
    /// A module could not be loaded on a GPU.
    #[error(
        "module `{module}` could not be loaded on {device} (compute capability {}.{}): tried {}{}",
        cc.0, cc.1, tried.join("; then "),
        if log.trim().is_empty() { String::new() } else { format!("\nJIT log:\n{}", log.trim_end()) }
    )]
    ModuleLoad {
        /// The module's name.
        module: String,
        /// The GPU's name.
        device: String,
        /// Its compute capability.
        cc: (i32, i32),
        /// What was tried, in order, and how each failed.
        tried: Vec<String>,
        /// The driver's JIT error log, where the PTX was compiled.
        log: String,
    },
    /// A CUDA driver call other than a launch failed.
    #[error("a CUDA driver call failed")]
    Cuda(#[from] cudarc::driver::DriverError),
    /// A kernel fault made the GPU's context unusable: `first` is that fault (with the kernel
    /// that caused it, or the last one launched before it was seen), `now` what this call got.
    #[error("the CUDA context of {device} is unusable since an earlier fault: {first} (this call: {now})")]
    Fault {
        /// The GPU's name.
        device: String,
        /// The first fault, as reported.
        first: String,
        /// This call's error.
        now: cudarc::driver::DriverError,
    },
    /// A launch, or with `TRIDENT_CUDA_SYNC=1` the kernel's run, failed.
    #[error("kernel `{kernel}` failed{}", if *.waited { " (TRIDENT_CUDA_SYNC=1 waited for it)" } else { " to launch" })]
    Kernel {
        /// The kernel's name.
        kernel: String,
        /// Whether the failure was seen by waiting for the kernel to finish.
        waited: bool,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// A module was loaded on a device that runs no kernels (`Cpu`).
    #[error("the {0:?} device runs no kernels; its ops have CPU implementations")]
    NoKernels(DeviceKind),
    /// [`Module::function`](crate::Module::function) named a kernel the module lacks.
    #[error("module `{module}` has no kernel `{name}`")]
    NoSuchKernel {
        /// The module's name.
        module: String,
        /// The kernel asked for.
        name: String,
    },
    /// A launch passed more or fewer arguments than the kernel has parameters.
    #[error("kernel `{kernel}` takes {expected} arguments ({params}), the launch passed {got}")]
    ArgCount {
        /// The kernel's name.
        kernel: &'static str,
        /// Its number of parameters.
        expected: usize,
        /// The number of arguments passed.
        got: usize,
        /// Its parameter types, comma-separated.
        params: String,
    },
    /// A launch argument's type differs from its parameter's.
    #[error("kernel `{kernel}` parameter {index} (`{name}`) is `{expected}`, the launch passed {got}")]
    ArgType {
        /// The kernel's name.
        kernel: &'static str,
        /// The parameter's position, from 0.
        index: usize,
        /// The parameter's name (empty where the kernel table does not know it).
        name: &'static str,
        /// The parameter's type.
        expected: String,
        /// What the argument holds.
        got: String,
    },
    /// The emulator refused a launch or found a fault in it.
    #[error("{0}")]
    Emulator(Box<trident_simt::EmuError>),
    /// A buffer, view or stream of one device was used with another.
    #[error("buffer on {buffer:?} used with a {device:?} operation; copy it to that device first")]
    WrongDevice {
        /// The device of the buffer, view or stream passed.
        buffer: DeviceKind,
        /// The device of the operation.
        device: DeviceKind,
    },
    /// A view's range lies outside its buffer or view.
    #[error("range {start}..{end} is out of bounds for a buffer of {len} elements")]
    OutOfBounds {
        /// First element of the range.
        start: usize,
        /// One past its last element.
        end: usize,
        /// Elements of the buffer or view it was taken from.
        len: usize,
    },
    /// Two mutable views asked for at once share elements.
    #[error("ranges {a:?} and {b:?} overlap; a mutable view needs its own elements")]
    Overlap {
        /// One range.
        a: std::ops::Range<usize>,
        /// The range it overlaps.
        b: std::ops::Range<usize>,
    },
    /// Host memory was offered as a view of a device whose buffers live elsewhere (`Cuda`).
    #[error("{0:?} buffers do not live in host memory; copy the data to the device instead")]
    NotHostMemory(DeviceKind),
    /// An allocation failed, or its size in bytes overflowed `usize` (`bytes: None`).
    #[error(
        "cannot allocate a {device:?} buffer of {len} elements ({}): not enough memory",
        bytes.map_or("more bytes than fit in usize".to_string(), |b| format!("{b} bytes"))
    )]
    OutOfMemory {
        /// The device asked.
        device: DeviceKind,
        /// Elements asked for.
        len: usize,
        /// Their size in bytes, where it fits in `usize`.
        bytes: Option<usize>,
    },
    /// A copy's source and destination differ in length.
    #[error("length mismatch: {what} has {got} elements, expected {expected}")]
    Length {
        /// Which side of the copy.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length it must have.
        expected: usize,
    },
    /// A view handed to a kernel as another element type does not hold whole, aligned
    /// elements of it.
    #[error("a view of {bytes} bytes at {addr:#x} is not whole, {align}-byte aligned elements of {elem_bytes} bytes")]
    Reinterpret {
        /// The view's bytes.
        bytes: usize,
        /// Its address.
        addr: u64,
        /// The size of the element type asked for.
        elem_bytes: usize,
        /// Its alignment.
        align: usize,
    },
    /// A module's resource table ([`ModuleSource::with_resources`](crate::ModuleSource::with_resources))
    /// has a line that is not `kernel<TAB>arch<TAB>registers<TAB>static_smem`.
    #[error("module `{module}`: resource table line {line}: {problem}")]
    Resources {
        /// The module's name.
        module: String,
        /// The line, counted from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<trident_simt::EmuError> for RuntimeError {
    fn from(e: trident_simt::EmuError) -> Self {
        RuntimeError::Emulator(Box::new(e))
    }
}
