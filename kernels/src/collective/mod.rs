//! Collective kernels over peer memory: every rank's kernel reads and writes the buffers of
//! the others (mapped into its address space) and synchronises with them through flags.
//!
//! - [`ring`]: ring reduce-scatter, all-gather, and the all-reduce made of the two, pipelined
//!   as NCCL's simple protocol is: block `b` of every rank works on slice `b` of each segment,
//!   so the grid's blocks are the chunks in flight, each with its own flags;
//! - [`one_shot`]: every rank reads all peers' inputs and sums them (small messages);
//! - [`two_shot`]: a reduce-scatter by reading, then an all-gather by writing (medium ones);
//! - [`send_recv`]: point-to-point send and receive between two ranks (a pipeline link), the
//!   sender pushing into the receiver's buffer once the receiver has said it is free;
//! - [`broadcast`]: from any root rank to every rank of the group, the root pushing.
//!
//! Every kernel comes in f32 and bf16 (`u16` bits, summed in f32 and rounded once) and takes
//! any length: segments and slices are balanced (sizes differ by at most one element), so
//! lengths need not be multiples of the world size, the grid or a vector width.
//!
//! The buffers and flags each rank passes, and the protocol the flags follow, are in
//! [`layout`]; the waits, their deadlines and the status a kernel leaves when a peer never
//! arrives are in [`wait`]; [`planted`] holds host-only variants of the send and broadcast
//! kernels with one step of their protocol broken, for the emulator's tests.

pub mod broadcast;
pub mod element;
pub mod layout;
pub mod one_shot;
pub mod planted;
pub mod ring;
pub mod send_recv;
pub mod two_shot;
pub mod wait;
