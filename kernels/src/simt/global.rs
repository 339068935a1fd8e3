//! Typed pointers into global memory: every global access of a kernel goes through them.
//!
//! [`Global<T>`] is read-only for the kernel, [`GlobalMut<T>`] read-write; both are a bare
//! pointer (`repr(transparent)`), so a kernel parameter of either type is a `.u64` parameter
//! in PTX. On nvptx64 `load`/`store` are plain dereferences, which LLVM lowers to
//! `ld.global`/`st.global` exactly as before (kernel pointer parameters are in the global
//! space); `load_nc` is `ld.global.nc`, the vector forms `ld/st.global[.nc].v2/.v4.b32`, the
//! atomics `atom/red.global.add.f32`. On the host each access calls the SIMT emulator, which
//! checks it (bounds, alignment, initialization, races) and counts it before it touches memory.
//!
//! Offsets are in elements. On the host, pointer arithmetic wraps instead of assuming it stays
//! in bounds, so an out-of-range address reaches the emulator's check rather than being
//! undefined before it.

use core::marker::PhantomData;

#[cfg(not(target_arch = "nvptx64"))]
use core::panic::Location;
#[cfg(not(target_arch = "nvptx64"))]
use trident_simt::device;

/// A pointer to elements of `T` in global memory that the kernel only reads.
#[cfg_attr(target_arch = "nvptx64", repr(transparent))]
pub struct Global<T> {
    ptr: *const T,
    /// On the host: the kernel parameter the pointer came from ([`trident_simt::NO_ARG`] when
    /// made by [`Global::from_ptr`]), whose view bounds every access through it.
    #[cfg(not(target_arch = "nvptx64"))]
    arg: u32,
    _element: PhantomData<T>,
}

/// A pointer to elements of `T` in global memory that the kernel reads and writes.
#[cfg_attr(target_arch = "nvptx64", repr(transparent))]
pub struct GlobalMut<T> {
    ptr: *mut T,
    /// As for [`Global`].
    #[cfg(not(target_arch = "nvptx64"))]
    arg: u32,
    _element: PhantomData<T>,
}

/// The parameter a pointer came from, where the target keeps track of it.
#[cfg(not(target_arch = "nvptx64"))]
const NONE: u32 = trident_simt::NO_ARG;

impl<T> Clone for Global<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Global<T> {}
impl<T> Clone for GlobalMut<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalMut<T> {}

#[cfg(not(target_arch = "nvptx64"))]
impl<T: Copy> trident_simt::KernelArg for Global<T> {
    fn to_word(self) -> u64 {
        self.ptr as usize as u64
    }
    fn from_word(word: u64) -> Self {
        Global::from_ptr(word as usize as *const T)
    }
    fn from_arg(word: u64, index: usize) -> Self {
        Global { ptr: word as usize as *const T, arg: index as u32, _element: PhantomData }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T: Copy> trident_simt::KernelArg for GlobalMut<T> {
    fn to_word(self) -> u64 {
        self.ptr as usize as u64
    }
    fn from_word(word: u64) -> Self {
        GlobalMut::from_ptr(word as usize as *mut T)
    }
    fn from_arg(word: u64, index: usize) -> Self {
        GlobalMut { ptr: word as usize as *mut T, arg: index as u32, _element: PhantomData }
    }
}

/// `p + n` elements: in-bounds arithmetic on the GPU (as the raw pointers were), wrapping on
/// the host so the emulator sees any address.
#[inline(always)]
fn offset<T>(p: *const T, n: usize) -> *const T {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: kernels index within the buffers their launch wrappers checked.
        unsafe { p.add(n) }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        p.wrapping_add(n)
    }
}

impl<T: Copy> Global<T> {
    /// The pointer as a kernel received it.
    #[inline(always)]
    pub fn from_ptr(ptr: *const T) -> Self {
        Global {
            ptr,
            #[cfg(not(target_arch = "nvptx64"))]
            arg: NONE,
            _element: PhantomData,
        }
    }

    /// The same parameter's pointer at `ptr`.
    #[inline(always)]
    fn with_ptr(self, ptr: *const T) -> Self {
        Global { ptr, ..self }
    }

    /// The kernel parameter the pointer came from (host only).
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn arg(self) -> u32 {
        self.arg
    }

    /// The address of element 0.
    #[inline(always)]
    pub fn as_ptr(self) -> *const T {
        self.ptr
    }

    /// The pointer `n` elements further on.
    // Named after `<*const T>::add`, which it replaces in kernels; not `ops::Add` (the
    // operand is an element count, not another pointer).
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn add(self, n: usize) -> Self {
        self.with_ptr(offset(self.ptr, n))
    }

    /// [`Global::add`] that may step past the end of the buffer (a pointer that is then
    /// accessed for no bytes, as a zero-filled `cp.async`).
    #[inline(always)]
    pub fn wrapping_add(self, n: usize) -> Self {
        self.with_ptr(self.ptr.wrapping_add(n))
    }

    /// Reads element `i` (`ld.global`).
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer (the emulator checks; the GPU does not).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(self, i: usize) -> T {
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { *offset(self.ptr, i) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address against the live allocations first.
            unsafe {
                device::global_load(offset(self.ptr, i), self.arg, align_of::<T>() as u32, Location::caller())
            }
        }
    }
}

impl<T: Copy> GlobalMut<T> {
    /// The pointer as a kernel received it.
    #[inline(always)]
    pub fn from_ptr(ptr: *mut T) -> Self {
        GlobalMut {
            ptr,
            #[cfg(not(target_arch = "nvptx64"))]
            arg: NONE,
            _element: PhantomData,
        }
    }

    /// The address of element 0.
    #[inline(always)]
    pub fn as_ptr(self) -> *mut T {
        self.ptr
    }

    /// The pointer `n` elements further on.
    // Named after `<*const T>::add`, which it replaces in kernels; not `ops::Add` (the
    // operand is an element count, not another pointer).
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn add(self, n: usize) -> Self {
        GlobalMut { ptr: offset(self.ptr, n).cast_mut(), ..self }
    }

    /// The kernel parameter the pointer came from (host only).
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn arg(self) -> u32 {
        self.arg
    }

    /// The same memory, read-only.
    #[inline(always)]
    pub fn as_const(self) -> Global<T> {
        Global {
            ptr: self.ptr,
            #[cfg(not(target_arch = "nvptx64"))]
            arg: self.arg,
            _element: PhantomData,
        }
    }

    /// Reads element `i` (`ld.global`).
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer (the emulator checks; the GPU does not).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load(self, i: usize) -> T {
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { *offset(self.ptr, i) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address against the live allocations first.
            unsafe {
                device::global_load(offset(self.ptr, i), self.arg, align_of::<T>() as u32, Location::caller())
            }
        }
    }

    /// Writes element `i` (`st.global`).
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer, and no other thread of the launch may access it
    /// unless ordered by a barrier (the emulator checks both).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store(self, i: usize, value: T) {
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { *offset(self.ptr, i).cast_mut() = value }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: as in `load`.
            unsafe {
                device::global_store(
                    offset(self.ptr, i).cast_mut(),
                    value,
                    self.arg,
                    align_of::<T>() as u32,
                    Location::caller(),
                )
            }
        }
    }
}

/// Element types of the 32-bit vector and non-coherent loads.
pub trait Word32: Copy {}
impl Word32 for f32 {}
impl Word32 for u32 {}
impl Word32 for i32 {}

#[cfg(target_arch = "nvptx64")]
mod ptx {
    //! The explicitly chosen global instructions. `cvta.to.global` turns the generic address
    //! a kernel parameter holds into a `.global` one (a no-op in SASS).
    use core::arch::asm;
    use core::mem::transmute_copy;

    use super::Word32;

    #[inline(always)]
    pub unsafe fn ld_nc<T: Word32>(p: *const T) -> T {
        let v: u32;
        // SAFETY: the caller guarantees a readable, 4-byte aligned word never written during
        // the kernel.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", "ld.global.nc.b32 {v}, [%ga];", "}}",
                v = out(reg32) v, p = in(reg64) p, options(pure, readonly, nostack),
            );
            transmute_copy(&v)
        }
    }

    macro_rules! vector_loads {
        ($($name:ident => $instr:literal;)*) => {$(
            #[inline(always)]
            pub unsafe fn $name<T: Word32>(p: *const T) -> [T; 4] {
                let (a, b, c, d): (u32, u32, u32, u32);
                // SAFETY: the caller guarantees 16 readable, 16-byte aligned bytes.
                unsafe {
                    asm!(
                        "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};",
                        concat!($instr, " {{{a}, {b}, {c}, {d}}}, [%ga];"), "}}",
                        a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                        p = in(reg64) p, options(pure, readonly, nostack),
                    );
                    [transmute_copy(&a), transmute_copy(&b), transmute_copy(&c), transmute_copy(&d)]
                }
            }
        )*};
    }

    vector_loads! {
        ld_v4 => "ld.global.v4.b32";
        ld_nc_v4 => "ld.global.nc.v4.b32";
    }

    #[inline(always)]
    pub unsafe fn ld_v2<T: Word32>(p: *const T) -> [T; 2] {
        let (a, b): (u32, u32);
        // SAFETY: the caller guarantees 8 readable, 8-byte aligned bytes.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", "ld.global.v2.b32 {{{a}, {b}}}, [%ga];", "}}",
                a = out(reg32) a, b = out(reg32) b, p = in(reg64) p, options(pure, readonly, nostack),
            );
            [transmute_copy(&a), transmute_copy(&b)]
        }
    }

    #[inline(always)]
    pub unsafe fn st_v4<T: Word32>(p: *mut T, v: [T; 4]) {
        let w: [u32; 4] = v.map(|x| unsafe { transmute_copy(&x) });
        // SAFETY: the caller guarantees 16 writable, 16-byte aligned bytes.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};",
                "st.global.v4.b32 [%ga], {{{a}, {b}, {c}, {d}}};", "}}",
                a = in(reg32) w[0], b = in(reg32) w[1], c = in(reg32) w[2], d = in(reg32) w[3],
                p = in(reg64) p, options(nostack),
            )
        }
    }

    #[inline(always)]
    pub unsafe fn st_v2<T: Word32>(p: *mut T, v: [T; 2]) {
        let w: [u32; 2] = v.map(|x| unsafe { transmute_copy(&x) });
        // SAFETY: the caller guarantees 8 writable, 8-byte aligned bytes.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", "st.global.v2.b32 [%ga], {{{a}, {b}}};", "}}",
                a = in(reg32) w[0], b = in(reg32) w[1], p = in(reg64) p, options(nostack),
            )
        }
    }

    #[inline(always)]
    pub unsafe fn atom_add_f32(p: *mut f32, value: f32) -> f32 {
        let old: f32;
        // SAFETY: the caller guarantees a valid global f32 accessed only atomically.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", "atom.global.add.f32 {old}, [%ga], {v};", "}}",
                old = out(reg32) old, p = in(reg64) p, v = in(reg32) value, options(nostack),
            )
        };
        old
    }

    #[inline(always)]
    pub unsafe fn atom_add_u32(p: *mut u32, value: u32) -> u32 {
        let old: u32;
        // SAFETY: the caller guarantees a valid global u32 accessed only atomically.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", "atom.global.add.u32 {old}, [%ga], {v};", "}}",
                old = out(reg32) old, p = in(reg64) p, v = in(reg32) value, options(nostack),
            )
        };
        old
    }

    #[inline(always)]
    pub unsafe fn red_add_f32(p: *mut f32, value: f32) {
        // SAFETY: as for `atom_add_f32`.
        unsafe {
            asm!(
                "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", "red.global.add.f32 [%ga], {v};", "}}",
                p = in(reg64) p, v = in(reg32) value, options(nostack),
            )
        };
    }
}

macro_rules! word_loads {
    ($ty:ident) => {
        impl<T: Word32> $ty<T> {
            /// Reads 2 consecutive elements from `i` (`ld.global.v2.b32`); element `i` must be
            /// 8-byte aligned.
            ///
            /// # Safety
            ///
            /// Both elements must lie in the buffer.
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            pub unsafe fn load_v2(self, i: usize) -> [T; 2] {
                let p = offset(self.ptr, i);
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: forwarded from the caller.
                    unsafe { ptx::ld_v2(p) }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: the emulator checks the address first.
                    unsafe { device::global_load(p.cast::<[T; 2]>(), self.arg, 8, Location::caller()) }
                }
            }

            /// Reads 4 consecutive elements from `i` (`ld.global.v4.b32`); element `i` must be
            /// 16-byte aligned.
            ///
            /// # Safety
            ///
            /// All four elements must lie in the buffer.
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            pub unsafe fn load_v4(self, i: usize) -> [T; 4] {
                let p = offset(self.ptr, i);
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: forwarded from the caller.
                    unsafe { ptx::ld_v4(p) }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: the emulator checks the address first.
                    unsafe { device::global_load(p.cast::<[T; 4]>(), self.arg, 16, Location::caller()) }
                }
            }
        }
    };
}

word_loads!(Global);
word_loads!(GlobalMut);

impl<T: Word32> Global<T> {
    /// Reads element `i` through the non-coherent (read-only) cache (`ld.global.nc`).
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer, and nothing may write the buffer while the kernel
    /// runs.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_nc(self, i: usize) -> T {
        let p = offset(self.ptr, i);
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::ld_nc(p) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_load(p, self.arg, 4, Location::caller()) }
        }
    }

    /// [`Global::load_v4`] through the non-coherent cache (`ld.global.nc.v4.b32`).
    ///
    /// # Safety
    ///
    /// As for [`Global::load_v4`] and [`Global::load_nc`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_nc_v4(self, i: usize) -> [T; 4] {
        let p = offset(self.ptr, i);
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::ld_nc_v4(p) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_load(p.cast::<[T; 4]>(), self.arg, 16, Location::caller()) }
        }
    }
}

impl<T: Word32> GlobalMut<T> {
    /// Writes 2 consecutive elements from `i` (`st.global.v2.b32`); element `i` must be 8-byte
    /// aligned.
    ///
    /// # Safety
    ///
    /// As for [`GlobalMut::store`], for both elements.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_v2(self, i: usize, value: [T; 2]) {
        let p = offset(self.ptr, i).cast_mut();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::st_v2(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_store(p.cast::<[T; 2]>(), value, self.arg, 8, Location::caller()) }
        }
    }

    /// Writes 4 consecutive elements from `i` (`st.global.v4.b32`); element `i` must be
    /// 16-byte aligned.
    ///
    /// # Safety
    ///
    /// As for [`GlobalMut::store`], for all four elements.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_v4(self, i: usize, value: [T; 4]) {
        let p = offset(self.ptr, i).cast_mut();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::st_v4(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_store(p.cast::<[T; 4]>(), value, self.arg, 16, Location::caller()) }
        }
    }
}

impl GlobalMut<f32> {
    /// `atomicAdd` on element `i` (`atom.global.add.f32`); returns the previous value.
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer, and other threads of the launch may access it only
    /// atomically (the emulator checks both).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn atomic_add(self, i: usize, value: f32) -> f32 {
        let p = offset(self.ptr, i).cast_mut();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::atom_add_f32(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_atomic_add_f32(p, value, self.arg, Location::caller()) }
        }
    }

    /// [`GlobalMut::atomic_add`] without the previous value (`red.global.add.f32`).
    ///
    /// # Safety
    ///
    /// As for [`GlobalMut::atomic_add`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn red_add(self, i: usize, value: f32) {
        let p = offset(self.ptr, i).cast_mut();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::red_add_f32(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe {
                device::global_atomic_add_f32(p, value, self.arg, Location::caller());
            }
        }
    }
}

impl GlobalMut<u32> {
    /// `atomicAdd` on element `i` (`atom.global.add.u32`); returns the previous value. With
    /// [`super::fence_acq_rel_gpu`] before it (release) or after it (acquire) it orders
    /// accesses of different blocks, which the emulator then does not report as races.
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer, and other threads of the launch may access it only
    /// atomically unless ordered so (the emulator checks both).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn atomic_add(self, i: usize, value: u32) -> u32 {
        let p = offset(self.ptr, i).cast_mut();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::atom_add_u32(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_atomic_add_u32(p, value, self.arg, Location::caller()) }
        }
    }
}

impl Global<u16> {
    /// The same memory as 32-bit words, each holding two consecutive 16-bit elements, as
    /// [`GlobalMut::pairs`] gives them, for reading.
    #[inline(always)]
    pub fn pairs(self) -> Global<u32> {
        Global {
            ptr: self.ptr.cast(),
            #[cfg(not(target_arch = "nvptx64"))]
            arg: self.arg,
            _element: PhantomData,
        }
    }
}

impl GlobalMut<u16> {
    /// The same memory as 32-bit words, each holding two consecutive 16-bit elements (element
    /// `2i` in the low half of word `i`, as [`super::pack_bf16x2`] packs them), for one store
    /// per pair. A word accessed must be 4-byte aligned (the emulator checks; on the host the
    /// pointer keeps the parameter whose view bounds it).
    #[inline(always)]
    pub fn pairs(self) -> GlobalMut<u32> {
        GlobalMut {
            ptr: self.ptr.cast(),
            #[cfg(not(target_arch = "nvptx64"))]
            arg: self.arg,
            _element: PhantomData,
        }
    }
}
