//! `wgmma` (sm_90a): warpgroup matrix multiply-accumulate from shared-memory matrix
//! descriptors, with its fence and groups.
//!
//! [`wgmma_m64n8k16_bf16`] and its siblings (N = 8, 16, 32, 64; bf16 or f16 in, f32
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
        WgmmaAccumulator([0.0; R])
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

/// `wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (8 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n8k16_bf16(acc: &mut WgmmaAccumulator<4>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
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
            trident_simt::device::MmaInput::Bf16,
            8,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (16 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n16k16_bf16(acc: &mut WgmmaAccumulator<8>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
                    d4 = inout(reg32) acc.0[4],
                    d5 = inout(reg32) acc.0[5],
                    d6 = inout(reg32) acc.0[6],
                    d7 = inout(reg32) acc.0[7],
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
            trident_simt::device::MmaInput::Bf16,
            16,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (32 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n32k16_bf16(acc: &mut WgmmaAccumulator<16>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
                    d4 = inout(reg32) acc.0[4],
                    d5 = inout(reg32) acc.0[5],
                    d6 = inout(reg32) acc.0[6],
                    d7 = inout(reg32) acc.0[7],
                    d8 = inout(reg32) acc.0[8],
                    d9 = inout(reg32) acc.0[9],
                    d10 = inout(reg32) acc.0[10],
                    d11 = inout(reg32) acc.0[11],
                    d12 = inout(reg32) acc.0[12],
                    d13 = inout(reg32) acc.0[13],
                    d14 = inout(reg32) acc.0[14],
                    d15 = inout(reg32) acc.0[15],
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
            trident_simt::device::MmaInput::Bf16,
            32,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (64 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n64k16_bf16(acc: &mut WgmmaAccumulator<32>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
                    d4 = inout(reg32) acc.0[4],
                    d5 = inout(reg32) acc.0[5],
                    d6 = inout(reg32) acc.0[6],
                    d7 = inout(reg32) acc.0[7],
                    d8 = inout(reg32) acc.0[8],
                    d9 = inout(reg32) acc.0[9],
                    d10 = inout(reg32) acc.0[10],
                    d11 = inout(reg32) acc.0[11],
                    d12 = inout(reg32) acc.0[12],
                    d13 = inout(reg32) acc.0[13],
                    d14 = inout(reg32) acc.0[14],
                    d15 = inout(reg32) acc.0[15],
                    d16 = inout(reg32) acc.0[16],
                    d17 = inout(reg32) acc.0[17],
                    d18 = inout(reg32) acc.0[18],
                    d19 = inout(reg32) acc.0[19],
                    d20 = inout(reg32) acc.0[20],
                    d21 = inout(reg32) acc.0[21],
                    d22 = inout(reg32) acc.0[22],
                    d23 = inout(reg32) acc.0[23],
                    d24 = inout(reg32) acc.0[24],
                    d25 = inout(reg32) acc.0[25],
                    d26 = inout(reg32) acc.0[26],
                    d27 = inout(reg32) acc.0[27],
                    d28 = inout(reg32) acc.0[28],
                    d29 = inout(reg32) acc.0[29],
                    d30 = inout(reg32) acc.0[30],
                    d31 = inout(reg32) acc.0[31],
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
            trident_simt::device::MmaInput::Bf16,
            64,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (8 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n8k16_f16(acc: &mut WgmmaAccumulator<4>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
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
            trident_simt::device::MmaInput::F16,
            8,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (16 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n16k16_f16(acc: &mut WgmmaAccumulator<8>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
                    d4 = inout(reg32) acc.0[4],
                    d5 = inout(reg32) acc.0[5],
                    d6 = inout(reg32) acc.0[6],
                    d7 = inout(reg32) acc.0[7],
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
            trident_simt::device::MmaInput::F16,
            16,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (32 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n32k16_f16(acc: &mut WgmmaAccumulator<16>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
                    d4 = inout(reg32) acc.0[4],
                    d5 = inout(reg32) acc.0[5],
                    d6 = inout(reg32) acc.0[6],
                    d7 = inout(reg32) acc.0[7],
                    d8 = inout(reg32) acc.0[8],
                    d9 = inout(reg32) acc.0[9],
                    d10 = inout(reg32) acc.0[10],
                    d11 = inout(reg32) acc.0[11],
                    d12 = inout(reg32) acc.0[12],
                    d13 = inout(reg32) acc.0[13],
                    d14 = inout(reg32) acc.0[14],
                    d15 = inout(reg32) acc.0[15],
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
            trident_simt::device::MmaInput::F16,
            32,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16`: `acc (+)= A x B^T` for the
/// warpgroup, A (64 x 16) and B (64 x 16) K-major in shared memory through the descriptors;
/// `scale_d` false replaces the accumulator instead of adding to it.
#[inline(always)]
#[track_caller]
pub fn wgmma_m64n64k16_f16(acc: &mut WgmmaAccumulator<32>, desc_a: u64, desc_b: u64, scale_d: bool) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the operands are in shared memory as the descriptors say; every thread of the
    // warpgroup executes this together.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %p;",
            "setp.ne.b32 %p, {s}, 0;",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}}}, {a}, {b}, %p, 1, 1, 0, 0;",
            "}}",
                    d0 = inout(reg32) acc.0[0],
                    d1 = inout(reg32) acc.0[1],
                    d2 = inout(reg32) acc.0[2],
                    d3 = inout(reg32) acc.0[3],
                    d4 = inout(reg32) acc.0[4],
                    d5 = inout(reg32) acc.0[5],
                    d6 = inout(reg32) acc.0[6],
                    d7 = inout(reg32) acc.0[7],
                    d8 = inout(reg32) acc.0[8],
                    d9 = inout(reg32) acc.0[9],
                    d10 = inout(reg32) acc.0[10],
                    d11 = inout(reg32) acc.0[11],
                    d12 = inout(reg32) acc.0[12],
                    d13 = inout(reg32) acc.0[13],
                    d14 = inout(reg32) acc.0[14],
                    d15 = inout(reg32) acc.0[15],
                    d16 = inout(reg32) acc.0[16],
                    d17 = inout(reg32) acc.0[17],
                    d18 = inout(reg32) acc.0[18],
                    d19 = inout(reg32) acc.0[19],
                    d20 = inout(reg32) acc.0[20],
                    d21 = inout(reg32) acc.0[21],
                    d22 = inout(reg32) acc.0[22],
                    d23 = inout(reg32) acc.0[23],
                    d24 = inout(reg32) acc.0[24],
                    d25 = inout(reg32) acc.0[25],
                    d26 = inout(reg32) acc.0[26],
                    d27 = inout(reg32) acc.0[27],
                    d28 = inout(reg32) acc.0[28],
                    d29 = inout(reg32) acc.0[29],
                    d30 = inout(reg32) acc.0[30],
                    d31 = inout(reg32) acc.0[31],
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
            trident_simt::device::MmaInput::F16,
            64,
            desc_a,
            desc_b,
            scale_d,
            acc.0.as_mut_ptr(),
            core::panic::Location::caller(),
        )
    };
}
