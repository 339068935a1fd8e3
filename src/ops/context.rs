use trident_runtime::{Device, Module};

use super::Result;

/// What every op needs besides its arguments: the device it runs on and, for the kernel
/// devices (`Emu`, `Cuda`), the loaded kernel module.
pub struct OpsContext {
    device: Device,
    module: Option<Module>,
}

impl OpsContext {
    /// A context for `device`; loads the kernel module where the device runs kernels.
    pub fn new(device: &Device) -> Result<Self> {
        let module = match device {
            Device::Cpu => {
                super::cpu::retain_freed_memory();
                None
            }
            Device::Emu | Device::Cuda(_) => Some(device.load_module(&crate::kernels::module_source())?),
        };
        Ok(Self { device: device.clone(), module })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The kernel module (`None` on `Cpu`).
    pub fn module(&self) -> Option<&Module> {
        self.module.as_ref()
    }
}

impl std::fmt::Debug for OpsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpsContext on {}", self.device.kind())
    }
}
