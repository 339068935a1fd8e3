//! After warm-up, collectives allocate nothing: the buffer-size paths run on buffers the
//! communicator already holds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use trident_collectives::{CommConfig, Communicator, InprocFabric, ReduceOp};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts calls on the current thread.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn every_op(c: &mut Communicator, big: &mut [f32], small: &mut [f32], out: &mut [f32]) {
    let n = c.size();
    let (right, left) = ((c.rank() + 1) % n, (c.rank() + n - 1) % n);
    c.all_reduce(big, ReduceOp::Sum).unwrap();
    c.all_reduce(small, ReduceOp::Max).unwrap();
    c.reduce_scatter(big, &mut out[..big.len() / n], ReduceOp::Sum).unwrap();
    c.all_gather(&small[..small.len() / n], &mut out[..small.len() / n * n]).unwrap();
    c.broadcast(big, 1).unwrap();
    c.broadcast(small, 2).unwrap();
    let (send, recv) = big.split_at_mut(big.len() / 2);
    c.send_recv(Some((&*send, right)), Some((recv, left)), 3).unwrap();
    c.barrier().unwrap();
}

#[test]
fn steady_state_collectives_do_not_allocate() {
    let n = 4;
    let fabric = Arc::new(InprocFabric::new());
    let counts: Vec<usize> = (0..n)
        .map(|rank| {
            let fabric = fabric.clone();
            std::thread::spawn(move || {
                let mut c = Communicator::world(fabric, rank, n, CommConfig::default()).unwrap();
                let mut big = trident_collectives::verify::input(1, rank, 0, 1 << 18);
                let mut small = trident_collectives::verify::input(2, rank, 0, 1 << 10);
                let mut out = vec![0.0f32; 1 << 18];
                every_op(&mut c, &mut big, &mut small, &mut out);
                let before = ALLOCATIONS.with(|a| a.get());
                for _ in 0..3 {
                    every_op(&mut c, &mut big, &mut small, &mut out);
                }
                ALLOCATIONS.with(|a| a.get()) - before
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert_eq!(counts, vec![0; n], "allocations per rank in steady state");
}
