//! [`Kernels`]: Trident's kernel module on one device, and the stream its launches go to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use trident_runtime::{Arg, Device, Function, LaunchConfig, Module, Stream};

use super::{LaunchError, Result};

/// Trident's kernel module, loaded on one device, with its functions looked up once, and the
/// stream the launch wrappers queue their work on (the device's default stream unless
/// [`Kernels::on_stream`] names another).
///
/// ```
/// use trident_ops::launch::{self, Kernels};
/// use trident_runtime::{Buffer, Device};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::Emu;
/// let kernels = Kernels::load(&device)?;
/// let (a, b) = (Buffer::from_slice(&device, &[1.0f32, 2.0])?, Buffer::from_slice(&device, &[10.0f32, 20.0])?);
/// let mut sum = Buffer::<f32>::zeros(&device, 2)?;
/// launch::add(&kernels, &mut sum.view_mut(..)?, &a.view(..)?, &b.view(..)?)?;
///
/// // The same kernels, launching on a stream of their own.
/// let stream = device.new_stream()?;
/// // SAFETY: `sum` is used on no other stream until the default stream waits for this one.
/// let on_stream = unsafe { kernels.on_stream(&stream)? };
/// launch::scale(&on_stream, &mut sum.view_mut(..)?, 0.5)?;
/// device.default_stream().wait_for(&stream)?;
/// assert_eq!(sum.to_vec()?, [5.5, 11.0]);
///
/// // A stream of another device is refused.
/// // SAFETY: refused before anything is queued.
/// assert!(unsafe { kernels.on_stream(&Device::Cpu.default_stream()) }.is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Kernels {
    module: Module,
    functions: Arc<Mutex<HashMap<&'static str, Function>>>,
    /// Launches issued per kernel name, shared by the copies [`Kernels::on_stream`] makes.
    launches: Arc<Mutex<HashMap<&'static str, u64>>>,
    stream: Stream,
}

impl Kernels {
    /// Loads every kernel on `device` (`Emu` or `Cuda`); the wrappers launch on its default
    /// stream.
    ///
    /// # Errors
    /// As [`kernels::load`](crate::kernels::load): the runtime's
    /// [`NoKernels`](trident_runtime::RuntimeError::NoKernels) on `Cpu`; on `Cuda`
    /// [`LaunchError::NoPtx`] without the `cuda` feature, else the driver's error where it
    /// refuses the PTX.
    pub fn load(device: &Device) -> Result<Self> {
        Ok(Self::from_module(crate::kernels::load(device)?))
    }

    /// Another module's kernels (a crate of one's own, say) with the same lookup cache, launch
    /// counts and stream handling; launches go to the default stream of the module's device.
    pub fn from_module(module: Module) -> Self {
        let stream = module.device().default_stream();
        let (functions, launches) = (Arc::default(), Arc::default());
        Self { module, functions, launches, stream }
    }

    /// The same kernels (sharing the loaded module), launching on `stream` instead; a stream
    /// of another device is refused ([`LaunchError::WrongDevice`]).
    ///
    /// Scratch buffers the wrappers allocate are ordered with `stream`, and downloads they make
    /// go through it.
    ///
    /// # Safety
    /// Work queued through the returned value is not ordered with the device's other streams.
    /// While it may be running, the views passed to its wrappers must not be used, copied or
    /// freed by work on another stream, unless that stream was made to wait for `stream`
    /// ([`Stream::wait_for`]) or `stream` was synchronized, and the views' earlier work on
    /// other streams must have been waited for by `stream` (an upload on the default stream
    /// through a plain `copy_from_slice` is: the stream-given copies order themselves with the
    /// default stream, but kernels on it are not). On `Emu` every launch finishes before it
    /// returns, so there is nothing to order.
    pub unsafe fn on_stream(&self, stream: &Stream) -> Result<Kernels> {
        self.check_device(stream.device())?;
        Ok(Kernels {
            module: self.module.clone(),
            functions: self.functions.clone(),
            launches: self.launches.clone(),
            stream: stream.clone(),
        })
    }

    /// The device the kernels are loaded on.
    pub fn device(&self) -> &Device {
        self.module.device()
    }

    /// The stream the wrappers queue their work on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// How many launches of each kernel these kernels (and every copy of them made by
    /// [`on_stream`](Self::on_stream)) have issued, by kernel name: which kernels a pass ran
    /// is then an exact count, on `Emu` and `Cuda` alike.
    pub fn launch_counts(&self) -> HashMap<&'static str, u64> {
        self.launches.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The loaded module, for launching its kernels directly.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Kernel `name` of the module, looked up once and cached.
    ///
    /// # Errors
    /// The runtime's [`NoSuchKernel`](trident_runtime::RuntimeError::NoSuchKernel) where the
    /// module has no kernel `name`.
    pub fn function(&self, name: &'static str) -> Result<Function> {
        let mut cache = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let f = self.module.function(name)?;
        cache.insert(name, f.clone());
        Ok(f)
    }

    /// Launches kernel `name` on the kernels' stream, its arguments checked against the
    /// kernel's parameter types.
    ///
    /// # Errors
    /// As [`Kernels::function`], and the runtime's where it refuses the arguments or the
    /// launch fails.
    ///
    /// # Safety
    /// As for [`Function::launch_on`]: the arguments must be what the kernel reads and writes
    /// for `cfg`, with every view covering what the kernel touches.
    pub unsafe fn launch(&self, name: &'static str, cfg: &LaunchConfig, args: &[Arg]) -> Result<()> {
        let f = self.function(name)?;
        // SAFETY: forwarded from the caller; the stream's ordering is the contract of
        // `on_stream` (or the default stream's own order).
        unsafe { f.launch_on(&self.stream, cfg, args)? };
        *self.launches.lock().unwrap_or_else(|e| e.into_inner()).entry(name).or_default() += 1;
        Ok(())
    }

    /// Makes the kernels' stream wait for the default stream's work so far (a scratch buffer
    /// just allocated and zeroed there, say); nothing to do when it is the default stream.
    pub(super) fn after_default_stream(&self) -> Result<()> {
        if !self.stream.is_default() {
            self.stream.wait_for(&self.device().default_stream())?;
        }
        Ok(())
    }

    /// Makes the default stream's later work (a scratch buffer's free, say) wait for the work
    /// queued on the kernels' stream so far; nothing to do when it is the default stream.
    pub(super) fn before_default_stream(&self) -> Result<()> {
        if !self.stream.is_default() {
            self.device().default_stream().wait_for(&self.stream)?;
        }
        Ok(())
    }

    /// Fails unless `device` is the one the kernels are loaded on.
    ///
    /// # Errors
    /// [`LaunchError::WrongDevice`].
    pub fn check_device(&self, device: &Device) -> Result<()> {
        if self.device().same_as(device) {
            Ok(())
        } else {
            Err(LaunchError::WrongDevice { view: device.kind(), kernels: self.device().kind() })
        }
    }
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels")
            .field("device", &self.device().kind())
            .field("default_stream", &self.stream.is_default())
            .finish()
    }
}
