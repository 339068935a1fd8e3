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
//!
//! A kernel fault (an illegal address, say) leaves the context unusable: every later call on
//! it fails with the same error. The device remembers the first such fault and the last kernel
//! launched before it, and every later error names them ([`RuntimeError::Fault`]), so that in
//! a process whose tests share one context a single faulting kernel is named by every test it
//! brings down rather than failing them unexplained.
//!
//! Uploads never rely on the driver staging pageable memory before an asynchronous copy
//! returns (the CUDA driver API's "API synchronization behavior" says not to): an upload goes
//! through a pinned staging buffer whose reuse waits for the copy that last read it, or, above
//! [`STAGING_MAX`], waits for the copy itself.

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DriverError,
    PinnedHostSlice,
};

use crate::{ModuleSource, Result, RuntimeError};

/// The largest upload that goes through the pinned staging buffer; larger ones (weights at
/// start-up) wait for their copy instead.
pub const STAGING_MAX: usize = 64 << 20;

/// Pinned host memory that uploads are copied through, and the event of the last copy that
/// read it.
struct Staging {
    host: PinnedHostSlice<u8>,
    read: CudaEvent,
}

impl std::fmt::Debug for Staging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staging").field("bytes", &self.host.len()).finish()
    }
}

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
    /// The pinned buffer uploads go through, made on the first upload.
    staging: Mutex<Option<Staging>>,
    /// The last kernel launched, for naming a fault found later.
    last_kernel: Mutex<&'static str>,
    /// The first fault that made the context unusable, as reported.
    fault: Mutex<Option<String>>,
}

/// Whether `e` is a fault after which the context is unusable (the driver API's "sticky"
/// errors: the kernel's memory access, instruction or trap, or a launch that failed).
fn is_sticky(e: &DriverError) -> bool {
    use sys::cudaError_enum as E;
    matches!(
        e.0,
        E::CUDA_ERROR_ILLEGAL_ADDRESS
            | E::CUDA_ERROR_LAUNCH_TIMEOUT
            | E::CUDA_ERROR_HARDWARE_STACK_ERROR
            | E::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | E::CUDA_ERROR_MISALIGNED_ADDRESS
            | E::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | E::CUDA_ERROR_INVALID_PC
            | E::CUDA_ERROR_LAUNCH_FAILED
            | E::CUDA_ERROR_ASSERT
    )
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
    /// Number of CUDA devices, 0 where no driver can be loaded or it does not initialise
    /// ([`CudaDevice::probe`] says why).
    pub fn count() -> usize {
        Self::probe().unwrap_or(0)
    }

    /// Number of CUDA devices, or why there are none to be had: no driver library, or the
    /// driver's error code from `cuInit` (`CUDA_ERROR_NO_DEVICE`, a driver older than the
    /// runtime needs, a GPU in a bad state...).
    ///
    /// # Errors
    /// [`RuntimeError::CudaUnavailable`] with the reason.
    pub fn probe() -> Result<usize> {
        if !driver_present() {
            return Err(RuntimeError::CudaUnavailable {
                why: "no CUDA driver library (libcuda.so.1) could be loaded".into(),
            });
        }
        cudarc::driver::result::init()
            .map_err(|e| RuntimeError::CudaUnavailable { why: format!("cuInit failed with {e}") })?;
        let n = cudarc::driver::result::device::get_count().map_err(|e| RuntimeError::CudaUnavailable {
            why: format!("cuDeviceGetCount failed with {e}"),
        })?;
        Ok(n.max(0) as usize)
    }

    /// Opens GPU `ordinal`: a context and a default stream on it.
    ///
    /// # Errors
    /// [`RuntimeError::CudaUnavailable`] where there is no driver, it does not initialise (with
    /// its error code) or there is no such GPU; the driver's error where it fails to create the
    /// context or stream.
    pub fn new(ordinal: usize) -> Result<Self> {
        let count = Self::probe()?;
        if count <= ordinal {
            return Err(RuntimeError::CudaUnavailable {
                why: format!("GPU {ordinal} was asked for and the driver sees {count}"),
            });
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
        Ok(Self {
            ctx,
            stream,
            name,
            compute_capability,
            sync_launches,
            staging: Mutex::new(None),
            last_kernel: Mutex::new(""),
            fault: Mutex::new(None),
        })
    }

    /// Makes this device's context current on the calling thread (a no-op when it is).
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| self.error(e))
    }

    /// `e` as the runtime reports it: a fault that made the context unusable is recorded (the
    /// first one) and named, with the last kernel launched before it was seen, in this and
    /// every later error.
    pub(crate) fn error(&self, e: DriverError) -> RuntimeError {
        let mut fault = self.fault.lock().unwrap_or_else(|p| p.into_inner());
        if fault.is_none() && is_sticky(&e) {
            let last = *self.last_kernel.lock().unwrap_or_else(|p| p.into_inner());
            *fault = Some(if last.is_empty() {
                format!("{e}, before any kernel was launched")
            } else {
                format!(
                    "{e}; the last kernel launched before it was `{last}` (TRIDENT_CUDA_SYNC=1 \
                     waits for every launch and names the kernel that faults)"
                )
            });
        }
        match fault.as_ref() {
            Some(first) => RuntimeError::Fault { device: self.name.clone(), first: first.clone(), now: e },
            None => RuntimeError::Cuda(e),
        }
    }

    /// The GPU's name, as the driver reports it (`NVIDIA H100 80GB HBM3`, say).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GPU's compute capability, `(major, minor)`: `(9, 0)` for sm_90.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// The GPU's streaming multiprocessors (`CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`): 132 on
    /// an H100 SXM, what a persistent grid sizes itself by.
    ///
    /// # Errors
    /// The driver's.
    pub fn sm_count(&self) -> Result<usize> {
        let attribute = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
        self.ctx.attribute(attribute).map(|n| n.max(1) as usize).map_err(|e| self.error(e))
    }

    /// `cuTensorMapEncodeTiled` of `f` (interleave none): the 128-byte `CUtensorMap` a TMA copy
    /// reads, as 16 words to upload where a kernel can address it. The caller checks the fields
    /// first with `trident_simt::TensorMap::new`, which applies the driver's documented rules
    /// and names the one broken (the driver only answers `CUDA_ERROR_INVALID_VALUE`).
    ///
    /// # Errors
    /// The driver's, where it refuses the fields.
    pub fn encode_tensor_map(&self, f: &trident_simt::TensorMapFields<'_>) -> Result<[u64; 16]> {
        use sys::CUtensorMapDataType_enum as D;
        use trident_simt::{L2Promotion, OobFill, Swizzle, TensorDataType as T};
        let data_type = match f.data_type {
            T::U8 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            T::U16 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            T::U32 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            T::I32 => D::CU_TENSOR_MAP_DATA_TYPE_INT32,
            T::U64 => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
            T::I64 => D::CU_TENSOR_MAP_DATA_TYPE_INT64,
            T::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            T::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            T::F64 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
            T::Bf16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        };
        let swizzle = match f.swizzle {
            Swizzle::None => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            Swizzle::B32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Swizzle::B64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Swizzle::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        };
        let l2 = match f.l2_promotion {
            L2Promotion::None => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            L2Promotion::B64 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            L2Promotion::B128 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            L2Promotion::B256 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        };
        let fill = match f.oob_fill {
            OobFill::Zero => sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            OobFill::Nan => sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
        };
        let mut map = sys::CUtensorMap { opaque: [0; 16] };
        self.bind()?;
        // SAFETY: the arrays hold the rank's entries (rank - 1 strides), as the checked
        // fields do; the map is written in place and read by nothing else.
        unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map,
                data_type,
                f.global_dims.len() as u32,
                f.global_address as *mut std::ffi::c_void,
                f.global_dims.as_ptr(),
                f.global_strides.as_ptr(),
                f.box_dims.as_ptr(),
                f.element_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                l2,
                fill,
            )
            .result()
        }
        .map_err(|e| self.error(e))?;
        Ok(map.opaque)
    }

    /// Waits until the work queued on every stream of the device has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.ctx.synchronize().map_err(|e| self.error(e))
    }

    /// Waits for everything queued on `stream` (a stream of this device).
    pub(crate) fn synchronize_stream(&self, stream: &CudaStream) -> Result<()> {
        stream.synchronize().map_err(|e| self.error(e))
    }

    /// The stream every buffer operation and plain launch goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn alloc_zeros(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.bind()?;
        self.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(|e| self.error(e))
    }

    /// Zeroes `bytes` bytes at `dst`, queued on `stream`.
    ///
    /// # Safety
    /// `dst` must be a device address with `bytes` writable bytes on this device.
    pub(crate) unsafe fn memset_zero(&self, stream: &CudaStream, dst: u64, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for the range.
        unsafe { cudarc::driver::result::memset_d8_async(dst, 0, bytes, stream.cu_stream()) }
            .map_err(|e| self.error(e))
    }

    /// Copies `src` to `dst`, queued on `stream`; `src` may be reused when this returns. Up to
    /// [`STAGING_MAX`] bytes go through the pinned staging buffer (the copy stays
    /// asynchronous); more are copied and waited for.
    ///
    /// # Safety
    /// `dst` must be a device address with `src.len()` writable bytes on this device.
    pub(crate) unsafe fn upload(&self, stream: &CudaStream, src: &[u8], dst: u64) -> Result<()> {
        self.bind()?;
        if src.len() > STAGING_MAX {
            // SAFETY: the caller vouches for `dst`; the copy is waited for before `src` can be
            // touched again.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream()) }
                .map_err(|e| self.error(e))?;
            return self.synchronize_stream(stream);
        }
        let mut staging = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if staging.as_ref().is_none_or(|s| s.host.len() < src.len()) {
            if let Some(old) = staging.take() {
                // The old buffer is freed only after the copy that last read it.
                old.read.synchronize().map_err(|e| self.error(e))?;
            }
            let bytes = src.len().next_power_of_two().clamp(1 << 20, STAGING_MAX);
            // SAFETY: the memory is written below before any copy reads it.
            let host = unsafe { self.ctx.alloc_pinned::<u8>(bytes) }.map_err(|e| self.error(e))?;
            let read = self.ctx.new_event(None).map_err(|e| self.error(e))?;
            *staging = Some(Staging { host, read });
        }
        let Some(s) = staging.as_mut() else { unreachable!("made above") };
        // The previous copy out of the buffer must have read it before it is overwritten.
        s.read.synchronize().map_err(|e| self.error(e))?;
        let host = s.host.as_mut_slice().map_err(|e| self.error(e))?;
        host[..src.len()].copy_from_slice(src);
        // SAFETY: the caller vouches for `dst`; the pinned bytes stay untouched until `read`
        // (recorded right after the copy) has completed.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, &host[..src.len()], stream.cu_stream()) }
            .map_err(|e| self.error(e))?;
        s.read.record(stream).map_err(|e| self.error(e))
    }

    /// Copies `dst.len()` bytes at `src` into `dst` on `stream`, and waits for `stream`.
    ///
    /// # Safety
    /// `src` must be a device address with `dst.len()` readable bytes on this device.
    pub(crate) unsafe fn download(&self, stream: &CudaStream, src: u64, dst: &mut [u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for `src`; the synchronize below completes the copy
        // before `dst` is used.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
            .map_err(|e| self.error(e))?;
        self.synchronize_stream(stream)
    }

    /// Copies `bytes` bytes from `src` to `dst`, queued on `stream`.
    ///
    /// # Safety
    /// `src` and `dst` must be device addresses with `bytes` bytes each on this device.
    pub(crate) unsafe fn copy(&self, stream: &CudaStream, src: u64, dst: u64, bytes: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller vouches for both ranges.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }
            .map_err(|e| self.error(e))
    }

    pub(crate) fn address(&self, buf: &CudaSlice<u8>) -> u64 {
        let (ptr, _sync) = buf.device_ptr(&self.stream);
        ptr
    }

    /// The architecture name of this GPU, `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// Loads `source`: the cubin that runs on this GPU ([`crate::pick_cubin`]), or else its PTX
    /// through the driver's JIT compiler, saying so on standard error once per module and GPU.
    pub(crate) fn load_module(&self, source: &ModuleSource<'_>) -> Result<Arc<CudaModule>> {
        self.bind()?;
        let arch = self.arch();
        let mut tried = Vec::new();
        match crate::pick_cubin(self.compute_capability, source.cubins) {
            Some((cubin_arch, image)) => match cubin_image(image) {
                Ok(bytes) => match self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bytes)) {
                    Ok(m) => return Ok(m),
                    Err(e) => tried.push(format!("the {cubin_arch} cubin, which the driver refused ({e})")),
                },
                Err(why) => tried.push(format!("the {cubin_arch} cubin, which is damaged ({why})")),
            },
            None => {
                let have: Vec<&str> = source.cubins.iter().map(|c| c.0).collect();
                tried.push(if have.is_empty() {
                    "machine code, of which the module has none".to_string()
                } else {
                    format!(
                        "machine code for {arch}, of which the module has none (it has {})",
                        have.join(", ")
                    )
                });
            }
        }
        let fail = |tried: Vec<String>, log: String| RuntimeError::ModuleLoad {
            module: source.name.to_string(),
            device: self.name.clone(),
            cc: self.compute_capability,
            tried,
            log,
        };
        if source.ptx.trim().is_empty() {
            tried.push("the PTX, which the module does not carry".into());
            return Err(fail(tried, String::new()));
        }
        jit_notice(&source.name, &self.name, &arch);
        match self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(source.ptx.as_ref())) {
            Ok(m) => Ok(m),
            Err(e) => {
                tried.push(format!("the PTX, which the driver's JIT compiler refused ({e})"));
                Err(fail(tried, jit_log(&source.ptx)))
            }
        }
    }

    /// # Safety
    /// `words` must match the kernel's parameters in number and type, and every pointer among
    /// them must be valid for the accesses the kernel makes.
    #[allow(clippy::too_many_arguments)] // the driver's launch parameters, one each
    pub(crate) unsafe fn launch(
        &self,
        kernel: &'static str,
        stream: &CudaStream,
        f: &CudaFunction,
        grid: [u32; 3],
        block: [u32; 3],
        smem: u32,
        words: &[u64],
    ) -> Result<()> {
        self.bind()?;
        *self.last_kernel.lock().unwrap_or_else(|p| p.into_inner()) = kernel;
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
            .map_err(|source| self.kernel_error(kernel, false, source))?;
        }
        if self.sync_launches {
            stream.synchronize().map_err(|source| self.kernel_error(kernel, true, source))?;
        }
        Ok(())
    }

    /// A launch's (or, `waited`, its run's) failure: a fault is recorded as naming `kernel`
    /// itself when the launch was waited for.
    fn kernel_error(&self, kernel: &'static str, waited: bool, source: DriverError) -> RuntimeError {
        if waited && is_sticky(&source) {
            let mut fault = self.fault.lock().unwrap_or_else(|p| p.into_inner());
            if fault.is_none() {
                *fault = Some(format!("{source} in kernel `{kernel}` (TRIDENT_CUDA_SYNC=1 waited for it)"));
                return RuntimeError::Kernel { kernel: kernel.into(), waited, source };
            }
        }
        match self.error(source) {
            RuntimeError::Cuda(source) => RuntimeError::Kernel { kernel: kernel.into(), waited, source },
            other => other,
        }
    }

    pub(crate) fn set_max_dynamic_smem(&self, f: &CudaFunction, bytes: u32) -> Result<()> {
        self.bind()?;
        f.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
        .map_err(|e| self.error(e))
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // The staging buffer is freed after the last copy that read it.
        if let Some(s) = self.staging.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = self.ctx.bind_to_thread();
            let _ = s.read.synchronize();
        }
    }
}

/// The ELF image of a cubin as a module source carries it: as it is, or zlib-inflated.
fn cubin_image(image: &[u8]) -> std::result::Result<Vec<u8>, String> {
    if image.starts_with(b"\x7fELF") {
        return Ok(image.to_vec());
    }
    let bytes = miniz_oxide::inflate::decompress_to_vec_zlib(image).map_err(|e| format!("zlib: {e:?}"))?;
    if bytes.starts_with(b"\x7fELF") {
        Ok(bytes)
    } else {
        Err("not an ELF image once inflated".into())
    }
}

/// Says on standard error, once per module and GPU model in this process, that the driver is
/// JIT-compiling a module's PTX (which can take minutes for a large module).
fn jit_notice(module: &str, device: &str, arch: &str) {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let key = format!("{module} on {device}");
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.contains(&key) {
        eprintln!(
            "trident: module `{module}` has no machine code for {device} ({arch}): the CUDA driver \
             JIT-compiles its PTX (once per process; the driver's cache may keep the result)"
        );
        said.push(key);
    }
}

/// The driver's JIT error log for `ptx` (loaded again with a log buffer; empty where the
/// driver wrote none).
fn jit_log(ptx: &str) -> String {
    let Ok(text) = std::ffi::CString::new(ptx) else {
        return "the PTX holds a NUL byte".into();
    };
    let mut log = vec![0u8; 64 << 10];
    let mut options =
        [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values: [*mut std::ffi::c_void; 2] =
        [log.as_mut_ptr().cast(), log.len() as *mut std::ffi::c_void];
    let mut module = std::ptr::null_mut();
    // SAFETY: the options are the error log buffer and its size, both valid for the call; the
    // image is a NUL-terminated PTX text; the caller has bound the context.
    let status = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            text.as_ptr().cast(),
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    if status == sys::cudaError_enum::CUDA_SUCCESS && !module.is_null() {
        // SAFETY: the module was just loaded by this call and nothing else holds it.
        let _ = unsafe { sys::cuModuleUnload(module) };
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    String::from_utf8_lossy(&log[..end]).into_owned()
}

/// Whether the CUDA driver library can be loaded.
pub(crate) fn driver_present() -> bool {
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
    fn cubins_are_read_plain_or_compressed() {
        let elf = b"\x7fELF and the rest".to_vec();
        assert_eq!(cubin_image(&elf).unwrap(), elf);
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&elf, 6);
        assert_eq!(cubin_image(&z).unwrap(), elf);
        assert!(cubin_image(b"garbage").is_err());
        let not_elf = miniz_oxide::deflate::compress_to_vec_zlib(b"text", 6);
        assert!(cubin_image(&not_elf).unwrap_err().contains("not an ELF"));
    }

    #[test]
    fn sticky_faults_are_told_from_other_errors() {
        use sys::cudaError_enum as E;
        assert!(is_sticky(&DriverError(E::CUDA_ERROR_ILLEGAL_ADDRESS)));
        assert!(is_sticky(&DriverError(E::CUDA_ERROR_LAUNCH_FAILED)));
        assert!(!is_sticky(&DriverError(E::CUDA_ERROR_INVALID_VALUE)));
        assert!(!is_sticky(&DriverError(E::CUDA_ERROR_OUT_OF_MEMORY)));
    }

    #[test]
    fn synchronous_launches_are_opt_in() {
        assert!(!sync_launches_requested(None));
        assert!(!sync_launches_requested(Some("0")));
        assert!(sync_launches_requested(Some("1")));
        assert!(sync_launches_requested(Some(" true ")));
    }
}
