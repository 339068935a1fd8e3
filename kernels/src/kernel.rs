//! [`kernels!`](crate::kernels): declares kernels once for both targets.

/// Declares a file's kernels once for both targets: PTX entry points on nvptx64, emulated
/// kernels on the host.
///
/// On nvptx64 each `pub unsafe fn` becomes `#[no_mangle] pub unsafe extern "ptx-kernel" fn`.
/// On the host each stays an `unsafe fn` and gets a [`HostKernel`](trident_simt::HostKernel)
/// entry that decodes the launch's argument words (one `u64` per parameter, see
/// [`KernelArg`](trident_simt::KernelArg)) and runs the body for the emulated thread that calls
/// it. The invocation's entries are collected in a `pub static HOST_KERNELS`, which
/// `trident_runtime::ModuleSource` takes with the PTX. Parameters are scalars (`u32`, `u64`,
/// `f32`, ...) or [`Global`](crate::simt::Global)/[`GlobalMut`](crate::simt::GlobalMut)
/// pointers; bodies use [`crate::simt`] for indices, barriers, shared memory and the rest.
///
/// Every path in the expansion goes through `$crate`, so a kernels crate of one's own needs no
/// dependency but `trident-kernels`. It also declares, once per invocation, the `.extern
/// .shared` symbol [`dynamic_shared`](crate::simt::dynamic_shared) addresses (PTX accepts the
/// repeated declaration), so every crate's PTX defines what its kernels use. A crate whose
/// kernels are not all declared through this macro must invoke it at least once (an empty
/// `kernels! {}` is enough) to use `dynamic_shared`.
///
/// The crate that invokes it must carry, at its root:
///
/// ```text
/// #![cfg_attr(target_arch = "nvptx64", no_std)]
/// #![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
/// ```
///
/// `abi_ptx` is for the `extern "ptx-kernel"` entries, `asm_experimental_arch` for the PTX
/// this macro (the dynamic shared memory declaration) and
/// [`static_shared!`](crate::static_shared) expand to in the calling crate (add
/// `stdarch_nvptx` if the crate uses `core::arch::nvptx` itself). It must not define a
/// `#[panic_handler]`: `trident-kernels` provides the nvptx64 one (a `trap`).
///
/// ```
/// # // The doc test builds for the host, where the entries are plain functions.
/// use trident_kernels::simt::{self, Global, GlobalMut};
///
/// trident_kernels::kernels! {
///     /// `y[i] = a * x[i] + y[i]` for `i < n`, one thread per element.
///     pub unsafe fn saxpy_f32(y: GlobalMut<f32>, x: Global<f32>, a: f32, n: u32) {
///         let i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
///         if i < n {
///             let i = i as usize;
///             // SAFETY: the launch passes `n` elements of `x` and `y`.
///             unsafe { y.store(i, simt::fma(a, x.load(i), y.load(i))) };
///         }
///     }
/// }
///
/// assert_eq!(HOST_KERNELS[0].name, "saxpy_f32");
/// assert_eq!(HOST_KERNELS[0].params, ["GlobalMut<f32>", "Global<f32>", "f32", "u32"]);
/// ```
#[macro_export]
macro_rules! kernels {
    ($(
        $(#[$meta:meta])*
        pub unsafe fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {
        // The base of the launch's dynamic shared memory, as `simt::dynamic_shared` names it.
        // Every unsized `.extern .shared` array starts there; PTX accepts the declaration once
        // per invocation of this macro, and each crate's PTX then carries its own.
        #[cfg(target_arch = "nvptx64")]
        ::core::arch::global_asm!(".extern .shared .align 16 .b8 trident_dynamic_smem[];");

        $(
            $(#[$meta])*
            ///
            /// # Safety
            /// Every pointer must be valid for the accesses the kernel makes for the given sizes;
            /// the kernel's safe launch wrapper checks this before launching.
            #[cfg(target_arch = "nvptx64")]
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body

            $(#[$meta])*
            ///
            /// # Safety
            /// Every pointer must be valid for the accesses the kernel makes for the given sizes,
            /// and the function must run inside an emulated launch.
            #[cfg(not(target_arch = "nvptx64"))]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) $body
        )*

        /// This file's kernels, for the SIMT emulator.
        #[cfg(not(target_arch = "nvptx64"))]
        pub static HOST_KERNELS: &[$crate::trident_simt::HostKernel] = &[$(
            $crate::trident_simt::HostKernel {
                name: stringify!($name),
                params: &[$(stringify!($ty)),*],
                param_names: &[$(stringify!($arg)),*],
                entry: |words: &[u64]| {
                    let mut words = words.iter().copied().enumerate();
                    $(
                        let $arg = {
                            let (index, word) =
                                words.next().expect(concat!("missing argument `", stringify!($arg), "`"));
                            <$ty as $crate::trident_simt::KernelArg>::from_arg(word, index)
                        };
                    )*
                    // SAFETY: `entry` is an `unsafe fn` whose caller guarantees one valid word
                    // per parameter and pointers valid for the kernel's accesses, which is
                    // this kernel's contract.
                    unsafe { $name($($arg),*) }
                },
            },
        )*];
    };
}
