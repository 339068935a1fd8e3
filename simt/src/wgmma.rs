//! `wgmma.mma_async` (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
//! Instructions") with A and B in shared memory through matrix descriptors ("Matrix Descriptor
//! Format"), its groups, and the accumulator checks.
//!
//! What is emulated: `wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}` with both operands
//! K-major from descriptors (no transpose), N a multiple of 8 from 8 to 256, scale-d, and
//! `wgmma.fence` / `commit_group` / `wait_group`. The four warps of a warpgroup (128 threads,
//! starting at a multiple of 128) must all execute it from one call site with the same
//! operands; the last to arrive computes `D = A x B^T (+ D)`, the exact products summed in
//! f64 and rounded once (the hardware accumulates in f32 in an unspecified order), and writes
//! every thread's accumulator in the D fragment layout: thread `t` of the warpgroup, warp
//! `w = t / 32`, lane `l`, holds for each 8-column block `j` the registers
//! `d[4j..4j+4] = D(r, c), D(r, c+1), D(r+8, c), D(r+8, c+1)` with `r = 16w + l/4`,
//! `c = 8j + 2(l%4)`.
//!
//! Operand element (row, k) (row < 64 for A, < N for B; k < 16) is at shared address
//! `start + (row/8)*SBO + (k/8)*LBO + (row%8)*16 + (k%8)*2` without swizzle (8 x 16-byte core
//! matrices), and at `swizzle(start + (row/8)*SBO + (row%8)*span + 2k)` with a 32/64/128-byte
//! swizzle of span `span` ([`crate::Swizzle::apply`], the TMA's permutation, so a tile a TMA
//! load wrote with the same swizzle reads back in place; the leading byte offset is unused
//! there). A base offset other than 0 is refused (not modelled). The operand bytes are read
//! through the async proxy: a generic write not covered by the writer's `fence.proxy.async`
//! (ordered before the `wgmma`) is the async-proxy race, a TMA destination not yet observed
//! is refused.
//!
//! Checks: a `wgmma.mma_async` without a `wgmma.fence` of the thread since it last wrote an
//! accumulator; reading or writing an accumulator ([`crate::device::wgmma_accumulator_access`])
//! whose `mma_async` is in a group not yet retired by `wgmma.wait_group` (or not committed);
//! a warpgroup member missing, at another call site or with other operands.
//!
//! A descriptor is 64 bits:
//!
//! | bits  | field                                                     |
//! |-------|-----------------------------------------------------------|
//! | 0-13  | start address, `(address & 0x3FFFF) >> 4`                  |
//! | 16-29 | leading dimension byte offset `>> 4`                        |
//! | 32-45 | stride dimension byte offset `>> 4`                         |
//! | 49-51 | matrix base offset (for swizzled tiles not at a pattern boundary) |
//! | 62-63 | swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte          |
//!
//! [`MatrixDescriptor`] encodes and decodes it; decoding checks the reserved bits are zero.
//!
//! # Not modelled yet (next steps)
//!
//! - A from registers (`wgmma.mma_async` with an A fragment instead of a descriptor), the
//!   MN-major layouts (the transpose immediates), a nonzero base offset, `.f16` accumulators
//!   and the other input types (tf32, e4m3/e5m2, integer): each is refused or absent.
//! - Counters: each `mma_async` counts one [`Class::Wgmma`] per thread (one warp instruction
//!   per warp) and its `64 x N x 16` multiply-adds once per warpgroup
//!   ([`crate::LaunchStats::wgmma_macs`]); the operand bytes read through descriptors are not
//!   yet counted, and the time model has no wgmma pipe yet.
//! - `setmaxnreg` (`trident_kernels::simt::setmaxnreg_inc`/`_dec`) only has its operand
//!   checked, at compile time: registers are not modelled. `stmatrix` and clusters (`mapa`,
//!   `barrier.cluster`, multicast TMA) are not emulated.

use crate::block::{BlockInner, BlockState, Status};
use crate::context::{self, fail, fail_with, suspend};
use crate::error::{Access, AccessKind, EmuError, Fault, Site};
use crate::fragments::{bf16_to_f32, f16_to_f32};
use crate::shared::race_error;
use crate::stats::Class;
use crate::tensor_map::Swizzle;
use crate::warp::MmaInput;

/// Threads per warpgroup.
const WARPGROUP: u32 = 128;

/// One thread's `wgmma` state.
#[derive(Default)]
pub(crate) struct ThreadWgmma {
    /// Whether a `wgmma.fence` ran since the thread last wrote an accumulator.
    fenced: bool,
    committed: u32,
    /// Accumulators in flight: (address, group, the `mma_async` site).
    in_flight: Vec<(usize, u32, Site)>,
}

/// A `wgmma.mma_async` some threads of a warpgroup have reached.
pub(crate) struct WarpgroupPending {
    group: u32,
    site: Site,
    operands: (MmaInput, u32, u64, u64, bool),
    arrived: u128,
    acc: Vec<usize>,
}

/// The error for a warpgroup collective some member never reaches.
pub(crate) fn stalled(block: &BlockState, inner: &BlockInner) -> Option<EmuError> {
    let p = inner.warpgroups.first()?;
    let base = p.group * WARPGROUP;
    let waiter = base + p.arrived.trailing_zeros();
    let missing = base + (!p.arrived).trailing_zeros();
    let state = match inner.threads[missing as usize].status {
        Status::Exited => "has exited".to_string(),
        Status::AtBarrier(site) => format!("waits at the barrier at {site}"),
        other => format!("is {other:?}"),
    };
    let detail = format!(
        "wgmma.mma_async waits for warpgroup member thread {}, which {state}: every thread of the \
         warpgroup must execute it (.sync.aligned)",
        block.dim3(missing)
    );
    Some(block.error_at(waiter, Fault::Wgmma { site: p.site, detail }))
}

fn wgmma_fault(block: &BlockState, thread: u32, site: Site, detail: String) -> ! {
    fail(block, thread, Fault::Wgmma { site, detail })
}

/// `wgmma.fence.sync.aligned`.
pub(crate) fn fence() {
    let (block, thread) = context::current();
    block.inner.borrow_mut().threads[thread as usize].wgmma.fenced = true;
}

/// `wgmma.commit_group.sync.aligned`.
pub(crate) fn commit_group() {
    let (block, thread) = context::current();
    block.inner.borrow_mut().threads[thread as usize].wgmma.committed += 1;
}

/// `wgmma.wait_group.sync.aligned n`: retires every committed group but the `n` most recent.
pub(crate) fn wait_group(n: u32) {
    let (block, thread) = context::current();
    let mut inner = block.inner.borrow_mut();
    let w = &mut inner.threads[thread as usize].wgmma;
    let limit = w.committed.saturating_sub(n);
    w.in_flight.retain(|&(_, group, _)| group >= limit);
}

/// Checks a read or write of the accumulator at `acc` by the running thread.
pub(crate) fn accumulator_access(acc: *const f32, write: bool, site: Site) {
    let (block, thread) = context::current();
    let mut inner = block.inner.borrow_mut();
    let w = &mut inner.threads[thread as usize].wgmma;
    if let Some(&(_, group, issued)) = w.in_flight.iter().find(|e| e.0 == acc as usize) {
        let state =
            if group >= w.committed { "not yet committed (wgmma.commit_group)" } else { "not yet retired" };
        let detail = format!(
            "{} of a wgmma accumulator while the wgmma.mma_async at {issued} that writes it is in \
             group {group}, {state}: wait for it first (wgmma.wait_group)",
            if write { "write" } else { "read" }
        );
        let error = block.error_at(thread, Fault::Wgmma { site, detail });
        drop(inner);
        fail_with(block, thread, error);
    }
    if write {
        w.fenced = false;
    }
}

/// The shared address of operand element (row, k) under descriptor `d`.
fn operand_address(d: &MatrixDescriptor, row: u32, k: u32) -> u32 {
    let sbo = (row / 8) * d.stride_byte_offset;
    match d.swizzle.span() {
        None => d.start_address + sbo + (k / 8) * d.leading_byte_offset + (row % 8) * 16 + (k % 8) * 2,
        Some(span) => d.swizzle.apply(d.start_address + sbo + (row % 8) * span + 2 * k),
    }
}

/// Reads a `rows` x 16 K-major operand through descriptor `d` (async proxy, as `thread`).
fn read_operand(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    d: &MatrixDescriptor,
    rows: u32,
    input: MmaInput,
    site: Site,
) -> Result<Vec<[f64; 16]>, EmuError> {
    let used = inner.smem.used_bytes();
    let mut out = vec![[0f64; 16]; rows as usize];
    for row in 0..rows {
        for chunk in 0..2 {
            let at = operand_address(d, row, 8 * chunk);
            if at % 16 != 0 || at + 16 > used {
                let detail = format!(
                    "the descriptor's row {row}, k {} is at shared byte {at}, {} (the block uses {used} bytes)",
                    8 * chunk,
                    if at % 16 != 0 { "not 16-byte aligned" } else { "out of range" }
                );
                return Err(block.error_at(thread, Fault::Wgmma { site, detail }));
            }
            inner.smem.track(at, 16, AccessKind::WgmmaRead, thread, site).map_err(|c| {
                let later = Access { kind: AccessKind::WgmmaRead, thread: block.dim3(thread), site };
                race_error(block, inner, c, later, thread)
            })?;
            let bits: [u16; 8] = inner.smem.read(at);
            for (i, &b) in bits.iter().enumerate() {
                out[row as usize][8 * chunk as usize + i] = f64::from(match input {
                    MmaInput::Bf16 => bf16_to_f32(b),
                    MmaInput::F16 => f16_to_f32(b),
                });
            }
        }
    }
    Ok(out)
}

/// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{input}.{input}` with the running thread's
/// accumulator of `n / 2` f32 at `acc` (see the module documentation).
///
/// # Safety
///
/// `acc` must be valid for reading and writing `n / 2` f32 until this returns.
pub(crate) unsafe fn mma_async(
    input: MmaInput,
    n: u32,
    desc_a: u64,
    desc_b: u64,
    scale_d: bool,
    acc: *mut f32,
    site: Site,
) {
    let (block, thread) = context::current();
    block.count(thread, Class::Wgmma);
    let group = thread / WARPGROUP;
    if block.threads < (group + 1) * WARPGROUP {
        let detail = format!("thread {thread} is in warpgroup {group}, which the block of {} threads does not fill: wgmma needs whole warpgroups of 128 threads", block.threads);
        wgmma_fault(block, thread, site, detail);
    }
    if n % 8 != 0 || !(8..=256).contains(&n) {
        wgmma_fault(block, thread, site, format!("m64n{n}k16: N must be a multiple of 8 from 8 to 256"));
    }
    let operands = (input, n, desc_a, desc_b, scale_d);
    let fault = |detail: String| block.error_at(thread, Fault::Wgmma { site, detail });
    // Ok(None): wait for the other members; Ok(Some(())): this thread completed it.
    let result: Result<Option<()>, EmuError> = {
        let mut inner = block.inner.borrow_mut();
        let inner = &mut *inner;
        let w = &mut inner.threads[thread as usize].wgmma;
        let index = inner.warpgroups.iter().position(|p| p.group == group);
        if !w.fenced {
            Err(fault(
                "wgmma.mma_async without a wgmma.fence since this thread last wrote the accumulator \
                 registers (PTX ISA: wgmma.fence must order register accesses before wgmma.mma_async)"
                    .to_string(),
            ))
        } else if let Some(p) =
            index.map(|i| &inner.warpgroups[i]).filter(|p| p.site != site || p.operands != operands)
        {
            Err(fault(format!(
                "this thread reaches wgmma.mma_async {operands:?} here while members of its warpgroup \
                 wait at {} with {:?}: .aligned needs one instruction with one set of operands",
                p.site, p.operands
            )))
        } else {
            w.in_flight.push((acc as usize, w.committed, site));
            let index = index.unwrap_or_else(|| {
                let acc = vec![0; WARPGROUP as usize];
                inner.warpgroups.push(WarpgroupPending { group, site, operands, arrived: 0, acc });
                inner.warpgroups.len() - 1
            });
            let p = &mut inner.warpgroups[index];
            let lane = thread % WARPGROUP;
            p.acc[lane as usize] = acc as usize;
            p.arrived |= 1u128 << lane;
            if p.arrived != u128::MAX {
                inner.threads[thread as usize].status = Status::InCollective;
                Ok(None)
            } else {
                let p = inner.warpgroups.swap_remove(index);
                complete(block, inner, thread, &p).map(Some)
            }
        }
    };
    match result {
        Ok(None) => suspend(block, thread),
        Ok(Some(())) => {}
        Err(error) => fail_with(block, thread, error),
    }
}

/// Computes the warpgroup's product and writes every member's accumulator.
fn complete(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    p: &WarpgroupPending,
) -> Result<(), EmuError> {
    let (input, n, desc_a, desc_b, scale_d) = p.operands;
    let site = p.site;
    let decode = |word: u64, which: &str| {
        let d = MatrixDescriptor::decode(word).map_err(|f| block.error_at(thread, f))?;
        if d.base_offset != 0 {
            let detail = format!(
                "{which} descriptor has base offset {}, which the emulator does not model",
                d.base_offset
            );
            return Err(block.error_at(thread, Fault::Wgmma { site, detail }));
        }
        Ok(d)
    };
    let (da, db) = (decode(desc_a, "the A")?, decode(desc_b, "the B")?);
    let a = read_operand(block, inner, thread, &da, 64, input, site)?;
    let b = read_operand(block, inner, thread, &db, n, input, site)?;
    inner.log.counts.wgmma_macs += u64::from(64 * n * 16);
    let base = p.group * WARPGROUP;
    for t in 0..WARPGROUP {
        let (warp, lane) = (t / 32, t % 32);
        // SAFETY: each member is suspended inside `mma_async`, whose caller guarantees its
        // accumulator of n / 2 f32 stays valid until the call returns.
        let acc = unsafe { std::slice::from_raw_parts_mut(p.acc[t as usize] as *mut f32, (n / 2) as usize) };
        for j in 0..n / 8 {
            for (v, value) in acc[4 * j as usize..4 * j as usize + 4].iter_mut().enumerate() {
                let v = v as u32;
                let row = 16 * warp + lane / 4 + 8 * (v / 2);
                let col = 8 * j + 2 * (lane % 4) + v % 2;
                let dot: f64 = (0..16).map(|k| a[row as usize][k] * b[col as usize][k]).sum();
                let c = if scale_d { f64::from(*value) } else { 0.0 };
                *value = (dot + c) as f32;
            }
        }
        inner.threads[(base + t) as usize].status = Status::Runnable;
    }
    Ok(())
}

/// The fields of a `wgmma` shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixDescriptor {
    /// Shared-memory byte address of the matrix (a multiple of 16, below 2^18).
    pub start_address: u32,
    /// Leading dimension byte offset (a multiple of 16, below 2^18).
    pub leading_byte_offset: u32,
    /// Stride dimension byte offset (a multiple of 16, below 2^18).
    pub stride_byte_offset: u32,
    /// Matrix base offset (0 to 7).
    pub base_offset: u8,
    /// Swizzle mode.
    pub swizzle: Swizzle,
}

impl MatrixDescriptor {
    /// The 64-bit descriptor; fails naming the field that does not fit.
    pub fn encode(&self) -> Result<u64, Fault> {
        let field = |name: &str, v: u32| {
            if v % 16 != 0 || v >= 1 << 18 {
                Err(Fault::TensorMap {
                    detail: format!("matrix descriptor {name} {v} is not a multiple of 16 below 2^18"),
                })
            } else {
                Ok(u64::from(v >> 4))
            }
        };
        if self.base_offset > 7 {
            let detail = format!("matrix descriptor base offset {} is not 0 to 7", self.base_offset);
            return Err(Fault::TensorMap { detail });
        }
        let swizzle: u64 = match self.swizzle {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        };
        Ok(field("start address", self.start_address)?
            | field("leading byte offset", self.leading_byte_offset)? << 16
            | field("stride byte offset", self.stride_byte_offset)? << 32
            | u64::from(self.base_offset) << 49
            | swizzle << 62)
    }

    /// The fields of `word`; fails when a reserved bit is set.
    pub fn decode(word: u64) -> Result<MatrixDescriptor, Fault> {
        const USED: u64 = 0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 0x7 << 49 | 0x3 << 62;
        if word & !USED != 0 {
            let detail = format!("matrix descriptor {word:#018x} sets reserved bits {:#018x}", word & !USED);
            return Err(Fault::TensorMap { detail });
        }
        let field = |shift: u32| ((word >> shift) & 0x3FFF) as u32 * 16;
        let swizzle = match word >> 62 {
            0 => Swizzle::None,
            1 => Swizzle::B128,
            2 => Swizzle::B64,
            _ => Swizzle::B32,
        };
        Ok(MatrixDescriptor {
            start_address: field(0),
            leading_byte_offset: field(16),
            stride_byte_offset: field(32),
            base_offset: ((word >> 49) & 7) as u8,
            swizzle,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_round_trip_with_the_fields_at_their_bits() {
        let d = MatrixDescriptor {
            start_address: 0x1_2340,
            leading_byte_offset: 16,
            stride_byte_offset: 1024,
            base_offset: 3,
            swizzle: Swizzle::B128,
        };
        let word = d.encode().unwrap();
        assert_eq!(word & 0x3FFF, 0x1234);
        assert_eq!((word >> 16) & 0x3FFF, 1);
        assert_eq!((word >> 32) & 0x3FFF, 64);
        assert_eq!((word >> 49) & 7, 3);
        assert_eq!(word >> 62, 1);
        assert_eq!(MatrixDescriptor::decode(word).unwrap(), d);
        for swizzle in [Swizzle::None, Swizzle::B32, Swizzle::B64] {
            let d = MatrixDescriptor { swizzle, ..d };
            assert_eq!(MatrixDescriptor::decode(d.encode().unwrap()).unwrap(), d);
        }
        let bad = MatrixDescriptor { stride_byte_offset: 1000, ..d };
        assert!(bad.encode().unwrap_err().to_string().contains("stride byte offset 1000"));
        assert!(MatrixDescriptor::decode(1 << 14).unwrap_err().to_string().contains("reserved"));
    }
}
