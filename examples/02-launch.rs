//! Loading Trident's kernels on a device and launching them through the checked wrappers.
//! On `Emu` the kernels run in the SIMT emulator; on `Cuda` the same kernels run as PTX.
//!
//! `cargo run --release --example 02-launch [emu|cuda]`

use trident::launch::{self, Gemm, Kernels};
use trident::runtime::{Buffer, Device};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match std::env::args().nth(1).as_deref() {
        Some("cuda") => Device::cuda(0)?,
        _ => Device::Emu,
    };
    let kernels = Kernels::load(&device)?;

    // GeLU of a vector.
    let x = Buffer::from_slice(&device, &[-2.0f32, -1.0, 0.0, 1.0, 2.0])?;
    let mut y = Buffer::<f32>::zeros(&device, 5)?;
    launch::gelu_forward_v4(&kernels, &mut y.view_mut(..)?, &x.view(..)?)?;
    println!("gelu({:?}) = {:?}", x.to_vec()?, y.to_vec()?);

    // C = A B^T for A: 2 x 3, B: 2 x 3 (stored [n, k], as a linear layer's weight).
    let a = Buffer::from_slice(&device, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    let b = Buffer::from_slice(&device, &[1.0f32, 0.0, 0.0, 0.0, 1.0, 1.0])?;
    let mut c = Buffer::<f32>::zeros(&device, 4)?;
    launch::gemm(&kernels, &mut c.view_mut(..)?, &a.view(..)?, &b.view(..)?, &Gemm::new(2, 2, 3).trans_b())?;
    println!("A B^T = {:?}", c.to_vec()?);

    // A launch that does not fit its buffers is refused before it runs.
    let err = launch::gemm(
        &kernels,
        &mut c.view_mut(..)?,
        &a.view(..)?,
        &b.view(..)?,
        &Gemm::new(3, 2, 3).trans_b(),
    )
    .unwrap_err();
    println!("refused: {err}");
    Ok(())
}
