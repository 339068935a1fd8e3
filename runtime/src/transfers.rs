//! A count of the host transfers the calling thread made: the data that crossed between host
//! memory and a device that runs kernels, as a GPU would move it.
//!
//! Counted, on `Emu` and `Cuda`: every upload ([`ViewMut::copy_from_slice`] and its stream
//! form, [`Buffer::from_slice`]), every download ([`View::copy_to_slice`], [`View::to_vec`]
//! and their stream forms), and on `Emu` every host write through [`ViewMut::host_mut`] (on a
//! GPU the host cannot write device memory in place: it would be an upload). Device-to-device copies
//! ([`ViewMut::copy_from`]), kernels and `Cpu` buffers (host memory with no device) are not
//! transfers. Reads through [`View::host`] are not counted: on `Cuda` there are none, a view's
//! host slice is `None` there.
//!
//! The count is per host thread (a rank of a threaded run counts its own), so a caller reads
//! it before and after the work it measures:
//!
//! ```
//! use trident_runtime::{host_transfers, Buffer, Device};
//!
//! # fn main() -> trident_runtime::Result<()> {
//! let device = Device::Emu;
//! let before = host_transfers();
//! let a = Buffer::from_slice(&device, &[1.0f32, 2.0])?; // an upload
//! let mut b = Buffer::<f32>::zeros(&device, 2)?; // allocated on the device
//! b.view_mut(..)?.copy_from(&a.view(..)?)?; // device to device
//! assert_eq!(host_transfers() - before, 1);
//! assert_eq!(b.to_vec()?, [1.0, 2.0]); // a download
//! assert_eq!(host_transfers() - before, 2);
//! let cpu = Buffer::from_slice(&Device::Cpu, &[1.0f32])?; // host memory, no device
//! assert_eq!(cpu.to_vec()?, [1.0]);
//! assert_eq!(host_transfers() - before, 2);
//! # Ok(())
//! # }
//! ```
//!
//! [`Buffer::from_slice`]: crate::Buffer::from_slice
//! [`ViewMut::copy_from_slice`]: crate::ViewMut::copy_from_slice
//! [`ViewMut::copy_from`]: crate::ViewMut::copy_from
//! [`ViewMut::host_mut`]: crate::ViewMut::host_mut
//! [`View::copy_to_slice`]: crate::View::copy_to_slice
//! [`View::to_vec`]: crate::View::to_vec
//! [`View::host`]: crate::View::host

use std::cell::Cell;

use crate::DeviceKind;

thread_local! {
    static TRANSFERS: Cell<u64> = const { Cell::new(0) };
}

/// How many host transfers the calling thread has made so far (see the module documentation).
pub fn host_transfers() -> u64 {
    TRANSFERS.with(Cell::get)
}

/// Counts one transfer to or from a buffer of `kind` (nothing for `Cpu`).
pub(crate) fn count(kind: DeviceKind) {
    if kind != DeviceKind::Cpu {
        TRANSFERS.with(|t| t.set(t.get() + 1));
    }
}
