//! Collectives on device buffers, ranks as threads: every reduction runs the `combine_f32`
//! kernel (on the emulator for `Emu`), checked against a serial f64 reference.

use rand::Rng;
use trident::collectives::{CommConfig, Communicator, ReduceOp};
use trident::device_collectives as dc;
use trident::launch::Kernels;
use trident::runtime::{Buffer, Device};
use trident_testkit::{assert_close, kernel_tests, rng, uniform};

/// Runs `f(rank, comm)` on `world` threads and returns their results in rank order.
fn on_ranks<R: Send>(world: usize, f: impl Fn(usize, &mut Communicator) -> R + Sync) -> Vec<R> {
    let comms = Communicator::inproc_world(world, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(r, mut c)| {
                s.spawn({
                    let f = &f;
                    move || f(r, &mut c)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn collectives(device: &Device) {
    let mut rng = rng("device collectives");
    // Below and above the small-message threshold, so both AllReduce algorithms run.
    for (world, n) in [(1, 5), (2, 0), (3, 1), (2, 9973), (4, rng.gen_range(20_000..40_000))] {
        let inputs: Vec<Vec<f32>> = (0..world).map(|_| uniform(&mut rng, n, 1.0)).collect();
        let sum: Vec<f64> = (0..n).map(|i| inputs.iter().map(|v| v[i] as f64).sum()).collect();
        let max: Vec<f64> =
            (0..n).map(|i| inputs.iter().map(|v| v[i] as f64).fold(f64::NEG_INFINITY, f64::max)).collect();
        let results = on_ranks(world, |rank, comm| {
            let k = Kernels::load(device).unwrap();
            let mut a = Buffer::from_slice(device, &inputs[rank]).unwrap();
            dc::all_reduce(comm, &k, &mut a.view_mut(..).unwrap(), ReduceOp::Sum).unwrap();
            let mut m = Buffer::from_slice(device, &inputs[rank]).unwrap();
            dc::all_reduce(comm, &k, &mut m.view_mut(..).unwrap(), ReduceOp::Max).unwrap();
            (a.to_vec().unwrap(), m.to_vec().unwrap())
        });
        for (rank, (a, m)) in results.iter().enumerate() {
            assert_close(&format!("all_reduce sum, world {world}, n {n}, rank {rank}"), a, &sum, 1e-6);
            assert_close(&format!("all_reduce max, world {world}, n {n}, rank {rank}"), m, &max, 0.0);
        }

        // Reduce-scatter, all-gather and broadcast on a length the world divides.
        let share = n / world;
        let len = share * world;
        let results = on_ranks(world, |rank, comm| {
            let k = Kernels::load(device).unwrap();
            let input = Buffer::from_slice(device, &inputs[rank][..len]).unwrap();
            let mut shard = Buffer::<f32>::zeros(device, share).unwrap();
            dc::reduce_scatter(
                comm,
                &k,
                &input.view(..).unwrap(),
                &mut shard.view_mut(..).unwrap(),
                ReduceOp::Sum,
            )
            .unwrap();
            let mut gathered = Buffer::<f32>::zeros(device, len).unwrap();
            dc::all_gather(comm, &shard.view(..).unwrap(), &mut gathered.view_mut(..).unwrap()).unwrap();
            let mut b = Buffer::from_slice(device, &inputs[rank]).unwrap();
            dc::broadcast(comm, &mut b.view_mut(..).unwrap(), world - 1).unwrap();
            (shard.to_vec().unwrap(), gathered.to_vec().unwrap(), b.to_vec().unwrap())
        });
        let root: Vec<f64> = inputs[world - 1].iter().map(|&x| x as f64).collect();
        for (rank, (shard, gathered, b)) in results.iter().enumerate() {
            assert_close("reduce_scatter", shard, &sum[rank * share..(rank + 1) * share], 1e-6);
            assert_close("all_gather of the reduced shards", gathered, &sum[..len], 1e-6);
            assert_close("broadcast", b, &root, 0.0);
        }
    }
}

kernel_tests!(collectives);
