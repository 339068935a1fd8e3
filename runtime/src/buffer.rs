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
use crate::{Device, Result, RuntimeError};

enum Storage<T: Pod> {
    Host(AlignedVec<T>),
    Cuda(CudaSlice<u8>),
}

fn out_of_memory<T>(device: &Device, len: usize) -> RuntimeError {
    RuntimeError::OutOfMemory { device: device.kind(), len, bytes: len.checked_mul(size_of::<T>()) }
}

/// `len` elements of `T` on one device.
pub struct Buffer<T: Pod> {
    device: Device,
    storage: Storage<T>,
    len: usize,
    /// On `Emu`: the allocation as the emulator's memory checks know it.
    _registration: Option<trident_simt::Registration>,
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

thread_local! {
    /// The `Emu` views whose address this thread took last (for a kernel argument), newest
    /// last: `(address, bytes, taken since this thread's last launch)`.
    static VIEW_EXTENTS: std::cell::RefCell<Vec<(u64, u64, bool)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Views remembered for [`arg_extent`]; older ones are forgotten.
const REMEMBERED_VIEWS: usize = 64;

fn took_address(device: &Device, addr: u64, bytes: usize) {
    if matches!(device, Device::Emu) {
        VIEW_EXTENTS.with(|v| {
            let mut v = v.borrow_mut();
            if v.len() == REMEMBERED_VIEWS {
                v.remove(0);
            }
            v.push((addr, bytes as u64, true));
        });
    }
}

/// The bytes of the view whose address `addr` this thread took for a kernel argument: of
/// those taken since its last launch, else of the older ones, the largest at that address
/// (two views may start at one address; the larger never makes a correct access fault).
pub(crate) fn arg_extent(addr: u64) -> Option<u64> {
    VIEW_EXTENTS.with(|v| {
        let v = v.borrow();
        let largest = |fresh: bool| v.iter().filter(|e| e.0 == addr && (e.2 || !fresh)).map(|e| e.1).max();
        largest(true).or_else(|| largest(false))
    })
}

/// Marks the remembered views as taken before this thread's last launch.
pub(crate) fn launched() {
    VIEW_EXTENTS.with(|v| v.borrow_mut().iter_mut().for_each(|e| e.2 = false));
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
            Device::Cuda(d) => Storage::Cuda(d.alloc_zeros(len * size_of::<T>())?),
        };
        let _registration = register(device, &storage, len, false);
        Ok(Self { device: device.clone(), storage, len, _registration })
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        if device.is_host() {
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

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn len(&self) -> usize {
        self.len
    }

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
    let start = match range.start_bound() {
        Included(&s) => s,
        Excluded(&s) => s + 1,
        Unbounded => 0,
    };
    let end = match range.end_bound() {
        Included(&e) => e + 1,
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

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

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

    /// The address of the first element as a kernel argument: a host address on `Cpu` and
    /// `Emu`, a device address on `Cuda`. On `Emu` the view's extent is remembered, so the
    /// emulator bounds the kernel's accesses through that argument by this view.
    pub fn addr(&self) -> u64 {
        match self.mem {
            Mem::Host(h) => {
                took_address(self.device, h.as_ptr() as u64, size_of_val(h));
                h.as_ptr() as u64
            }
            Mem::Cuda(_, a) => a,
        }
    }

    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        self.copy_to_slice(&mut out)?;
        Ok(out)
    }

    /// Copies the view's elements into `out`, which must have the view's length (a download on
    /// `Cuda`, finished when this returns).
    pub fn copy_to_slice(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len {
            return Err(RuntimeError::Length {
                what: "the destination slice",
                got: out.len(),
                expected: self.len,
            });
        }
        match self.mem {
            Mem::Host(h) => out.copy_from_slice(h),
            // SAFETY: `a` addresses this view's `len` elements on `d`, and `out` has as many.
            Mem::Cuda(d, a) => unsafe { d.download(a, bytemuck::cast_slice_mut(out))? },
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

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

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

    /// The address of the first element as a kernel argument (see [`View::addr`]).
    pub fn addr_mut(&mut self) -> u64 {
        match &mut self.mem {
            MemMut::Host(h) => {
                took_address(self.device, h.as_ptr() as u64, size_of_val(*h));
                h.as_mut_ptr() as u64
            }
            MemMut::Cuda(_, a, _) => *a,
        }
    }

    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(RuntimeError::Length {
                what: "the source slice",
                got: data.len(),
                expected: self.len,
            });
        }
        match &mut self.mem {
            MemMut::Host(h) => {
                h.copy_from_slice(data);
                host_wrote(self.device, h.as_ptr().cast(), size_of_val(*h));
            }
            // SAFETY: `a` addresses this view's `len` elements on `d`.
            MemMut::Cuda(d, a, _) => unsafe { d.upload(bytemuck::cast_slice(data), *a)? },
        }
        Ok(())
    }

    /// Copies `src` (same length, same device) into this view.
    pub fn copy_from(&mut self, src: &View<'_, T>) -> Result<()> {
        src.device().expect_same(self.device)?;
        if src.len != self.len {
            return Err(RuntimeError::Length { what: "the source view", got: src.len, expected: self.len });
        }
        match (&mut self.mem, src.mem) {
            (MemMut::Host(d), Mem::Host(s)) => {
                d.copy_from_slice(s);
                host_wrote(self.device, d.as_ptr().cast(), size_of_val(*d));
            }
            // SAFETY: both addresses cover `len` elements on the same device.
            (MemMut::Cuda(d, dst, _), Mem::Cuda(_, s)) => unsafe {
                d.copy(s, *dst, self.len * size_of::<T>())?
            },
            _ => unreachable!("views on one device share a memory kind"),
        }
        Ok(())
    }

    /// Sets every element to zero.
    pub fn fill_zero(&mut self) -> Result<()> {
        if let Some(h) = self.host_mut() {
            h.fill(T::zeroed());
            return Ok(());
        }
        match &mut self.mem {
            // SAFETY: `a` addresses this view's `len` elements on `d`; a device memset, not an
            // upload of a host buffer of zeros.
            MemMut::Cuda(d, a, _) => unsafe { d.memset_zero(*a, self.len * size_of::<T>()) },
            MemMut::Host(_) => unreachable!("host views returned above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffers_past_memory_are_errors() {
        for device in [Device::Cpu, Device::Emu] {
            let Err(err) = Buffer::<f32>::zeros(&device, 1 << 60) else {
                panic!("2^62 bytes were allocated")
            };
            assert!(matches!(err, RuntimeError::OutOfMemory { bytes: Some(b), .. } if b == 1 << 62), "{err}");
            assert!(err.to_string().contains("not enough memory"), "{err}");
            let Err(err) = Buffer::<f32>::zeros(&device, usize::MAX / 2) else {
                panic!("an overflowing size")
            };
            assert!(matches!(err, RuntimeError::OutOfMemory { bytes: None, .. }), "{err}");
        }
    }

    #[test]
    fn copy_to_slice_checks_the_length_and_views_print_what_they_are() {
        for device in [Device::Cpu, Device::Emu] {
            let b = Buffer::from_slice(&device, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
            let mut out = [0.0f32; 2];
            b.view(1..3).unwrap().copy_to_slice(&mut out).unwrap();
            assert_eq!(out, [2.0, 3.0]);
            let err = b.view(..).unwrap().copy_to_slice(&mut out).unwrap_err();
            assert!(matches!(err, RuntimeError::Length { got: 2, expected: 4, .. }), "{err}");
            let text = format!("{:?}", b.view(1..3).unwrap());
            assert!(text.starts_with("View {") && text.contains("len: 2") && text.contains("f32"), "{text}");
        }
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
    fn sub_views_address_their_first_element() {
        let b = Buffer::from_slice(&Device::Emu, &[1u32, 2, 3, 4]).unwrap();
        let v = b.view(1..).unwrap().sub(1..2).unwrap();
        assert_eq!(v.to_vec().unwrap(), [3]);
        assert_eq!(v.addr(), b.view(..).unwrap().addr() + 8);
    }
}
