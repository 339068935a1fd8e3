//! The shortcuts `trident bench kernels` takes to count large launches on `Emu` are exact: a
//! GEMM counted at two short K and extrapolated equals the GEMM counted whole, and attention
//! counted for one (sequence, head) and scaled equals it counted for all, for the f32 kernel
//! and for the tensor-core flash attention (forward and the backward's main launch).

use trident::kernel_bench::{Bench, Case, FlashStep, Op};
use trident::launch::{AttentionShape, FlashAttentionShape, Gemm};
use trident::runtime::Device;
use trident_perfmodel::Workload;

fn same_counters(a: &Workload, b: &Workload) {
    assert_eq!(a.blocks, b.blocks);
    assert_eq!(a.warp, b.warp);
    assert_eq!(a.smem_wavefronts, b.smem_wavefronts);
    assert_eq!(a.global_sectors, b.global_sectors);
}

#[test]
fn gemm_counts_extrapolated_in_k_equal_the_whole_launch() {
    let bench = Bench::load(&Device::Emu).unwrap();
    for g in [
        Gemm::new(96, 200, 320),
        Gemm::new(160, 64, 256).trans_b(),
        Gemm::new(128, 96, 192).trans_a().beta(1.0),
    ] {
        let case = Case { name: "gemm".into(), op: Op::Gemm(g) };
        let extrapolated = bench.count(&case).unwrap();
        let whole = bench.count_exact(&case.op).unwrap();
        same_counters(&extrapolated, &whole);
        assert!(whole.warp.fma > 0 && whole.global_sectors > 0);
    }
}

#[test]
fn attention_counts_scaled_over_heads_and_sequences_equal_the_whole_launch() {
    let bench = Bench::load(&Device::Emu).unwrap();
    // T = 20: five query blocks of four rows, all run by the sampler, so both counts are exact.
    let s = AttentionShape { b: 2, t: 20, nh: 3, hs: 16 };
    let case = Case { name: "attention".into(), op: Op::Attention(s) };
    let scaled = bench.count(&case).unwrap();
    let whole = bench.count_exact(&case.op).unwrap();
    same_counters(&scaled, &whole);
}

#[test]
fn flash_attention_counts_scaled_over_heads_and_sequences_equal_the_whole_launch() {
    let bench = Bench::load(&Device::Emu).unwrap();
    // T = 72: a whole query tile and an edge one, every block run in both counts; T a multiple
    // of 8 keeps each head's f32 lse row on whole 32-byte sectors, as it is for head 0.
    let s = FlashAttentionShape { b: 2, t: 72, nh: 2, hs: 64 };
    for op in [Op::FlashForward(s), Op::FlashBackward(s, FlashStep::Main)] {
        let case = Case { name: "flash".into(), op };
        let scaled = bench.count(&case).unwrap();
        let whole = bench.count_exact(&case.op).unwrap();
        same_counters(&scaled, &whole);
        assert!(whole.warp.mma > 0, "{op:?}");
    }
}
