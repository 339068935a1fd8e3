//! [`Check`]: the argument checks every launch wrapper makes, public so that wrappers of one's
//! own kernels make the same ones.

use trident_runtime::{Device, View, ViewMut};

use super::{LaunchError, Result};

/// The checks a launch wrapper makes before it launches: every view on the device the kernels
/// run on and exactly the length its shape implies, and the shape's own conditions; each
/// failure is a [`LaunchError`] naming the kernel and the argument. The checks chain, and the
/// first failure ends the chain.
///
/// A wrapper of a kernel of one's own (in a module from
/// [`Device::load_module`](trident_runtime::Device::load_module)) checks its arguments the same
/// way, against its module's device:
///
/// ```
/// use trident_ops::launch::{Check, LaunchError};
/// use trident_runtime::{Buffer, Device};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let device = Device::Emu;
/// let x = Buffer::<f32>::zeros(&device, 8)?;
/// let mut y = Buffer::<f32>::zeros(&device, 7)?;
/// let check = Check::new(&device, "my_kernel");
///
/// check.input("x", &x.view(..)?, 8)?.shape(8 % 4 == 0, || "n must be a multiple of 4".into())?;
/// let err = check.output("y", &y.view_mut(..)?, 8).unwrap_err();
/// assert!(matches!(err, LaunchError::Length { kernel: "my_kernel", what: "y", got: 7, expected: 8 }));
///
/// let on_cpu = Buffer::<f32>::zeros(&Device::Cpu, 8)?;
/// assert!(matches!(check.input("x", &on_cpu.view(..)?, 8), Err(LaunchError::WrongDevice { .. })));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Check<'d> {
    device: &'d Device,
    kernel: &'static str,
}

impl<'d> Check<'d> {
    /// Checks for a launch of `kernel` (the name its errors carry) on `device`.
    pub fn new(device: &'d Device, kernel: &'static str) -> Self {
        Self { device, kernel }
    }

    /// `v` is on the kernel's device and has `expected` elements.
    ///
    /// # Errors
    /// [`LaunchError::WrongDevice`], [`LaunchError::Length`].
    pub fn input<T: bytemuck::Pod>(&self, what: &'static str, v: &View<T>, expected: usize) -> Result<&Self> {
        self.same_device(v.device())?;
        self.len(what, v.len(), expected)
    }

    /// `v` is on the kernel's device and has `expected` elements.
    ///
    /// # Errors
    /// [`LaunchError::WrongDevice`], [`LaunchError::Length`].
    pub fn output<T: bytemuck::Pod>(
        &self,
        what: &'static str,
        v: &ViewMut<T>,
        expected: usize,
    ) -> Result<&Self> {
        self.same_device(v.device())?;
        self.len(what, v.len(), expected)
    }

    /// `device` is the kernel's device.
    ///
    /// # Errors
    /// [`LaunchError::WrongDevice`].
    pub fn same_device(&self, device: &Device) -> Result<&Self> {
        if self.device.same_as(device) {
            Ok(self)
        } else {
            Err(LaunchError::WrongDevice { view: device.kind(), kernels: self.device.kind() })
        }
    }

    fn len(&self, what: &'static str, got: usize, expected: usize) -> Result<&Self> {
        if got == expected {
            Ok(self)
        } else {
            Err(LaunchError::Length { kernel: self.kernel, what, got, expected })
        }
    }

    /// A condition of the shape holds; `what` says which, for the error.
    ///
    /// # Errors
    /// [`LaunchError::Shape`] with `what()`.
    pub fn shape(&self, ok: bool, what: impl FnOnce() -> String) -> Result<&Self> {
        if ok {
            Ok(self)
        } else {
            Err(LaunchError::Shape { kernel: self.kernel, what: what() })
        }
    }
}
