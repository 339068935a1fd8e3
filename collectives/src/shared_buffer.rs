//! Buffers that the ranks of a communicator can reach in each other's memory, so that a
//! collective on them moves each byte with plain loads and stores: registered buffers, in
//! the sense of MPI's shared windows or NCCL's buffer registration.

use crate::element::Element;
use crate::transport::SharedRegion;
use std::ops::{Deref, DerefMut};

enum Storage<T> {
    /// Mapped by every member ([`crate::transport::Fabric::share`]).
    Shared(SharedRegion),
    /// Ordinary memory, where the transport shares none (ranks that are threads already
    /// reach each other's memory; TCP ranks cannot).
    Private(Vec<T>),
}

/// `len` elements of `T`, zero-initialised, made by [`crate::Communicator::shared_buffer`]
/// on every member of a communicator and used like a slice. Collectives called with it
/// (e.g. [`crate::Communicator::all_reduce_shared`]) read and write the members' buffers in
/// place where the transport allows.
pub struct SharedBuffer<T: Element> {
    storage: Storage<T>,
    len: usize,
    rank: usize,
    /// Which allocation of its communicator this is; the same on every member.
    pub(crate) id: u64,
    /// The communicator that made it (its group key), whose ranks index the parts.
    pub(crate) owner: String,
}

impl<T: Element> SharedBuffer<T> {
    pub(crate) fn shared(region: SharedRegion, len: usize, rank: usize, id: u64, owner: String) -> Self {
        debug_assert!(region.bytes() >= len * std::mem::size_of::<T>());
        SharedBuffer { storage: Storage::Shared(region), len, rank, id, owner }
    }

    pub(crate) fn private(len: usize, rank: usize, id: u64, owner: String) -> Self {
        SharedBuffer { storage: Storage::Private(vec![T::zeroed(); len]), len, rank, id, owner }
    }

    /// Where every member's buffer lies in this process, by rank; `None` for a private one.
    pub(crate) fn region(&self) -> Option<&SharedRegion> {
        match &self.storage {
            Storage::Shared(region) => Some(region),
            Storage::Private(_) => None,
        }
    }

    /// Whether the other members can reach this buffer in place.
    pub fn is_shared(&self) -> bool {
        self.region().is_some()
    }
}

impl<T: Element> Deref for SharedBuffer<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.storage {
            // SAFETY: this rank's part holds `len` elements of `T` (page-aligned, zero-filled
            // when created), and peers write it only inside collectives on `&mut self`.
            Storage::Shared(region) => unsafe {
                std::slice::from_raw_parts(region.part(self.rank) as *const T, self.len)
            },
            Storage::Private(v) => v,
        }
    }
}

impl<T: Element> DerefMut for SharedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.storage {
            // SAFETY: as for `deref`, and `&mut self` excludes every other use here.
            Storage::Shared(region) => unsafe {
                std::slice::from_raw_parts_mut(region.part(self.rank) as *mut T, self.len)
            },
            Storage::Private(v) => v,
        }
    }
}
