//! Streams: in-order queues of work on a device.
//!
//! Every buffer allocation, copy and plain [`Function::launch`](crate::Function::launch) goes to
//! the device's default stream. Work on another stream runs concurrently with it; order the two
//! with [`Stream::wait_for`]. On the host devices every operation completes before it returns,
//! so their streams are already ordered.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::{Device, Result};

/// A queue of work on one device.
#[derive(Clone, Debug)]
pub struct Stream {
    device: Device,
    cuda: Option<Arc<CudaStream>>,
}

impl Device {
    /// The stream that buffers and plain launches use.
    pub fn default_stream(&self) -> Stream {
        let cuda = match self {
            Device::Cuda(d) => Some(d.stream().clone()),
            _ => None,
        };
        Stream { device: self.clone(), cuda }
    }

    /// A new stream on this device.
    pub fn new_stream(&self) -> Result<Stream> {
        let cuda = match self {
            Device::Cuda(d) => Some(d.stream().fork()?),
            _ => None,
        };
        Ok(Stream { device: self.clone(), cuda })
    }
}

impl Stream {
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Blocks until everything queued on this stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        match &self.cuda {
            Some(s) => Ok(s.synchronize()?),
            None => Ok(()),
        }
    }

    /// Makes work queued on this stream from now on wait for everything queued on `other` so far.
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        self.device.expect_same(&other.device)?;
        match (&self.cuda, &other.cuda) {
            (Some(a), Some(b)) => Ok(a.join(b)?),
            _ => Ok(()),
        }
    }

    pub(crate) fn cuda(&self) -> Option<&Arc<CudaStream>> {
        self.cuda.as_ref()
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
