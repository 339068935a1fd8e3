//! Typed device buffers and views of element ranges in them.
//!
//! A view resolves its buffer once: host memory becomes a slice (so disjoint mutable views are
//! plain `split_at_mut` pieces), device memory an address on its device.

use std::marker::PhantomData;
use std::ops::{Range, RangeBounds};

use bytemuck::Pod;
use cudarc::driver::CudaSlice;

use crate::cuda::CudaDevice;
use crate::host_alloc::AlignedVec;
use crate::{Arg, Device, Result, RuntimeError, Stream};

enum Storage<T: Pod> {
    Host(AlignedVec<T>),
    Cuda(CudaSlice<u8>),
}

fn out_of_memory<T>(device: &Device, len: usize) -> RuntimeError {
    RuntimeError::OutOfMemory { device: device.kind(), len, bytes: len.checked_mul(size_of::<T>()) }
}

/// `len` elements of `T` on one device, freed when dropped (on `Cuda`, on the default stream,
/// after the work queued there).
///
/// Every range a view, copy or split takes is checked: a range outside the buffer, two
/// overlapping mutable views, a copy between different lengths or devices are errors.
///
/// ```
/// use trident_runtime::{Buffer, Device, RuntimeError};
///
/// # fn main() -> trident_runtime::Result<()> {
/// let device = Device::Cpu;
/// let mut b = Buffer::<u32>::zeros(&device, 4)?;
/// b.copy_from_slice(&[1, 2, 3, 4])?;
/// assert_eq!(b.view(1..3)?.to_vec()?, [2, 3]);
/// assert!(matches!(b.copy_from_slice(&[1, 2]), Err(RuntimeError::Length { got: 2, expected: 4, .. })));
/// assert!(matches!(b.view(..5), Err(RuntimeError::OutOfBounds { end: 5, len: 4, .. })));
/// # Ok(())
/// # }
/// ```
pub struct Buffer<T: Pod> {
    device: Device,
    storage: Storage<T>,
    len: usize,
    /// On `Emu`: the allocation as the emulator's memory checks know it.
    _registration: Option<trident_simt::Registration>,
}

impl<T: Pod> Drop for Buffer<T> {
    fn drop(&mut self) {
        // cudarc frees device memory when the slice drops (after this body), on the default
        // stream, without making its context current: bind it for the free.
        if let (Storage::Cuda(_), Device::Cuda(d)) = (&self.storage, &self.device) {
            // A context that cannot be bound has faulted; its memory goes with it.
            let _ = d.bind();
        }
    }
}

/// Registers host storage of an `Emu` buffer with the emulator.
fn register<T: Pod>(
    device: &Device,
    storage: &Storage<T>,
    len: usize,
    initialized: bool,
) -> Option<trident_simt::Registration> {
    match (device, storage) {
        (Device::Emu, Storage::Host(v)) => Some(trident_simt::register(
            v.as_slice().as_ptr().cast::<u8>(),
            len * size_of::<T>(),
            initialized,
            format!("Buffer<{}>[{len}]", std::any::type_name::<T>()),
        )),
        _ => None,
    }
}

/// Tells the emulator that `bytes` bytes at `ptr` now hold data (host writes into an `Emu`
/// buffer that was allocated uninitialized).
fn host_wrote(device: &Device, ptr: *const u8, bytes: usize) {
    if matches!(device, Device::Emu) {
        trident_simt::mark_initialized(ptr, bytes);
    }
}

impl<T: Pod> Buffer<T> {
    /// A buffer of `len` zeroed elements.
    pub fn zeros(device: &Device, len: usize) -> Result<Self> {
        let storage = match device {
            Device::Cpu | Device::Emu => {
                Storage::Host(AlignedVec::try_zeroed(len).ok_or_else(|| out_of_memory::<T>(device, len))?)
            }
            Device::Cuda(d) => {
                let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| out_of_memory::<T>(device, len))?;
                Storage::Cuda(d.alloc_zeros(bytes)?)
            }
        };
        let _registration = register(device, &storage, len, true);
        Ok(Self { device: device.clone(), storage, len, _registration })
    }

    /// A buffer of `len` elements that hold no data yet: on `Emu` its bytes read as NaN
    /// patterns (0xFF), and a kernel that reads one before anything wrote it fails (as
    /// compute-sanitizer's initcheck would report); on `Cpu` and `Cuda` it is zeroed.
    pub fn uninit(device: &Device, len: usize) -> Result<Self> {
        let storage = match device {
            Device::Cpu => {
                Storage::Host(AlignedVec::try_zeroed(len).ok_or_else(|| out_of_memory::<T>(device, len))?)
            }
            Device::Emu => {
                let mut v =
                    AlignedVec::<T>::try_zeroed(len).ok_or_else(|| out_of_memory::<T>(device, len))?;
                bytemuck::cast_slice_mut::<T, u8>(v.as_mut_slice()).fill(0xFF);
                Storage::Host(v)
            }
            Device::Cuda(d) => {
                let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| out_of_memory::<T>(device, len))?;
                Storage::Cuda(d.alloc_zeros(bytes)?)
            }
        };
        let _registration = register(device, &storage, len, false);
        Ok(Self { device: device.clone(), storage, len, _registration })
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        if device.is_host() {
            crate::transfers::count(device.kind());
            let storage = Storage::Host(
                AlignedVec::try_from_slice(data).ok_or_else(|| out_of_memory::<T>(device, data.len()))?,
            );
            let _registration = register(device, &storage, data.len(), true);
            return Ok(Self { device: device.clone(), storage, len: data.len(), _registration });
        }
        let mut b = Self::zeros(device, data.len())?;
        b.copy_from_slice(data)?;
        Ok(b)
    }

    /// The device holding the buffer.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Overwrites the whole buffer with `data`.
    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        self.view_mut(..)?.copy_from_slice(data)
    }

    /// The buffer's contents, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.view(..)?.to_vec()
    }

    /// A view of `range`.
    pub fn view(&self, range: impl RangeBounds<usize>) -> Result<View<'_, T>> {
        let r = resolve(range, self.len)?;
        Ok(self.whole().narrow(r))
    }

    /// A mutable view of `range`.
    pub fn view_mut(&mut self, range: impl RangeBounds<usize>) -> Result<ViewMut<'_, T>> {
        let r = resolve(range, self.len)?;
        Ok(self.whole_mut().narrow(r))
    }

    /// Mutable views of `N` pairwise disjoint ranges at once (e.g. a weight's and a bias's
    /// gradients in one gradient buffer), in the order given.
    pub fn views_mut<const N: usize>(&mut self, ranges: [Range<usize>; N]) -> Result<[ViewMut<'_, T>; N]> {
        for (i, a) in ranges.iter().enumerate() {
            resolve(a.clone(), self.len)?;
            for b in &ranges[i + 1..] {
                if a.start < b.end && b.start < a.end && !a.is_empty() && !b.is_empty() {
                    return Err(RuntimeError::Overlap { a: a.clone(), b: b.clone() });
                }
            }
        }
        let whole = self.whole_mut();
        let device = whole.device;
        let mut order: [usize; N] = std::array::from_fn(|i| i);
        order.sort_by_key(|&i| ranges[i].start);
        let mut out: [Option<ViewMut<'_, T>>; N] = std::array::from_fn(|_| None);
        let mut rest = Some(whole);
        let mut consumed = 0;
        for &i in &order {
            let r = &ranges[i];
            if r.is_empty() {
                let mem = match device {
                    Device::Cuda(d) => MemMut::Cuda(d, 0, PhantomData),
                    _ => MemMut::Host(&mut []),
                };
                out[i] = Some(ViewMut { device, mem, len: 0 });
                continue;
            }
            let (_, tail) = rest.take().expect("one remainder per step").split_at(r.start - consumed);
            let (piece, tail) = tail.split_at(r.len());
            out[i] = Some(piece);
            rest = Some(tail);
            consumed = r.end;
        }
        Ok(out.map(|v| v.expect("every range got its view")))
    }

    fn whole(&self) -> View<'_, T> {
        let mem = match (&self.storage, &self.device) {
            (Storage::Host(v), _) => Mem::Host(v.as_slice()),
            (Storage::Cuda(s), Device::Cuda(d)) => Mem::Cuda(d, d.address(s)),
            (Storage::Cuda(_), _) => unreachable!("CUDA storage belongs to a CUDA device"),
        };
        View { device: &self.device, mem, len: self.len }
    }

    fn whole_mut(&mut self) -> ViewMut<'_, T> {
        let len = self.len;
        let mem = match (&mut self.storage, &self.device) {
            (Storage::Host(v), _) => MemMut::Host(v.as_mut_slice()),
            (Storage::Cuda(s), Device::Cuda(d)) => MemMut::Cuda(d, d.address(s), PhantomData),
            (Storage::Cuda(_), _) => unreachable!("CUDA storage belongs to a CUDA device"),
        };
        ViewMut { device: &self.device, mem, len }
    }
}

impl<T: Pod> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer<{}>[{}] on {}", std::any::type_name::<T>(), self.len, self.device.kind())
    }
}

fn resolve(range: impl RangeBounds<usize>, len: usize) -> Result<Range<usize>> {
    use std::ops::Bound::*;
    // `x..` and `..=x` at `usize::MAX` have no representable bound: out of bounds for any length.
    let past = |b: usize| b.checked_add(1).ok_or(RuntimeError::OutOfBounds { start: b, end: b, len });
    let start = match range.start_bound() {
        Included(&s) => s,
        Excluded(&s) => past(s)?,
        Unbounded => 0,
    };
    let end = match range.end_bound() {
        Included(&e) => past(e)?,
        Excluded(&e) => e,
        Unbounded => len,
    };
    if start > end || end > len {
        return Err(RuntimeError::OutOfBounds { start, end, len });
    }
    Ok(start..end)
}

#[derive(Clone, Copy)]
enum Mem<'a, T> {
    Host(&'a [T]),
    /// Device address of the view's first element.
    Cuda(&'a CudaDevice, u64),
}

enum MemMut<'a, T> {
    Host(&'a mut [T]),
    Cuda(&'a CudaDevice, u64, PhantomData<&'a mut T>),
}

/// A range of a buffer's elements, read-only.
#[derive(Clone, Copy)]
pub struct View<'a, T: Pod> {
    device: &'a Device,
    mem: Mem<'a, T>,
    len: usize,
}

/// A range of a buffer's elements, writable.
pub struct ViewMut<'a, T: Pod> {
    device: &'a Device,
    mem: MemMut<'a, T>,
    len: usize,
}

impl<T: Pod> std::fmt::Debug for View<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = match self.mem {
            Mem::Host(h) => h.as_ptr() as u64,
            Mem::Cuda(_, a) => a,
        };
        f.debug_struct("View")
            .field("device", &self.device.kind())
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("address", &format_args!("{at:#x}"))
            .finish()
    }
}

impl<T: Pod> std::fmt::Debug for ViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = match &self.mem {
            MemMut::Host(h) => h.as_ptr() as u64,
            MemMut::Cuda(_, a, _) => *a,
        };
        f.debug_struct("ViewMut")
            .field("device", &self.device.kind())
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("address", &format_args!("{at:#x}"))
            .finish()
    }
}

impl<'a, T: Pod> View<'a, T> {
    /// Host memory that no [`Buffer`] owns (a transport's receive ring, say), as a view on a
    /// device whose buffers live in host memory (`Cpu`, `Emu`).
    pub fn from_host(device: &'a Device, data: &'a [T]) -> Result<Self> {
        if !device.is_host() {
            return Err(RuntimeError::NotHostMemory(device.kind()));
        }
        Ok(View { device, mem: Mem::Host(data), len: data.len() })
    }

    /// Number of elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device holding the view's elements.
    pub fn device(&self) -> &'a Device {
        self.device
    }

    /// The elements, where the buffer lives in host memory (`Cpu`, `Emu`).
    pub fn host(&self) -> Option<&'a [T]> {
        match self.mem {
            Mem::Host(h) => Some(h),
            Mem::Cuda(..) => None,
        }
    }

    /// A narrower view, `range` relative to this one.
    pub fn sub(&self, range: impl RangeBounds<usize>) -> Result<View<'a, T>> {
        Ok(self.narrow(resolve(range, self.len)?))
    }

    fn narrow(self, r: Range<usize>) -> View<'a, T> {
        let mem = match self.mem {
            Mem::Host(h) => Mem::Host(&h[r.clone()]),
            Mem::Cuda(d, a) => Mem::Cuda(d, a + (r.start * size_of::<T>()) as u64),
        };
        View { device: self.device, mem, len: r.len() }
    }

    /// On `Emu`, host memory that no registered allocation holds (a view made with
    /// [`View::from_host`]) lent to the emulator's memory checks while the returned value
    /// lives, so a kernel may access it; None where there is nothing to lend.
    pub fn lend_to_emulator(&self) -> Option<trident_simt::Registration> {
        match (self.device, self.mem) {
            (Device::Emu, Mem::Host(h))
                if !trident_simt::is_registered(h.as_ptr().cast(), size_of_val(h)) =>
            {
                Some(trident_simt::register(
                    h.as_ptr().cast(),
                    size_of_val(h),
                    true,
                    "host memory lent to a launch",
                ))
            }
            _ => None,
        }
    }

    /// The address of the first element: a host address on `Cpu` and `Emu`, a device address
    /// on `Cuda`.
    pub fn addr(&self) -> u64 {
        match self.mem {
            Mem::Host(h) => h.as_ptr() as u64,
            Mem::Cuda(_, a) => a,
        }
    }

    /// The view as a launch argument for a `Global<T>` (read-only) parameter; on `Emu` the
    /// emulator bounds the kernel's accesses through it by this view.
    pub fn arg(&self) -> Arg {
        Arg::pointer::<T>(self.addr(), self.len, false)
    }

    /// The view as a launch argument for a `Global<U>` parameter: its bytes read as elements
    /// of `U` (a kernel reading bf16 pairs as `u32`, say). [`RuntimeError::Reinterpret`] unless
    /// the view holds whole elements of `U` at an address aligned for it.
    pub fn arg_as<U: Pod>(&self) -> Result<Arg> {
        let len = reinterpreted::<T, U>(self.addr(), self.len)?;
        Ok(Arg::pointer::<U>(self.addr(), len, false))
    }

    /// The view's elements, copied to the host (see [`View::copy_to_slice`]).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        self.copy_to_slice(&mut out)?;
        Ok(out)
    }

    /// Copies the view's elements into `out`, which must have the view's length
    /// ([`RuntimeError::Length`] otherwise): a download on `Cuda`, queued on the device's
    /// default stream and finished when this returns.
    pub fn copy_to_slice(&self, out: &mut [T]) -> Result<()> {
        self.copy_to_slice_on(&self.device.default_stream(), out)
    }

    /// [`View::copy_to_slice`] on `stream`, a stream of the view's device
    /// ([`RuntimeError::WrongDevice`] otherwise). On `Cuda` the download waits for the work
    /// queued on the default stream so far and for the work queued on `stream`, and has
    /// finished when this returns.
    pub fn copy_to_slice_on(&self, stream: &Stream, out: &mut [T]) -> Result<()> {
        self.device.expect_same(stream.device())?;
        if out.len() != self.len {
            return Err(RuntimeError::Length {
                what: "the destination slice",
                got: out.len(),
                expected: self.len,
            });
        }
        crate::transfers::count(self.device.kind());
        match self.mem {
            Mem::Host(h) => out.copy_from_slice(h),
            Mem::Cuda(d, a) => stream.ordered(|s| {
                // SAFETY: `a` addresses this view's `len` elements on `d`, and `out` has as
                // many; the download has finished when `download` returns.
                unsafe { d.download(s, a, bytemuck::cast_slice_mut(out)) }
            })?,
        }
        Ok(())
    }
}

impl<'a, T: Pod> ViewMut<'a, T> {
    /// Writable host memory that no [`Buffer`] owns, as a view on a host device (see
    /// [`View::from_host`]).
    pub fn from_host_mut(device: &'a Device, data: &'a mut [T]) -> Result<Self> {
        if !device.is_host() {
            return Err(RuntimeError::NotHostMemory(device.kind()));
        }
        let len = data.len();
        Ok(ViewMut { device, mem: MemMut::Host(data), len })
    }

    /// Number of elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device holding the view's elements.
    pub fn device(&self) -> &'a Device {
        self.device
    }

    /// The same elements, read-only.
    pub fn as_view(&self) -> View<'_, T> {
        let mem = match &self.mem {
            MemMut::Host(h) => Mem::Host(h),
            MemMut::Cuda(d, a, _) => Mem::Cuda(d, *a),
        };
        View { device: self.device, mem, len: self.len }
    }

    /// The elements, where the buffer lives in host memory (`Cpu`, `Emu`). The emulator
    /// takes them to hold data from now on.
    pub fn host_mut(&mut self) -> Option<&mut [T]> {
        match &mut self.mem {
            MemMut::Host(h) => {
                host_wrote(self.device, h.as_ptr().cast(), size_of_val(*h));
                if self.device.kind() == crate::DeviceKind::Emu {
                    crate::transfers::count(crate::DeviceKind::Emu);
                }
                Some(h)
            }
            MemMut::Cuda(..) => None,
        }
    }

    /// Consumes the view into its host slice, where it has one (see [`ViewMut::host_mut`]).
    pub fn into_host_mut(self) -> Option<&'a mut [T]> {
        match self.mem {
            MemMut::Host(h) => {
                host_wrote(self.device, h.as_ptr().cast(), size_of_val(h));
                if self.device.kind() == crate::DeviceKind::Emu {
                    crate::transfers::count(crate::DeviceKind::Emu);
                }
                Some(h)
            }
            MemMut::Cuda(..) => None,
        }
    }

    /// A narrower mutable view, `range` relative to this one.
    pub fn sub_mut(&mut self, range: impl RangeBounds<usize>) -> Result<ViewMut<'_, T>> {
        let r = resolve(range, self.len)?;
        let mem = match &mut self.mem {
            MemMut::Host(h) => MemMut::Host(&mut h[r.clone()]),
            MemMut::Cuda(d, a, _) => MemMut::Cuda(d, *a + (r.start * size_of::<T>()) as u64, PhantomData),
        };
        Ok(ViewMut { device: self.device, mem, len: r.len() })
    }

    fn narrow(self, r: Range<usize>) -> ViewMut<'a, T> {
        let mem = match self.mem {
            MemMut::Host(h) => MemMut::Host(&mut h[r.clone()]),
            MemMut::Cuda(d, a, p) => MemMut::Cuda(d, a + (r.start * size_of::<T>()) as u64, p),
        };
        ViewMut { device: self.device, mem, len: r.len() }
    }

    /// Splits into `[0, mid)` and `[mid, len)`.
    ///
    /// # Panics
    /// If `mid > len`, as `slice::split_at_mut` does; [`ViewMut::split_at_checked`] returns an
    /// error instead.
    pub fn split_at(self, mid: usize) -> (ViewMut<'a, T>, ViewMut<'a, T>) {
        assert!(mid <= self.len, "split point {mid} past the view's {} elements", self.len);
        let (device, len) = (self.device, self.len);
        let (a, b) = match self.mem {
            MemMut::Host(h) => {
                let (a, b) = h.split_at_mut(mid);
                (MemMut::Host(a), MemMut::Host(b))
            }
            MemMut::Cuda(d, a, p) => {
                (MemMut::Cuda(d, a, p), MemMut::Cuda(d, a + (mid * size_of::<T>()) as u64, p))
            }
        };
        (ViewMut { device, mem: a, len: mid }, ViewMut { device, mem: b, len: len - mid })
    }

    /// [`ViewMut::split_at`], or [`RuntimeError::OutOfBounds`] if `mid > len`.
    pub fn split_at_checked(self, mid: usize) -> Result<(ViewMut<'a, T>, ViewMut<'a, T>)> {
        if mid > self.len {
            return Err(RuntimeError::OutOfBounds { start: mid, end: mid, len: self.len });
        }
        Ok(self.split_at(mid))
    }

    /// The address of the first element (see [`View::addr`]).
    pub fn addr_mut(&mut self) -> u64 {
        match &mut self.mem {
            MemMut::Host(h) => h.as_mut_ptr() as u64,
            MemMut::Cuda(_, a, _) => *a,
        }
    }

    /// The view as a launch argument for a `GlobalMut<T>` (or `Global<T>`) parameter; on
    /// `Emu` the emulator bounds the kernel's accesses through it by this view.
    pub fn arg_mut(&mut self) -> Arg {
        Arg::pointer::<T>(self.addr_mut(), self.len, true)
    }

    /// The view as a launch argument for a `GlobalMut<U>` parameter, its bytes read as
    /// elements of `U` (see [`View::arg_as`]).
    pub fn arg_mut_as<U: Pod>(&mut self) -> Result<Arg> {
        let addr = self.addr_mut();
        let len = reinterpreted::<T, U>(addr, self.len)?;
        Ok(Arg::pointer::<U>(addr, len, true))
    }

    /// Overwrites the view with `data`, which must have the view's length
    /// ([`RuntimeError::Length`] otherwise): an upload on `Cuda`, queued on the device's default
    /// stream (`data` may be reused when this returns).
    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        self.copy_from_slice_on(&self.device.default_stream(), data)
    }

    /// [`ViewMut::copy_from_slice`] on `stream`, a stream of the view's device
    /// ([`RuntimeError::WrongDevice`] otherwise). On `Cuda` the upload runs after the work
    /// queued on the default stream so far, and work queued there later runs after it.
    pub fn copy_from_slice_on(&mut self, stream: &Stream, data: &[T]) -> Result<()> {
        self.device.expect_same(stream.device())?;
        if data.len() != self.len {
            return Err(RuntimeError::Length {
                what: "the source slice",
                got: data.len(),
                expected: self.len,
            });
        }
        crate::transfers::count(self.device.kind());
        match &mut self.mem {
            MemMut::Host(h) => {
                h.copy_from_slice(data);
                host_wrote(self.device, h.as_ptr().cast(), size_of_val(*h));
            }
            MemMut::Cuda(d, a, _) => stream.ordered(|s| {
                // SAFETY: `a` addresses this view's `len` elements on `d`, and `data` has as
                // many; a copy from pageable memory has read `data` when it returns.
                unsafe { d.upload(s, bytemuck::cast_slice(data), *a) }
            })?,
        }
        Ok(())
    }

    /// Copies `src` (same length, same device) into this view: a device-to-device copy on
    /// `Cuda`, queued on the default stream.
    ///
    /// # Errors
    /// [`RuntimeError::WrongDevice`] and [`RuntimeError::Length`] where `src` is on another
    /// device or of another length.
    pub fn copy_from(&mut self, src: &View<'_, T>) -> Result<()> {
        self.copy_from_on(&self.device.default_stream(), src)
    }

    /// [`ViewMut::copy_from`] on `stream`, ordered on `Cuda` as [`ViewMut::copy_from_slice_on`]
    /// is.
    pub fn copy_from_on(&mut self, stream: &Stream, src: &View<'_, T>) -> Result<()> {
        src.device().expect_same(self.device)?;
        self.device.expect_same(stream.device())?;
        if src.len != self.len {
            return Err(RuntimeError::Length { what: "the source view", got: src.len, expected: self.len });
        }
        let bytes = self.len * size_of::<T>();
        match (&mut self.mem, src.mem) {
            (MemMut::Host(d), Mem::Host(s)) => {
                d.copy_from_slice(s);
                host_wrote(self.device, d.as_ptr().cast(), size_of_val(*d));
            }
            (MemMut::Cuda(d, dst, _), Mem::Cuda(_, from)) => stream.ordered(|s| {
                // SAFETY: both addresses cover `len` elements on the same device; a mutable
                // view never shares elements with a view the borrow checker lets coexist.
                unsafe { d.copy(s, from, *dst, bytes) }
            })?,
            _ => unreachable!("views on one device share a memory kind"),
        }
        Ok(())
    }

    /// Sets every element to zero (a device memset on `Cuda`, on the default stream).
    pub fn fill_zero(&mut self) -> Result<()> {
        self.fill_zero_on(&self.device.default_stream())
    }

    /// [`ViewMut::fill_zero`] on `stream`, ordered on `Cuda` as [`ViewMut::copy_from_slice_on`]
    /// is ([`RuntimeError::WrongDevice`] for a stream of another device).
    pub fn fill_zero_on(&mut self, stream: &Stream) -> Result<()> {
        self.device.expect_same(stream.device())?;
        let bytes = self.len * size_of::<T>();
        match &mut self.mem {
            // A memset on the device, not a host transfer.
            MemMut::Host(h) => {
                h.fill(T::zeroed());
                host_wrote(self.device, h.as_ptr().cast(), size_of_val(*h));
                Ok(())
            }
            MemMut::Cuda(d, a, _) => stream.ordered(|s| {
                // SAFETY: `a` addresses this view's `len` elements on `d`; a device memset,
                // not an upload of a host buffer of zeros.
                unsafe { d.memset_zero(s, *a, bytes) }
            }),
        }
    }
}

/// How many `U` the `len` elements of `T` at `addr` are, when they are whole and aligned ones.
fn reinterpreted<T, U>(addr: u64, len: usize) -> Result<usize> {
    let (bytes, elem_bytes, align) = (len * size_of::<T>(), size_of::<U>(), align_of::<U>());
    if elem_bytes == 0 || bytes % elem_bytes != 0 || addr % align as u64 != 0 {
        return Err(RuntimeError::Reinterpret { bytes, addr, elem_bytes, align });
    }
    Ok(bytes / elem_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceKind;

    fn host_buffers_past_memory_are_errors(device: &Device) {
        let Err(err) = Buffer::<f32>::zeros(device, 1 << 60) else { panic!("2^62 bytes were allocated") };
        assert!(matches!(err, RuntimeError::OutOfMemory { bytes: Some(b), .. } if b == 1 << 62), "{err}");
        assert!(err.to_string().contains("not enough memory"), "{err}");
        let Err(err) = Buffer::<f32>::zeros(device, usize::MAX / 2) else { panic!("an overflowing size") };
        assert!(matches!(err, RuntimeError::OutOfMemory { bytes: None, .. }), "{err}");
    }

    fn copy_to_slice_checks_the_length_and_views_print_what_they_are(device: &Device) {
        let b = Buffer::from_slice(device, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mut out = [0.0f32; 2];
        b.view(1..3).unwrap().copy_to_slice(&mut out).unwrap();
        assert_eq!(out, [2.0, 3.0]);
        let err = b.view(..).unwrap().copy_to_slice(&mut out).unwrap_err();
        assert!(matches!(err, RuntimeError::Length { got: 2, expected: 4, .. }), "{err}");
        let text = format!("{:?}", b.view(1..3).unwrap());
        assert!(text.starts_with("View {") && text.contains("len: 2") && text.contains("f32"), "{text}");
        if !Device::cuda_available() {
            assert!(Device::auto().is_host(), "no GPU: auto is the CPU");
        }
    }

    #[test]
    fn disjoint_views_write_their_own_ranges() {
        let mut b = Buffer::from_slice(&Device::Emu, &[0.0f32; 10]).unwrap();
        let [mut x, mut y] = b.views_mut([6..9, 1..3]).unwrap();
        x.copy_from_slice(&[1.0, 2.0, 3.0]).unwrap();
        y.host_mut().unwrap().fill(7.0);
        assert_eq!(b.to_vec().unwrap(), [0.0, 7.0, 7.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0]);
    }

    #[test]
    fn overlapping_and_out_of_range_views_are_refused() {
        let mut b = Buffer::<f32>::zeros(&Device::Cpu, 8).unwrap();
        assert!(matches!(b.views_mut([0..4, 3..5]), Err(RuntimeError::Overlap { .. })));
        assert!(matches!(b.view(2..9), Err(RuntimeError::OutOfBounds { end: 9, .. })));
        assert!(b.views_mut([0..0, 0..8]).is_ok());
        assert!(b.views_mut([2..6, 4..4]).is_ok());
    }

    #[test]
    fn ranges_at_the_end_of_usize_are_errors_not_panics() {
        let mut b = Buffer::<f32>::zeros(&Device::Emu, 4).unwrap();
        assert!(matches!(b.view(..=usize::MAX), Err(RuntimeError::OutOfBounds { .. })));
        let r = (std::ops::Bound::Excluded(usize::MAX), std::ops::Bound::Unbounded);
        assert!(matches!(b.view(r), Err(RuntimeError::OutOfBounds { .. })));
        let v = b.view_mut(..).unwrap();
        assert!(matches!(v.split_at_checked(5), Err(RuntimeError::OutOfBounds { start: 5, .. })));
    }

    fn copies_on_two_streams_land_and_a_foreign_stream_is_refused(device: &Device) {
        let (s1, s2) = (device.new_stream().unwrap(), device.new_stream().unwrap());
        let mut a = Buffer::<f32>::zeros(device, 4).unwrap();
        let mut b = Buffer::<f32>::uninit(device, 4).unwrap();
        a.view_mut(..).unwrap().copy_from_slice_on(&s1, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        b.view_mut(..2).unwrap().fill_zero_on(&s2).unwrap();
        s2.wait_for(&s1).unwrap();
        b.view_mut(2..).unwrap().copy_from_on(&s2, &a.view(1..3).unwrap()).unwrap();
        let mut out = [9.0f32; 4];
        b.view(..).unwrap().copy_to_slice_on(&s2, &mut out).unwrap();
        assert_eq!(out, [0.0, 0.0, 2.0, 3.0]);
        let other = if device.kind() == DeviceKind::Cpu { Device::Emu } else { Device::Cpu };
        let foreign = other.default_stream();
        let wrong = |e: RuntimeError| matches!(e, RuntimeError::WrongDevice { .. });
        assert!(wrong(a.view(..).unwrap().copy_to_slice_on(&foreign, &mut out).unwrap_err()));
        assert!(wrong(a.view_mut(..).unwrap().copy_from_slice_on(&foreign, &out).unwrap_err()));
        assert!(wrong(a.view_mut(..).unwrap().fill_zero_on(&foreign).unwrap_err()));
        let src = b.view(..).unwrap();
        assert!(wrong(a.view_mut(..).unwrap().copy_from_on(&foreign, &src).unwrap_err()));
        assert_eq!(a.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0], "refused copies leave the data alone");
    }

    // Memory past the machine's is the hosts' question: a GPU reports its own error.
    trident_testkit::host_tests!(crate::Device => host_buffers_past_memory_are_errors);
    trident_testkit::device_tests!(
        crate::Device =>
        copy_to_slice_checks_the_length_and_views_print_what_they_are,
        copies_on_two_streams_land_and_a_foreign_stream_is_refused,
    );

    #[test]
    fn sub_views_address_their_first_element() {
        let b = Buffer::from_slice(&Device::Emu, &[1u32, 2, 3, 4]).unwrap();
        let v = b.view(1..).unwrap().sub(1..2).unwrap();
        assert_eq!(v.to_vec().unwrap(), [3]);
        assert_eq!(v.addr(), b.view(..).unwrap().addr() + 8);
    }
}
