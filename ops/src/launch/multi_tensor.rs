//! Launch wrappers of the multi-tensor kernels (`kernels/src/multi_tensor.rs`): AdamW over
//! every parameter tensor of a flat buffer in one launch, and the sum of squares of many
//! ranges as a grid-filling two-stage reduction.

use std::ops::Range;

use trident_kernels::multi_tensor::{CHUNK_DECAYS, CHUNK_WORDS};
use trident_runtime::{Buffer, LaunchConfig, View, ViewMut};

use super::check::Check;
use super::vectorized::vectorized;
use super::{to_u32, AdamW, Kernels, LaunchError, Result, ELEMENTWISE_THREADS};

/// Elements per chunk: 16 groups of 4 per thread of a 256-thread block.
pub const CHUNK: usize = 16 * 1024;

/// Most blocks of a multi-tensor launch: 8 per SM of a 132-SM GPU, each taking every
/// `grid`-th chunk. Fixed, so the sum of squares adds in the same order on every device.
const MAX_CHUNK_BLOCKS: usize = 1056;

/// The chunk table of `pieces` (ranges of a buffer of `len` elements, and whether each
/// decays): `[start, end, flags]` per chunk, each range cut at multiples of [`CHUNK`] (so a
/// chunk's interior is group-aligned wherever the range is); empty ranges give no chunk.
pub fn chunk_table(pieces: &[(Range<usize>, bool)], len: usize) -> Result<Vec<u32>> {
    let mut table = Vec::new();
    for (r, decays) in pieces {
        if r.start > r.end || r.end > len {
            return Err(LaunchError::Shape {
                kernel: "chunk_table",
                what: format!("range {r:?} is not inside the {len} elements"),
            });
        }
        let mut s = r.start;
        while s < r.end {
            let e = ((s / CHUNK + 1) * CHUNK).min(r.end);
            table.extend([to_u32("start", s)?, to_u32("end", e)?, if *decays { CHUNK_DECAYS } else { 0 }]);
            s = e;
        }
    }
    Ok(table)
}

/// The table on the device and the grid of its launches.
fn upload(k: &Kernels, table: &[u32]) -> Result<(Buffer<u32>, u32, LaunchConfig)> {
    let nchunks = table.len() / CHUNK_WORDS;
    // One word at least: an empty table still needs a buffer to point at.
    let words = if table.is_empty() { vec![0] } else { table.to_vec() };
    let buf = Buffer::from_slice(k.device(), &words)?;
    k.after_default_stream()?;
    let cfg = LaunchConfig {
        grid: [nchunks.clamp(1, MAX_CHUNK_BLOCKS) as u32, 1, 1],
        block: [ELEMENTWISE_THREADS, 1, 1],
        dynamic_smem_bytes: 0,
    };
    Ok((buf, to_u32("chunks", nchunks)?, cfg))
}

/// One AdamW update, as [`super::adamw`] computes it, of every range of `pieces` (ranges of
/// `params`, with whether weight decay applies) in one launch; elements in no range are not
/// touched. `m`, `v` and `grads` are indexed as `params`.
pub fn adamw_chunks(
    k: &Kernels,
    params: &mut ViewMut<f32>,
    m: &mut ViewMut<f32>,
    v: &mut ViewMut<f32>,
    grads: &View<f32>,
    pieces: &[(Range<usize>, bool)],
    h: &AdamW,
) -> Result<()> {
    const KERNEL: &str = "adamw_chunks_f32";
    let n = params.len();
    let ch = Check::new(k.device(), KERNEL);
    ch.output("params", params, n)?.output("m", m, n)?.output("v", v, n)?.input("grads", grads, n)?;
    ch.shape(h.step >= 1, || "the step number starts at 1".into())?;
    to_u32("n", n)?;
    let table = chunk_table(pieces, n)?;
    if table.is_empty() {
        return Ok(());
    }
    let (chunks, nchunks, cfg) = upload(k, &table)?;
    let vec = vectorized(&[params.addr_mut(), m.addr_mut(), v.addr_mut(), grads.addr()]);
    let bc1 = 1.0 - h.beta1.powi(h.step as i32);
    let bc2 = 1.0 - h.beta2.powi(h.step as i32);
    let args = [
        params.arg_mut(),
        grads.arg(),
        m.arg_mut(),
        v.arg_mut(),
        chunks.view(..)?.arg(),
        nchunks.into(),
        vec.into(),
        h.lr.into(),
        h.beta1.into(),
        h.beta2.into(),
        h.eps.into(),
        h.weight_decay.into(),
        bc1.into(),
        bc2.into(),
        h.grad_scale.into(),
    ];
    // SAFETY: the four views hold `n` elements, every chunk lies in `0..n` (checked by
    // `chunk_table`), chunks do not overlap where the ranges do not, and `vec` only where all
    // four are 16-byte aligned.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    // The table is freed on the default stream: after the launch, wherever it was queued.
    if !k.stream().is_default() {
        k.device().default_stream().wait_for(k.stream())?;
    }
    Ok(())
}

/// The sum of squares of `x` over `ranges`, on the device in two launches (partial sums of a
/// grid that fills the GPU, then one block), one word downloaded; `on_launch` is called after
/// each launch with its kernel's name (for the benchmark's counters).
pub fn sum_squares_ranges_with(
    k: &Kernels,
    x: &View<f32>,
    ranges: &[Range<usize>],
    mut on_launch: impl FnMut(&'static str),
) -> Result<f64> {
    const KERNEL: &str = "sum_squares_chunks_f32";
    const FINISH: &str = "sum_squares_finish_f32";
    Check::new(k.device(), KERNEL).input("x", x, x.len())?;
    let pieces: Vec<_> = ranges.iter().map(|r| (r.clone(), false)).collect();
    let table = chunk_table(&pieces, x.len())?;
    if table.is_empty() {
        return Ok(0.0);
    }
    let (chunks, nchunks, cfg) = upload(k, &table)?;
    let blocks = cfg.grid[0] as usize;
    let mut partial = Buffer::<f32>::zeros(k.device(), blocks)?;
    let mut total = Buffer::<f32>::zeros(k.device(), 1)?;
    k.after_default_stream()?;
    let vec = vectorized(&[x.addr()]);
    let args = [partial.view_mut(..)?.arg_mut(), x.arg(), chunks.view(..)?.arg(), nchunks.into(), vec.into()];
    // SAFETY: `partial` holds one element per block, every chunk lies in `x`, and `vec` only
    // where `x` is 16-byte aligned.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    on_launch(KERNEL);
    let one = LaunchConfig { grid: [1, 1, 1], block: [1024, 1, 1], dynamic_smem_bytes: 0 };
    let args = [total.view_mut(..)?.arg_mut(), partial.view(..)?.arg(), to_u32("blocks", blocks)?.into()];
    // SAFETY: `total` holds one element and `partial` `blocks`.
    unsafe { k.launch(FINISH, &one, &args)? };
    on_launch(FINISH);
    let mut sum = [0.0f32];
    total.view(..)?.copy_to_slice_on(k.stream(), &mut sum)?;
    Ok(f64::from(sum[0]))
}

/// [`sum_squares_ranges_with`] without the callback.
pub fn sum_squares_ranges(k: &Kernels, x: &View<f32>, ranges: &[Range<usize>]) -> Result<f64> {
    sum_squares_ranges_with(k, x, ranges, |_| {})
}
