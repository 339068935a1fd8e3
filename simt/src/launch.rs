//! A launch: blocks are independent, so worker threads take them one at a time.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;

use crate::block::BlockRunner;
use crate::config::{HostKernel, KernelAttributes, LaunchConfig};
use crate::error::EmuError;
use crate::global::{ArgExtent, LaunchMemory};
use crate::stats::{LaunchStats, WeightedSums};
use crate::warp::WARP_SIZE;

/// Which blocks of a grid a launch runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlockSample {
    /// Every block: results and counters are exact.
    #[default]
    All,
    /// A representative sample, for counting a large grid quickly (the kernel's outputs are
    /// then incomplete). Along each grid dimension the first and last index run, plus up to
    /// three interior ones (the second, the middle and the second to last); a sampled block
    /// stands for as many blocks as its indices do (an interior index for its share of the
    /// interior), so counters of a grid whose interior blocks do equal work and whose edge
    /// blocks differ only along the edge are exact when scaled.
    Edges,
    /// As [`BlockSample::Edges`] along x and y, with every z index of each sampled (x, y):
    /// for grids whose z blocks cooperate on one (x, y) (a split-K GEMM whose last block of a
    /// tile sums the others' partials), so that the sampled tiles' work is all done.
    EdgesWholeZ,
}

/// The order in which a launch hands its blocks to the workers (each worker takes the next
/// one). Results of a correct kernel never depend on it; tests change it to show that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlockOrder {
    /// Linear block number order (x fastest).
    #[default]
    Forward,
    /// The reverse.
    Reverse,
    /// A pseudo-random permutation drawn from the seed.
    Shuffled(u64),
}

thread_local! {
    static ORDER: RefCell<BlockOrder> = const { RefCell::new(BlockOrder::Forward) };
    static SAMPLE: RefCell<BlockSample> = const { RefCell::new(BlockSample::All) };
    static LAST_STATS: RefCell<Option<LaunchStats>> = const { RefCell::new(None) };
    static LOG: RefCell<Option<Vec<LaunchStats>>> = const { RefCell::new(None) };
}

/// Runs `f` and returns, beside its result, the counters of every launch this OS thread
/// completed without a fault meanwhile, in launch order (launches made by other threads are
/// not seen). Calls nest: an inner call's launches are the outer call's too.
///
/// ```
/// use trident_simt::{launch, record_launches, HostKernel, LaunchConfig};
///
/// fn body(_words: &[u64]) {}
/// let kernel = HostKernel { name: "nothing", params: &[], param_names: &[], entry: body };
/// let ((), launches) = record_launches(|| {
///     for blocks in [1, 3] {
///         // SAFETY: the kernel takes no arguments and touches no memory.
///         unsafe { launch(&kernel, &LaunchConfig::linear(blocks, 32), &[]) }.unwrap();
///     }
/// });
/// let grids: Vec<u32> = launches.iter().map(|s| s.grid[0]).collect();
/// assert_eq!(grids, [1, 3]);
/// ```
pub fn record_launches<R>(f: impl FnOnce() -> R) -> (R, Vec<LaunchStats>) {
    let outer = LOG.with(|l| l.borrow_mut().replace(Vec::new()));
    // Restores the outer log (with this call's launches appended) even if `f` unwinds.
    struct Restore(Option<Option<Vec<LaunchStats>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                let inner = LOG.with(|l| std::mem::replace(&mut *l.borrow_mut(), outer));
                append_to_log(inner.unwrap_or_default());
            }
        }
    }
    let mut restore = Restore(Some(outer));
    let result = f();
    let outer = restore.0.take().expect("restored once");
    let inner = LOG.with(|l| std::mem::replace(&mut *l.borrow_mut(), outer)).unwrap_or_default();
    append_to_log(inner.to_vec());
    (result, inner)
}

/// Appends `launches` to the log of an enclosing [`record_launches`], if any.
fn append_to_log(launches: Vec<LaunchStats>) {
    LOG.with(|l| {
        if let Some(log) = l.borrow_mut().as_mut() {
            log.extend(launches);
        }
    });
}

/// Makes the launches this OS thread starts from now on run `sample` (the runtime's launches
/// have no other way to ask for it). Returns the previous setting.
pub fn set_block_sample(sample: BlockSample) -> BlockSample {
    SAMPLE.with(|s| s.replace(sample))
}

/// Makes the launches this OS thread starts from now on hand out their blocks in `order`.
/// Returns the previous setting.
pub fn set_block_order(order: BlockOrder) -> BlockOrder {
    ORDER.with(|o| o.replace(order))
}

/// Reorders `blocks` as `order` asks (Fisher-Yates on a 64-bit xorshift for `Shuffled`).
fn reorder(blocks: &mut [(u64, f64)], order: BlockOrder) {
    match order {
        BlockOrder::Forward => {}
        BlockOrder::Reverse => blocks.reverse(),
        BlockOrder::Shuffled(seed) => {
            let mut x = seed | 1;
            for i in (1..blocks.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                blocks.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
    }
}

/// The counters of the last launch this OS thread completed without a fault.
pub fn last_launch_stats() -> Option<LaunchStats> {
    LAST_STATS.with(|s| s.borrow().clone())
}

/// Runs `kernel` over the grid of `cfg` with argument words `args`, returning its counters or
/// the first fault (of the lowest-numbered failing block among those that ran). Which blocks
/// run follows [`set_block_sample`] (all, unless this thread asked otherwise).
///
/// Every global-memory access must fall within an allocation registered with
/// [`crate::register`] before the launch began.
///
/// # Safety
/// The kernel runs on the raw words of `args`: they must meet the contract of
/// [`HostKernel::entry`] for `kernel` (one valid word per parameter; every address valid for
/// every access the kernel makes with the other arguments). The emulator checks the accesses
/// kernels make through `Global`/`GlobalMut`, but not what a kernel does with a raw pointer.
///
/// ```
/// use trident_simt::{launch, HostKernel, LaunchConfig};
///
/// fn body(_words: &[u64]) {}
/// let kernel = HostKernel { name: "nothing", params: &[], param_names: &[], entry: body };
/// // SAFETY: the kernel takes no arguments and touches no memory.
/// let stats = unsafe { launch(&kernel, &LaunchConfig::linear(2, 32), &[]) }.unwrap();
/// assert_eq!(stats.blocks_run, 2);
/// ```
///
/// Safe code cannot launch: the same call outside `unsafe` does not compile.
///
/// ```compile_fail,E0133
/// use trident_simt::{launch, HostKernel, LaunchConfig};
///
/// fn body(_words: &[u64]) {}
/// let kernel = HostKernel { name: "nothing", params: &[], param_names: &[], entry: body };
/// let stats = launch(&kernel, &LaunchConfig::linear(2, 32), &[]);
/// ```
pub unsafe fn launch(kernel: &HostKernel, cfg: &LaunchConfig, args: &[u64]) -> Result<LaunchStats, EmuError> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_with(kernel, cfg, args, &[], current_sample()) }
}

/// The block sample this OS thread's launches use (see [`set_block_sample`]).
pub fn current_sample() -> BlockSample {
    SAMPLE.with(|s| *s.borrow())
}

/// [`launch`] with the views the pointer arguments came from (`extents[i]` for parameter
/// `i`, where known: an access through that parameter outside it faults) and an explicit
/// block sample.
///
/// # Safety
/// As for [`launch`].
pub unsafe fn launch_with(
    kernel: &HostKernel,
    cfg: &LaunchConfig,
    args: &[u64],
    extents: &[Option<ArgExtent>],
    sample: BlockSample,
) -> Result<LaunchStats, EmuError> {
    // SAFETY: forwarded from the caller.
    unsafe { launch_with_attributes(kernel, cfg, &KernelAttributes::default(), args, extents, sample) }
}

/// [`launch_with`] for a kernel with `attributes`: the dynamic shared memory the host opted
/// in to and the registers per thread, which the launch is checked against as a GPU would
/// (see [`KernelAttributes`]). [`launch`] and [`launch_with`] use the defaults: no opt-in, so
/// a block may use 48 KiB of shared memory, and no register check.
///
/// ```
/// use trident_simt::{launch_with_attributes, BlockSample, HostKernel, KernelAttributes, LaunchConfig};
///
/// fn body(_words: &[u64]) {}
/// let kernel = HostKernel { name: "nothing", params: &[], param_names: &[], entry: body };
/// let cfg = LaunchConfig { dynamic_smem_bytes: 64 * 1024, ..LaunchConfig::linear(1, 32) };
/// let run = |attributes: KernelAttributes| {
///     // SAFETY: the kernel takes no arguments and touches no memory.
///     unsafe { launch_with_attributes(&kernel, &cfg, &attributes, &[], &[], BlockSample::All) }
/// };
/// let error = run(KernelAttributes::default()).unwrap_err();
/// assert!(error.to_string().contains("without opting in"), "{error}");
/// run(KernelAttributes { max_dynamic_smem_bytes: Some(64 * 1024), ..Default::default() }).unwrap();
/// ```
///
/// # Safety
/// As for [`launch`].
pub unsafe fn launch_with_attributes(
    kernel: &HostKernel,
    cfg: &LaunchConfig,
    attributes: &KernelAttributes,
    args: &[u64],
    extents: &[Option<ArgExtent>],
    sample: BlockSample,
) -> Result<LaunchStats, EmuError> {
    cfg.validate(kernel.name)?;
    attributes.validate(kernel.name, cfg)?;
    let mut blocks = blocks_to_run(cfg.grid, sample);
    reorder(&mut blocks, ORDER.with(|o| *o.borrow()));
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(blocks.len());
    let memory = LaunchMemory::new(extents, kernel.param_names, kernel.params);
    let threads = cfg.block_threads();
    let stats = LaunchStats {
        kernel: kernel.name,
        grid: cfg.grid,
        block: cfg.block,
        dynamic_smem_bytes: cfg.dynamic_smem_bytes,
        blocks_total: cfg.grid_blocks(),
        blocks_run: blocks.len() as u64,
        warps_per_block: threads.div_ceil(WARP_SIZE),
        ..LaunchStats::default()
    };
    let grid = Grid {
        kernel,
        cfg,
        attributes,
        args,
        blocks: &blocks,
        memory: &memory,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
        sums: Mutex::new(WeightedSums::default()),
        workers: AtomicUsize::new(1),
        panic: Mutex::new(None),
    };
    thread::scope(|scope| {
        for _ in 1..workers {
            grid.spawn_worker(scope);
        }
        grid.work(scope);
    });
    // A worker that panicked (outside kernel code, which the block catches) panics the launch.
    if let Some(payload) = grid.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
        std::panic::resume_unwind(payload);
    }
    crate::peer_order::launch_done(&memory.learned.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some((_, error)) = grid.failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(error);
    }
    let mut stats = stats;
    grid.sums.into_inner().unwrap_or_else(|e| e.into_inner()).write_into(&mut stats);
    LAST_STATS.with(|s| *s.borrow_mut() = Some(stats.clone()));
    append_to_log(vec![stats.clone()]);
    Ok(stats)
}

/// Indices (with their weights) to run along one grid dimension of extent `n`.
fn sample_axis(n: u32) -> Vec<(u32, f64)> {
    if n <= 5 {
        return (0..n).map(|i| (i, 1.0)).collect();
    }
    let interior = [1, n / 2, n - 2];
    let share = f64::from(n - 2) / interior.len() as f64;
    let mut out = vec![(0, 1.0)];
    out.extend(interior.iter().map(|&i| (i, share)));
    out.push((n - 1, 1.0));
    out
}

/// Linear block numbers to run, each with the number of grid blocks it stands for.
fn blocks_to_run(grid: [u32; 3], sample: BlockSample) -> Vec<(u64, f64)> {
    let [gx, gy, gz] = grid;
    match sample {
        BlockSample::All => (0..u64::from(gx) * u64::from(gy) * u64::from(gz)).map(|b| (b, 1.0)).collect(),
        BlockSample::Edges | BlockSample::EdgesWholeZ => {
            let zs = if sample == BlockSample::Edges {
                sample_axis(gz)
            } else {
                (0..gz).map(|z| (z, 1.0)).collect()
            };
            let mut out = Vec::new();
            for &(z, wz) in &zs {
                for &(y, wy) in &sample_axis(gy) {
                    for &(x, wx) in &sample_axis(gx) {
                        let linear =
                            u64::from(x) + u64::from(gx) * (u64::from(y) + u64::from(gy) * u64::from(z));
                        out.push((linear, wx * wy * wz));
                    }
                }
            }
            out
        }
    }
}

struct Grid<'a> {
    kernel: &'a HostKernel,
    cfg: &'a LaunchConfig,
    attributes: &'a KernelAttributes,
    args: &'a [u64],
    /// Block numbers to run and their weights.
    blocks: &'a [(u64, f64)],
    memory: &'a LaunchMemory,
    next: AtomicUsize,
    stop: AtomicBool,
    failure: Mutex<Option<(u64, EmuError)>>,
    sums: Mutex<WeightedSums>,
    /// Workers started so far (the launching thread is the first).
    workers: AtomicUsize,
    /// The payload of a worker's panic, for the launching thread to resume.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Grid<'_> {
    /// Starts one more worker (the scope joins it). A worker that fails to spawn is not waited
    /// for: the others take its blocks.
    fn spawn_worker<'s, 'e>(&'s self, scope: &'s thread::Scope<'s, 'e>) {
        let n = self.workers.fetch_add(1, Ordering::Relaxed);
        let body = move || {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.work(scope)));
            if let Err(payload) = run {
                self.stop.store(true, Ordering::Relaxed);
                self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(payload);
            }
        };
        if thread::Builder::new().name(format!("simt-worker-{n}")).spawn_scoped(scope, body).is_err() {
            self.workers.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A block of this worker is idle (every thread waits on a flag): start another worker
    /// while blocks of the grid wait to start, so they run meanwhile (up to one per block).
    fn on_idle<'s, 'e>(&'s self, scope: &'s thread::Scope<'s, 'e>) {
        let started = self.next.load(Ordering::Relaxed);
        if started < self.blocks.len() && self.workers.load(Ordering::Relaxed) < self.blocks.len() {
            self.spawn_worker(scope);
        }
    }

    /// Runs blocks until none are left or one has failed.
    fn work<'s, 'e>(&'s self, scope: &'s thread::Scope<'s, 'e>) {
        let idle = || self.on_idle(scope);
        let mut runner = BlockRunner::new(self.kernel, self.cfg, *self.attributes, self.memory);
        let mut local = WeightedSums::default();
        while !self.stop.load(Ordering::Relaxed) {
            let Some(&(block, weight)) = self.blocks.get(self.next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            match runner.run(self.kernel, self.cfg, self.args, block, &idle) {
                Ok(counts) => local.add(&counts, weight),
                Err(error) => {
                    self.stop.store(true, Ordering::Relaxed);
                    let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
                    if failure.as_ref().is_none_or(|(first, _)| block < *first) {
                        *failure = Some((block, error));
                    }
                    break;
                }
            }
        }
        runner.release();
        self.sums.lock().unwrap_or_else(|e| e.into_inner()).merge(&local);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_logs_see_inner_launches_and_unwinding_restores_the_outer() {
        fn body(_words: &[u64]) {}
        let kernel = HostKernel { name: "nothing", params: &[], param_names: &[], entry: body };
        let run = |blocks| {
            // SAFETY: the kernel takes no arguments and touches no memory.
            unsafe { launch(&kernel, &LaunchConfig::linear(blocks, 32), &[]) }.unwrap();
        };
        let grids = |l: &[LaunchStats]| l.iter().map(|s| s.grid[0]).collect::<Vec<_>>();
        let ((), outer) = record_launches(|| {
            run(1);
            let ((), inner) = record_launches(|| run(2));
            assert_eq!(grids(&inner), [2]);
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                record_launches(|| {
                    run(3);
                    panic!("planted");
                })
            }));
            assert!(unwound.is_err());
            run(4);
        });
        assert_eq!(grids(&outer), [1, 2, 3, 4]);
        run(5);
        assert_eq!(record_launches(|| ()).1.len(), 0);
    }

    #[test]
    fn edge_samples_weigh_up_to_the_grid() {
        for grid in [[1, 1, 1], [7, 3, 1], [128, 64, 2], [6, 6, 6]] {
            let blocks = blocks_to_run(grid, BlockSample::Edges);
            let total: f64 = blocks.iter().map(|b| b.1).sum();
            let want: f64 = grid.iter().map(|&g| f64::from(g)).product();
            assert!((total - want).abs() < 1e-6 * want, "{grid:?}: {total} vs {want}");
            assert!(blocks.len() <= 125);
        }
        assert_eq!(blocks_to_run([4, 1, 1], BlockSample::Edges).len(), 4);
        let whole_z = blocks_to_run([128, 64, 7], BlockSample::EdgesWholeZ);
        assert_eq!(whole_z.len(), 5 * 5 * 7);
        let total: f64 = whole_z.iter().map(|b| b.1).sum();
        assert!((total - 128.0 * 64.0 * 7.0).abs() < 1e-6);
    }

    #[test]
    fn reordered_blocks_are_a_permutation() {
        let forward = blocks_to_run([7, 5, 3], BlockSample::All);
        for order in [BlockOrder::Reverse, BlockOrder::Shuffled(1), BlockOrder::Shuffled(99)] {
            let mut blocks = forward.clone();
            reorder(&mut blocks, order);
            assert_ne!(blocks, forward, "{order:?}");
            blocks.sort_by_key(|b| b.0);
            assert_eq!(blocks, forward, "{order:?}");
        }
    }
}
