//! Criterion benchmarks of the foundation kernels on every available device: `Emu` at small
//! sizes (emulated: these figures measure the emulator, not a GPU) and `Cuda` when present.
//! GEMM reports FLOP/s (as elements of 2*M*N*K), the memory-bound kernels bytes/s.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use trident::launch::{self, Gemm, Kernels};
use trident::runtime::{Buffer, Device};

fn devices() -> Vec<(String, Device, bool)> {
    let mut out = vec![("emu (emulated)".to_string(), Device::Emu, true)];
    match Device::cuda(0) {
        Ok(d) => out.push(("cuda".to_string(), d, false)),
        Err(e) => eprintln!("cuda skipped: {e}"),
    }
    out
}

fn data(device: &Device, n: usize) -> Buffer<f32> {
    let v: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    Buffer::from_slice(device, &v).unwrap()
}

fn elementwise(c: &mut Criterion) {
    for (label, device, emulated) in devices() {
        let k = Kernels::load(&device).unwrap();
        let mut g = c.benchmark_group(format!("elementwise/{label}"));
        if emulated {
            g.sample_size(10);
        }
        let n = if emulated { 1 << 14 } else { 1 << 26 };
        let (a, b) = (data(&device, n), data(&device, n));
        let mut out = Buffer::<f32>::zeros(&device, n).unwrap();
        g.throughput(Throughput::Bytes((3 * 4 * n) as u64));
        g.bench_function(BenchmarkId::new("add", n), |bench| {
            bench.iter(|| {
                launch::add(&k, &mut out.view_mut(..).unwrap(), &a.view(..).unwrap(), &b.view(..).unwrap())
                    .unwrap();
                device.synchronize().unwrap();
            })
        });
        g.throughput(Throughput::Bytes((2 * 4 * n) as u64));
        g.bench_function(BenchmarkId::new("gelu_forward_v4", n), |bench| {
            bench.iter(|| {
                launch::gelu_forward_v4(&k, &mut out.view_mut(..).unwrap(), &a.view(..).unwrap()).unwrap();
                device.synchronize().unwrap();
            })
        });
        g.throughput(Throughput::Bytes((3 * 4 * n) as u64));
        g.bench_function(BenchmarkId::new("gelu_backward_v4", n), |bench| {
            bench.iter(|| {
                launch::gelu_backward_v4(
                    &k,
                    &mut out.view_mut(..).unwrap(),
                    &a.view(..).unwrap(),
                    &b.view(..).unwrap(),
                )
                .unwrap();
                device.synchronize().unwrap();
            })
        });
        g.finish();
    }
}

fn gemm(c: &mut Criterion) {
    for (label, device, emulated) in devices() {
        let k = Kernels::load(&device).unwrap();
        let mut g = c.benchmark_group(format!("gemm_f32/{label}"));
        if emulated {
            g.sample_size(10);
        }
        let sizes: &[usize] = if emulated { &[64, 128] } else { &[1024, 4096] };
        for &s in sizes {
            let (a, b) = (data(&device, s * s), data(&device, s * s));
            let mut out = Buffer::<f32>::zeros(&device, s * s).unwrap();
            // Elements of throughput are FLOPs: criterion's "elem/s" reads as FLOP/s.
            g.throughput(Throughput::Elements((2 * s * s * s) as u64));
            for (name, spec) in [
                ("nn", Gemm::new(s, s, s)),
                ("nt", Gemm::new(s, s, s).trans_b()),
                ("tn", Gemm::new(s, s, s).trans_a()),
            ] {
                g.bench_function(BenchmarkId::new(name, s), |bench| {
                    bench.iter(|| {
                        launch::gemm(
                            &k,
                            &mut out.view_mut(..).unwrap(),
                            &a.view(..).unwrap(),
                            &b.view(..).unwrap(),
                            &spec,
                        )
                        .unwrap();
                        device.synchronize().unwrap();
                    })
                });
            }
        }
        g.finish();
    }
}

/// The benchmark group, in a private module: `criterion_group!` defines an undocumented
/// `pub fn`.
mod group {
    use super::*;
    criterion_group!(benches, elementwise, gemm);
}
use group::benches;

criterion_main!(benches);
