//! Host memory for `Cpu` and `Emu` buffers, aligned as the CUDA allocator aligns device memory
//! (256 bytes), so that a kernel's vector loads and `cp.async` copies see on the emulator the
//! same alignment they get on a GPU.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use bytemuck::Pod;

/// Alignment of every host buffer, in bytes.
pub const HOST_ALIGN: usize = 256;

/// A zero-initialised, 256-byte aligned array of `len` elements.
pub(crate) struct AlignedVec<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: `AlignedVec` owns its elements exclusively, like `Vec<T>`; `T: Pod` holds no
// references or thread-bound state.
unsafe impl<T: Pod> Send for AlignedVec<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Pod> Sync for AlignedVec<T> {}

impl<T: Pod> AlignedVec<T> {
    fn layout(len: usize) -> Layout {
        let bytes = (len * size_of::<T>()).max(1);
        Layout::from_size_align(bytes, HOST_ALIGN.max(align_of::<T>())).expect("buffer size overflows")
    }

    pub fn zeroed(len: usize) -> Self {
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw as *mut T).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }

    pub fn from_slice(data: &[T]) -> Self {
        let mut v = Self::zeroed(data.len());
        v.as_mut_slice().copy_from_slice(data);
        v
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

impl<T: Pod> Drop for AlignedVec<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr() as *mut u8, Self::layout(self.len)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_like_device_memory() {
        for len in [0, 1, 3, 1000] {
            let v = AlignedVec::<f32>::from_slice(&vec![1.5; len]);
            assert_eq!(v.as_slice().as_ptr() as usize % HOST_ALIGN, 0);
            assert!(v.as_slice().iter().all(|&x| x == 1.5));
        }
    }
}
