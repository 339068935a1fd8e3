//! TMA (the Tensor Memory Accelerator, sm_90): `cp.async.bulk.tensor` loads into shared
//! memory completing on an mbarrier, stores from shared memory in bulk groups.
//!
//! A [`TensorMapRef`] names the tensor map a copy reads: on the GPU the generic address of a
//! 64-byte aligned `CUtensorMap` made by `cuTensorMapEncodeTiled` (in kernel parameter,
//! constant or global memory); on the host the address of a validated
//! `trident_simt::TensorMap` with the same fields. Coordinates are in elements, innermost
//! first, and may be negative or past the end (out-of-bounds elements of a load read as the
//! map's fill; those of a store are not written).
//!
//! The emulator writes a loaded box into shared memory in the map's swizzled layout and
//! faults any access to it before the accessing thread observed the mbarrier phase the load
//! completes (or a barrier followed another thread's observation); a store's source must
//! have been made visible to the async proxy ([`fence_proxy_async_shared_cta`]) and must not
//! be written before [`bulk_wait_group_read`]. As in `hopper.rs`, every function is
//! `#[inline(always)]` and emits sm_90 instructions only into kernels that call it.
//!
//! [`fence_proxy_async_shared_cta`]: super::fence_proxy_async_shared_cta

use super::Shared;

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// The tensor map a TMA copy reads (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct TensorMapRef(u64);

impl TensorMapRef {
    /// The map at `address` (a kernel parameter word).
    ///
    /// # Safety
    ///
    /// On the GPU `address` must be the generic address of a valid, 64-byte aligned
    /// `CUtensorMap`; on the host, the address of a `trident_simt::TensorMap` that outlives
    /// the launch.
    #[inline(always)]
    pub const unsafe fn from_address(address: u64) -> Self {
        TensorMapRef(address)
    }

    /// The address it was made from.
    #[inline(always)]
    pub const fn address(self) -> u64 {
        self.0
    }

    #[cfg(not(target_arch = "nvptx64"))]
    fn map(self) -> &'static trident_simt::TensorMap {
        // SAFETY: `from_address`'s contract: the address of a TensorMap that outlives the launch.
        unsafe { &*(self.0 as *const trident_simt::TensorMap) }
    }
}

macro_rules! tma_copies {
    ($($rank:literal => $load:ident, $store:ident, [$($c:ident),*];)*) => {$(
        #[doc = concat!(
            "`cp.async.bulk.tensor.", $rank, "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`: ",
            "loads the box at `coords` of `map` into `dst` from element `index` on (128-byte ",
            "aligned; 1024-byte aligned keeps a 128-byte swizzle's pattern), completing its bytes ",
            "on mbarrier `bar` of `bars`."
        )]
        ///
        /// # Safety
        ///
        /// The map must describe global memory valid for reading its in-bounds elements.
        #[inline(always)]
        #[track_caller]
        pub unsafe fn $load<T: Copy>(dst: Shared<T>, index: usize, map: TensorMapRef, coords: [i32; $rank], bars: Shared<u64>, bar: usize) {
            #[cfg(target_arch = "nvptx64")]
            {
                let [$($c),*] = coords;
                // SAFETY: the caller vouches for the map; destination and mbarrier are in the
                // block's shared memory.
                unsafe {
                    asm!(
                        concat!(
                            "cp.async.bulk.tensor.", $rank, "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes ",
                            "[{d}], [{m}, {{", tma_copies!(@list $($c),*), "}}], [{b}];"
                        ),
                        d = in(reg32) dst.address_of(index),
                        m = in(reg64) map.0,
                        b = in(reg32) bars.address_of(bar),
                        $($c = in(reg32) $c,)*
                        options(nostack),
                    )
                };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: forwarded from the caller; the emulator checks each element's address.
            unsafe {
                trident_simt::device::tma_load(map.map(), dst, index, &coords, bars, bar, core::panic::Location::caller())
            };
        }

        #[doc = concat!(
            "`cp.async.bulk.tensor.", $rank, "d.global.shared::cta.tile.bulk_group`: stores the box ",
            "in `src` (from element `index` on, 128-byte aligned) to `map` at `coords`; the ",
            "source may be written again after [`bulk_wait_group_read`] covers the store's group."
        )]
        ///
        /// # Safety
        ///
        /// The map must describe global memory valid for writing its in-bounds elements.
        #[inline(always)]
        #[track_caller]
        pub unsafe fn $store<T: Copy>(src: Shared<T>, index: usize, map: TensorMapRef, coords: [i32; $rank]) {
            #[cfg(target_arch = "nvptx64")]
            {
                let [$($c),*] = coords;
                // SAFETY: the caller vouches for the map; the source is in shared memory.
                unsafe {
                    asm!(
                        concat!(
                            "cp.async.bulk.tensor.", $rank, "d.global.shared::cta.tile.bulk_group ",
                            "[{m}, {{", tma_copies!(@list $($c),*), "}}], [{s}];"
                        ),
                        s = in(reg32) src.address_of(index),
                        m = in(reg64) map.0,
                        $($c = in(reg32) $c,)*
                        options(nostack),
                    )
                };
            }
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: forwarded from the caller; the emulator checks each element's address.
            unsafe {
                trident_simt::device::tma_store(map.map(), src, index, &coords, core::panic::Location::caller())
            };
        }
    )*};
    (@list $first:ident $(, $rest:ident)*) => {
        concat!("{", stringify!($first), "}" $(, ", {", stringify!($rest), "}")*)
    };
}

tma_copies! {
    1 => tma_load_1d, tma_store_1d, [c0];
    2 => tma_load_2d, tma_store_2d, [c0, c1];
    3 => tma_load_3d, tma_store_3d, [c0, c1, c2];
    4 => tma_load_4d, tma_store_4d, [c0, c1, c2, c3];
    5 => tma_load_5d, tma_store_5d, [c0, c1, c2, c3, c4];
}

/// `cp.async.bulk.commit_group`: the running thread's uncommitted TMA stores form a group.
#[inline(always)]
pub fn bulk_commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("cp.async.bulk.commit_group;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    trident_simt::device::bulk_commit_group();
}

/// `cp.async.bulk.wait_group.read N`: waits until every committed group but the `N` most
/// recent has read its shared-memory source.
#[inline(always)]
pub fn bulk_wait_group_read<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: only an immediate operand.
    unsafe {
        asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    trident_simt::device::bulk_wait_group_read(N);
}
