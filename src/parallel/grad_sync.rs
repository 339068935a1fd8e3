//! Data-parallel gradient reduction on a communication thread, so that a layer's gradient
//! AllReduce runs while the backward pass works on the layers below it.
//!
//! The buckets (one per layer block, one for the stage block) are staged in registered
//! buffers ([`Communicator::shared_buffer`]) made once when the trainer starts: on the
//! shared-memory transport each is a mapping every DP peer has, so the AllReduce sums in
//! place in the peers' buffers with plain loads and stores; elsewhere the buffer is ordinary
//! memory and the call is a plain AllReduce. A bucket's life in one step: the backward copies
//! the gradients into it (main thread, holding its lock), the DP thread reduces it (holding
//! the lock), and the main thread copies the sums back into the gradient buffer after
//! [`Pending::wait`]. The lock is never contended: each side takes it only after the other
//! has handed the bucket over through a channel.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use trident_collectives::{CommError, Communicator, ReduceOp, SharedBuffer};
use trident_runtime::{Buffer, View};

use super::{ParallelError, Result};

type Bucket = Arc<Mutex<SharedBuffer<f32>>>;

/// How many bucket AllReduces took each path (exact counts, summed over the run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketPaths {
    /// Reduced in place in the peers' mapped buffers (shared memory, above the small size).
    pub registered: u64,
    /// Plain AllReduce: no mapping (threads, TCP), a small bucket, or no registered buckets.
    pub ordinary: u64,
}

impl std::fmt::Display for BucketPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in registered shared buffers, {} ordinary", self.registered, self.ordinary)
    }
}

#[derive(Default)]
struct PathCounters {
    registered: AtomicU64,
    ordinary: AtomicU64,
}

fn lock(bucket: &Bucket) -> MutexGuard<'_, SharedBuffer<f32>> {
    // A panic while holding the lock leaves plain floats behind: nothing to repair.
    bucket.lock().unwrap_or_else(|e| e.into_inner())
}

type Job = Box<dyn FnOnce(&mut Communicator) + Send>;

/// The data-parallel communicator, owned by a thread that runs the collectives it is handed
/// in order.
pub struct DpWorker {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Data-parallel replicas (DP).
    pub size: usize,
    /// This rank's index among them.
    pub rank: usize,
    /// Registered buckets, by index; empty until [`DpWorker::register_buckets`].
    buckets: Vec<Bucket>,
    paths: Arc<PathCounters>,
}

enum Reduced {
    /// The sums are in this registered bucket.
    InBucket(Bucket),
    /// The sums, reduced in ordinary memory.
    Values(Vec<f32>),
}

/// An AllReduce in flight: a bucket's local range and its reduced values to come.
pub struct Pending {
    range: Range<usize>,
    result: Receiver<std::result::Result<Reduced, CommError>>,
}

impl DpWorker {
    /// Moves `comm` (the data-parallel group) to a new communication thread; the collectives
    /// handed to the worker run there in the order they are handed.
    ///
    /// # Panics
    ///
    /// If the thread cannot be spawned.
    pub fn new(mut comm: Communicator) -> Self {
        let (size, rank) = (comm.size(), comm.rank());
        let (tx, rx) = channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(format!("dp-comm-{rank}"))
            .spawn(move || {
                for job in rx {
                    job(&mut comm);
                }
            })
            .expect("spawning the data-parallel communication thread");
        Self { jobs: Some(tx), thread: Some(thread), size, rank, buckets: Vec::new(), paths: Arc::default() }
    }

    /// Makes one registered buffer per bucket, of `lens[i]` floats for bucket `i`, on the
    /// DP communicator. Every DP rank calls this once, with the same `lens` (the DP replicas
    /// of a stage hold the same layout), before the first [`DpWorker::all_reduce_registered`].
    pub fn register_buckets(&mut self, lens: &[usize]) -> Result<()> {
        let lens = lens.to_vec();
        let made: Vec<SharedBuffer<f32>> =
            self.run(move |c| lens.iter().map(|&n| c.shared_buffer::<f32>(n)).collect())?;
        self.buckets = made.into_iter().map(|b| Arc::new(Mutex::new(b))).collect();
        Ok(())
    }

    /// Bucket AllReduces so far, by path.
    pub fn bucket_paths(&self) -> BucketPaths {
        BucketPaths {
            registered: self.paths.registered.load(Ordering::Relaxed),
            ordinary: self.paths.ordinary.load(Ordering::Relaxed),
        }
    }

    /// Starts the sum over the data-parallel ranks of `grads` (the gradients of local
    /// `range`) in registered bucket `bucket`, or, when no buckets are registered, in an
    /// ordinary host copy. The bucket must hold `grads.len()` floats, and its previous
    /// [`Pending`] must have been waited for (the trainer hands each bucket over once a step).
    pub fn all_reduce_registered(
        &self,
        bucket: usize,
        range: Range<usize>,
        grads: View<'_, f32>,
    ) -> Result<Pending> {
        let Some(b) = self.buckets.get(bucket) else {
            return Ok(self.all_reduce_bucket(range, grads.to_vec()?));
        };
        {
            let mut staged = lock(b);
            if staged.len() != grads.len() {
                return Err(ParallelError::Unsupported(format!(
                    "data-parallel bucket {bucket} holds {} gradients, the layer gave {}: every DP rank \
                     must register the buckets of its stage's layout",
                    staged.len(),
                    grads.len()
                )));
            }
            match grads.host() {
                Some(h) => staged.copy_from_slice(h),
                None => staged.copy_from_slice(&grads.to_vec()?),
            }
        }
        let (b, paths) = (b.clone(), self.paths.clone());
        let result = self.submit(move |c| {
            let mut staged = lock(&b);
            let counter = if c.reduces_in_place(&staged) { &paths.registered } else { &paths.ordinary };
            c.all_reduce_shared(&mut staged, ReduceOp::Sum)?;
            counter.fetch_add(1, Ordering::Relaxed);
            drop(staged);
            Ok(Reduced::InBucket(b))
        });
        Ok(Pending { range, result })
    }

    /// Runs `f` on the communicator thread; the answer arrives on the returned channel.
    pub fn submit<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Communicator) -> std::result::Result<R, CommError> + Send + 'static,
    ) -> Receiver<std::result::Result<R, CommError>> {
        let (tx, rx) = channel();
        let job: Job = Box::new(move |comm| {
            let _ = tx.send(f(comm));
        });
        if let Some(jobs) = &self.jobs {
            // A send fails only when the thread is gone; the receiver then reports it.
            let _ = jobs.send(job);
        }
        rx
    }

    /// Starts the sum of `data` (the gradients of local `range`) over the data-parallel ranks.
    pub fn all_reduce_bucket(&self, range: Range<usize>, mut data: Vec<f32>) -> Pending {
        let paths = self.paths.clone();
        let result = self.submit(move |c| {
            c.all_reduce(&mut data, ReduceOp::Sum)?;
            paths.ordinary.fetch_add(1, Ordering::Relaxed);
            Ok(Reduced::Values(data))
        });
        Pending { range, result }
    }

    /// Runs `f` on the communicator and waits for it.
    pub fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Communicator) -> std::result::Result<R, CommError> + Send + 'static,
    ) -> Result<R> {
        wait(self.submit(f))
    }
}

impl Pending {
    /// Waits for the reduced bucket and stores the sums into `grads` at its local range.
    pub fn wait(self, grads: &mut Buffer<f32>) -> Result<()> {
        let mut dst = grads.view_mut(self.range)?;
        match wait(self.result)? {
            Reduced::InBucket(b) => dst.copy_from_slice(&lock(&b))?,
            Reduced::Values(v) => dst.copy_from_slice(&v)?,
        }
        Ok(())
    }
}

fn wait<R>(rx: Receiver<std::result::Result<R, CommError>>) -> Result<R> {
    match rx.recv() {
        Ok(r) => Ok(r?),
        Err(_) => Err(ParallelError::Panicked("the data-parallel communication thread stopped".into())),
    }
}

impl Drop for DpWorker {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
