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

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use trident_collectives::{CommError, Communicator};

use super::{ParallelError, Result};

/// Tag of every pipeline transfer (each link carries one kind, in order).
const TAG: u32 = 0x5051;

/// The sending end of a link: a thread that sends what it is given, in order.
struct PostedSends {
    jobs: Option<Sender<Vec<f32>>>,
    done: Receiver<std::result::Result<(), CommError>>,
    /// Sends posted and not yet seen to complete.
    pending: usize,
    thread: Option<JoinHandle<()>>,
}

impl PostedSends {
    fn new(mut link: Communicator, name: String) -> Self {
        let (jobs, rx) = channel::<Vec<f32>>();
        let (tx, done) = channel();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                for data in rx {
                    if tx.send(link.send(&data, 1, TAG)).is_err() {
                        return;
                    }
                }
            })
            .expect("spawning a pipeline send thread");
        Self { jobs: Some(jobs), done, pending: 0, thread: Some(thread) }
    }

    fn post(&mut self, data: Vec<f32>) -> Result<()> {
        let jobs = self.jobs.as_ref().expect("the send thread runs until drop");
        jobs.send(data).map_err(|_| ParallelError::Unsupported("a pipeline send thread stopped".into()))?;
        self.pending += 1;
        Ok(())
    }

    /// Waits until every posted send was taken by the receiver; the first failure, if any.
    fn flush(&mut self) -> Result<()> {
        let mut first = Ok(());
        while self.pending > 0 {
            self.pending -= 1;
            let r = self
                .done
                .recv()
                .unwrap_or_else(|_| Err(CommError::Broken("a pipeline send thread died".into())));
            if let (Err(e), Ok(())) = (r, &first) {
                first = Err(e.into());
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

/// One stage's ends of the pipeline links (none in a pipeline of one stage).
pub struct PipeLinks {
    activations_in: Option<Communicator>,
    gradients_in: Option<Communicator>,
    activations_out: Option<PostedSends>,
    gradients_out: Option<PostedSends>,
}

impl PipeLinks {
    /// The links of this rank of `pipe` (the pipeline group: stage = rank). With `wrap`, also
    /// the links between the last stage and the first (interleaving). Every stage calls this.
    pub fn new(pipe: &mut Communicator, wrap: bool) -> Result<Self> {
        let (p, me) = (pipe.size(), pipe.rank());
        let mut links =
            Self { activations_in: None, gradients_in: None, activations_out: None, gradients_out: None };
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
                    links.activations_in = Some(link);
                }
                let link = pipe.new_group(&format!("pipe-gradients-{i}"), &[next, i])?;
                if me == next {
                    links.gradients_out = Some(PostedSends::new(link, format!("pipe-send-b{me}")));
                } else {
                    links.gradients_in = Some(link);
                }
            }
        }
        Ok(links)
    }

    fn missing(what: &str) -> ParallelError {
        ParallelError::Unsupported(format!("this pipeline stage has no link for {what}"))
    }

    /// Posts an activation for the next stage.
    pub fn send_activation(&mut self, data: Vec<f32>) -> Result<()> {
        self.activations_out.as_mut().ok_or_else(|| Self::missing("sending activations"))?.post(data)
    }

    /// Posts a gradient for the previous stage.
    pub fn send_gradient(&mut self, data: Vec<f32>) -> Result<()> {
        self.gradients_out.as_mut().ok_or_else(|| Self::missing("sending gradients"))?.post(data)
    }

    /// Receives the previous stage's next activation.
    pub fn recv_activation(&mut self, buf: &mut [f32]) -> Result<()> {
        let link = self.activations_in.as_mut().ok_or_else(|| Self::missing("receiving activations"))?;
        Ok(link.recv(buf, 0, TAG)?)
    }

    /// Receives the next stage's next gradient.
    pub fn recv_gradient(&mut self, buf: &mut [f32]) -> Result<()> {
        let link = self.gradients_in.as_mut().ok_or_else(|| Self::missing("receiving gradients"))?;
        Ok(link.recv(buf, 0, TAG)?)
    }

    /// Waits until the neighbours took everything this stage sent.
    pub fn flush(&mut self) -> Result<()> {
        let a = self.activations_out.as_mut().map_or(Ok(()), PostedSends::flush);
        let g = self.gradients_out.as_mut().map_or(Ok(()), PostedSends::flush);
        a.and(g)
    }
}
