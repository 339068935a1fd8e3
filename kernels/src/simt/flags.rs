//! Flags: 32-bit words through which kernels of different blocks or devices synchronise, and
//! the global timer their waits take deadlines from.
//!
//! PTX ISA, "Memory Consistency Model": a release store (`st.release.<scope>`) and an acquire
//! load (`ld.acquire.<scope>`) of the same word are *morally strong* when each one's scope
//! includes the other thread; when the acquire reads the value the release wrote, the
//! releasing thread's earlier accesses happen before the acquiring thread's later ones
//! ("Release and Acquire Patterns"). `.gpu` reaches the threads of one device, `.sys` those
//! of every device and the host ("Scope"): flags between peers are `.sys`. Volatile accesses
//! (`ld/st.volatile`) are neither: they only keep the compiler from caching the word, and order
//! nothing. On the host each of these calls the SIMT emulator, where acquire and volatile
//! loads are scheduling points (a polling thread yields) and every access to peer memory is
//! checked against the other devices' (see `trident_simt`).

#[cfg(not(target_arch = "nvptx64"))]
use core::panic::Location;
#[cfg(not(target_arch = "nvptx64"))]
use trident_simt::device;

use super::{Global, GlobalMut};

/// `%globaltimer`: a nanosecond timer every device of the node shares (for deadlines; its
/// resolution on a GPU is about a microsecond).
#[inline(always)]
pub fn global_timer_ns() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let t: u64;
        // SAFETY: reading a special register has no preconditions.
        unsafe { core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
        t
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        device::global_timer_ns()
    }
}

#[cfg(target_arch = "nvptx64")]
mod ptx {
    //! The flag instructions, on a `.global` address (`cvta.to.global` of the generic one).
    use core::arch::asm;

    macro_rules! flag_load {
        ($name:ident, $instr:literal) => {
            #[inline(always)]
            pub unsafe fn $name(p: *const u32) -> u32 {
                let v: u32;
                // SAFETY: the caller guarantees a readable, 4-byte aligned global word. Not
                // `pure`: the load must be issued every time (it polls).
                unsafe {
                    asm!(
                        "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", concat!($instr, " {v}, [%ga];"), "}}",
                        v = out(reg32) v, p = in(reg64) p, options(nostack),
                    )
                };
                v
            }
        };
    }

    macro_rules! flag_store {
        ($name:ident, $instr:literal) => {
            #[inline(always)]
            pub unsafe fn $name(p: *mut u32, v: u32) {
                // SAFETY: the caller guarantees a writable, 4-byte aligned global word. Without
                // `nomem` the asm is a compiler barrier: earlier stores stay before it.
                unsafe {
                    asm!(
                        "{{", ".reg .u64 %ga;", "cvta.to.global.u64 %ga, {p};", concat!($instr, " [%ga], {v};"), "}}",
                        v = in(reg32) v, p = in(reg64) p, options(nostack),
                    )
                };
            }
        };
    }

    flag_load!(ld_acquire_sys, "ld.acquire.sys.global.u32");
    flag_load!(ld_acquire_gpu, "ld.acquire.gpu.global.u32");
    flag_load!(ld_volatile, "ld.volatile.global.u32");
    flag_store!(st_release_sys, "st.release.sys.global.u32");
    flag_store!(st_release_gpu, "st.release.gpu.global.u32");
    flag_store!(st_volatile, "st.volatile.global.u32");
}

macro_rules! flag_loads {
    ($ty:ident) => {
        impl $ty<u32> {
            /// Reads flag `i` with `ld.acquire.sys`: once it reads the value a peer's
            /// [`GlobalMut::store_release_sys`] wrote, what that peer released happens before
            /// this thread's later accesses.
            ///
            /// # Safety
            ///
            /// Element `i` must lie in the buffer (the emulator checks; the GPU does not).
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            pub unsafe fn load_acquire_sys(self, i: usize) -> u32 {
                let p = self.add(i).as_ptr();
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: forwarded from the caller.
                    unsafe { ptx::ld_acquire_sys(p) }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: the emulator checks the address first.
                    unsafe {
                        device::global_load_acquire_u32(p, device::Scope::Sys, self.arg(), Location::caller())
                    }
                }
            }

            /// Reads flag `i` with `ld.acquire.gpu`: as [`Self::load_acquire_sys`] for the
            /// threads of this device only.
            ///
            /// # Safety
            ///
            /// As for [`Self::load_acquire_sys`].
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            pub unsafe fn load_acquire_gpu(self, i: usize) -> u32 {
                let p = self.add(i).as_ptr();
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: forwarded from the caller.
                    unsafe { ptx::ld_acquire_gpu(p) }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: the emulator checks the address first.
                    unsafe {
                        device::global_load_acquire_u32(p, device::Scope::Gpu, self.arg(), Location::caller())
                    }
                }
            }

            /// Reads word `i` with `ld.volatile` (issued every time, ordering nothing).
            ///
            /// # Safety
            ///
            /// As for [`Self::load_acquire_sys`].
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            pub unsafe fn load_volatile(self, i: usize) -> u32 {
                let p = self.add(i).as_ptr();
                #[cfg(target_arch = "nvptx64")]
                {
                    // SAFETY: forwarded from the caller.
                    unsafe { ptx::ld_volatile(p) }
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    // SAFETY: the emulator checks the address first.
                    unsafe { device::global_load_volatile_u32(p, self.arg(), Location::caller()) }
                }
            }
        }
    };
}

flag_loads!(Global);
flag_loads!(GlobalMut);

impl GlobalMut<u32> {
    /// Writes `value` to flag `i` with `st.release.sys`: the thread's earlier accesses (and,
    /// after a `sync_threads`, its block's) happen before the accesses of any thread of any
    /// device that reads the value with [`GlobalMut::load_acquire_sys`].
    ///
    /// # Safety
    ///
    /// Element `i` must lie in the buffer (the emulator checks; the GPU does not).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_release_sys(self, i: usize, value: u32) {
        let p = self.add(i).as_ptr();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::st_release_sys(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe {
                device::global_store_release_u32(p, value, device::Scope::Sys, self.arg(), Location::caller())
            }
        }
    }

    /// Writes `value` to flag `i` with `st.release.gpu`: as [`GlobalMut::store_release_sys`]
    /// for the threads of this device only.
    ///
    /// # Safety
    ///
    /// As for [`GlobalMut::store_release_sys`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_release_gpu(self, i: usize, value: u32) {
        let p = self.add(i).as_ptr();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::st_release_gpu(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe {
                device::global_store_release_u32(p, value, device::Scope::Gpu, self.arg(), Location::caller())
            }
        }
    }

    /// Writes `value` to word `i` with `st.volatile` (issued, releasing nothing).
    ///
    /// # Safety
    ///
    /// As for [`GlobalMut::store_release_sys`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store_volatile(self, i: usize, value: u32) {
        let p = self.add(i).as_ptr();
        #[cfg(target_arch = "nvptx64")]
        {
            // SAFETY: forwarded from the caller.
            unsafe { ptx::st_volatile(p, value) }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            // SAFETY: the emulator checks the address first.
            unsafe { device::global_store_volatile_u32(p, value, self.arg(), Location::caller()) }
        }
    }
}
