//! `wgmma` (sm_90a): warpgroup matrix multiply-accumulate from shared-memory matrix
//! descriptors, with its fence and groups.
//!
//! [`wgmma_m64n8k16_bf16`] and its siblings (N = 8, 16, 32, 64, 128, 256; bf16 or f16 in, f32
//! accumulate) must be executed by all 128 threads of a warpgroup together; A (64 x 16) and B
//! (N x 16) are K-major in shared memory, described by [`matrix_descriptor`]. The accumulator
//! is a [`WgmmaAccumulator`]: on the GPU N/2 f32 registers per thread in the PTX ISA's D
//! fragment layout; on the host the emulator checks every [`WgmmaAccumulator::get`] and
//! [`WgmmaAccumulator::set`] against the `mma_async` in flight: an accumulator used before
//! [`wgmma_wait_group`] retired its group, or written to and then passed to `mma_async`
//! without a [`wgmma_fence`] in between, fails naming both places. See `trident_simt`'s
//! `wgmma.rs` for the operand addressing and what is modelled.
//!
//! The instructions need an sm_90a PTX module; the functions are `#[inline(always)]`, so no
//! other module contains them unless a kernel in it calls one.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// A thread's `R` f32 accumulator registers of a `wgmma` with N = 2R.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct WgmmaAccumulator<const R: usize>([f32; R]);

impl<const R: usize> WgmmaAccumulator<R> {
    /// Zeros (a first `mma_async` may instead pass `scale_d = false`).
    #[inline(always)]
    pub const fn zeroed() -> Self {
        // SAFETY: all-zero bits are the f32 0.0. Unlike `[0.0; R]`, which rustc may lower to
        // a store loop that keeps a large accumulator in local memory, this is one memset that
        // LLVM splits into registers.
        WgmmaAccumulator(unsafe { core::mem::zeroed() })
    }

    /// Register `i`.
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, i: usize) -> f32 {
        #[cfg(not(target_arch = "nvptx64"))]
        trident_simt::device::wgmma_accumulator_access(
            self.0.as_ptr(),
            false,
            core::panic::Location::caller(),
        );
        self.0[i]
    }

    /// Sets register `i`.
    #[inline(always)]
    #[track_caller]
    pub fn set(&mut self, i: usize, value: f32) {
        #[cfg(not(target_arch = "nvptx64"))]
        trident_simt::device::wgmma_accumulator_access(
            self.0.as_ptr(),
            true,
            core::panic::Location::caller(),
        );
        self.0[i] = value;
    }
}

/// A `wgmma` shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start
/// address, leading and stride byte offsets (each a multiple of 16 below 2^18), base offset
/// 0, and the swizzle code (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
#[inline(always)]
pub const fn matrix_descriptor(
    start_address: u32,
    leading_byte_offset: u32,
    stride_byte_offset: u32,
    swizzle: u32,
) -> u64 {
    descriptor_field(start_address)
        | descriptor_field(leading_byte_offset) << 16
        | descriptor_field(stride_byte_offset) << 32
        | ((swizzle & 3) as u64) << 62
}

/// A descriptor's 14-bit encoding of a byte address or offset: `(x & 0x3FFFF) >> 4`.
#[inline(always)]
const fn descriptor_field(x: u32) -> u64 {
    ((x & 0x3FFFF) >> 4) as u64
}

/// `wgmma.fence.sync.aligned`: orders the warpgroup's register accesses before the
/// `wgmma.mma_async` that follow.
#[inline(always)]
pub fn wgmma_fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("wgmma.fence.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    trident_simt::device::wgmma_fence();
}

/// `wgmma.commit_group.sync.aligned`: the thread's uncommitted `mma_async` form a group.
#[inline(always)]
pub fn wgmma_commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: no operands.
    unsafe {
        asm!("wgmma.commit_group.sync.aligned;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    trident_simt::device::wgmma_commit_group();
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` groups are pending.
#[inline(always)]
pub fn wgmma_wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: only an immediate operand.
    unsafe {
        asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    trident_simt::device::wgmma_wait_group(N);
}

/// Declares `wgmma_m64n{N}k16_{T}`: one `wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T` per
/// shape and input type, with its `R = N/2` accumulator registers listed as `[0 1 .. R-1]`.
/// The operands are `d` (the R registers, positional operands `{0}` .. `{R-1}`), the two
/// descriptors, the scale-d predicate (set from `scale_d`), and the immediates scale-a = 1,
/// scale-b = 1, transpose-a = 0, transpose-b = 0 (PTX ISA, "wgmma.mma_async").
macro_rules! wgmma_mma_async {
    ($name:ident, n = $n:literal, $ptx_type:literal, $input:ident, $regs:literal, [$first:literal $($rest:literal)*]) => {
        #[doc = concat!(
            "`wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ptx_type, ".", $ptx_type,
            "`: `acc (+)= A x B^T` for the warpgroup, A (64 x 16) and B (", $n, " x 16) K-major in ",
            "shared memory through the descriptors; `scale_d` false replaces the accumulator ",
            "instead of adding to it."
        )]
        #[inline(always)]
        #[track_caller]
        pub fn $name(acc: &mut WgmmaAccumulator<$regs>, desc_a: u64, desc_b: u64, scale_d: bool) {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: the operands are in shared memory as the descriptors say; every thread of
            // the warpgroup executes this together.
            unsafe {
                asm!(
                    "{{",
                    ".reg .pred %p;",
                    "setp.ne.b32 %p, {s}, 0;",
                    concat!(
                        "wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ptx_type, ".", $ptx_type,
                        " {{{", $first, "}", $(", {", $rest, "}",)* "}}, {a}, {b}, %p, 1, 1, 0, 0;"
                    ),
                    "}}",
                    inout(reg32) acc.0[$first],
                    $(inout(reg32) acc.0[$rest],)*
                    a = in(reg64) desc_a,
                    b = in(reg64) desc_b,
                    s = in(reg32) u32::from(scale_d),
                    options(nostack),
                )
            };
            #[cfg(not(target_arch = "nvptx64"))]
            // SAFETY: the accumulator lives across the call.
            unsafe {
                trident_simt::device::wgmma_mma_async(
                    trident_simt::device::MmaInput::$input,
                    $n,
                    desc_a,
                    desc_b,
                    scale_d,
                    acc.0.as_mut_ptr(),
                    core::panic::Location::caller(),
                )
            };
        }
    };
}

wgmma_mma_async!(wgmma_m64n8k16_bf16, n = 8, "bf16", Bf16, 4, [0 1 2 3]);
wgmma_mma_async!(wgmma_m64n16k16_bf16, n = 16, "bf16", Bf16, 8, [0 1 2 3 4 5 6 7]);
wgmma_mma_async!(wgmma_m64n32k16_bf16, n = 32, "bf16", Bf16, 16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
wgmma_mma_async!(wgmma_m64n64k16_bf16, n = 64, "bf16", Bf16, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]);
wgmma_mma_async!(wgmma_m64n128k16_bf16, n = 128, "bf16", Bf16, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]);
wgmma_mma_async!(wgmma_m64n256k16_bf16, n = 256, "bf16", Bf16, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]);
wgmma_mma_async!(wgmma_m64n8k16_f16, n = 8, "f16", F16, 4, [0 1 2 3]);
wgmma_mma_async!(wgmma_m64n16k16_f16, n = 16, "f16", F16, 8, [0 1 2 3 4 5 6 7]);
wgmma_mma_async!(wgmma_m64n32k16_f16, n = 32, "f16", F16, 16, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
wgmma_mma_async!(wgmma_m64n64k16_f16, n = 64, "f16", F16, 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]);
wgmma_mma_async!(wgmma_m64n128k16_f16, n = 128, "f16", F16, 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]);
wgmma_mma_async!(wgmma_m64n256k16_f16, n = 256, "f16", F16, 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]);
