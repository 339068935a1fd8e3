//! One thread block: its threads as coroutines, and the deterministic scheduler that runs
//! them between barriers and warp collectives.

use std::cell::RefCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::async_copy::AsyncCopies;
use crate::config::{HostKernel, LaunchConfig};
use crate::context;
use crate::error::{Dim3, EmuError, Fault, Site};
use crate::smem::SharedMemory;
use crate::stacks;
use crate::warp::{self, WarpState, WARP_SIZE};
use crate::watchdog::Heartbeat;

/// Where an emulated thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Runnable,
    AtBarrier(Site),
    InCollective,
    Exited,
    Faulted,
}

pub(crate) struct ThreadSlot {
    pub status: Status,
    pub yielder: *const Yielder<(), ()>,
    /// Result of the warp collective the thread took part in last.
    pub collective_out: [u32; 4],
    /// `cp.async` copies the thread has not waited for.
    pub async_copies: AsyncCopies,
}

/// State the scheduler and the running thread share. Borrowed only inside one device function
/// call or one scheduler step, never across a suspension.
pub(crate) struct BlockInner {
    pub threads: Vec<ThreadSlot>,
    pub warps: Vec<WarpState>,
    pub smem: SharedMemory,
    pub fault: Option<EmuError>,
    /// Set while the scheduler unwinds the coroutines of a failed block.
    pub tearing_down: bool,
}

/// One block being run: shape and index (fixed while it runs) plus the mutable state.
pub(crate) struct BlockState {
    pub kernel: &'static str,
    pub grid_dim: [u32; 3],
    pub block_dim: [u32; 3],
    pub block_idx: [u32; 3],
    pub threads: u32,
    pub inner: RefCell<BlockInner>,
}

impl BlockState {
    /// Thread index (x, y, z) of linear thread id `t` (x fastest).
    pub fn thread_idx(&self, t: u32) -> [u32; 3] {
        let [bx, by, _] = self.block_dim;
        [t % bx, (t / bx) % by, t / (bx * by)]
    }

    pub fn error_at(&self, thread: u32, fault: Fault) -> EmuError {
        EmuError::Fault {
            kernel: self.kernel,
            block: Dim3(self.block_idx),
            thread: Dim3(self.thread_idx(thread)),
            fault,
        }
    }

    pub fn dim3(&self, thread: u32) -> Dim3 {
        Dim3(self.thread_idx(thread))
    }
}

type ThreadCoroutine = Coroutine<(), (), Result<(), String>, DefaultStack>;

/// Runs blocks one after another on the current OS thread, reusing stacks and shadow memory.
pub(crate) struct BlockRunner {
    block: Box<BlockState>,
    stacks: Vec<DefaultStack>,
    heartbeat: Arc<Heartbeat>,
    /// Number of the block being run.
    linear: u64,
}

impl BlockRunner {
    pub fn new(kernel: &HostKernel, cfg: &LaunchConfig) -> Self {
        let threads = cfg.block_threads();
        let warps = threads.div_ceil(WARP_SIZE) as usize;
        let inner = BlockInner {
            threads: (0..threads)
                .map(|_| ThreadSlot {
                    status: Status::Runnable,
                    yielder: std::ptr::null(),
                    collective_out: [0; 4],
                    async_copies: AsyncCopies::default(),
                })
                .collect(),
            warps: (0..warps).map(|_| WarpState::default()).collect(),
            smem: SharedMemory::new(),
            fault: None,
            tearing_down: false,
        };
        BlockRunner {
            block: Box::new(BlockState {
                kernel: kernel.name,
                grid_dim: cfg.grid,
                block_dim: cfg.block,
                block_idx: [0; 3],
                threads,
                inner: RefCell::new(inner),
            }),
            stacks: Vec::new(),
            heartbeat: Heartbeat::register(kernel.name, cfg.grid, cfg.block),
            linear: 0,
        }
    }

    /// Runs block number `linear` (x fastest) of the grid to completion or to its first fault.
    pub fn run(
        &mut self,
        kernel: &HostKernel,
        cfg: &LaunchConfig,
        args: &[u64],
        linear: u64,
    ) -> Result<(), EmuError> {
        self.linear = linear;
        let [gx, gy, _] = cfg.grid.map(u64::from);
        self.block.block_idx = [linear % gx, (linear / gx) % gy, linear / (gx * gy)].map(|v| v as u32);
        {
            let mut inner = self.block.inner.borrow_mut();
            let inner = &mut *inner;
            for slot in &mut inner.threads {
                slot.status = Status::Runnable;
                slot.yielder = std::ptr::null();
                slot.async_copies.abandon(&mut inner.smem);
            }
            for warp in &mut inner.warps {
                warp.pending.clear();
            }
            inner.smem.begin_block(cfg.dynamic_smem_bytes);
            inner.fault = None;
            inner.tearing_down = false;
        }
        let mut coroutines = Vec::with_capacity(self.block.threads as usize);
        for t in 0..self.block.threads {
            let stack = match self.stacks.pop() {
                Some(stack) => stack,
                None => stacks::take()
                    .map_err(|problem| EmuError::HostResources { kernel: kernel.name, problem })?,
            };
            coroutines.push(self.spawn(stack, kernel.entry, args, t));
        }
        let result = self.schedule(&mut coroutines);
        self.block.inner.borrow_mut().tearing_down = true;
        for mut coroutine in coroutines {
            if !coroutine.done() {
                context::set_current(&*self.block, 0);
                coroutine.force_unwind();
            }
            self.stacks.push(coroutine.into_stack());
        }
        context::set_current(std::ptr::null(), 0);
        result
    }

    /// Hands the stacks back to the process-wide pool.
    pub fn release(self) {
        stacks::give_back(self.stacks);
    }

    fn spawn(&self, stack: DefaultStack, entry: fn(&[u64]), args: &[u64], thread: u32) -> ThreadCoroutine {
        let block: *const BlockState = &*self.block;
        let (args_ptr, args_len) = (args.as_ptr(), args.len());
        Coroutine::with_stack(stack, move |yielder: &Yielder<(), ()>, ()| {
            // SAFETY: `run` drives every coroutine to completion or unwinds it before it
            // returns, so the boxed block state and the argument slice outlive this closure.
            let (block, args) = unsafe { (&*block, std::slice::from_raw_parts(args_ptr, args_len)) };
            block.inner.borrow_mut().threads[thread as usize].yielder = yielder;
            match catch_unwind(AssertUnwindSafe(|| entry(args))) {
                Ok(()) => Ok(()),
                Err(payload) if block.inner.borrow().tearing_down => resume_unwind(payload),
                Err(payload) => Err(panic_message(payload.as_ref())),
            }
        })
    }

    /// Runs every runnable thread until it blocks, then resolves barriers, until all threads
    /// exit or one faults. Threads run in linear-id order, so a schedule is reproducible.
    fn schedule(&mut self, coroutines: &mut [ThreadCoroutine]) -> Result<(), EmuError> {
        let block: &BlockState = &self.block;
        loop {
            let mut ran_any = false;
            for t in 0..block.threads {
                if block.inner.borrow().threads[t as usize].status != Status::Runnable {
                    continue;
                }
                ran_any = true;
                context::set_current(block, t);
                self.heartbeat.enter(self.linear, t);
                let resumed = coroutines[t as usize].resume(());
                self.heartbeat.leave();
                match resumed {
                    CoroutineResult::Yield(()) => {}
                    CoroutineResult::Return(Ok(())) => on_exit(block, t)?,
                    CoroutineResult::Return(Err(message)) => {
                        return Err(block.error_at(t, Fault::Panic { message }))
                    }
                }
                if let Some(error) = block.inner.borrow_mut().fault.take() {
                    return Err(error);
                }
            }
            if !ran_any && !release_barrier(block)? {
                return Ok(());
            }
        }
    }
}

fn on_exit(block: &BlockState, t: u32) -> Result<(), EmuError> {
    let mut inner = block.inner.borrow_mut();
    inner.threads[t as usize].status = Status::Exited;
    let lane_bit = 1u32 << (t % WARP_SIZE);
    let warp = &inner.warps[(t / WARP_SIZE) as usize];
    if let Some(p) = warp.pending.iter().find(|p| p.members & lane_bit != 0) {
        let detail = format!(
            "this thread exited while lanes {:#010x} of its warp wait for it at {} with member mask {:#010x}",
            p.arrived, p.op, p.mask
        );
        return Err(block.error_at(t, Fault::WarpCollective { site: p.site, detail }));
    }
    Ok(())
}

/// Called when no thread can run. Releases the barrier all live threads wait at and returns
/// true; returns false when every thread has exited; fails when the block cannot go on.
fn release_barrier(block: &BlockState) -> Result<bool, EmuError> {
    let mut inner = block.inner.borrow_mut();
    if let Some(error) = warp::stalled_collective(block, &inner) {
        return Err(error);
    }
    let statuses: Vec<Status> = inner.threads.iter().map(|s| s.status).collect();
    let Some((waiter, site)) = statuses.iter().enumerate().find_map(|(t, s)| match s {
        Status::AtBarrier(site) => Some((t as u32, *site)),
        _ => None,
    }) else {
        return Ok(false);
    };
    for (t, status) in statuses.iter().enumerate() {
        let t = t as u32;
        match *status {
            Status::AtBarrier(other_site) if other_site != site => {
                return Err(block.error_at(
                    t,
                    Fault::DivergentBarrier { site: other_site, other: block.dim3(waiter), other_site: site },
                ))
            }
            Status::AtBarrier(_) => {}
            other => {
                let missing_state = match other {
                    Status::Exited => "exited without reaching it".to_string(),
                    _ => format!("is stuck elsewhere ({other:?})"),
                };
                return Err(block.error_at(
                    waiter,
                    Fault::PartialBarrier { site, missing: block.dim3(t), missing_state },
                ));
            }
        }
    }
    for slot in &mut inner.threads {
        slot.status = Status::Runnable;
    }
    inner.smem.barrier();
    Ok(true)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}
