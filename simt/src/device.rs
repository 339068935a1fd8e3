//! Host implementations of the device-side operations kernels call through
//! `trident_kernels::simt`. Each reaches the running emulated thread through the scheduler's
//! thread-local context.

use crate::block::Status;
use crate::context::{self, fail, fail_with, suspend};
use crate::error::{Access, AccessKind, Fault, Site};
use crate::global::{Owner, Problem};
use crate::peer_order::{self, Agent, FlagSide};
use crate::shared::{self, Shared};
use crate::stats::{Class, MemOp};
use crate::tensor_map::TensorMap;
use crate::warp::{self, Arrival, Op};

pub use crate::flags::{
    global_load_acquire_u32, global_load_volatile_u32, global_store_release_u32, global_store_volatile_u32,
    global_timer_ns,
};
pub use crate::peer_order::Scope;
pub use crate::warp::{MmaInput, ShflMode, VoteMode, FULL_MASK, POISON_WORD, WARP_SIZE};

/// `threadIdx` of the running thread.
pub fn thread_idx() -> [u32; 3] {
    let (block, thread) = context::current();
    block.thread_idx(thread)
}

/// Linear id of the running thread within its block (x fastest).
pub fn linear_thread_id() -> u32 {
    context::current().1
}

/// `blockIdx` of the running block.
pub fn block_idx() -> [u32; 3] {
    context::current().0.block_idx
}

/// `blockDim` of the launch.
pub fn block_dim() -> [u32; 3] {
    context::current().0.block_dim
}

/// `gridDim` of the launch.
pub fn grid_dim() -> [u32; 3] {
    context::current().0.grid_dim
}

/// `bar.sync 0` at `site`: waits until every thread of the block reaches the same barrier.
/// `bar.sync` is `barrier.sync.aligned` (PTX ISA, "barrier"): every thread must execute the same
/// barrier instruction, so threads waiting at different sites fail the block.
pub fn sync_threads(site: Site) {
    let (block, thread) = context::current();
    block.count(thread, Class::Barrier);
    block.inner.borrow_mut().threads[thread as usize].status = Status::AtBarrier(site);
    suspend(block, thread);
}

/// Runs warp collective `op`, returning this lane's result words.
fn collective(op: Op, mask: u32, site: Site, input: &[u32]) -> [u32; 4] {
    let (block, thread) = context::current();
    let class = match op {
        Op::Shfl(_) => Class::Shuffle,
        Op::Vote(_) => Class::Vote,
        Op::SyncWarp => Class::WarpSync,
        Op::Mma(_) => Class::Mma,
        Op::Ldmatrix { .. } => Class::Ldmatrix,
        Op::Elect => Class::Elect,
    };
    block.count(thread, class);
    let arrival = {
        let mut inner = block.inner.borrow_mut();
        warp::arrive(block, &mut inner, thread, op, mask, site, input)
    };
    match arrival {
        Ok(Arrival::Done(out)) => out,
        Ok(Arrival::Wait) => {
            suspend(block, thread);
            block.inner.borrow().threads[thread as usize].collective_out
        }
        Err(error) => fail_with(block, thread, error),
    }
}

/// `shfl.sync.{mode}.b32` with width 32: `b` is the source lane (idx), the delta (up, down)
/// or the lane mask (bfly). A source lane outside the member mask yields [`POISON_WORD`].
pub fn shfl(mode: ShflMode, mask: u32, value: u32, b: u32, site: Site) -> u32 {
    collective(Op::Shfl(mode), mask, site, &[value, b])[0]
}

/// `vote.sync.{mode}`: all/any return 0 or 1, ballot the bit mask of lanes whose predicate holds.
pub fn vote(mode: VoteMode, mask: u32, predicate: bool, site: Site) -> u32 {
    collective(Op::Vote(mode), mask, site, &[u32::from(predicate)])[0]
}

/// `elect.sync d|p, mask`: elects one leader among the lanes of `mask` (every one must execute
/// it, the running lane included) and returns `(leader lane, whether this lane is it)`. The
/// leader is the lowest lane of `mask` (see `warp.rs` for the rule and its PTX ISA section).
pub fn elect_sync(mask: u32, site: Site) -> (u32, bool) {
    let out = collective(Op::Elect, mask, site, &[]);
    (out[0], out[1] != 0)
}

/// `bar.warp.sync mask`: waits for the lanes in `mask`. When `mask` names every lane of the
/// warp, it also orders the lanes' shared-memory accesses for race tracking; a partial mask
/// does not (dependent accesses then need `sync_threads`).
pub fn sync_warp(mask: u32, site: Site) {
    collective(Op::SyncWarp, mask, site, &[]);
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (see [`crate::fragments`] for the
/// register layouts).
pub fn mma_m16n8k16_bf16(a: [u32; 4], b: [u32; 2], c: [f32; 4], site: Site) -> [f32; 4] {
    mma_m16n8k16(MmaInput::Bf16, a, b, c, site)
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: as [`mma_m16n8k16_bf16`] with IEEE
/// half-precision A and B.
pub fn mma_m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [f32; 4], site: Site) -> [f32; 4] {
    mma_m16n8k16(MmaInput::F16, a, b, c, site)
}

fn mma_m16n8k16(input_type: MmaInput, a: [u32; 4], b: [u32; 2], c: [f32; 4], site: Site) -> [f32; 4] {
    let mut input = [0u32; 10];
    input[..4].copy_from_slice(&a);
    input[4..6].copy_from_slice(&b);
    for (word, value) in input[6..].iter_mut().zip(c) {
        *word = value.to_bits();
    }
    collective(Op::Mma(input_type), warp::FULL_MASK, site, &input).map(f32::from_bits)
}

/// `ldmatrix.sync.aligned.m8n8.x{matrices}[.trans].shared.b16`: lane `8i + r` (for
/// `i < matrices`) gives the element offset within `s` of row r of matrix i; other lanes'
/// offsets are ignored.
pub fn ldmatrix(s: Shared<u16>, elem_offset: usize, matrices: u8, trans: bool, site: Site) -> [u32; 4] {
    assert!(matches!(matrices, 1 | 2 | 4), "ldmatrix loads 1, 2 or 4 matrices");
    let (block, thread) = context::current();
    let addresses_row = thread % WARP_SIZE < u32::from(matrices) * 8;
    let offset = if addresses_row { s.row_offset(block, thread, elem_offset, site) } else { 0 };
    collective(Op::Ldmatrix { matrices, trans }, warp::FULL_MASK, site, &[offset])
}

/// Checks a global access of `len` bytes at `addr` by the running thread and logs it; fails
/// the thread when it is out of range, misaligned or reads bytes never written.
pub(crate) fn global_access(addr: u64, len: u32, align: u32, op: MemOp, arg: u32, site: Site) {
    let class = match op {
        MemOp::Load => Class::GlobalLoad,
        MemOp::Store => Class::GlobalStore,
        MemOp::Atomic => Class::GlobalAtomic,
    };
    global_access_as(addr, len, align, op, class, arg, site);
}

/// [`global_access`] counted as an instruction of `class`; a plain access to memory shared
/// with peers is also checked against the other devices' accesses (`peer_order.rs`).
pub(crate) fn global_access_as(
    addr: u64,
    len: u32,
    align: u32,
    op: MemOp,
    class: Class,
    arg: u32,
    site: Site,
) {
    if checked_access(addr, len, align, op, class, arg, site) {
        peer_access(addr, len, op, site, |side| {
            if op == MemOp::Store {
                side.plain_store();
            }
        });
    }
}

/// Checks a global access and logs it for the block's own race checks; fails the thread when
/// it is out of range, misaligned or reads bytes never written. Returns whether the memory is
/// shared with peers.
pub(crate) fn checked_access(
    addr: u64,
    len: u32,
    align: u32,
    op: MemOp,
    class: Class,
    arg: u32,
    site: Site,
) -> bool {
    let (block, thread) = context::current();
    block.count(thread, class);
    let checked = {
        let mut inner = block.inner.borrow_mut();
        let checked = block.memory().check(
            addr,
            u64::from(len),
            u64::from(align.max(1)),
            op,
            arg,
            &mut inner.log.alloc_cache,
        );
        if checked.is_ok() {
            inner.log.push_global(addr, len, op, thread, site);
            match block.memory().owner_of(inner.log.alloc_cache) {
                Owner::Own => inner.log.counts.own_bytes[op as usize] += u64::from(len),
                Owner::Peer => inner.log.counts.peer_bytes[op as usize] += u64::from(len),
                Owner::Unknown => {}
            }
        }
        checked
    };
    match checked {
        Ok(peer) => peer,
        Err(problem) => {
            let fault = match problem {
                Problem::OutOfRange(detail) => Fault::GlobalOutOfRange { site, detail },
                Problem::Misaligned(detail) => Fault::BadOperand { site, detail },
                Problem::Uninitialized(detail) => Fault::GlobalUninitialized { site, detail },
            };
            fail(block, thread, fault)
        }
    }
}

/// Runs `memory_op` as the running thread's access to peer-shared memory, checked against the
/// other devices' accesses; fails the thread on a race.
pub(crate) fn peer_access<R>(
    addr: u64,
    len: u32,
    op: MemOp,
    site: Site,
    memory_op: impl FnOnce(&mut FlagSide) -> R,
) -> R {
    let (block, thread) = context::current();
    let index = block.thread_idx(thread);
    let result = {
        let mut inner = block.inner.borrow_mut();
        let memory = block.memory();
        let agent = inner.agent.get_or_insert_with(|| {
            Agent::new(block.kernel, block.block_idx, memory.device, &memory.start_clock)
        });
        agent.access((thread, index), addr, len, op, site, memory_op)
    };
    match result {
        Ok(r) => r,
        Err(race) => {
            let memory = block.memory();
            let access_kind = match op {
                MemOp::Load => AccessKind::Read,
                MemOp::Store => AccessKind::Write,
                MemOp::Atomic => AccessKind::Atomic,
            };
            let fault = Fault::PeerRace {
                location: format!("{}: {}", memory.describe(race.byte), race.earlier).into(),
                later: Access { kind: access_kind, thread: block.dim3(thread), site },
                device: peer_order::device_label(memory.device, block.kernel, block.block_idx).into(),
                why: race.why.into(),
            };
            fail(block, thread, fault)
        }
    }
}

/// `ld.global` of a `T` at `p`, which must be `align`-aligned (a vector load: its width); `arg`
/// is the kernel parameter the pointer came from ([`crate::NO_ARG`] when unknown), whose view
/// bounds the access where the launch knows it.
///
/// # Safety
///
/// `p` must be valid for reads of a `T`. The emulator faults the thread instead of reading
/// when `p` lies outside every registered allocation, so this holds whenever the
/// registrations describe live memory.
pub unsafe fn global_load<T: Copy>(p: *const T, arg: u32, align: u32, site: Site) -> T {
    global_access(p as u64, size_of::<T>() as u32, align, MemOp::Load, arg, site);
    // SAFETY: checked above to lie within a registered allocation; the caller vouches for it.
    unsafe { p.read_unaligned() }
}

/// `st.global` of `value` at `p`, which must be `align`-aligned.
///
/// # Safety
///
/// As for [`global_load`], for writes.
pub unsafe fn global_store<T: Copy>(p: *mut T, value: T, arg: u32, align: u32, site: Site) {
    global_access(p as u64, size_of::<T>() as u32, align, MemOp::Store, arg, site);
    // SAFETY: as in `global_load`.
    unsafe { p.write_unaligned(value) }
}

/// `atom.global.add.f32`: adds `value` at `p` atomically and returns the previous value.
///
/// # Safety
///
/// As for [`global_load`]; other threads must access the word only atomically while this runs
/// (the emulator reports a plain access of the same launch as a race).
pub unsafe fn global_atomic_add_f32(p: *mut f32, value: f32, arg: u32, site: Site) -> f32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    global_access(p as u64, 4, 4, MemOp::Atomic, arg, site);
    // SAFETY: checked to be in a registered allocation and 4-byte aligned; accessed atomically.
    let word = unsafe { AtomicU32::from_ptr(p.cast::<u32>()) };
    let mut old = word.load(Ordering::Relaxed);
    loop {
        let new = (f32::from_bits(old) + value).to_bits();
        match word.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return f32::from_bits(old),
            Err(current) => old = current,
        }
    }
}

/// `atom.global.add.u32`: adds `value` at `p` atomically and returns the previous value. The
/// update is *ordered*: the launch numbers the updates of each word, so that a block's
/// [`fence_acq_rel`] before its update releases its earlier accesses to any block whose
/// later update of the word is followed by a fence (the acquire). Accesses so ordered are not
/// reported as races between blocks (see `trident_simt`'s documentation).
///
/// # Safety
///
/// As for [`global_atomic_add_f32`].
pub unsafe fn global_atomic_add_u32(p: *mut u32, value: u32, arg: u32, site: Site) -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    global_access(p as u64, 4, 4, MemOp::Atomic, arg, site);
    let (block, _) = context::current();
    // SAFETY: checked to be in a registered allocation and 4-byte aligned; accessed atomically.
    let word = unsafe { AtomicU32::from_ptr(p) };
    // The lock orders the update with the others of the word (and, for the host, makes the
    // releasing block's plain stores visible to the acquiring block's loads).
    let (old, order) = block.memory().ordered_rmw(p as u64, || word.fetch_add(value, Ordering::AcqRel));
    block.inner.borrow_mut().log.ordered_atomic(order);
    old
}

/// `fence.acq_rel.gpu` (`__threadfence()`): orders the running thread's global accesses
/// before it with those after it for the whole GPU. With an ordered atomic it releases or
/// acquires ([`global_atomic_add_u32`]); counted as a barrier (it waits for the thread's
/// outstanding writes).
pub fn fence_acq_rel() {
    let (block, thread) = context::current();
    block.count(thread, Class::Barrier);
    block.inner.borrow_mut().log.fence(thread);
}

/// Counts one instruction of `class` for the running thread (for arithmetic the emulator
/// does not otherwise see, such as `fma`); does nothing outside a launch (host code calling
/// the same math functions).
#[inline]
pub fn count(class: Class) {
    if let Some((block, thread)) = context::try_current() {
        block.count(thread, class);
    }
}

/// A window of `len` elements of `T` at `byte_offset` into the launch's dynamic shared memory;
/// the thread faults when the window does not fit or is misaligned.
pub fn dynamic_shared<T: Copy>(byte_offset: usize, len: usize, site: Site) -> Shared<T> {
    shared::dynamic_shared(byte_offset, len, site)
}

/// The block's static shared array named `key` (one per declaration), `len` elements of `T`.
pub fn static_shared<T: Copy>(key: &'static str, len: usize, site: Site) -> Shared<T> {
    shared::static_shared(key, len, site)
}

/// `cp.async` of `bytes` (4, 8 or 16) bytes from global `src` to element `dst_index` of `dst`:
/// the first `src_bytes` bytes come from `src`, the rest are zero. The bytes land when the
/// thread waits for the copy's group; any access to them before that faults.
///
/// # Safety
///
/// `src` must be valid for reading `src_bytes` bytes (checked against the registered
/// allocations as for [`global_load`]).
pub unsafe fn cp_async<T: Copy>(
    dst: Shared<T>,
    dst_index: usize,
    src: *const T,
    src_arg: u32,
    bytes: u32,
    src_bytes: u32,
    site: Site,
) {
    // SAFETY: forwarded from the caller.
    unsafe { crate::async_copy::copy(dst, dst_index, src, src_arg, bytes, src_bytes, site) }
}

/// `cp.async.commit_group`.
pub fn cp_async_commit_group() {
    crate::async_copy::commit_group();
}

/// `cp.async.wait_group n`: waits for all but the `n` most recently committed groups.
pub fn cp_async_wait_group(n: u32) {
    crate::async_copy::wait_group(n);
}

/// `cp.async.wait_all`: commits the pending copies and waits for every group.
pub fn cp_async_wait_all() {
    crate::async_copy::commit_group();
    crate::async_copy::wait_group(0);
}

/// `mbarrier.init.shared::cta.b64`: initializes mbarrier `i` of `bars` with an expected
/// arrival count of `count` (1 to 2^20 - 1). Another thread may use it only after a barrier.
pub fn mbarrier_init(bars: Shared<u64>, i: usize, count: u32, site: Site) {
    crate::mbarrier::init(bars, i, count, site);
}

/// `mbarrier.inval.shared::cta.b64`: ends mbarrier `i` of `bars`.
pub fn mbarrier_inval(bars: Shared<u64>, i: usize, site: Site) {
    crate::mbarrier::inval(bars, i, site);
}

/// `mbarrier.arrive.shared::cta.b64`: one arrival; returns the state token.
pub fn mbarrier_arrive(bars: Shared<u64>, i: usize, site: Site) -> u64 {
    crate::mbarrier::arrive(bars, i, site)
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64`: raises the tx-count by `bytes`, then arrives.
pub fn mbarrier_arrive_expect_tx(bars: Shared<u64>, i: usize, bytes: u32, site: Site) -> u64 {
    crate::mbarrier::arrive_expect_tx(bars, i, bytes, site)
}

/// `mbarrier.expect_tx.shared::cta.b64`: raises the tx-count by `bytes` without arriving.
pub fn mbarrier_expect_tx(bars: Shared<u64>, i: usize, bytes: u32, site: Site) {
    crate::mbarrier::expect_tx(bars, i, bytes, site);
}

/// `mbarrier.complete_tx.shared::cta.b64`: lowers the tx-count by `bytes` (as an async copy
/// completing would).
pub fn mbarrier_complete_tx(bars: Shared<u64>, i: usize, bytes: u32, site: Site) {
    crate::mbarrier::complete_tx(bars, i, bytes, site);
}

/// `mbarrier.try_wait.parity.shared::cta.b64`: waits until the phase of parity `parity` (0
/// or 1) completed and returns true (the emulator's try_wait never times out); a wait that
/// can never succeed fails the block as a deadlock.
pub fn mbarrier_try_wait_parity(bars: Shared<u64>, i: usize, parity: u32, site: Site) -> bool {
    crate::mbarrier::wait_parity(bars, i, parity, true, site)
}

/// `mbarrier.test_wait.parity.shared::cta.b64`: whether the phase of parity `parity`
/// completed; when it has not, the thread yields first (so a polling loop lets the others run).
pub fn mbarrier_test_wait_parity(bars: Shared<u64>, i: usize, parity: u32, site: Site) -> bool {
    crate::mbarrier::wait_parity(bars, i, parity, false, site)
}

/// `fence.proxy.async.shared::cta`: the running thread's earlier generic-proxy writes to shared
/// memory become visible to async-proxy operations (TMA stores, `wgmma`) ordered after it.
pub fn fence_proxy_async() {
    let (block, thread) = context::current();
    block.count(thread, Class::ProxyFence);
    let mut inner = block.inner.borrow_mut();
    let clock = inner.smem.tick_now();
    inner.smem.order.proxy_fence(thread, clock);
}

/// `cp.async.bulk.tensor` load of the box at `coords` (one per dimension of `map`) into `dst`
/// from element `index` on (128-byte aligned), completing the box's bytes on mbarrier `bar`
/// of `bars`; see `tma.rs` for the rules checked.
///
/// # Safety
///
/// `map`'s global address must describe memory valid for reading the in-bounds elements
/// (checked against the registered allocations).
pub unsafe fn tma_load<T: Copy>(
    map: &TensorMap,
    dst: Shared<T>,
    index: usize,
    coords: &[i32],
    bars: Shared<u64>,
    bar: usize,
    site: Site,
) {
    // SAFETY: forwarded from the caller.
    unsafe { crate::tma::load(map, dst, index, coords, bars, bar, site) }
}

/// `cp.async.bulk.tensor` store of the box in `src` (from element `index` on) to the tensor at
/// `coords`; out-of-bounds elements are not written.
///
/// # Safety
///
/// `map`'s global address must describe memory valid for writing the in-bounds elements.
pub unsafe fn tma_store<T: Copy>(map: &TensorMap, src: Shared<T>, index: usize, coords: &[i32], site: Site) {
    // SAFETY: forwarded from the caller.
    unsafe { crate::tma::store(map, src, index, coords, site) }
}

/// `cp.async.bulk.commit_group`.
pub fn bulk_commit_group() {
    crate::tma::commit_group();
}

/// `cp.async.bulk.wait_group.read n`.
pub fn bulk_wait_group_read(n: u32) {
    crate::tma::wait_group_read(n);
}

/// `wgmma.fence.sync.aligned`: orders the running thread's accumulator accesses before the
/// `wgmma.mma_async` that follow.
pub fn wgmma_fence() {
    crate::wgmma::fence();
}

/// `wgmma.commit_group.sync.aligned`.
pub fn wgmma_commit_group() {
    crate::wgmma::commit_group();
}

/// `wgmma.wait_group.sync.aligned n`.
pub fn wgmma_wait_group(n: u32) {
    crate::wgmma::wait_group(n);
}

/// Checks a read (or write) of the wgmma accumulator at `acc` by the running thread: it fails
/// when an `mma_async` writing it has not been retired by `wgmma.wait_group`.
pub fn wgmma_accumulator_access(acc: *const f32, write: bool, site: Site) {
    crate::wgmma::accumulator_access(acc, write, site);
}

/// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{input}.{input}` with A and B from shared
/// memory through the matrix descriptors `desc_a` and `desc_b` (K-major), accumulating into
/// the running thread's `n / 2` f32 at `acc` (replacing them when `scale_d` is false); see
/// `wgmma.rs` for the layouts and the checks.
///
/// # Safety
///
/// `acc` must be valid for reading and writing `n / 2` f32.
pub unsafe fn wgmma_mma_async(
    input: MmaInput,
    n: u32,
    desc_a: u64,
    desc_b: u64,
    scale_d: bool,
    acc: *mut f32,
    site: Site,
) {
    // SAFETY: forwarded from the caller.
    unsafe { crate::wgmma::mma_async(input, n, desc_a, desc_b, scale_d, acc, site) }
}
