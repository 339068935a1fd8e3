//! nvptx64 side of `simt`: indices and barriers from `core::arch::nvptx`, everything else as
//! inline PTX. Shared memory is addressed with 32-bit `.shared` addresses; nothing is checked.

use core::arch::{asm, nvptx};
use core::marker::PhantomData;
use core::mem::{size_of, transmute_copy};

use super::Global;

// The dynamic shared memory symbol, `trident_dynamic_smem`, is declared by every `kernels!`
// invocation: a declaration here would reach only this crate's PTX, not that of a crate of
// one's own kernels that calls `dynamic_shared` (ptxas: "Unknown symbol").

macro_rules! special_registers {
    ($($name:ident => $intrinsic:ident, $what:literal;)*) => {$(
        #[doc = $what]
        #[inline(always)]
        pub fn $name() -> u32 {
            // SAFETY: reading a special register has no preconditions.
            unsafe { nvptx::$intrinsic() as u32 }
        }
    )*};
}

special_registers! {
    thread_idx_x => _thread_idx_x, "`threadIdx.x`.";
    thread_idx_y => _thread_idx_y, "`threadIdx.y`.";
    thread_idx_z => _thread_idx_z, "`threadIdx.z`.";
    block_idx_x => _block_idx_x, "`blockIdx.x`.";
    block_idx_y => _block_idx_y, "`blockIdx.y`.";
    block_idx_z => _block_idx_z, "`blockIdx.z`.";
    block_dim_x => _block_dim_x, "`blockDim.x`.";
    block_dim_y => _block_dim_y, "`blockDim.y`.";
    block_dim_z => _block_dim_z, "`blockDim.z`.";
    grid_dim_x => _grid_dim_x, "`gridDim.x`.";
    grid_dim_y => _grid_dim_y, "`gridDim.y`.";
    grid_dim_z => _grid_dim_z, "`gridDim.z`.";
}

/// Lane of the running thread in its warp (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    let lane: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane, options(pure, nomem, nostack)) };
    lane
}

/// `__syncthreads()`: `bar.sync 0`.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a barrier has no memory-safety preconditions.
    unsafe { nvptx::_syncthreads() }
}

/// `__threadfence()`: `fence.acq_rel.gpu`, ordering this thread's global accesses before it
/// with those after it for every thread of the GPU.
#[inline(always)]
pub fn fence_acq_rel_gpu() {
    // SAFETY: a fence has no memory-safety preconditions; without `nomem` the asm is a
    // compiler barrier for memory too.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) };
}

/// `__syncwarp(mask)`: `bar.warp.sync`.
#[inline(always)]
pub fn sync_warp(mask: u32) {
    // SAFETY: a warp barrier has no memory-safety preconditions.
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack)) };
}

macro_rules! shuffles {
    ($($name:ident, $fname:ident => $mode:literal, $clamp:literal, $what:literal;)*) => {$(
        #[doc = $what]
        #[inline(always)]
        pub fn $name(mask: u32, value: u32, b: u32) -> u32 {
            let out: u32;
            // SAFETY: a warp shuffle has no memory-safety preconditions.
            unsafe {
                asm!(
                    concat!("shfl.sync.", $mode, ".b32 {d}, {v}, {b}, ", $clamp, ", {m};"),
                    d = out(reg32) out,
                    v = in(reg32) value,
                    b = in(reg32) b,
                    m = in(reg32) mask,
                    options(nostack),
                )
            };
            out
        }

        #[doc = $what]
        #[inline(always)]
        pub fn $fname(mask: u32, value: f32, b: u32) -> f32 {
            f32::from_bits($name(mask, value.to_bits(), b))
        }
    )*};
}

shuffles! {
    shfl_idx_u32, shfl_idx_f32 => "idx", "31", "`__shfl_sync`: the value of lane `src_lane % 32`.";
    shfl_up_u32, shfl_up_f32 => "up", "0", "`__shfl_up_sync`: lanes below `delta` keep their own.";
    shfl_down_u32, shfl_down_f32 => "down", "31", "`__shfl_down_sync`: lanes past 31 keep their own.";
    shfl_xor_u32, shfl_xor_f32 => "bfly", "31", "`__shfl_xor_sync`: the value of lane `lane ^ lane_mask`.";
}

macro_rules! votes {
    ($($name:ident => $mode:literal, $what:literal;)*) => {$(
        #[doc = $what]
        #[inline(always)]
        pub fn $name(mask: u32, pred: bool) -> bool {
            let out: u32;
            // SAFETY: a vote has no memory-safety preconditions.
            unsafe {
                asm!(
                    "{{",
                    ".reg .pred %vp_in, %vp_out;",
                    "setp.ne.u32 %vp_in, {p}, 0;",
                    concat!("vote.sync.", $mode, ".pred %vp_out, %vp_in, {m};"),
                    "selp.u32 {d}, 1, 0, %vp_out;",
                    "}}",
                    d = out(reg32) out,
                    p = in(reg32) u32::from(pred),
                    m = in(reg32) mask,
                    options(nostack),
                )
            };
            out != 0
        }
    )*};
}

votes! {
    vote_all => "all", "`__all_sync`: whether `pred` holds on every lane in `mask`.";
    vote_any => "any", "`__any_sync`: whether `pred` holds on some lane in `mask`.";
}

/// `__ballot_sync`: bit `l` set when lane `l` is in `mask` and its `pred` holds.
#[inline(always)]
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    let out: u32;
    // SAFETY: a vote has no memory-safety preconditions.
    unsafe {
        asm!(
            "{{",
            ".reg .pred %vp_in;",
            "setp.ne.u32 %vp_in, {p}, 0;",
            "vote.sync.ballot.b32 {d}, %vp_in, {m};",
            "}}",
            d = out(reg32) out,
            p = in(reg32) u32::from(pred),
            m = in(reg32) mask,
            options(nostack),
        )
    };
    out
}

/// An array of `len` elements of `T` in the block's shared memory, by its `.shared` address.
/// `T` must be plain data for which every bit pattern is a value (integers, floats, arrays of
/// them).
pub struct Shared<T: Copy> {
    addr: u32,
    len: u32,
    _element: PhantomData<T>,
}

impl<T: Copy> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Copy> Copy for Shared<T> {}

impl<T: Copy> Shared<T> {
    #[doc(hidden)]
    #[inline(always)]
    pub fn from_shared_address(addr: u32, len: usize) -> Self {
        Shared { addr, len: len as u32, _element: PhantomData }
    }

    /// Number of elements.
    #[inline(always)]
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// Whether the array has no elements.
    #[inline(always)]
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The `len` elements from `start`, as an array of their own (not checked on the GPU).
    #[inline(always)]
    pub fn sub(self, start: usize, len: usize) -> Shared<T> {
        Shared::from_shared_address(self.address_of(start), len)
    }

    /// The same bytes as elements of `U` (alignment and size are checked on the host).
    #[inline(always)]
    pub fn cast<U: Copy>(self) -> Shared<U> {
        Shared::from_shared_address(self.addr, self.len as usize * size_of::<T>() / size_of::<U>())
    }

    /// The `.shared` byte address of element `i` (what `wgmma` matrix descriptors hold).
    #[inline(always)]
    pub fn shared_address(self, i: usize) -> u32 {
        self.address_of(i)
    }

    #[inline(always)]
    pub(crate) fn address_of(self, i: usize) -> u32 {
        self.addr + (i * size_of::<T>()) as u32
    }

    /// Reads element `i` (`ld.shared`; not bounds-checked on the GPU).
    #[inline(always)]
    pub fn load(self, i: usize) -> T {
        let a = self.address_of(i);
        // SAFETY (all arms): `a` is a shared-window address inside the array when `i` is in
        // range, which the emulator checks for every kernel that runs there; transmute_copy
        // reinterprets a register of exactly size_of::<T>() bytes.
        unsafe {
            match size_of::<T>() {
                2 => {
                    let v: u16;
                    asm!("ld.shared.b16 {v}, [{a}];", v = out(reg16) v, a = in(reg32) a, options(nostack, readonly));
                    transmute_copy(&v)
                }
                4 => {
                    let v: u32;
                    asm!("ld.shared.b32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a, options(nostack, readonly));
                    transmute_copy(&v)
                }
                8 => {
                    let v: u64;
                    asm!("ld.shared.b64 {v}, [{a}];", v = out(reg64) v, a = in(reg32) a, options(nostack, readonly));
                    transmute_copy(&v)
                }
                16 => {
                    let (x, y, z, w): (u32, u32, u32, u32);
                    asm!(
                        "ld.shared.v4.b32 {{{x}, {y}, {z}, {w}}}, [{a}];",
                        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                        a = in(reg32) a, options(nostack, readonly),
                    );
                    transmute_copy(&[x, y, z, w])
                }
                _ => generic_pointer::<T>(a).read(),
            }
        }
    }

    /// Writes element `i` (`st.shared`; not bounds-checked on the GPU).
    #[inline(always)]
    pub fn store(self, i: usize, value: T) {
        let a = self.address_of(i);
        // SAFETY: as in `load`.
        unsafe {
            match size_of::<T>() {
                2 => {
                    let v: u16 = transmute_copy(&value);
                    asm!("st.shared.b16 [{a}], {v};", v = in(reg16) v, a = in(reg32) a, options(nostack));
                }
                4 => {
                    let v: u32 = transmute_copy(&value);
                    asm!("st.shared.b32 [{a}], {v};", v = in(reg32) v, a = in(reg32) a, options(nostack));
                }
                8 => {
                    let v: u64 = transmute_copy(&value);
                    asm!("st.shared.b64 [{a}], {v};", v = in(reg64) v, a = in(reg32) a, options(nostack));
                }
                16 => {
                    let [x, y, z, w]: [u32; 4] = transmute_copy(&value);
                    asm!(
                        "st.shared.v4.b32 [{a}], {{{x}, {y}, {z}, {w}}};",
                        x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, w = in(reg32) w,
                        a = in(reg32) a, options(nostack),
                    );
                }
                _ => generic_pointer::<T>(a).write(value),
            }
        }
    }
}

impl Shared<f32> {
    /// Atomically adds `value` to element `i` (`atom.shared.add.f32`); returns the previous value.
    #[inline(always)]
    pub fn atomic_add(self, i: usize, value: f32) -> f32 {
        let a = self.address_of(i);
        let old: f32;
        // SAFETY: as in `load`.
        unsafe {
            asm!(
                "atom.shared.add.f32 {old}, [{a}], {v};",
                old = out(reg32) old, a = in(reg32) a, v = in(reg32) value, options(nostack),
            )
        };
        old
    }
}

/// Generic pointer to a `.shared` address, for element sizes without a dedicated ld/st.
#[inline(always)]
unsafe fn generic_pointer<T>(shared_addr: u32) -> *mut T {
    let p: u64;
    // SAFETY: address conversion only.
    unsafe {
        asm!(
            "cvta.shared.u64 {p}, {a};",
            p = out(reg64) p, a = in(reg64) u64::from(shared_addr), options(pure, nomem, nostack),
        )
    };
    p as *mut T
}

/// A window of `len` elements of `T` at `byte_offset` into the launch's dynamic shared memory.
///
/// # Safety
///
/// The window must lie within the launch's dynamic shared memory, `byte_offset` must be
/// aligned for `T`, and overlapping windows of different types must not be used between the
/// same two barriers.
#[inline(always)]
pub unsafe fn dynamic_shared<T: Copy>(byte_offset: usize, len: usize) -> Shared<T> {
    let base: u32;
    // SAFETY: takes the address of the dynamic shared window.
    unsafe { asm!("mov.u32 {b}, trident_dynamic_smem;", b = out(reg32) base, options(pure, nomem, nostack)) };
    Shared::from_shared_address(base + byte_offset as u32, len)
}

#[doc(hidden)]
pub const fn static_shared_symbol(key: &str) -> u64 {
    // FNV-1a: a stable id for each declaration, to name its `.shared` symbol.
    let bytes = key.as_bytes();
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// A per-block shared array `$name` of `$len` elements of `$ty`, as a [`Shared`] handle.
/// `$ty` and `$len` must not depend on generic parameters (they size a module-level
/// `.shared` declaration).
#[macro_export]
macro_rules! static_shared {
    ($name:ident, $ty:ty, $len:expr) => {{
        const SYMBOL: u64 = $crate::simt::static_shared_symbol(concat!(
            module_path!(), "::", stringify!($name), "@", line!(), ":", column!()
        ));
        const BYTES: usize = ($len) * ::core::mem::size_of::<$ty>();
        ::core::arch::global_asm!(
            ".shared .align 16 .b8 trident_smem_{symbol}[{bytes}];",
            symbol = const SYMBOL,
            bytes = const BYTES,
        );
        let addr: u32;
        // SAFETY: takes the address of the array declared above.
        unsafe {
            ::core::arch::asm!(
                "mov.u32 {a}, trident_smem_{symbol};",
                a = out(reg32) addr,
                symbol = const SYMBOL,
                options(pure, nomem, nostack),
            )
        };
        $crate::simt::Shared::<$ty>::from_shared_address(addr, $len)
    }};
}

macro_rules! unary_fns {
    ($($name:ident => $instr:literal, $what:literal;)*) => {$(
        #[doc = $what]
        #[inline(always)]
        pub fn $name(x: f32) -> f32 {
            let y: f32;
            // SAFETY: arithmetic only.
            unsafe {
                asm!(concat!($instr, " {y}, {x};"), y = out(reg32) y, x = in(reg32) x, options(pure, nomem, nostack))
            };
            y
        }
    )*};
}

unary_fns! {
    log2 => "lg2.approx.ftz.f32", "`log2(x)` (`lg2.approx.ftz.f32`).";
    tanh => "tanh.approx.f32", "`tanh(x)` (`tanh.approx.f32`, sm_75+).";
    rsqrt => "rsqrt.approx.ftz.f32", "`1 / sqrt(x)` (`rsqrt.approx.ftz.f32`).";
    sqrt => "sqrt.rn.f32", "Correctly rounded square root (`sqrt.rn.f32`).";
    exp2 => "ex2.approx.ftz.f32", "`2^x` (`ex2.approx.ftz.f32`).";
}

/// `a * b + c` rounded once (`fma.rn.f32`).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    let d: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!(
            "fma.rn.f32 {d}, {a}, {b}, {c};",
            d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
            options(pure, nomem, nostack),
        )
    };
    d
}

/// Larger of `a` and `b`; a NaN operand yields the other one (`max.f32`).
#[inline(always)]
pub fn fmax(a: f32, b: f32) -> f32 {
    let d: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("max.f32 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
    };
    d
}

/// Smaller of `a` and `b`; a NaN operand yields the other one (`min.f32`).
#[inline(always)]
pub fn fmin(a: f32, b: f32) -> f32 {
    let d: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("min.f32 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, options(pure, nomem, nostack))
    };
    d
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: D = A x B + C in the PTX ISA fragment
/// layouts. All 32 lanes of the warp must execute it together.
#[inline(always)]
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut d = [0f32; 4];
    // SAFETY: register-only warp-collective instruction; all lanes execute it together.
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \
             {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
             {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3],
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b[0], b1 = in(reg32) b[1],
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            // Not `pure`: a warp collective must not be moved into divergent code or dropped.
            options(nomem, nostack),
        )
    };
    d
}

macro_rules! ldmatrix_fns {
    ($($name:ident => $shape:literal, $n:tt, $what:literal;)*) => {$(
        #[doc = $what]
        #[inline(always)]
        pub fn $name(s: Shared<u16>, elem_offset: usize) -> [u32; $n] {
            let a = s.address_of(elem_offset);
            let mut r = [0u32; $n];
            ldmatrix_asm!($shape, $n, a, r);
            r
        }
    )*};
}

macro_rules! ldmatrix_asm {
    ($shape:literal, 4, $a:ident, $r:ident) => {
        // SAFETY: reads four 8x8 b16 matrices at shared addresses the lanes provide.
        unsafe {
            asm!(
                concat!("ldmatrix.sync.aligned.m8n8.", $shape, ".shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];"),
                r0 = out(reg32) $r[0], r1 = out(reg32) $r[1], r2 = out(reg32) $r[2], r3 = out(reg32) $r[3],
                a = in(reg32) $a, options(nostack, readonly),
            )
        }
    };
    ($shape:literal, 2, $a:ident, $r:ident) => {
        // SAFETY: reads two 8x8 b16 matrices at shared addresses the lanes provide.
        unsafe {
            asm!(
                concat!("ldmatrix.sync.aligned.m8n8.", $shape, ".shared.b16 {{{r0}, {r1}}}, [{a}];"),
                r0 = out(reg32) $r[0], r1 = out(reg32) $r[1],
                a = in(reg32) $a, options(nostack, readonly),
            )
        }
    };
    ($shape:literal, 1, $a:ident, $r:ident) => {
        // SAFETY: reads one 8x8 b16 matrix at shared addresses the lanes provide.
        unsafe {
            asm!(
                concat!("ldmatrix.sync.aligned.m8n8.", $shape, ".shared.b16 {{{r0}}}, [{a}];"),
                r0 = out(reg32) $r[0],
                a = in(reg32) $a, options(nostack, readonly),
            )
        }
    };
}

ldmatrix_fns! {
    ldmatrix_x4 => "x4", 4, "`ldmatrix...x4.shared.b16`: lanes 8i..8i+7 give rows 0..7 of matrix i.";
    ldmatrix_x2 => "x2", 2, "`ldmatrix...x2.shared.b16`: lanes 0..15 give the row offsets.";
    ldmatrix_x4_trans => "x4.trans", 4, "`ldmatrix...x4.trans.shared.b16`.";
    ldmatrix_x2_trans => "x2.trans", 2, "`ldmatrix...x2.trans.shared.b16`.";
}

/// `ldmatrix...x1.shared.b16`: lanes 0..7 give the row offsets.
#[inline(always)]
pub fn ldmatrix_x1(s: Shared<u16>, elem_offset: usize) -> u32 {
    let a = s.address_of(elem_offset);
    let mut r = [0u32; 1];
    ldmatrix_asm!("x1", 1, a, r);
    r[0]
}

/// `ldmatrix...x1.trans.shared.b16`.
#[inline(always)]
pub fn ldmatrix_x1_trans(s: Shared<u16>, elem_offset: usize) -> u32 {
    let a = s.address_of(elem_offset);
    let mut r = [0u32; 1];
    ldmatrix_asm!("x1.trans", 1, a, r);
    r[0]
}

/// `cp.async.cg.shared.global` of 16 bytes from global `src` to element `dst_index` of `dst`
/// (both 16-byte aligned); the bytes land at the `cp_async_wait_*` covering its group.
///
/// # Safety
///
/// `src` must be valid for reading 16 bytes.
#[inline(always)]
pub unsafe fn cp_async_16<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>) {
    // SAFETY: the caller guarantees `src`; the destination is in the block's shared memory.
    unsafe {
        asm!(
            "{{",
            ".reg .u64 %ga;",
            "cvta.to.global.u64 %ga, {s};",
            "cp.async.cg.shared.global [{d}], [%ga], 16;",
            "}}",
            d = in(reg32) dst.address_of(dst_index),
            s = in(reg64) src.as_ptr(),
            options(nostack),
        )
    };
}

/// [`cp_async_16`] reading only the first `src_bytes` (at most 16) bytes and zeroing the rest.
///
/// # Safety
///
/// `src` must be valid for reading `src_bytes` bytes.
#[inline(always)]
pub unsafe fn cp_async_16_zfill<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>, src_bytes: u32) {
    // SAFETY: as in `cp_async_16`.
    unsafe {
        asm!(
            "{{",
            ".reg .u64 %ga;",
            "cvta.to.global.u64 %ga, {s};",
            "cp.async.cg.shared.global [{d}], [%ga], 16, {n};",
            "}}",
            d = in(reg32) dst.address_of(dst_index),
            s = in(reg64) src.as_ptr(),
            n = in(reg32) src_bytes,
            options(nostack),
        )
    };
}

macro_rules! cp_async_ca {
    ($($name:ident => $bytes:literal;)*) => {$(
        #[doc = concat!("`cp.async.ca.shared.global` of ", $bytes, " bytes; see [`cp_async_16`].")]
        ///
        /// # Safety
        ///
        #[doc = concat!("`src` must be valid for reading ", $bytes, " bytes.")]
        #[inline(always)]
        pub unsafe fn $name<T: Copy>(dst: Shared<T>, dst_index: usize, src: Global<T>) {
            // SAFETY: as in `cp_async_16`.
            unsafe {
                asm!(
                    "{{",
                    ".reg .u64 %ga;",
                    "cvta.to.global.u64 %ga, {s};",
                    concat!("cp.async.ca.shared.global [{d}], [%ga], ", $bytes, ";"),
                    "}}",
                    d = in(reg32) dst.address_of(dst_index),
                    s = in(reg64) src.as_ptr(),
                    options(nostack),
                )
            };
        }
    )*};
}

cp_async_ca! {
    cp_async_4 => "4";
    cp_async_8 => "8";
}

/// `cp.async.commit_group`.
#[inline(always)]
pub fn cp_async_commit_group() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// `cp.async.wait_group N`: waits until at most `N` committed groups are in flight.
#[inline(always)]
pub fn cp_async_wait_group<const N: u32>() {
    // SAFETY: no operands besides the immediate.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}

/// `cp.async.wait_all`.
#[inline(always)]
pub fn cp_async_wait_all() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.wait_all;", options(nostack)) };
}

// Tensor-core GEMM support (kept together at the end of the file).

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: [`mma_m16n8k16_bf16`] with IEEE
/// half-precision A and B, in the same fragment layouts. All 32 lanes of the warp must execute
/// it together.
#[inline(always)]
pub fn mma_m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let mut d = [0f32; 4];
    // SAFETY: register-only warp-collective instruction; all lanes execute it together.
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
             {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
             {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d[0], d1 = out(reg32) d[1], d2 = out(reg32) d[2], d3 = out(reg32) d[3],
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b[0], b1 = in(reg32) b[1],
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            // Not `pure`: a warp collective must not be moved into divergent code or dropped.
            options(nomem, nostack),
        )
    };
    d
}
