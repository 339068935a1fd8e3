//! `kernels!`: declares kernels once for both targets.
//!
//! On nvptx64 each becomes `#[no_mangle] extern "ptx-kernel"`. On the host each stays an
//! `unsafe fn` and gets a [`trident_simt::HostKernel`] entry that decodes the launch's argument
//! words (one `u64` per parameter, see [`trident_simt::KernelArg`]) and runs the body for the
//! emulated thread that calls it. The file's entries are collected in its `HOST_KERNELS`.

macro_rules! kernels {
    ($(
        $(#[$meta:meta])*
        pub unsafe fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {
        $(
            $(#[$meta])*
            ///
            /// # Safety
            /// Every pointer must be valid for the accesses the kernel makes for the given sizes;
            /// the safe launch wrapper in `trident::ops` checks this before launching.
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
        pub static HOST_KERNELS: &[trident_simt::HostKernel] = &[$(
            trident_simt::HostKernel {
                name: stringify!($name),
                params: &[$(stringify!($ty)),*],
                param_names: &[$(stringify!($arg)),*],
                entry: |words: &[u64]| {
                    let mut words = words.iter().copied().enumerate();
                    $(
                        let $arg = {
                            let (index, word) =
                                words.next().expect(concat!("missing argument `", stringify!($arg), "`"));
                            <$ty as trident_simt::KernelArg>::from_arg(word, index)
                        };
                    )*
                    // SAFETY: the runtime checked the word count against `params`, and the
                    // launch wrapper checked every pointer against the sizes it passes.
                    unsafe { $name($($arg),*) }
                },
            },
        )*];
    };
}
