//! The CUDA glue: context, stream, allocation, copies and raw launches through `cudarc`.
//!
//! Everything here is thin; the logic of every op lives in the kernels, which the emulator runs
//! too. The driver library is loaded at run time and probed before first use, because `cudarc`
//! panics where no driver exists.
//!
//! The driver keeps the current context per OS thread, and `cudarc`'s raw calls (copies,
//! memsets, launches) use whatever is current: every raw call here binds the device's context
//! to the calling thread first, so rank threads, the data-parallel worker and any other thread
//! may use a device. `TRIDENT_CUDA_SYNC=1` waits for every launch and names the kernel that
//! failed (a kernel fault otherwise surfaces at the next synchronisation, unattributed).

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};

use crate::{Result, RuntimeError};

/// One GPU: its context and its default stream (allocations, frees, and every operation not
/// given another stream).
#[derive(Debug)]
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    compute_capability: (i32, i32),
    /// `TRIDENT_CUDA_SYNC=1`: every launch is waited for, and a failure names its kernel.
    sync_launches: bool,
}

/// Whether `TRIDENT_CUDA_SYNC` asks for synchronous launches.
pub fn sync_launches_requested(value: Option<&str>) -> bool {
    matches!(value.map(str::trim), Some("1") | Some("true") | Some("yes"))
}

/// The GPU a process uses when none is named: its launcher's `LOCAL_RANK` (or Open MPI's and
/// Slurm's local rank) modulo the GPUs present, so that each local rank gets its own GPU.
pub fn local_ordinal(local_rank: Option<&str>, count: usize) -> usize {
    let rank = local_rank.and_then(|r| r.trim().parse::<usize>().ok()).unwrap_or(0);
    if count == 0 {
        0
    } else {
        rank % count
    }
}

impl CudaDevice {
    /// Number of CUDA devices, 0 where no driver can be loaded.
    pub fn count() -> usize {
        if !driver_present() {
            return 0;
        }
        CudaContext::device_count().map(|n| n.max(0) as usize).unwrap_or(0)
    }

    /// Opens GPU `ordinal`: a context and a default stream on it.
    ///
    /// # Errors
    /// [`RuntimeError::CudaUnavailable`] where there is no driver or no such GPU; the driver's
    /// error where it fails to create the context or stream.
    pub fn new(ordinal: usize) -> Result<Self> {
        if Self::count() <= ordinal {
            return Err(RuntimeError::CudaUnavailable);
        }
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: buffers are allocated and freed on the default stream; a copy on another
        // stream is ordered with the default stream on both sides (`Stream::ordered`), and a
        // launch on another stream is unsafe, its caller ordering the streams, so the
        // per-buffer events that tracking would record order nothing that is not already.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let name = ctx.name()?;
        let compute_capability = ctx.compute_capability()?;
        let sync_launches = sync_launches_requested(std::env::var("TRIDENT_CUDA_SYNC").ok().as_deref());
        Ok(Self { ctx, stream, name, compute_capability, sync_launches })
    }

    /// Makes this device's context current on the calling thread (a no-op when it is).
    fn bind(&self) -> Result<()> {
        Ok(self.ctx.bind_to_thread()?)
    }

    /// The GPU's name, as the driver reports it (`NVIDIA H100 80GB HBM3`, say).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GPU's compute capability, `(major, minor)`: `(9, 0)` for sm_90.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// Waits until the work queued on every stream of the device has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        Ok(self.ctx.synchronize()?)
    }

    /// The stream every buffer operation and plain launch goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn alloc_zeros(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.bind()?;
        Ok(self.stream.alloc_zeros::<u8>(bytes.max(1))?)
    }

    /// Zeroes `bytes` bytes at `dst`, queued on `stream`.
    ///
    /// # Safety
    /// `dst` must be a device address with `bytes` writable bytes on this device.
    pub(crate) unsafe fn memset_zero(&self, stream: &CudaStream, dst: u64, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for the range.
        unsafe { cudarc::driver::result::memset_d8_async(dst, 0, bytes, stream.cu_stream())? };
        Ok(())
    }

    /// Copies `src` to `dst`, queued on `stream`.
    ///
    /// # Safety
    /// `dst` must be a device address with `src.len()` writable bytes on this device.
    pub(crate) unsafe fn upload(&self, stream: &CudaStream, src: &[u8], dst: u64) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for `dst`; a copy from pageable memory has read `src`
        // before it returns.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream())? };
        Ok(())
    }

    /// Copies `dst.len()` bytes at `src` into `dst` on `stream`, and waits for `stream`.
    ///
    /// # Safety
    /// `src` must be a device address with `dst.len()` readable bytes on this device.
    pub(crate) unsafe fn download(&self, stream: &CudaStream, src: u64, dst: &mut [u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for `src`; the synchronize below completes the copy
        // before `dst` is used.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream())? };
        Ok(stream.synchronize()?)
    }

    /// Copies `bytes` bytes from `src` to `dst`, queued on `stream`.
    ///
    /// # Safety
    /// `src` and `dst` must be device addresses with `bytes` bytes each on this device.
    pub(crate) unsafe fn copy(&self, stream: &CudaStream, src: u64, dst: u64, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for both ranges.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream())? };
        Ok(())
    }

    pub(crate) fn address(&self, buf: &CudaSlice<u8>) -> u64 {
        let (ptr, _sync) = buf.device_ptr(&self.stream);
        ptr
    }

    pub(crate) fn load_module(&self, ptx: &str) -> Result<Arc<CudaModule>> {
        self.bind()?;
        Ok(self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx))?)
    }

    /// # Safety
    /// `words` must match the kernel's parameters in number and type, and every pointer among
    /// them must be valid for the accesses the kernel makes.
    #[allow(clippy::too_many_arguments)] // the driver's launch parameters, one each
    pub(crate) unsafe fn launch(
        &self,
        kernel: &str,
        stream: &CudaStream,
        f: &CudaFunction,
        grid: [u32; 3],
        block: [u32; 3],
        smem: u32,
        words: &[u64],
    ) -> Result<()> {
        self.bind()?;
        let mut words = words.to_vec();
        let mut params: Vec<*mut std::ffi::c_void> =
            words.iter_mut().map(|w| w as *mut u64 as *mut _).collect();
        // SAFETY: each parameter points at a word that lives until the launch has copied it;
        // the driver reads each parameter's own size from its word's low bytes (little-endian).
        unsafe {
            cudarc::driver::result::launch_kernel(
                f.cu_function(),
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                smem,
                stream.cu_stream(),
                &mut params,
            )
            .map_err(|source| RuntimeError::Kernel {
                kernel: kernel.into(),
                waited: false,
                source,
            })?;
        }
        if self.sync_launches {
            stream.synchronize().map_err(|source| RuntimeError::Kernel {
                kernel: kernel.into(),
                waited: true,
                source,
            })?;
        }
        Ok(())
    }

    pub(crate) fn set_max_dynamic_smem(&self, f: &CudaFunction, bytes: u32) -> Result<()> {
        self.bind()?;
        f.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )?;
        Ok(())
    }
}

fn driver_present() -> bool {
    // SAFETY: the probe only tries to open the driver library; it calls nothing in it.
    unsafe { sys::is_culib_present() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_local_rank_gets_its_own_gpu() {
        assert_eq!(local_ordinal(None, 8), 0);
        assert_eq!(local_ordinal(Some("3"), 8), 3);
        assert_eq!(local_ordinal(Some("9"), 8), 1, "more local ranks than GPUs share them in turn");
        assert_eq!(local_ordinal(Some("not a number"), 8), 0);
        assert_eq!(local_ordinal(Some("2"), 0), 0);
    }

    #[test]
    fn synchronous_launches_are_opt_in() {
        assert!(!sync_launches_requested(None));
        assert!(!sync_launches_requested(Some("0")));
        assert!(sync_launches_requested(Some("1")));
        assert!(sync_launches_requested(Some(" true ")));
    }
}
