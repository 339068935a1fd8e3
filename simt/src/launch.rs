//! A launch: blocks are independent, so worker threads take them one at a time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;

use crate::block::BlockRunner;
use crate::config::{HostKernel, LaunchConfig};
use crate::error::EmuError;

/// Runs `kernel` over the grid of `cfg` with argument words `args`, returning the first fault
/// (of the lowest-numbered failing block among those that ran).
///
/// The kernel's own memory accesses through raw pointers are the caller's responsibility:
/// `args` must describe buffers that stay valid for the whole launch.
pub fn launch(kernel: &HostKernel, cfg: &LaunchConfig, args: &[u64]) -> Result<(), EmuError> {
    cfg.validate(kernel.name)?;
    let blocks = cfg.grid_blocks();
    let cores = thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let workers = cores.min(blocks);
    let grid = Grid {
        kernel,
        cfg,
        args,
        blocks,
        next: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
    };
    if workers <= 1 {
        grid.work();
    } else {
        thread::scope(|scope| {
            let spawned: Vec<_> = (1..workers)
                .map(|i| {
                    thread::Builder::new()
                        .name(format!("simt-worker-{i}"))
                        .spawn_scoped(scope, || grid.work())
                })
                .collect();
            grid.work();
            // A worker that failed to spawn is not waited for: the others take its blocks.
            for handle in spawned.into_iter().flatten() {
                if let Err(payload) = handle.join() {
                    std::panic::resume_unwind(payload);
                }
            }
        });
    }
    match grid.failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

struct Grid<'a> {
    kernel: &'a HostKernel,
    cfg: &'a LaunchConfig,
    args: &'a [u64],
    blocks: u64,
    next: AtomicU64,
    stop: AtomicBool,
    failure: Mutex<Option<(u64, EmuError)>>,
}

impl Grid<'_> {
    /// Runs blocks until none are left or one has failed.
    fn work(&self) {
        let mut runner = BlockRunner::new(self.kernel, self.cfg);
        while !self.stop.load(Ordering::Relaxed) {
            let block = self.next.fetch_add(1, Ordering::Relaxed);
            if block >= self.blocks {
                break;
            }
            if let Err(error) = runner.run(self.kernel, self.cfg, self.args, block) {
                self.stop.store(true, Ordering::Relaxed);
                let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
                if failure.as_ref().is_none_or(|(first, _)| block < *first) {
                    *failure = Some((block, error));
                }
                break;
            }
        }
        runner.release();
    }
}
