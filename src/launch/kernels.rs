use std::collections::HashMap;
use std::sync::Mutex;

use trident_runtime::{Device, Function, Module};

use super::{LaunchError, Result};

/// Trident's kernel module, loaded on one device, with its functions looked up once.
pub struct Kernels {
    module: Module,
    functions: Mutex<HashMap<&'static str, Function>>,
}

impl Kernels {
    /// Loads every kernel on `device` (`Emu` or `Cuda`).
    pub fn load(device: &Device) -> Result<Self> {
        let module = device.load_module(&crate::kernels::module_source())?;
        Ok(Self { module, functions: Mutex::new(HashMap::new()) })
    }

    pub fn device(&self) -> &Device {
        self.module.device()
    }

    pub(super) fn function(&self, name: &'static str) -> Result<Function> {
        let mut cache = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let f = self.module.function(name)?;
        cache.insert(name, f.clone());
        Ok(f)
    }

    /// Fails unless `device` is the one the kernels are loaded on.
    pub(super) fn check_device(&self, device: &Device) -> Result<()> {
        if self.device().same_as(device) {
            Ok(())
        } else {
            Err(LaunchError::WrongDevice { view: device.kind(), kernels: self.device().kind() })
        }
    }
}
