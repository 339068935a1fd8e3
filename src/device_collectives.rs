//! Collectives on device buffers: the algorithms of `trident-collectives` (ring AllReduce and
//! the rest), with every reduction step run by Trident's own `combine_f32` kernel.
//!
//! On `Emu` (and `Cpu`) device memory is host memory, so the transports read and write the
//! buffers in place and the kernel reduces straight out of the transport's receive buffers. On
//! `Cuda` the buffer is staged through host memory around the collective and each reduction
//! step copies its two operands to the GPU: correct and the same kernel, but not fast; a
//! device-resident transport (CUDA IPC, NVLink) is future work.

use std::sync::Mutex;

use trident_collectives::{Combine, CommError, Communicator, ReduceOp};
use trident_runtime::{Buffer, View, ViewMut};

use crate::launch::{self, CombineOp, Kernels, LaunchError};

/// Why a collective on device buffers failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceCommError {
    /// The collective itself (transport, peers, sizes).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The kernel that combines incoming data into the device buffer.
    #[error("the reduction kernel failed during the collective: {0}")]
    Kernel(#[from] LaunchError),
    /// A copy between the device buffer and the host.
    #[error(transparent)]
    Runtime(#[from] trident_runtime::RuntimeError),
}

type Result<T> = std::result::Result<T, DeviceCommError>;

/// The reduction hook of the collectives, backed by the `combine_f32` kernel. A launch error
/// cannot travel through the hook, so the first one is kept and reported after the collective.
struct KernelCombine<'k> {
    kernels: &'k Kernels,
    error: Mutex<Option<LaunchError>>,
}

impl<'k> KernelCombine<'k> {
    fn new(kernels: &'k Kernels) -> Self {
        Self { kernels, error: Mutex::new(None) }
    }

    fn run(&self, op: ReduceOp, acc: &mut [f32], incoming: &[f32]) -> std::result::Result<(), LaunchError> {
        let op = match op {
            ReduceOp::Sum => CombineOp::Sum,
            ReduceOp::Max => CombineOp::Max,
        };
        let device = self.kernels.device();
        if device.is_host() {
            let mut acc = ViewMut::from_host_mut(device, acc)?;
            return launch::combine(self.kernels, op, &mut acc, &View::from_host(device, incoming)?);
        }
        let mut a = Buffer::from_slice(device, acc)?;
        let b = Buffer::from_slice(device, incoming)?;
        launch::combine(self.kernels, op, &mut a.view_mut(..)?, &b.view(..)?)?;
        acc.copy_from_slice(&a.to_vec()?);
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl Combine<f32> for KernelCombine<'_> {
    fn reduce(&self, op: ReduceOp, acc: &mut [f32], incoming: &[f32]) {
        if let Err(e) = self.run(op, acc, incoming) {
            let mut slot = self.error.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(e);
        }
    }
}

/// Runs `f` on the view's elements as a host slice: in place on host devices, staged through
/// host memory on `Cuda`.
fn with_host<R>(buf: &mut ViewMut<f32>, f: impl FnOnce(&mut [f32]) -> Result<R>) -> Result<R> {
    if let Some(h) = buf.host_mut() {
        return f(h);
    }
    let mut staged = buf.as_view().to_vec()?;
    let r = f(&mut staged)?;
    buf.copy_from_slice(&staged)?;
    Ok(r)
}

/// AllReduce of `buf` over `comm`, reduced by the kernel.
pub fn all_reduce(comm: &mut Communicator, k: &Kernels, buf: &mut ViewMut<f32>, op: ReduceOp) -> Result<()> {
    let combine = KernelCombine::new(k);
    with_host(buf, |h| Ok(comm.all_reduce_with(h, op, &combine)?))?;
    combine.finish()
}

/// Reduce-scatter: `output` (`input.len() / comm.size()` elements) receives this rank's
/// reduced share of `input`.
pub fn reduce_scatter(
    comm: &mut Communicator,
    k: &Kernels,
    input: &View<f32>,
    output: &mut ViewMut<f32>,
    op: ReduceOp,
) -> Result<()> {
    let combine = KernelCombine::new(k);
    let staged_in;
    let input = match input.host() {
        Some(h) => h,
        None => {
            staged_in = input.to_vec()?;
            &staged_in
        }
    };
    with_host(output, |out| Ok(comm.reduce_scatter_with(input, out, op, &combine)?))?;
    combine.finish()
}

/// All-gather: `output` (`comm.size()` times `input`'s length) receives every rank's `input`.
pub fn all_gather(comm: &mut Communicator, input: &View<f32>, output: &mut ViewMut<f32>) -> Result<()> {
    let staged_in;
    let input = match input.host() {
        Some(h) => h,
        None => {
            staged_in = input.to_vec()?;
            &staged_in
        }
    };
    with_host(output, |out| Ok(comm.all_gather(input, out)?))
}

/// Broadcast of `buf` from `root`.
pub fn broadcast(comm: &mut Communicator, buf: &mut ViewMut<f32>, root: usize) -> Result<()> {
    with_host(buf, |h| Ok(comm.broadcast(h, root)?))
}
