//! Streams: in-order queues of work on a device.
//!
//! Every allocation and free, and every copy and launch not given a stream, goes to the
//! device's default stream ([`Device::default_stream`]). Work on another stream
//! ([`Device::new_stream`]) runs concurrently with it; order two streams with
//! [`Stream::wait_for`]. On the host devices every operation completes before it returns, so
//! their streams are already ordered.
//!
//! A copy given a stream (`copy_from_slice_on`, `copy_to_slice_on`, `copy_from_on`,
//! `fill_zero_on` on the views) is safe: on `Cuda` it runs after the work queued on the default
//! stream so far, and the default stream's later work (a free, say) waits for it, while it may
//! overlap work on other streams. A launch on a stream ([`Function::launch_on`]) is unsafe
//! already, and its caller orders the streams that share its buffers.
//!
//! ```
//! use trident_runtime::{Buffer, Device, RuntimeError};
//!
//! # fn main() -> trident_runtime::Result<()> {
//! let device = Device::Emu;
//! let copies = device.new_stream()?;
//! let mut b = Buffer::<f32>::zeros(&device, 4)?;
//! b.view_mut(..)?.copy_from_slice_on(&copies, &[1.0, 2.0, 3.0, 4.0])?;
//! device.default_stream().wait_for(&copies)?;
//! let mut out = [0.0f32; 2];
//! b.view(2..)?.copy_to_slice_on(&copies, &mut out)?;
//! assert_eq!(out, [3.0, 4.0]);
//!
//! // A stream of another device is refused.
//! let other = Device::Cpu.default_stream();
//! assert!(matches!(b.view(..)?.copy_to_slice_on(&other, &mut [0.0; 4]), Err(RuntimeError::WrongDevice { .. })));
//! # Ok(())
//! # }
//! ```
//!
//! [`Function::launch_on`]: crate::Function::launch_on

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::{Device, Result};

/// A queue of work on one device. Cloning it names the same queue.
#[derive(Clone, Debug)]
pub struct Stream {
    device: Device,
    cuda: Option<Arc<CudaStream>>,
}

impl Device {
    /// The stream that allocations and every operation not given another stream use.
    pub fn default_stream(&self) -> Stream {
        let cuda = match self {
            Device::Cuda(d) => Some(d.stream().clone()),
            _ => None,
        };
        Stream { device: self.clone(), cuda }
    }

    /// A new stream on this device, unordered with the others until [`Stream::wait_for`]
    /// orders it.
    pub fn new_stream(&self) -> Result<Stream> {
        let cuda = match self {
            Device::Cuda(d) => Some(d.stream().fork()?),
            _ => None,
        };
        Ok(Stream { device: self.clone(), cuda })
    }
}

impl Stream {
    /// The device the stream queues work on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Whether this is its device's default stream.
    pub fn is_default(&self) -> bool {
        match (&self.cuda, &self.device) {
            (Some(s), Device::Cuda(d)) => Arc::ptr_eq(s, d.stream()),
            _ => true,
        }
    }

    /// Blocks until everything queued on this stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        match &self.cuda {
            Some(s) => Ok(s.synchronize()?),
            None => Ok(()),
        }
    }

    /// Makes work queued on this stream from now on wait for everything queued on `other` so
    /// far ([`RuntimeError::WrongDevice`](crate::RuntimeError::WrongDevice) for a stream of
    /// another device).
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        self.device.expect_same(&other.device)?;
        match (&self.cuda, &other.cuda) {
            (Some(a), Some(b)) => Ok(a.join(b)?),
            _ => Ok(()),
        }
    }

    /// The CUDA stream, on `Cuda`.
    pub(crate) fn cuda(&self) -> Option<&Arc<CudaStream>> {
        self.cuda.as_ref()
    }

    /// Queues `op` on this CUDA stream after the default stream's work so far, and makes the
    /// default stream's later work wait for it (so that a buffer's free, on the default stream,
    /// never overtakes a copy on this one). Only called on `Cuda` streams.
    pub(crate) fn ordered<R>(&self, op: impl FnOnce(&CudaStream) -> Result<R>) -> Result<R> {
        let (Some(s), Device::Cuda(d)) = (&self.cuda, &self.device) else {
            unreachable!("`ordered` is called for CUDA views, whose streams are CUDA streams")
        };
        let default = d.stream();
        if Arc::ptr_eq(s, default) {
            return op(s);
        }
        s.join(default)?;
        let result = op(s);
        default.join(s)?;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_streams_are_ordered_and_tied_to_their_device() {
        let a = Device::Emu.new_stream().unwrap();
        let b = Device::Emu.default_stream();
        a.wait_for(&b).unwrap();
        a.synchronize().unwrap();
        assert!(a.wait_for(&Device::Cpu.default_stream()).is_err());
    }
}
