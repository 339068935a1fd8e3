//! SIMT emulator core: runs Trident's kernels, compiled for the host, as GPU thread blocks.
//!
//! [`launch`] runs each block on a worker thread (one per core, blocks taken in turn) with the
//! block's threads as coroutines, switched at barriers and warp collectives in linear-id order,
//! so a launch's schedule within a block is reproducible. Kernels reach the emulator through
//! [`device`] (wrapped by `trident_kernels::simt`), which finds the running thread through a
//! thread-local the scheduler sets before each resume.
//!
//! A launch fails with an [`EmuError`] naming kernel, block, thread and source line when a
//! kernel does what a GPU leaves undefined:
//! - a shared-memory data race: two threads touch the same byte between two barriers and one
//!   of them writes (atomics only race with plain accesses; a full-warp `sync_warp` orders the
//!   accesses of its lanes);
//! - a launch the driver would refuse ([`EmuError::InvalidLaunch`]): a grid or block out of
//!   range; more than 48 KiB of shared memory per block (static plus dynamic) without the
//!   kernel's opt-in (`cuFuncSetAttribute` `MAX_DYNAMIC_SHARED_SIZE_BYTES`, passed as
//!   [`KernelAttributes::max_dynamic_smem_bytes`]), or more dynamic shared memory than it
//!   opted in to; a block needing more than [`REGISTERS_PER_BLOCK`] registers at the kernel's
//!   [`KernelAttributes::registers_per_thread`] (only where that is known). Static shared
//!   arrays are allocated when a block first declares them, so their part of the shared-memory
//!   rule is checked then;
//! - a barrier reached by only part of the block, or at different call sites (`bar.sync` is
//!   `.aligned`);
//! - a warp collective (shuffle, vote, `sync_warp`, `mma`, `ldmatrix`) whose member lanes do
//!   not all arrive with the same operation and mask, that leaves out the calling lane, or,
//!   for `mma`/`ldmatrix`, that is not executed by a full warp from one call site (they are
//!   `.aligned`);
//! - a shared-memory access out of range (static or dynamic) or misaligned for the width of
//!   the instruction that makes it (`ld.shared.v4.b32` needs 16 bytes even for a `[u32; 4]`),
//!   and a read of a `cp.async` destination before the copy was waited for;
//! - Hopper synchronization and copies (`mbarrier.rs`, `sync_order.rs`, `tma.rs`,
//!   `tensor_map.rs`): an mbarrier used before `init` or initialized twice, more arrivals in
//!   one phase than its count, a transaction count out of range or below zero once every
//!   arrival of the phase is in, a wait that can never complete (every live thread waits on
//!   an mbarrier or a barrier: a deadlock, reported instead of hung); shared accesses ordered
//!   only by an mbarrier arrival a thread observed count as ordered; a TMA load's destination
//!   read before the accessing thread observed its mbarrier phase; a TMA store's source
//!   written before its bulk group was waited for; a generic-proxy write read by the async
//!   proxy without the writer's `fence.proxy.async` ordered before the read (the async-proxy
//!   race); a tensor map the driver's `cuTensorMapEncodeTiled` would refuse ([`TensorMap`]);
//!   a `wgmma.mma_async` (`wgmma.rs`) not executed by a whole warpgroup from one call site,
//!   without a `wgmma.fence`, or whose accumulator is read or written before
//!   `wgmma.wait_group` retired it;
//! - a panic in kernel code;
//! - global memory, as compute-sanitizer's memcheck, racecheck and initcheck would (kernels
//!   reach it only through `Global`/`GlobalMut` pointers; see [`register`]):
//!   - an access outside every allocation registered when the launch began, or outside the
//!     view a pointer argument was made from where the launch knows it ([`launch_with`]), or
//!     misaligned for its width;
//!   - two threads touching the same bytes where one writes and not both use atomics:
//!     threads of a block are ordered only by `sync_threads`; threads of different blocks
//!     only through an ordered atomic ([`device::global_atomic_add_u32`]) with fences
//!     ([`device::fence_acq_rel`]): a block's accesses before a barrier (or its own, for the
//!     thread itself) that precedes a fence and then its update of a word happen before the
//!     accesses of a block whose later update of that word is followed by a fence (and, for
//!     its other threads, a barrier) — the release/acquire of a "last block" reduction. Each
//!     block's accesses are checked, as byte intervals, against those of the blocks that
//!     ended before it (the first access of each kind to a byte is the one remembered);
//!   - a read of bytes never written (registered uninitialized and not yet uploaded, stored
//!     or marked with [`mark_initialized`]).
//!
//! - across emulated devices (`peer_order.rs`): several devices live in one process, one per
//!   host thread ([`set_emulated_device`]), and their kernels run at once, synchronising only
//!   through memory shared with peers ([`Registration::share_with_peers`]). Two accesses to
//!   the same bytes from different devices, launches or blocks, one a write (or an atomic
//!   against a plain access), race unless a release/acquire chain at a wide enough scope
//!   (`st.release.sys` observed by `ld.acquire.sys`) orders them: a flag written or polled
//!   with plain or volatile accesses, data read without such a chain, and a buffer rewritten
//!   before every peer finished reading it are reported naming both sides;
//! - a flag wait that can never complete (`flags.rs`): acquire and volatile loads are
//!   scheduling points, a block whose threads all poll lets the rest of its grid start (up to
//!   one worker per block), and a thread that reads an unchanging flag for the poll limit
//!   ([`set_poll_limit`]) fails with an error naming it instead of hanging.
//!
//! Each launch also counts its work exactly ([`LaunchStats`]: instructions by class,
//! shared-memory wavefronts under the 32-bank model, global sectors, TMA bytes and sectors,
//! the launch shape); with
//! [`BlockSample::Edges`] it runs only a sample of a large grid and scales the counts.
//!
//! A thread that runs for `TRIDENT_EMU_WATCHDOG_SECS` seconds (default 120) without reaching a
//! barrier, a collective or its end is taken for an endless loop: the emulator names it and
//! aborts the process. Each thread has a [`THREAD_STACK_BYTES`] stack; overflowing it aborts
//! the process. Fresh shared memory and shuffles from lanes outside the mask read as
//! NaN-pattern poison.

mod arg;
mod async_copy;
mod block;
mod config;
mod context;
pub mod device;
mod error;
mod flags;
pub mod fragments;
mod global;
mod launch;
mod mbarrier;
mod peer_order;
mod shared;
mod sites;
mod smem;
mod stacks;
mod stats;
mod sync_order;
mod tensor_map;
mod tma;
mod warp;
mod watchdog;
mod wgmma;

pub use arg::{KernelArg, ParamType};
pub use config::{
    block_registers, HostKernel, KernelAttributes, LaunchConfig, DEFAULT_SHARED_BYTES, MAX_BLOCK_THREADS,
    MAX_REGISTERS_PER_THREAD, MAX_SHARED_BYTES, REGISTERS_PER_BLOCK, REGISTER_ALLOCATION_UNIT,
};
pub use error::{Access, AccessKind, Dim3, EmuError, Fault, Site};
pub use flags::set_poll_limit;
pub use global::{is_registered, mark_initialized, register, ArgExtent, Registration, NO_ARG};
pub use launch::{
    current_sample, last_launch_stats, launch, launch_with, launch_with_attributes, record_launches,
    set_block_order, set_block_sample, BlockOrder, BlockSample,
};
pub use peer_order::{emulated_device, host_order, join_host_order, set_emulated_device, HostOrder, Scope};
pub use shared::Shared;
pub use stacks::THREAD_STACK_BYTES;
pub use stats::{
    Class, GlobalTraffic, InstructionCounts, LaunchStats, SharedTraffic, ASYNC_OVERLAP_BUCKETS, BANK_BYTES,
    SECTOR_BYTES, SHARED_BANKS,
};
pub use tensor_map::{L2Promotion, OobFill, Swizzle, TensorDataType, TensorMap, TensorMapFields};
pub use wgmma::MatrixDescriptor;
