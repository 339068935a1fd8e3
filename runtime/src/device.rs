use std::sync::Arc;

use crate::cuda::CudaDevice;
use crate::{Result, RuntimeError};

/// Which kind of device a [`Device`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// [`Device::Cpu`].
    Cpu,
    /// [`Device::Emu`].
    Emu,
    /// [`Device::Cuda`].
    Cuda,
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Emu => "emu",
            DeviceKind::Cuda => "cuda",
        })
    }
}

/// A device that holds buffers and, except for `Cpu`, runs kernels. Cloning it names the same
/// device (for `Cuda`: the same context and default stream).
///
/// ```
/// use trident_runtime::{Device, DeviceKind};
///
/// let device = Device::auto(); // a GPU where one is present, else the CPU
/// assert_eq!(device.is_host(), device.kind() != DeviceKind::Cuda);
/// assert!(Device::Emu.same_as(&Device::Emu.clone()) && !Device::Emu.same_as(&Device::Cpu));
/// Device::Emu.synchronize().unwrap(); // host devices have nothing in flight
/// ```
#[derive(Clone, Debug)]
pub enum Device {
    /// Host memory; runs no kernels (the `trident` crate's ops have CPU implementations).
    Cpu,
    /// Host memory; runs kernels compiled for the host through the SIMT emulator, which
    /// checks and counts every launch.
    Emu,
    /// One GPU, through the CUDA driver loaded at run time.
    Cuda(Arc<CudaDevice>),
}

impl Device {
    /// GPU `ordinal`, or [`RuntimeError::CudaUnavailable`] where no driver or device exists.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        Ok(Device::Cuda(Arc::new(CudaDevice::new(ordinal)?)))
    }

    /// Emulated device `ordinal`, for ranks that run as threads of one process with one
    /// emulated device each: makes the calling host thread drive that device and returns
    /// [`Device::Emu`]. The thread's launches then run as device `ordinal` (named so in the
    /// emulator's reports), and the buffers it allocates are memory the other emulated devices
    /// map: a kernel reaches a peer's buffer through the pointer passed to it, and the emulator
    /// checks every access to such memory against the other devices' (the PTX memory model:
    /// only release/acquire chains at `.sys` scope order two devices). Call it on each rank's
    /// thread before that rank allocates.
    ///
    /// ```
    /// use trident_runtime::{Device, DeviceKind};
    ///
    /// let ranks: Vec<DeviceKind> = std::thread::scope(|s| {
    ///     let handles: Vec<_> = (0..2).map(|r| s.spawn(move || Device::emu(r).kind())).collect();
    ///     handles.into_iter().map(|h| h.join().unwrap()).collect()
    /// });
    /// assert_eq!(ranks, [DeviceKind::Emu, DeviceKind::Emu]);
    /// ```
    pub fn emu(ordinal: u32) -> Device {
        trident_simt::set_emulated_device(Some(ordinal));
        Device::Emu
    }

    /// The emulated device the calling host thread drives ([`Device::emu`]), if any.
    pub fn emu_ordinal() -> Option<u32> {
        trident_simt::emulated_device()
    }

    /// The GPU of this process among the local ranks of a job: `LOCAL_RANK` (torchrun,
    /// `trident launch`), `OMPI_COMM_WORLD_LOCAL_RANK` or `SLURM_LOCALID`, modulo the GPUs
    /// present; GPU 0 outside a launcher.
    pub fn cuda_for_local_rank() -> Result<Device> {
        let local = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"]
            .iter()
            .find_map(|v| std::env::var(v).ok());
        Device::cuda(crate::cuda::local_ordinal(local.as_deref(), CudaDevice::count()))
    }

    /// A GPU when one is present (this local rank's, see [`Device::cuda_for_local_rank`]),
    /// else the CPU. Where a CUDA driver is installed but no GPU can be opened (`cuInit`
    /// fails, or the context cannot be made), it says why on standard error before it takes
    /// the CPU.
    pub fn auto() -> Device {
        let why = match CudaDevice::probe() {
            Ok(0) => return Device::Cpu,
            Ok(_) => match Device::cuda_for_local_rank() {
                Ok(d) => return d,
                Err(e) => e,
            },
            Err(_) if !crate::cuda::driver_present() => return Device::Cpu,
            Err(e) => e,
        };
        eprintln!("trident: a CUDA driver is installed but no GPU could be opened ({why}); using the CPU");
        Device::Cpu
    }

    /// Whether a CUDA driver with at least one device is present.
    pub fn cuda_available() -> bool {
        CudaDevice::count() > 0
    }

    /// Which kind of device this is.
    pub fn kind(&self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
            Device::Emu => DeviceKind::Emu,
            Device::Cuda(_) => DeviceKind::Cuda,
        }
    }

    /// Whether buffers of this device live in host memory (`Cpu` and `Emu`).
    pub fn is_host(&self) -> bool {
        !matches!(self, Device::Cuda(_))
    }

    /// Waits until all work queued on the device, on every stream, has finished. Host devices
    /// run synchronously.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu | Device::Emu => Ok(()),
            Device::Cuda(d) => d.synchronize(),
        }
    }

    /// Whether two handles name the same device (for Cuda: the same context).
    pub fn same_as(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cuda(a), Device::Cuda(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.kind() == b.kind(),
        }
    }

    /// [`Device::same_as`] as a check: an operation on this device refuses a buffer, view or
    /// stream of `other`.
    ///
    /// ```
    /// use trident_runtime::{Device, RuntimeError};
    ///
    /// assert!(Device::Emu.expect_same(&Device::Emu).is_ok());
    /// assert!(matches!(Device::Emu.expect_same(&Device::Cpu), Err(RuntimeError::WrongDevice { .. })));
    /// ```
    ///
    /// # Errors
    /// [`RuntimeError::WrongDevice`] unless the two name the same device.
    pub fn expect_same(&self, other: &Device) -> Result<()> {
        if self.same_as(other) {
            Ok(())
        } else {
            Err(RuntimeError::WrongDevice { buffer: other.kind(), device: self.kind() })
        }
    }
}
