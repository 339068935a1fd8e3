//! CPU implementations of the ops, on host slices: GEMM through the `gemm` crate, rayon across
//! cores, loops written to vectorise (see [`math`]). Shapes are checked by the dispatchers in
//! `ops`; these functions assert the lengths their raw-pointer GEMMs rely on (a panic, never an
//! access outside a slice, on a wrong shape).

mod adamw;
mod attention;
mod cross_entropy;
mod encoder;
mod gelu;
mod layernorm;
pub mod math;
mod matmul;
mod norm;
mod residual;
mod scratch;

pub use adamw::adamw_update;
pub use attention::{attention_backward, attention_forward, MAX_HEAD_DIM};
pub use cross_entropy::softmax_cross_entropy;
pub use encoder::{encoder_backward, encoder_forward};
pub use gelu::{gelu_backward, gelu_forward};
pub use layernorm::{layernorm_backward, layernorm_forward, LAYERNORM_EPS};
pub use matmul::{matmul_backward, matmul_forward, matmul_residual_forward};
pub use norm::{drain_into, sum_of_squares};
pub use residual::{accumulate, residual_forward};

/// Keeps the allocator from handing freed memory back to the OS. `gemm` allocates its packing
/// buffers on every call; with glibc's defaults, buffers past the mmap threshold are mapped and
/// unmapped each time, and every step pays page faults and TLB shootdowns for them.
pub fn retain_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes allocator tuning parameters; it is called once, before
        // the ops allocate anything large.
        unsafe {
            // 32 MiB is the largest threshold glibc accepts on 64-bit targets.
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        }
    });
}

/// The product of `factors`, or `usize::MAX` where it overflows: no slice is that long, so a
/// length check against an overflowed product fails, where a wrapped one could pass.
fn elems(factors: &[usize]) -> usize {
    factors.iter().try_fold(1usize, |p, &f| p.checked_mul(f)).unwrap_or(usize::MAX)
}
