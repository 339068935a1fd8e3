use std::sync::{Mutex, MutexGuard};

use trident_runtime::{Buffer, Device, Stream};

use super::{OpsError, Result};
use crate::launch::Kernels;

/// What every op needs besides its arguments: the device it runs on and, for the kernel
/// devices (`Emu`, `Cuda`), the loaded kernels and a scratch buffer that ops reuse instead of
/// allocating on every call.
pub struct OpsContext {
    device: Device,
    kernels: Option<Kernels>,
    /// The device's default stream, where no kernels are loaded (`Cpu`).
    default_stream: Stream,
    scratch: Mutex<Option<Buffer<f32>>>,
}

impl OpsContext {
    /// A context for `device`; loads the kernels where the device runs kernels.
    pub fn new(device: &Device) -> Result<Self> {
        let kernels = match device {
            Device::Cpu => {
                super::cpu::retain_freed_memory();
                None
            }
            Device::Emu | Device::Cuda(_) => Some(Kernels::load(device)?),
        };
        Ok(Self {
            device: device.clone(),
            kernels,
            default_stream: device.default_stream(),
            scratch: Mutex::new(None),
        })
    }

    /// The device the ops run on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The stream the context's kernels and copies use: the device's default stream (its
    /// kernels' stream, see [`Kernels::stream`]).
    pub fn stream(&self) -> &Stream {
        match &self.kernels {
            Some(k) => k.stream(),
            None => &self.default_stream,
        }
    }

    /// The loaded kernels; an error on `Cpu`, which runs none.
    pub fn kernels(&self) -> Result<&Kernels> {
        self.kernels.as_ref().ok_or(OpsError::Unsupported { op: "kernel launch", device: self.device.kind() })
    }

    /// A device scratch buffer of at least `len` elements, held until the guard drops.
    pub(super) fn scratch(&self, len: usize) -> Result<ScratchGuard<'_>> {
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_none_or(|b| b.len() < len) {
            *guard = Some(Buffer::zeros(&self.device, len)?);
        }
        Ok(ScratchGuard(guard))
    }
}

/// Exclusive use of the context's scratch buffer.
pub(super) struct ScratchGuard<'a>(MutexGuard<'a, Option<Buffer<f32>>>);

impl std::ops::Deref for ScratchGuard<'_> {
    type Target = Buffer<f32>;
    fn deref(&self) -> &Buffer<f32> {
        self.0.as_ref().expect("scratch is allocated before the guard is handed out")
    }
}

impl std::ops::DerefMut for ScratchGuard<'_> {
    fn deref_mut(&mut self) -> &mut Buffer<f32> {
        self.0.as_mut().expect("scratch is allocated before the guard is handed out")
    }
}

impl std::fmt::Debug for OpsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpsContext on {}", self.device.kind())
    }
}
