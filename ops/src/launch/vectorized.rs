//! Launch wrappers of the 128-bit elementwise kernels (`kernels/src/elementwise_vec.rs`): f32
//! and bf16 (`u16` bits) residual adds and GeLU.
//!
//! Each passes `vectorized = 1` where every view starts 16-byte aligned, so the kernel moves
//! whole 16-byte groups and only the ends (or, unaligned, every element) one at a time.

use bytemuck::Pod;
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// 1 where every address is 16-byte aligned (a 128-bit access's alignment), else 0.
pub(super) fn vectorized(addrs: &[u64]) -> u32 {
    u32::from(addrs.iter().all(|a| a % 16 == 0))
}

/// Threads for `n` elements at `per_thread` each (the vector width), grid-stride beyond.
fn grid(n: usize, per_thread: usize) -> LaunchConfig {
    LaunchConfig::for_items(n.div_ceil(per_thread), ELEMENTWISE_THREADS, MAX_BLOCKS)
}

/// Launches `kernel(out, inputs.., n, vectorized)` over `out.len()` elements, the inputs of
/// the same length; `None` for an input is `out` itself (read before written per element).
fn launch_map<T: Pod>(
    k: &Kernels,
    kernel: &'static str,
    per_thread: usize,
    out: &mut ViewMut<T>,
    inputs: &[(&'static str, Option<&View<T>>)],
) -> Result<()> {
    let n = out.len();
    let ch = Check::new(k.device(), kernel);
    ch.output("out", out, n)?;
    let mut addrs = vec![out.addr_mut()];
    for (what, v) in inputs {
        if let Some(v) = v {
            ch.input(what, v, n)?;
            addrs.push(v.addr());
        }
    }
    let vec = vectorized(&addrs);
    let dst = out.arg_mut();
    let mut args = vec![dst];
    args.extend(inputs.iter().map(|(_, v)| v.map_or(dst, View::arg)));
    args.push(to_u32("length", n)?.into());
    args.push(vec.into());
    // SAFETY: every view holds `n` elements on the kernels' device, aligned as `vec` says;
    // where `out` is also an input each thread reads its elements before writing them.
    unsafe { k.launch(kernel, &grid(n, per_thread), &args)? };
    Ok(())
}

/// `out = a + b`, 4 f32 per access.
pub fn add_v4(k: &Kernels, out: &mut ViewMut<f32>, a: &View<f32>, b: &View<f32>) -> Result<()> {
    launch_map(k, "add_v4_f32", 4, out, &[("a", Some(a)), ("b", Some(b))])
}

/// `out += b`, 4 f32 per access.
pub fn add_assign_v4(k: &Kernels, out: &mut ViewMut<f32>, b: &View<f32>) -> Result<()> {
    launch_map(k, "add_v4_f32", 4, out, &[("a", None), ("b", Some(b))])
}

/// `out = bf16(a + b)` on bf16 tensors (f32 sum), 8 per access.
pub fn add_bf16(k: &Kernels, out: &mut ViewMut<u16>, a: &View<u16>, b: &View<u16>) -> Result<()> {
    launch_map(k, "add_bf16", 8, out, &[("a", Some(a)), ("b", Some(b))])
}

/// `out = gelu(inp)`, 4 f32 per access.
pub fn gelu_forward_v4(k: &Kernels, out: &mut ViewMut<f32>, inp: &View<f32>) -> Result<()> {
    launch_map(k, "gelu_forward_v4_f32", 4, out, &[("inp", Some(inp))])
}

/// `out = bf16(gelu(inp))` on bf16 tensors, 8 per access.
pub fn gelu_forward_bf16(k: &Kernels, out: &mut ViewMut<u16>, inp: &View<u16>) -> Result<()> {
    launch_map(k, "gelu_forward_bf16", 8, out, &[("inp", Some(inp))])
}

/// `dinp = gelu'(inp) * dout`, 4 f32 per access.
pub fn gelu_backward_v4(
    k: &Kernels,
    dinp: &mut ViewMut<f32>,
    inp: &View<f32>,
    dout: &View<f32>,
) -> Result<()> {
    launch_map(k, "gelu_backward_v4_f32", 4, dinp, &[("inp", Some(inp)), ("dout", Some(dout))])
}

/// `d = gelu'(inp) * d` in place, 4 f32 per access.
pub fn gelu_backward_v4_inplace(k: &Kernels, d: &mut ViewMut<f32>, inp: &View<f32>) -> Result<()> {
    launch_map(k, "gelu_backward_v4_f32", 4, d, &[("inp", Some(inp)), ("dout", None)])
}

/// `d = bf16(gelu'(inp) * d)` in place on bf16 tensors, 8 per access.
pub fn gelu_backward_bf16_inplace(k: &Kernels, d: &mut ViewMut<u16>, inp: &View<u16>) -> Result<()> {
    launch_map(k, "gelu_backward_bf16", 8, d, &[("inp", Some(inp)), ("dout", None)])
}

/// `dinp = bf16(gelu'(inp) * dout)` on bf16 tensors, 8 per access; `dinp` may alias nothing.
pub fn gelu_backward_bf16(
    k: &Kernels,
    dinp: &mut ViewMut<u16>,
    inp: &View<u16>,
    dout: &View<u16>,
) -> Result<()> {
    launch_map(k, "gelu_backward_bf16", 8, dinp, &[("inp", Some(inp)), ("dout", Some(dout))])
}
