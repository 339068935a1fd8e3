//! Criterion benchmarks of in-process AllReduce (ranks as threads), with throughput in bytes
//! so criterion reports GB/s. Shared-memory and TCP numbers need real processes: run
//! `trident-coll bench --transport shm|tcp --world-size N` (release build).

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use trident_collectives::{CommConfig, Communicator, InprocFabric, ReduceOp};

/// Rank threads that run `iters` AllReduces of `len` f32 on command; rank 0 is driven by
/// the benchmark thread itself.
struct Ranks {
    rank0: Communicator,
    others: Vec<mpsc::Sender<(usize, u64)>>,
    done: mpsc::Receiver<()>,
    buf: Vec<f32>,
}

impl Ranks {
    fn new(world: usize, max_len: usize) -> Ranks {
        let fabric = Arc::new(InprocFabric::new());
        let (done_tx, done) = mpsc::channel();
        let mut others = Vec::new();
        for rank in 1..world {
            let (tx, rx) = mpsc::channel::<(usize, u64)>();
            let fabric = fabric.clone();
            let done_tx = done_tx.clone();
            thread::spawn(move || {
                let mut comm = Communicator::world(fabric, rank, world, CommConfig::default()).unwrap();
                let mut buf = vec![1.0f32; max_len];
                for (len, iters) in rx {
                    for _ in 0..iters {
                        comm.all_reduce(&mut buf[..len], ReduceOp::Sum).unwrap();
                    }
                    done_tx.send(()).unwrap();
                }
            });
            others.push(tx);
        }
        let rank0 = Communicator::world(fabric, 0, world, CommConfig::default()).unwrap();
        Ranks { rank0, others, done, buf: vec![1.0f32; max_len] }
    }

    fn run(&mut self, len: usize, iters: u64) {
        for tx in &self.others {
            tx.send((len, iters)).unwrap();
        }
        for _ in 0..iters {
            self.rank0.all_reduce(&mut self.buf[..len], ReduceOp::Sum).unwrap();
        }
        for _ in &self.others {
            self.done.recv().unwrap();
        }
    }
}

fn all_reduce_inproc(c: &mut Criterion) {
    let sizes = [4 << 10, 1 << 20, 16 << 20, 64 << 20];
    for world in [2, 4] {
        let mut ranks = Ranks::new(world, sizes[sizes.len() - 1] / 4);
        let mut group = c.benchmark_group(format!("all_reduce_inproc_{world}ranks"));
        group.sample_size(10);
        for bytes in sizes {
            // busbw = algbw * 2(n-1)/n: report bus bytes so criterion's GB/s is busbw.
            let bus = bytes as u64 * 2 * (world as u64 - 1) / world as u64;
            group.throughput(Throughput::Bytes(bus));
            group.bench_with_input(BenchmarkId::from_parameter(bytes), &bytes, |b, &bytes| {
                b.iter_custom(|iters| {
                    let start = std::time::Instant::now();
                    ranks.run(bytes / 4, iters);
                    start.elapsed()
                })
            });
        }
        group.finish();
    }
}

/// The benchmark group, in a private module: `criterion_group!` defines a `pub fn` without
/// documentation.
mod group {
    use super::*;
    criterion_group!(benches, all_reduce_inproc);
}

/// Runs the benchmarks (what `criterion_main!` expands to).
fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}
