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
//!
//! Once [`DpWorker::attach`] has connected the group on its devices (a [`DeviceComm`]: `Emu`
//! ranks that are threads of one process), the buckets are device buffers instead: the
//! backward copies the gradients into the bucket on the device, the DP thread sums it with the
//! collective kernels, and [`Pending::wait`] copies the sums back on the device; no gradient
//! goes through the host.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use trident_collectives::{CommError, Communicator, ReduceOp, SharedBuffer};
use trident_runtime::{Buffer, Device, View, ViewMut};

use super::device_comm::{Connected, DeviceComm};
use super::{ParallelError, Result};

type Bucket = Arc<Mutex<SharedBuffer<f32>>>;

/// A bucket on the device, for the device path.
type DeviceBucket = Arc<Mutex<Buffer<f32>>>;

/// How many bucket AllReduces took each path (exact counts, summed over the run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketPaths {
    /// Reduced in place in the peers' mapped buffers (shared memory, above the small size).
    pub registered: u64,
    /// Plain AllReduce: no mapping (threads, TCP), a small bucket, or no registered buckets.
    pub ordinary: u64,
    /// Summed by the collective kernels on the devices ([`DpWorker::attach`]).
    pub device: u64,
}

impl std::fmt::Display for BucketPaths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in registered shared buffers, {} ordinary", self.registered, self.ordinary)?;
        if self.device > 0 {
            write!(f, ", {} on the devices", self.device)?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct PathCounters {
    registered: AtomicU64,
    ordinary: AtomicU64,
    device: AtomicU64,
}

fn lock<T>(bucket: &Mutex<T>) -> MutexGuard<'_, T> {
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
    /// The group on its devices, once [`DpWorker::attach`] has connected it (used on the
    /// communication thread only).
    device: Option<(Device, Arc<Mutex<DeviceComm>>)>,
    /// Device buckets, by index, on the device path.
    device_buckets: Vec<DeviceBucket>,
    /// ZeRO-1 on the device path: the whole padded tensor and this rank's block of it, kept
    /// between steps (allocated at the first use, zero past what the caller fills).
    sharded: Option<Arc<Mutex<Sharded>>>,
    paths: Arc<PathCounters>,
}

/// ZeRO-1's device buffers: `full` holds `dp` blocks of `local`'s length.
struct Sharded {
    full: Buffer<f32>,
    local: Buffer<f32>,
}

enum Reduced {
    /// The sums are in this registered bucket.
    InBucket(Bucket),
    /// The sums are in this device bucket.
    OnDevice(DeviceBucket),
    /// The sums, reduced in ordinary memory.
    Values(Vec<f32>),
}

/// An AllReduce in flight: a bucket's local range and its reduced values to come.
pub struct Pending {
    range: Range<usize>,
    result: Receiver<Result<Reduced>>,
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
        Self {
            jobs: Some(tx),
            thread: Some(thread),
            size,
            rank,
            buckets: Vec::new(),
            device: None,
            device_buckets: Vec::new(),
            sharded: None,
            paths: Arc::default(),
        }
    }

    /// Connects the data-parallel group on `device`, this rank's device (every DP rank calls
    /// it at the same point, before [`DpWorker::register_buckets`]): the buckets then live on
    /// the devices and are summed by the collective kernels where [`DeviceComm::connect`] can
    /// connect the group; elsewhere nothing changes. A no-op for a group of one.
    ///
    /// # Errors
    /// As [`DeviceComm::connect`].
    pub fn attach(&mut self, device: &Device) -> Result<()> {
        if self.size == 1 {
            return Ok(());
        }
        let d = device.clone();
        let connected = wait(self.job(move |c| DeviceComm::connect(c, &d)))?;
        if let Connected::Device(dc) = connected {
            self.device = Some((device.clone(), Arc::new(Mutex::new(*dc))));
        }
        Ok(())
    }

    /// Runs `f` on the communicator thread; its outcome arrives on the returned channel.
    fn job<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Communicator) -> Result<R> + Send + 'static,
    ) -> Receiver<Result<R>> {
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

    /// Makes one registered buffer per bucket, of `lens[i]` floats for bucket `i`, on the
    /// DP communicator. Every DP rank calls this once, with the same `lens` (the DP replicas
    /// of a stage hold the same layout), before the first [`DpWorker::all_reduce_registered`].
    pub fn register_buckets(&mut self, lens: &[usize]) -> Result<()> {
        if let Some((device, _)) = &self.device {
            self.device_buckets = lens
                .iter()
                .map(|&n| Ok(Arc::new(Mutex::new(Buffer::zeros(device, n)?))))
                .collect::<Result<_>>()?;
            return Ok(());
        }
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
            device: self.paths.device.load(Ordering::Relaxed),
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
        if let (Some((_, dc)), Some(b)) = (&self.device, self.device_buckets.get(bucket)) {
            return self.all_reduce_on_device(bucket, range, grads, dc.clone(), b.clone());
        }
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
        let result = self.job(move |c| {
            let mut staged = lock(&b);
            let counter = if c.reduces_in_place(&staged) { &paths.registered } else { &paths.ordinary };
            c.all_reduce_shared(&mut staged, ReduceOp::Sum)?;
            counter.fetch_add(1, Ordering::Relaxed);
            drop(staged);
            Ok(Reduced::InBucket(b))
        });
        Ok(Pending { range, result })
    }

    /// The device path of [`DpWorker::all_reduce_registered`]: `grads` copied into device
    /// bucket `b` on the device, summed there by the collective kernels on the communication
    /// thread.
    fn all_reduce_on_device(
        &self,
        bucket: usize,
        range: Range<usize>,
        grads: View<'_, f32>,
        dc: Arc<Mutex<DeviceComm>>,
        b: DeviceBucket,
    ) -> Result<Pending> {
        {
            let mut staged = lock(&b);
            if staged.len() != grads.len() {
                return Err(ParallelError::Unsupported(format!(
                    "data-parallel bucket {bucket} holds {} gradients, the layer gave {}: every DP rank \
                     must register the buckets of its stage's layout",
                    staged.len(),
                    grads.len()
                )));
            }
            staged.view_mut(..)?.copy_from(&grads)?;
        }
        let paths = self.paths.clone();
        let result = self.job(move |c| {
            let mut staged = lock(&b);
            lock(&dc).all_reduce(c, &mut staged.view_mut(..)?)?;
            paths.device.fetch_add(1, Ordering::Relaxed);
            drop(staged);
            Ok(Reduced::OnDevice(b))
        });
        Ok(Pending { range, result })
    }

    /// Starts the sum of `data` (the gradients of local `range`) over the data-parallel ranks.
    pub fn all_reduce_bucket(&self, range: Range<usize>, mut data: Vec<f32>) -> Pending {
        let paths = self.paths.clone();
        let result = self.job(move |c| {
            c.all_reduce(&mut data, ReduceOp::Sum)?;
            paths.ordinary.fetch_add(1, Ordering::Relaxed);
            Ok(Reduced::Values(data))
        });
        Pending { range, result }
    }

    /// ZeRO-1's reduce-scatter on the devices: `values` (the rank's gradients, zero-padded to
    /// `padded`, a multiple of the group's size) summed over the group, and this rank's block
    /// of the sums, its first `out.len()` elements, left in `out`; every copy a device copy.
    /// Returns `false` (and does nothing) where the group is not on its devices.
    ///
    /// # Errors
    /// As [`DeviceComm::reduce_scatter`]; `values` or `out` longer than the padding allows.
    pub fn reduce_scatter_on_devices(
        &mut self,
        values: &View<f32>,
        padded: usize,
        out: &mut ViewMut<f32>,
    ) -> Result<bool> {
        self.on_sharded(
            padded,
            out,
            |_, s| Ok(s.full.view_mut(..values.len())?.copy_from(values)?),
            |dc, c, Sharded { full, local }| dc.reduce_scatter(c, &full.view(..)?, &mut local.view_mut(..)?),
            |out, s| Ok(out.copy_from(&s.local.view(..out.len())?)?),
        )
    }

    /// ZeRO-1's all-gather of the updated weights on the devices: this rank's `owned` range of
    /// `params` (at most `padded / dp` elements) gathered in rank order with the others', and
    /// the first `params.len()` elements of the whole written over `params`; every copy a
    /// device copy. Returns `false` (and does nothing) where the group is not on its devices.
    ///
    /// # Errors
    /// As [`DeviceComm::all_gather`]; `owned` or `params` longer than the padding allows.
    pub fn all_gather_on_devices(
        &mut self,
        params: &mut Buffer<f32>,
        owned: Range<usize>,
        padded: usize,
    ) -> Result<bool> {
        self.on_sharded(
            padded,
            params,
            |params, s| {
                s.local.view_mut(..)?.fill_zero()?;
                s.local.view_mut(..owned.len())?.copy_from(&params.view(owned.clone())?)?;
                Ok(())
            },
            |dc, c, Sharded { full, local }| dc.all_gather(c, &local.view(..)?, &mut full.view_mut(..)?),
            |params, s| {
                let len = params.len();
                Ok(params.view_mut(..)?.copy_from(&s.full.view(..len)?)?)
            },
        )
    }

    /// One ZeRO-1 collective on the device buffers: `fill` stages this rank's data from `io`,
    /// `collective` runs on the communication thread, `read` takes the result out into `io`;
    /// `false` off the device path (nothing runs).
    fn on_sharded<T: ?Sized>(
        &mut self,
        padded: usize,
        io: &mut T,
        fill: impl FnOnce(&mut T, &mut Sharded) -> Result<()>,
        collective: impl FnOnce(&mut DeviceComm, &mut Communicator, &mut Sharded) -> Result<()> + Send + 'static,
        read: impl FnOnce(&mut T, &Sharded) -> Result<()>,
    ) -> Result<bool> {
        let Some((sharded, dc)) = self.sharded(padded)? else { return Ok(false) };
        fill(io, &mut lock(&sharded))?;
        let job_sharded = sharded.clone();
        wait(self.job(move |c| collective(&mut lock(&dc), c, &mut lock(&job_sharded))))?;
        read(io, &lock(&sharded))?;
        self.paths.device.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// ZeRO-1's device buffers for a padded length of `padded`, made at the first call (zeros),
    /// and the device communicator; `None` off the device path.
    #[allow(clippy::type_complexity)]
    fn sharded(&mut self, padded: usize) -> Result<Option<(Arc<Mutex<Sharded>>, Arc<Mutex<DeviceComm>>)>> {
        let Some((device, dc)) = &self.device else { return Ok(None) };
        if padded % self.size != 0 {
            return Err(ParallelError::DeviceCollective(format!(
                "ZeRO-1 pads the gradients to {padded} elements, not a multiple of the {} data-parallel ranks",
                self.size
            )));
        }
        let sharded = match &self.sharded {
            Some(s) if lock(s).full.len() == padded => s.clone(),
            _ => {
                let full = Buffer::zeros(device, padded)?;
                let local = Buffer::zeros(device, padded / self.size)?;
                let s = Arc::new(Mutex::new(Sharded { full, local }));
                self.sharded = Some(s.clone());
                s
            }
        };
        Ok(Some((sharded, dc.clone())))
    }

    /// Runs `f` on the communicator and waits for it.
    pub fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Communicator) -> std::result::Result<R, CommError> + Send + 'static,
    ) -> Result<R> {
        wait(self.job(move |c| Ok(f(c)?)))
    }
}

impl Pending {
    /// Waits for the reduced bucket and stores the sums into `grads` at its local range.
    pub fn wait(self, grads: &mut Buffer<f32>) -> Result<()> {
        let mut dst = grads.view_mut(self.range)?;
        match wait(self.result)? {
            Reduced::InBucket(b) => dst.copy_from_slice(&lock(&b))?,
            Reduced::OnDevice(b) => dst.copy_from(&lock(&b).view(..)?)?,
            Reduced::Values(v) => dst.copy_from_slice(&v)?,
        }
        Ok(())
    }
}

fn wait<R>(rx: Receiver<Result<R>>) -> Result<R> {
    match rx.recv() {
        Ok(r) => r,
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
