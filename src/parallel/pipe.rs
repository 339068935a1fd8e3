//! The pipeline's point-to-point links: activations to the next stage, gradients to the
//! previous one, sent from a thread per link so that a stage never waits for its neighbour to
//! take what it sent.
//!
//! A stage blocks only on what it needs: its next input. Sends are posted and go out in
//! order on their own link while the stage computes, so any schedule whose data dependencies
//! can be met ([`super::schedule::simulate_interleaved`] checks that) runs without deadlock —
//! the interleaved schedule included, where Megatron-LM pairs sends and receives by hand.
//!
//! Each link is a two-rank communicator used in one direction: rank 0 of the link sends, rank
//! 1 receives, so each communicator belongs to one thread. Link `i` carries activations from
//! stage `i` to stage `(i + 1) % p`; gradient link `i` carries them back from `(i + 1) % p`
//! to `i`. The links from the last stage to the first (`i = p - 1`) exist only with
//! interleaving, where a micro-batch passes the stages several times.
//!
//! **On the devices.** Once [`PipeLinks::attach`] has connected a link's two ranks on their
//! devices ([`DeviceComm`]: `Emu`, stages that are threads of one process), the link's
//! transfers of views are the send and receive kernels over peer memory, with no host copy:
//! a posted send is a device copy of the view (the stage may overwrite the view at once),
//! which the link's thread sends with [`DeviceComm::send`]; a receive is
//! [`DeviceComm::recv`] into the view. The send kernel waits only for the receiver's kernel to
//! start, on the link's own thread, so the schedule stays deadlock-free as on the host: each
//! send's receiver is a stage that blocks on nothing but its own inputs. Elsewhere the host
//! path stays.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use trident_collectives::{CommError, Communicator};
use trident_runtime::{host_transfers, Buffer, Device, View, ViewMut};

use super::device_comm::{Connected, DeviceComm};
use super::groups::on_host;
use super::{ParallelError, Result};

/// Tag of every pipeline transfer (each link carries one kind, in order).
const TAG: u32 = 0x5051;

/// What a link's send thread is handed.
enum Job {
    /// Host data, sent through the link's communicator.
    Host(Vec<f32>),
    /// A device copy of the data, sent by the link's device communicator.
    Device(Buffer<f32>),
    /// Connect the link on `device` as emulated device `ordinal` (the stage's), answering
    /// whether the link now runs on the devices.
    Connect(Device, Option<u32>, Sender<Result<bool>>),
}

/// The sending end of a link: a thread that sends what it is given, in order.
struct PostedSends {
    jobs: Option<Sender<Job>>,
    done: Receiver<Result<u64>>,
    /// Sends posted and not yet seen to complete.
    pending: usize,
    /// The stage's device, where the link runs on the devices.
    device: Option<Device>,
    thread: Option<JoinHandle<()>>,
}

impl PostedSends {
    fn new(mut link: Communicator, name: String) -> Self {
        let (jobs, rx) = channel::<Job>();
        let (tx, done) = channel();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let mut dc: Option<DeviceComm> = None;
                for job in rx {
                    // Each send reports the host transfers this thread made for it.
                    let before = host_transfers();
                    let sent = match job {
                        Job::Host(data) => link.send(&data, 1, TAG).map_err(ParallelError::from),
                        Job::Device(data) => match (&mut dc, data.view(..)) {
                            (Some(d), Ok(view)) => d.send(&mut link, &view, 1),
                            (None, _) => Err(ParallelError::Unsupported(
                                "a device send on a pipeline link that is not on the devices".into(),
                            )),
                            (_, Err(e)) => Err(e.into()),
                        },
                        Job::Connect(device, ordinal, answer) => {
                            trident_simt::set_emulated_device(ordinal);
                            let connected = DeviceComm::connect(&mut link, &device).map(|c| match c {
                                Connected::Device(d) => {
                                    dc = Some(*d);
                                    true
                                }
                                Connected::Host(_) => false,
                            });
                            let _ = answer.send(connected);
                            continue;
                        }
                    };
                    if tx.send(sent.map(|()| host_transfers() - before)).is_err() {
                        return;
                    }
                }
            })
            .expect("spawning a pipeline send thread");
        Self { jobs: Some(jobs), done, pending: 0, device: None, thread: Some(thread) }
    }

    fn stopped() -> ParallelError {
        ParallelError::Unsupported("a pipeline send thread stopped".into())
    }

    fn post(&mut self, job: Job) -> Result<()> {
        let jobs = self.jobs.as_ref().expect("the send thread runs until drop");
        jobs.send(job).map_err(|_| Self::stopped())?;
        self.pending += 1;
        Ok(())
    }

    /// Connects the link on `device` on the send thread (the receiving stage connects its end
    /// at the same point).
    fn attach(&mut self, device: &Device) -> Result<()> {
        let (answer, result) = channel();
        let jobs = self.jobs.as_ref().expect("the send thread runs until drop");
        jobs.send(Job::Connect(device.clone(), Device::emu_ordinal(), answer))
            .map_err(|_| Self::stopped())?;
        if result.recv().map_err(|_| Self::stopped())?? {
            self.device = Some(device.clone());
        }
        Ok(())
    }

    /// Posts `view`: a device copy where the link runs on the devices, else a host copy.
    fn post_view(&mut self, view: &View<f32>) -> Result<()> {
        match &self.device {
            Some(device) => {
                let mut copy = Buffer::zeros(device, view.len())?;
                copy.view_mut(..)?.copy_from(view)?;
                self.post(Job::Device(copy))
            }
            None => self.post(Job::Host(view.to_vec()?)),
        }
    }

    /// Waits until every posted send was taken by the receiver; the first failure, if any, or
    /// the host transfers the send thread made.
    fn flush(&mut self) -> Result<u64> {
        let mut first = Ok(0);
        while self.pending > 0 {
            self.pending -= 1;
            let r = self
                .done
                .recv()
                .unwrap_or_else(|_| Err(CommError::Broken("a pipeline send thread died".into()).into()));
            match (r, &mut first) {
                (Err(e), Ok(_)) => first = Err(e),
                (Ok(n), Ok(total)) => *total += n,
                _ => {}
            }
        }
        first
    }
}

impl Drop for PostedSends {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The receiving end of a link: its communicator, and its device communicator once attached.
struct Incoming {
    link: Communicator,
    device: Option<Box<DeviceComm>>,
}

impl Incoming {
    fn attach(&mut self, device: &Device) -> Result<()> {
        if let Connected::Device(d) = DeviceComm::connect(&mut self.link, device)? {
            self.device = Some(d);
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [f32]) -> Result<()> {
        Ok(self.link.recv(buf, 0, TAG)?)
    }

    fn recv_view(&mut self, view: &mut ViewMut<f32>) -> Result<()> {
        match &mut self.device {
            Some(d) => d.recv(&mut self.link, view, 0),
            None => on_host(view, |h| self.link.recv(h, 0, TAG).map_err(ParallelError::from)),
        }
    }
}

/// What a stage's pipeline transfers have done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PipeTraffic {
    /// Transfers of views that ran on the devices (sends and receives).
    pub on_device: u64,
    /// Transfers of views that went through host memory.
    pub on_host: u64,
    /// Host transfers ([`trident_runtime::host_transfers`]) made for them, by the stage and
    /// by its send threads (counted when the sends are flushed).
    pub host_transfers: u64,
}

/// One stage's ends of the pipeline links (none in a pipeline of one stage).
pub struct PipeLinks {
    activations_in: Option<Incoming>,
    gradients_in: Option<Incoming>,
    activations_out: Option<PostedSends>,
    gradients_out: Option<PostedSends>,
    /// The links the stage walks, in the order every stage walks them: (link, whether it
    /// carries activations, whether this stage sends on it).
    order: Vec<(usize, bool, bool)>,
    traffic: PipeTraffic,
}

impl PipeLinks {
    /// The links of this rank of `pipe` (the pipeline group: stage = rank). With `wrap`, also
    /// the links between the last stage and the first (interleaving). Every stage calls this.
    pub fn new(pipe: &mut Communicator, wrap: bool) -> Result<Self> {
        let (p, me) = (pipe.size(), pipe.rank());
        let mut links = Self {
            activations_in: None,
            gradients_in: None,
            activations_out: None,
            gradients_out: None,
            order: Vec::new(),
            traffic: PipeTraffic::default(),
        };
        if p == 1 {
            return Ok(links);
        }
        let count = if wrap { p } else { p - 1 };
        // Every stage walks the links in the same order, so each pair meets at its link.
        for i in 0..count {
            let next = (i + 1) % p;
            if me == i || me == next {
                let link = pipe.new_group(&format!("pipe-activations-{i}"), &[i, next])?;
                if me == i {
                    links.activations_out = Some(PostedSends::new(link, format!("pipe-send-f{me}")));
                } else {
                    links.activations_in = Some(Incoming { link, device: None });
                }
                links.order.push((i, true, me == i));
                let link = pipe.new_group(&format!("pipe-gradients-{i}"), &[next, i])?;
                if me == next {
                    links.gradients_out = Some(PostedSends::new(link, format!("pipe-send-b{me}")));
                } else {
                    links.gradients_in = Some(Incoming { link, device: None });
                }
                links.order.push((i, false, me == next));
            }
        }
        Ok(links)
    }

    /// Connects the stage's links on `device`, this rank's device (every stage calls it at the
    /// same point; the two ends of each link meet in the order [`PipeLinks::new`] made them):
    /// their transfers of views then run on the devices where [`DeviceComm::connect`] can
    /// connect the link's two ranks, else on the host path. A no-op in a pipeline of one stage.
    ///
    /// # Errors
    /// As [`DeviceComm::connect`].
    pub fn attach(&mut self, device: &Device) -> Result<()> {
        for &(_, activations, sends) in &self.order.clone() {
            match (activations, sends) {
                (true, true) => self.activations_out.as_mut().map_or(Ok(()), |l| l.attach(device))?,
                (true, false) => self.activations_in.as_mut().map_or(Ok(()), |l| l.attach(device))?,
                (false, true) => self.gradients_out.as_mut().map_or(Ok(()), |l| l.attach(device))?,
                (false, false) => self.gradients_in.as_mut().map_or(Ok(()), |l| l.attach(device))?,
            }
        }
        Ok(())
    }

    /// Whether every link of this stage runs on the devices (true for a stage with none).
    pub fn on_device(&self) -> bool {
        self.activations_in.as_ref().is_none_or(|l| l.device.is_some())
            && self.gradients_in.as_ref().is_none_or(|l| l.device.is_some())
            && self.activations_out.as_ref().is_none_or(|l| l.device.is_some())
            && self.gradients_out.as_ref().is_none_or(|l| l.device.is_some())
    }

    /// What the transfers of views have done so far.
    pub fn traffic(&self) -> PipeTraffic {
        self.traffic
    }

    fn missing(what: &str) -> ParallelError {
        ParallelError::Unsupported(format!("this pipeline stage has no link for {what}"))
    }

    /// Counts one transfer of a view over a link on the devices (or not) and the host
    /// transfers made since `before`.
    fn count(&mut self, on_device: bool, before: u64) {
        if on_device {
            self.traffic.on_device += 1;
        } else {
            self.traffic.on_host += 1;
        }
        self.traffic.host_transfers += host_transfers() - before;
    }

    /// Posts an activation for the next stage.
    pub fn send_activation(&mut self, data: Vec<f32>) -> Result<()> {
        self.activations_out
            .as_mut()
            .ok_or_else(|| Self::missing("sending activations"))?
            .post(Job::Host(data))
    }

    /// Posts a gradient for the previous stage.
    pub fn send_gradient(&mut self, data: Vec<f32>) -> Result<()> {
        self.gradients_out.as_mut().ok_or_else(|| Self::missing("sending gradients"))?.post(Job::Host(data))
    }

    /// Posts the activation in `view` for the next stage (on the devices where the link is;
    /// the view may be overwritten as soon as this returns).
    pub fn send_activation_view(&mut self, view: &View<f32>) -> Result<()> {
        let before = host_transfers();
        let link = self.activations_out.as_mut().ok_or_else(|| Self::missing("sending activations"))?;
        link.post_view(view)?;
        let on_device = link.device.is_some();
        self.count(on_device, before);
        Ok(())
    }

    /// Posts the gradient in `view` for the previous stage (as
    /// [`PipeLinks::send_activation_view`]).
    pub fn send_gradient_view(&mut self, view: &View<f32>) -> Result<()> {
        let before = host_transfers();
        let link = self.gradients_out.as_mut().ok_or_else(|| Self::missing("sending gradients"))?;
        link.post_view(view)?;
        let on_device = link.device.is_some();
        self.count(on_device, before);
        Ok(())
    }

    /// Receives the previous stage's next activation.
    pub fn recv_activation(&mut self, buf: &mut [f32]) -> Result<()> {
        self.activations_in.as_mut().ok_or_else(|| Self::missing("receiving activations"))?.recv(buf)
    }

    /// Receives the next stage's next gradient.
    pub fn recv_gradient(&mut self, buf: &mut [f32]) -> Result<()> {
        self.gradients_in.as_mut().ok_or_else(|| Self::missing("receiving gradients"))?.recv(buf)
    }

    /// Receives the previous stage's next activation into `view` (on the devices where the
    /// link is).
    pub fn recv_activation_view(&mut self, view: &mut ViewMut<f32>) -> Result<()> {
        let before = host_transfers();
        let link = self.activations_in.as_mut().ok_or_else(|| Self::missing("receiving activations"))?;
        link.recv_view(view)?;
        let on_device = link.device.is_some();
        self.count(on_device, before);
        Ok(())
    }

    /// Receives the next stage's next gradient into `view` (on the devices where the link is).
    pub fn recv_gradient_view(&mut self, view: &mut ViewMut<f32>) -> Result<()> {
        let before = host_transfers();
        let link = self.gradients_in.as_mut().ok_or_else(|| Self::missing("receiving gradients"))?;
        link.recv_view(view)?;
        let on_device = link.device.is_some();
        self.count(on_device, before);
        Ok(())
    }

    /// Waits until the neighbours took everything this stage sent.
    pub fn flush(&mut self) -> Result<()> {
        let a = self.activations_out.as_mut().map_or(Ok(0), PostedSends::flush);
        let g = self.gradients_out.as_mut().map_or(Ok(0), PostedSends::flush);
        let (a, g) = (a?, g?);
        self.traffic.host_transfers += a + g;
        Ok(())
    }
}
