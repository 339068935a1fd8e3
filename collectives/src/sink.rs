//! Where received bytes go: copied into a buffer or reduced into an accumulator.

use crate::element::{Combine, Element, ReduceOp};

/// Consumer of one incoming payload. The transport hands over the payload in order, in
/// pieces that are whole multiples of [`Sink::granule`] bytes, possibly unaligned.
pub trait Sink {
    /// Bytes every piece is a whole multiple of (an element's size, for reductions).
    fn granule(&self) -> usize;
    /// Takes the payload's bytes `offset..offset + bytes.len()`.
    fn accept(&mut self, offset: usize, bytes: &[u8]);

    /// The destination itself, when the payload is to be stored verbatim: a transport that
    /// reads from a socket can then read straight into it, skipping its staging buffer.
    fn direct(&mut self) -> Option<&mut [u8]> {
        None
    }
}

/// Copies the payload into `dst`.
pub struct CopySink<'a> {
    /// Where the payload goes; it holds the whole payload.
    pub dst: &'a mut [u8],
    /// See [`Sink::granule`].
    pub granule: usize,
}

impl Sink for CopySink<'_> {
    fn granule(&self) -> usize {
        self.granule
    }
    fn accept(&mut self, offset: usize, bytes: &[u8]) {
        self.dst[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    fn direct(&mut self) -> Option<&mut [u8]> {
        Some(self.dst)
    }
}

/// `acc = acc (op) payload`, or `out = local (op) payload` when `local` is given.
pub struct ReduceSink<'a, T: Element> {
    /// The accumulator, or the output where `local` is given.
    pub out: &'a mut [T],
    /// This rank's own values, where they are not already in `out`.
    pub local: Option<&'a [T]>,
    /// The reduction.
    pub op: ReduceOp,
    /// Who computes it (the host, or a device kernel).
    pub combine: &'a dyn Combine<T>,
}

const STAGE_ELEMS_BYTES: usize = 4096;

impl<T: Element> ReduceSink<'_, T> {
    fn apply(&mut self, first: usize, incoming: &[T]) {
        let out = &mut self.out[first..first + incoming.len()];
        match self.local {
            Some(local) => {
                self.combine.reduce_into(self.op, out, &local[first..first + incoming.len()], incoming)
            }
            None => self.combine.reduce(self.op, out, incoming),
        }
    }
}

impl<T: Element> Sink for ReduceSink<'_, T> {
    fn granule(&self) -> usize {
        std::mem::size_of::<T>()
    }

    fn accept(&mut self, offset: usize, bytes: &[u8]) {
        let size = std::mem::size_of::<T>();
        let first = offset / size;
        if let Ok(incoming) = bytemuck::try_cast_slice::<u8, T>(bytes) {
            self.apply(first, incoming);
            return;
        }
        // Unaligned piece: stage it through an aligned buffer.
        let mut stage = [0u64; STAGE_ELEMS_BYTES / 8];
        let per = STAGE_ELEMS_BYTES / size;
        for (i, part) in bytes.chunks(per * size).enumerate() {
            let staged = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut stage)[..part.len()];
            staged.copy_from_slice(part);
            let incoming: &[T] = bytemuck::cast_slice(staged);
            self.apply(first + i * per, incoming);
        }
    }
}
