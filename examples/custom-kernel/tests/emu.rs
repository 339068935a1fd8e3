//! The example's kernels on `Emu` through `trident-runtime`, against host references that
//! follow the kernels' order of operations (so results are compared bit for bit).

use custom_kernel::{load, reverse_tiles, saxpy, sum, Error, MAX_BLOCKS, THREADS, TILE};
use trident_runtime::{Buffer, Device, LaunchConfig};

/// Deterministic inputs in [-1, 1) with varied exponents.
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

#[test]
fn saxpy_matches_fma_elementwise_on_a_ragged_length() {
    let device = Device::Emu;
    let module = load(&device).unwrap();
    // Not a multiple of the block: the last block's tail threads must not write.
    let n = 3 * THREADS as usize + 37;
    let (x, y0) = (data(n, 1), data(n, 2));
    let dx = Buffer::from_slice(&device, &x).unwrap();
    let mut dy = Buffer::from_slice(&device, &y0).unwrap();
    saxpy(&module, 1.75, &dx.view(..).unwrap(), &mut dy.view_mut(..).unwrap()).unwrap();
    let want: Vec<f32> = x.iter().zip(&y0).map(|(&x, &y)| 1.75f32.mul_add(x, y)).collect();
    assert_eq!(dy.to_vec().unwrap(), want);

    // A sub-view: only its elements change.
    let mut dy = Buffer::from_slice(&device, &y0).unwrap();
    saxpy(&module, -2.0, &dx.view(10..20).unwrap(), &mut dy.view_mut(100..110).unwrap()).unwrap();
    let got = dy.to_vec().unwrap();
    for (i, (&g, &y)) in got.iter().zip(&y0).enumerate() {
        let want = if (100..110).contains(&i) { (-2f32).mul_add(x[i - 90], y) } else { y };
        assert_eq!(g.to_bits(), want.to_bits(), "element {i}");
    }
}

/// `block_sum_f32` then the host's sum of the partials, in the kernel's order.
fn reference_sum(x: &[f32]) -> f32 {
    let cfg = LaunchConfig::for_items(x.len(), THREADS, MAX_BLOCKS);
    let (threads, blocks) = (THREADS as usize, cfg.grid[0] as usize);
    let stride = threads * blocks;
    let mut total = 0f32;
    for b in 0..blocks {
        let mut sums: Vec<f32> =
            (0..threads).map(|t| x.iter().skip(b * threads + t).step_by(stride).sum()).collect();
        let mut half = threads / 2;
        while half > 0 {
            for t in 0..half {
                sums[t] += sums[t + half];
            }
            half /= 2;
        }
        total += sums[0];
    }
    total
}

#[test]
fn block_sum_in_dynamic_shared_memory_matches_the_reference_bit_for_bit() {
    let device = Device::Emu;
    let module = load(&device).unwrap();
    // One partial block, a few blocks, and a grid-stride loop over more than MAX_BLOCKS blocks.
    for n in [1, 200, 5 * THREADS as usize + 3, (MAX_BLOCKS as usize + 5) * THREADS as usize] {
        let x = data(n, n as u32);
        let dx = Buffer::from_slice(&device, &x).unwrap();
        let got = sum(&module, &dx.view(..).unwrap()).unwrap();
        assert_eq!(got.to_bits(), reference_sum(&x).to_bits(), "n = {n}");
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        assert!((f64::from(got) - exact).abs() < 1e-3, "n = {n}: {got} vs {exact}");
    }
}

#[test]
fn reverse_tiles_through_static_shared_memory() {
    let device = Device::Emu;
    let module = load(&device).unwrap();
    let x = data(3 * TILE, 7);
    let mut dx = Buffer::from_slice(&device, &x).unwrap();
    reverse_tiles(&module, &mut dx.view_mut(..).unwrap()).unwrap();
    let want: Vec<f32> = x.chunks(TILE).flat_map(|c| c.iter().rev().copied()).collect();
    assert_eq!(dx.to_vec().unwrap(), want);

    let e = reverse_tiles(&module, &mut dx.view_mut(..TILE + 1).unwrap()).unwrap_err();
    assert!(matches!(e, Error::Length { op: "reverse_tiles", lengths: (257, 512) }), "{e}");
}

#[test]
fn the_wrappers_refuse_mismatched_lengths_and_devices_before_launching() {
    let device = Device::Emu;
    let module = load(&device).unwrap();
    let dx = Buffer::from_slice(&device, &[1f32; 8]).unwrap();
    let mut dy = Buffer::from_slice(&device, &[0f32; 7]).unwrap();
    let e = saxpy(&module, 1.0, &dx.view(..).unwrap(), &mut dy.view_mut(..).unwrap()).unwrap_err();
    assert!(matches!(e, Error::Length { op: "saxpy", lengths: (8, 7) }), "{e}");
    assert_eq!(dy.to_vec().unwrap(), [0f32; 7]);

    let host = Buffer::from_slice(&Device::Cpu, &[1f32; 4]).unwrap();
    let e = sum(&module, &host.view(..).unwrap()).unwrap_err();
    assert!(matches!(e, Error::Device { op: "sum" }), "{e}");
    assert!(e.to_string().contains("copy it there first"), "{e}");

    // `Cpu` has no kernels: loading the module there says so.
    assert!(matches!(load(&Device::Cpu), Err(Error::Runtime(_))));
}
