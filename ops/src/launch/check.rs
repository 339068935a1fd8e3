//! Argument checks shared by the launch wrappers.

use trident_runtime::{View, ViewMut};

use super::{Kernels, LaunchError, Result};

/// Checks that every view is on the kernels' device and holds exactly its expected length.
pub(super) struct Check<'k> {
    k: &'k Kernels,
    kernel: &'static str,
}

impl<'k> Check<'k> {
    pub fn new(k: &'k Kernels, kernel: &'static str) -> Self {
        Self { k, kernel }
    }

    pub fn input<T: bytemuck::Pod>(&self, what: &'static str, v: &View<T>, expected: usize) -> Result<&Self> {
        self.k.check_device(v.device())?;
        self.len(what, v.len(), expected)
    }

    pub fn output<T: bytemuck::Pod>(
        &self,
        what: &'static str,
        v: &ViewMut<T>,
        expected: usize,
    ) -> Result<&Self> {
        self.k.check_device(v.device())?;
        self.len(what, v.len(), expected)
    }

    fn len(&self, what: &'static str, got: usize, expected: usize) -> Result<&Self> {
        if got == expected {
            Ok(self)
        } else {
            Err(LaunchError::Length { kernel: self.kernel, what, got, expected })
        }
    }

    pub fn shape(&self, ok: bool, what: impl FnOnce() -> String) -> Result<&Self> {
        if ok {
            Ok(self)
        } else {
            Err(LaunchError::Shape { kernel: self.kernel, what: what() })
        }
    }
}
