//! Data-parallel gradient reduction on a communication thread, so that a layer's gradient
//! AllReduce runs while the backward pass works on the layers below it.

use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use trident_collectives::{CommError, Communicator, ReduceOp};

use super::{ParallelError, Result};

type Job = Box<dyn FnOnce(&mut Communicator) + Send>;

/// The data-parallel communicator, owned by a thread that runs the collectives it is handed
/// in order.
pub struct DpWorker {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    pub size: usize,
    pub rank: usize,
}

/// An AllReduce in flight: a bucket's local range and its reduced values to come.
pub struct Pending {
    range: Range<usize>,
    result: Receiver<std::result::Result<Vec<f32>, CommError>>,
}

impl DpWorker {
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
        Self { jobs: Some(tx), thread: Some(thread), size, rank }
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
        let result = self.submit(move |c| c.all_reduce(&mut data, ReduceOp::Sum).map(|()| data));
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
    /// Waits for the reduced bucket.
    pub fn wait(self) -> Result<(Range<usize>, Vec<f32>)> {
        let range = self.range;
        wait(self.result).map(|v| (range, v))
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
