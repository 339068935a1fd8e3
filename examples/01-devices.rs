//! The three devices and their buffers.
//!
//! `cargo run --example 01-devices`

use trident::runtime::{Buffer, Device};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut devices = vec![Device::Cpu, Device::Emu];
    match Device::cuda(0) {
        Ok(gpu) => devices.push(gpu),
        Err(e) => println!("no GPU: {e}"),
    }
    for device in &devices {
        // A buffer lives on one device; views name element ranges of it.
        let mut buf = Buffer::from_slice(device, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
        let [mut head, mut tail] = buf.views_mut([0..2, 4..6])?;
        head.copy_from(&tail.as_view())?;
        tail.fill_zero()?;
        println!("{:>4}: {:?}", device.kind(), buf.to_vec()?);
    }
    Ok(())
}
