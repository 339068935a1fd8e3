//! Host memory for `Cpu` and `Emu` buffers, aligned as the CUDA allocator aligns device memory
//! (256 bytes), so that a kernel's vector loads and `cp.async` copies see on the emulator the
//! same alignment they get on a GPU.
//!
//! Buffers of 2 MiB and more (parameters, gradients, optimizer state, activation arenas) are
//! aligned to 2 MiB and, on Linux, asked to be backed by transparent huge pages: the ops stream
//! through them, and with 4 KiB pages every pass over a large buffer walks the page tables.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use bytemuck::Pod;

/// Alignment of every host buffer, in bytes.
pub const HOST_ALIGN: usize = 256;
/// Size (and alignment) of a transparent huge page on the targets that have them.
const HUGE_PAGE: usize = 2 << 20;

/// A zero-initialised, 256-byte aligned array of `len` elements.
pub(crate) struct AlignedVec<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
    /// What it was allocated with, for `dealloc`.
    layout: Layout,
}

// SAFETY: `AlignedVec` owns its elements exclusively, like `Vec<T>`; `T: Pod` holds no
// references or thread-bound state.
unsafe impl<T: Pod> Send for AlignedVec<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Pod> Sync for AlignedVec<T> {}

impl<T: Pod> AlignedVec<T> {
    /// The layout of `len` elements; `None` where the size overflows.
    fn layout(len: usize) -> Option<Layout> {
        let bytes = len.checked_mul(size_of::<T>())?.max(1);
        let align = if bytes >= HUGE_PAGE { HUGE_PAGE } else { HOST_ALIGN.max(align_of::<T>()) };
        Layout::from_size_align(bytes, align).ok()
    }

    /// `len` zeroed elements, or `None` where the size overflows or the allocator has no
    /// memory for it (an error the caller reports, where `Vec` would abort the process).
    pub fn try_zeroed(len: usize) -> Option<Self> {
        let layout = Self::layout(len)?;
        if layout.align() < HUGE_PAGE {
            // SAFETY: the layout has a non-zero size.
            let raw = unsafe { alloc::alloc_zeroed(layout) };
            let ptr = NonNull::new(raw as *mut T)?;
            return Some(Self { ptr, len, layout });
        }
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let ptr = NonNull::new(raw as *mut T)?;
        advise_huge_pages(raw, layout.size());
        // SAFETY: `raw` is valid for writes of `layout.size()` bytes. Zeroing after the advice
        // lets the first touch of each 2 MiB fault in a huge page.
        unsafe { std::ptr::write_bytes(raw, 0, layout.size()) };
        Some(Self { ptr, len, layout })
    }

    /// A copy of `data`; `None` as in [`try_zeroed`](Self::try_zeroed).
    pub fn try_from_slice(data: &[T]) -> Option<Self> {
        let mut v = Self::try_zeroed(data.len())?;
        v.as_mut_slice().copy_from_slice(data);
        Some(v)
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised (zeroed or written) elements of a Pod type.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Asks the kernel to back the whole 2 MiB pages of `bytes` at `ptr` with huge pages. Advice
/// only: where transparent huge pages are off, or on other systems, nothing changes.
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: madvise only changes how the kernel backs this range, which the caller owns; the
    // range starts 2 MiB aligned and is rounded down to whole huge pages.
    unsafe {
        libc::madvise(ptr.cast(), bytes / HUGE_PAGE * HUGE_PAGE, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

impl<T: Pod> Drop for AlignedVec<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `try_zeroed` with this same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr() as *mut u8, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_like_device_memory() {
        for len in [0, 1, 3, 1000, HUGE_PAGE / 4 + 5] {
            let v = AlignedVec::<f32>::try_from_slice(&vec![1.5; len]).unwrap();
            assert_eq!(v.as_slice().as_ptr() as usize % HOST_ALIGN, 0);
            assert!(v.as_slice().iter().all(|&x| x == 1.5));
        }
    }

    #[test]
    fn large_buffers_start_zeroed_on_a_huge_page_boundary() {
        let v = AlignedVec::<f32>::try_zeroed(3 * HUGE_PAGE / 4 + 1).unwrap();
        assert_eq!(v.as_slice().as_ptr() as usize % HUGE_PAGE, 0);
        assert!(v.as_slice().iter().all(|&x| x == 0.0));
    }

    #[test]
    fn sizes_past_memory_are_refused_not_aborted() {
        // Overflows usize in bytes.
        assert!(AlignedVec::<f32>::try_zeroed(usize::MAX / 2).is_none());
        // 2^62 bytes: a valid layout, but more than any address space holds.
        assert!(AlignedVec::<f32>::try_zeroed(1 << 60).is_none());
    }
}
