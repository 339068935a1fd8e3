//! The shortcuts `trident bench kernels` takes to count large launches on `Emu` are exact: a
//! GEMM counted at two short K and extrapolated equals the GEMM counted whole, and attention
//! counted for one (sequence, head) and scaled equals it counted for all, for the f32 kernel
//! and for the tensor-core flash attention (forward and the backward's main launch).

use trident::launch::{AttentionShape, FlashAttentionShape, Gemm, GemmTc, GemmTcPlan, HalfFormat};
use trident::runtime::Device;
use trident_bench::{Bench, Case, FlashStep, Op, TcOut};
use trident_kernels::gemm_tc::{Config, BK, SMALL};
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

/// A split-K plan of `splits` ranges of `k_split_slices` K-slices each on tile `config`.
fn split_plan(config: Config, splits: usize, k_split_slices: usize) -> GemmTcPlan {
    GemmTcPlan { config, splits, k_split: k_split_slices * BK }
}

/// A tensor-core GEMM counted at two short K and extrapolated equals it counted whole.
#[test]
fn bench_counts_of_tensor_core_gemms_extrapolated_in_k_equal_the_whole_launch() {
    let bench = Bench::load(&Device::Emu).unwrap();
    let g = GemmTc::new(130, 260, 320, HalfFormat::Bf16).trans_b();
    let case = Case { name: "tc".into(), op: Op::GemmTc(g, TcOut::B16) };
    let extrapolated = bench.count(&case).unwrap();
    let whole = bench.count_exact(&case.op).unwrap();
    assert_eq!(extrapolated.blocks, whole.blocks);
    assert_eq!(extrapolated.warp, whole.warp);
    assert_eq!(extrapolated.smem_wavefronts, whole.smem_wavefronts);
    assert_eq!(extrapolated.global_sectors, whole.global_sectors);
    assert_eq!(extrapolated.async_overlap, whole.async_overlap);
}

/// The same for split-K in one launch: at two short K with the plan's split count and last
/// split shortfall, the launch (partial stores, counts, the last blocks' reads and epilogue
/// included) extrapolates to exactly the counters of the whole launch.
#[test]
fn bench_counts_of_split_k_gemms_extrapolated_in_k_equal_the_whole_launch() {
    let bench = Bench::load(&Device::Emu).unwrap();
    // 3 splits of 9 slices over 26: the last range is one slice short.
    let plan = split_plan(SMALL, 3, 9);
    for out in [TcOut::F32, TcOut::B16] {
        let g = GemmTc::new(104, 152, 26 * BK - 7, HalfFormat::Bf16).trans_a().with_plan(plan);
        let case = Case { name: "tc split".into(), op: Op::GemmTc(g, out) };
        let extrapolated = bench.count(&case).unwrap();
        let whole = bench.count_exact(&case.op).unwrap();
        assert_eq!(extrapolated.blocks, whole.blocks);
        assert_eq!(extrapolated.warp, whole.warp, "{out:?}");
        assert_eq!(extrapolated.smem_wavefronts, whole.smem_wavefronts, "{out:?}");
        assert_eq!(extrapolated.global_sectors, whole.global_sectors, "{out:?}");
        assert_eq!(extrapolated.async_overlap, whole.async_overlap, "{out:?}");
        // Beyond an unsplit launch's sectors: at least each tile's 3 partials written and 2
        // read back (32 KiB each), and its counter's 3 counts and 1 reset.
        let unsplit = GemmTcPlan { splits: 1, k_split: 26 * BK, ..plan };
        let one = bench.count_exact(&Op::GemmTc(GemmTc { plan: Some(unsplit), ..g }, out)).unwrap();
        let tiles = 4;
        assert!(whole.global_sectors >= one.global_sectors + tiles * (5 * 1024 + 4), "{out:?}");
    }
}

/// The Hopper GEMM counted for one tile at two short K and extrapolated equals the tile
/// counted whole; over several tiles its main loop is the tile's times the tiles, and an
/// edge tile's TMA reads (out-of-bounds rows filled, not read) and epilogue stores are bounded
/// by a whole one's.
#[test]
fn bench_counts_of_the_hopper_gemm_extrapolated_in_k_and_over_tiles() {
    use trident_kernels::gemm_hopper::{BK, BM, BN, STAGES};
    let bench = Bench::load(&Device::Emu).unwrap();
    // One tile, K past the two counted lengths (2 and 3 x STAGES slices) and no multiple of BK.
    let k = 3 * STAGES * BK + 2 * BK + 8;
    let g = GemmTc::new(BM - 28, BN - 56, k, HalfFormat::Bf16).trans_b();
    let case = Case { name: "hopper".into(), op: Op::GemmHopper(g, TcOut::B16) };
    let extrapolated = bench.count(&case).unwrap();
    let whole = bench.count_exact(&case.op).unwrap();
    same_counters(&extrapolated, &whole);
    assert_eq!(extrapolated.wgmma_macs, whole.wgmma_macs);
    assert_eq!(extrapolated.tma_sectors, whole.tma_sectors);
    // 128 x 256 x K rounded up to whole 16-deep wgmma steps and 64-wide slices.
    assert_eq!(whole.wgmma_macs, (BM * BN * k.div_ceil(BK) * BK) as u64);
    assert!(whole.warp.wgmma > 0 && whole.warp.tma > 0);
    // Three tiles (the last a partial one) in a persistent grid of three blocks.
    let g = GemmTc::new(2 * BM + 40, BN, 2 * BK, HalfFormat::Bf16).trans_b();
    let case = Case { name: "hopper tiles".into(), op: Op::GemmHopper(g, TcOut::F32) };
    let counted = bench.count(&case).unwrap();
    let whole = bench.count_exact(&case.op).unwrap();
    assert_eq!((counted.blocks, whole.blocks), (3, 3));
    // The main loop is the same in every tile; the edge tile's epilogue stores only its 40
    // rows (whole warps skip the rest), so three whole tiles bound it from above.
    let (c, w) = (counted.warp, whole.warp);
    assert_eq!((c.wgmma, c.tma, c.barrier), (w.wgmma, w.tma, w.barrier));
    assert!(c.global_store > w.global_store && w.global_store > 0, "{c:?} vs {w:?}");
    assert_eq!(counted.wgmma_macs, whole.wgmma_macs);
    assert!(counted.tma_sectors >= whole.tma_sectors && whole.tma_sectors > 0);
}
