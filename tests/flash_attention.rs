//! The tensor-core flash attention on `Emu` (and `Cuda` when present) against an f64 reference
//! computed from the bf16-rounded inputs: random small shapes, `T` a multiple of no tile, both
//! head sizes, every output poisoned (NaN) before the launch; and the exact counters of a
//! launch (tiles visited, bank conflicts).
//!
//! Tolerances are norm-wise (`max |got - want| / max |want|`): the kernels round P and dS to
//! bf16 before their products (2^-9 relative each) and every output to bf16 (2^-9 again), so
//! O and the gradients are held to 1e-2 and 1.5e-2 (observed: 2e-3 to 6e-3); `lse` is f32 from f32 accumulation, held to
//! 1e-5 (`ex2.approx`/`lg2.approx` on the GPU add a few ulp).

use rand::rngs::StdRng;
use rand::Rng;
use trident::launch::{self, FlashAttentionShape, Kernels, LaunchError};
use trident::runtime::{Buffer, Device};
use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
use trident_testkit::reference as refs;
use trident_testkit::{assert_close, f64s, kernel_tests, rel_err, rng, uniform, POISON, POISON_BF16};

const OUT_TOL: f64 = 1e-2;
const LSE_TOL: f64 = 1e-5;
const GRAD_TOL: f64 = 1.5e-2;

/// `n` random bf16 values in `[-scale, scale)`.
fn bf16s(rng: &mut StdRng, n: usize, scale: f32) -> Vec<u16> {
    uniform(rng, n, scale).into_iter().map(f32_to_bf16).collect()
}

fn f32s(v: &[u16]) -> Vec<f32> {
    v.iter().map(|&x| bf16_to_f32(x)).collect()
}

/// f64 reference: `out`, `lse`, and from `dout` the gradient `dqkv`.
struct Reference {
    out: Vec<f64>,
    lse: Vec<f64>,
    dqkv: Vec<f64>,
}

fn reference(qkv: &[u16], dout: &[u16], s: &FlashAttentionShape) -> Reference {
    let (qkv, dout) = (f64s(&f32s(qkv)), f64s(&f32s(dout)));
    let c = s.nh * s.hs;
    let (out, lse) = refs::attention(&qkv, s.b, s.t, c, s.nh);
    Reference { out, lse, dqkv: refs::attention_backward(&qkv, &dout, s.b, s.t, c, s.nh) }
}

/// Runs forward and backward on `s`, poisoned outputs, and compares with the reference.
fn check_shape(k: &Kernels, device: &Device, rng: &mut StdRng, s: FlashAttentionShape) {
    // Inputs of unit-ish scores: |q . k| / sqrt(hs) up to a few units, so the softmax is peaked.
    let qkv = bf16s(rng, s.qkv_len(), 1.5);
    let dout = bf16s(rng, s.out_len(), 1.0);
    let want = reference(&qkv, &dout, &s);
    let d_qkv = Buffer::from_slice(device, &qkv).unwrap();
    let d_dout = Buffer::from_slice(device, &dout).unwrap();
    let mut out = Buffer::from_slice(device, &vec![POISON_BF16; s.out_len()]).unwrap();
    let mut lse = Buffer::from_slice(device, &vec![POISON; s.stat_len()]).unwrap();
    launch::flash_attention_forward(
        k,
        &mut out.view_mut(..).unwrap(),
        &mut lse.view_mut(..).unwrap(),
        &d_qkv.view(..).unwrap(),
        &s,
    )
    .unwrap();
    let what = format!("{s:?}");
    let got_out = f32s(&out.to_vec().unwrap());
    eprintln!("{what}: out error {:.2e}", rel_err(&got_out, &want.out));
    assert_close(&format!("forward out {what}"), &got_out, &want.out, OUT_TOL);
    assert_close(&format!("forward lse {what}"), &lse.to_vec().unwrap(), &want.lse, LSE_TOL);

    let mut dqkv = Buffer::from_slice(device, &vec![POISON_BF16; s.qkv_len()]).unwrap();
    let mut dsum = Buffer::from_slice(device, &vec![POISON; s.stat_len()]).unwrap();
    let mut dq_accum = Buffer::from_slice(device, &vec![POISON; s.out_len()]).unwrap();
    launch::flash_attention_backward(
        k,
        &mut dqkv.view_mut(..).unwrap(),
        &mut dsum.view_mut(..).unwrap(),
        &mut dq_accum.view_mut(..).unwrap(),
        &d_dout.view(..).unwrap(),
        &d_qkv.view(..).unwrap(),
        &out.view(..).unwrap(),
        &lse.view(..).unwrap(),
        &s,
    )
    .unwrap();
    let got = f32s(&dqkv.to_vec().unwrap());
    // dQ, dK, dV separately: each has its own scale.
    let c = s.nh * s.hs;
    for (part, name) in ["dq", "dk", "dv"].iter().enumerate() {
        let pick = |v: &[f32]| -> Vec<f32> {
            v.chunks(3 * c).flat_map(|row| row[part * c..(part + 1) * c].to_vec()).collect()
        };
        let pick64 = |v: &[f64]| -> Vec<f64> {
            v.chunks(3 * c).flat_map(|row| row[part * c..(part + 1) * c].to_vec()).collect()
        };
        let (got, want) = (pick(&got), pick64(&want.dqkv));
        eprintln!("{what}: {name} error {:.2e}", rel_err(&got, &want));
        assert_close(&format!("backward {name} {what}"), &got, &want, GRAD_TOL);
    }
}

/// Random shapes with `T` a multiple of no tile (64): one to three query tiles, so the
/// diagonal, the edge at `T` and (hs 64) a whole unmasked tile are all exercised.
fn flash_attention_matches_reference(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let mut rng = rng("flash_attention_matches_reference");
    let shapes = [
        FlashAttentionShape { b: 1, t: rng.gen_range(129..192), nh: 1, hs: 64 },
        FlashAttentionShape { b: 2, t: rng.gen_range(2..64), nh: 2, hs: 64 },
        FlashAttentionShape { b: 1, t: rng.gen_range(65..128), nh: 2, hs: 128 },
    ];
    for s in shapes {
        check_shape(&k, device, &mut rng, s);
    }
}

/// Shapes and views the kernels cannot take are refused with errors that name them.
fn flash_attention_rejects_bad_arguments(device: &Device) {
    let k = Kernels::load(device).unwrap();
    let s = FlashAttentionShape { b: 1, t: 8, nh: 1, hs: 32 };
    let qkv = Buffer::from_slice(device, &vec![0u16; s.qkv_len()]).unwrap();
    let mut out = Buffer::from_slice(device, &vec![0u16; s.out_len()]).unwrap();
    let mut lse = Buffer::from_slice(device, &vec![0f32; s.stat_len()]).unwrap();
    let err = launch::flash_attention_forward(
        &k,
        &mut out.view_mut(..).unwrap(),
        &mut lse.view_mut(..).unwrap(),
        &qkv.view(..).unwrap(),
        &s,
    )
    .unwrap_err();
    assert!(matches!(&err, LaunchError::Shape { what, .. } if what.contains("head size 32")), "{err}");
    let s = FlashAttentionShape { hs: 64, ..s };
    let err = launch::flash_attention_forward(
        &k,
        &mut out.view_mut(..).unwrap(),
        &mut lse.view_mut(..).unwrap(),
        &qkv.view(..).unwrap(),
        &s,
    )
    .unwrap_err();
    assert!(matches!(err, LaunchError::Length { what: "out", .. }), "{err}");
    // A qkv view one element in is not 16-byte aligned for cp.async.
    let qkv = Buffer::from_slice(device, &vec![0u16; s.qkv_len() + 1]).unwrap();
    let mut out = Buffer::from_slice(device, &vec![0u16; s.out_len()]).unwrap();
    let err = launch::flash_attention_forward(
        &k,
        &mut out.view_mut(..).unwrap(),
        &mut lse.view_mut(..).unwrap(),
        &qkv.view(1..).unwrap(),
        &s,
    )
    .unwrap_err();
    assert!(matches!(&err, LaunchError::Shape { what, .. } if what.contains("16-byte")), "{err}");
}

kernel_tests!(flash_attention_matches_reference, flash_attention_rejects_bad_arguments);

/// Exact counters of one (sequence, head) on `Emu`: the forward visits exactly the causal
/// tiles (`n (n + 1) / 2` for `n` query tiles, seen in the mma count), its `ldmatrix` reads
/// are free of bank conflicts (every 16-byte phase one wavefront), and the backward runs its
/// five products over exactly the causal (key block, query tile) pairs.
#[test]
fn flash_attention_counters_on_emu() {
    let device = Device::Emu;
    let k = Kernels::load(&device).unwrap();
    let mut rng = rng("flash_attention_counters_on_emu");
    for hs in [64usize, 128] {
        let s = FlashAttentionShape { b: 1, t: 150, nh: 1, hs };
        let n = s.t.div_ceil(64) as u64;
        let causal_tiles = n * (n + 1) / 2;
        let (k16, n8) = (hs as u64 / 16, hs as u64 / 8);
        let qkv = Buffer::from_slice(&device, &bf16s(&mut rng, s.qkv_len(), 1.0)).unwrap();
        let mut out = Buffer::from_slice(&device, &vec![POISON_BF16; s.out_len()]).unwrap();
        let mut lse = Buffer::from_slice(&device, &vec![POISON; s.stat_len()]).unwrap();
        launch::flash_attention_forward(
            &k,
            &mut out.view_mut(..).unwrap(),
            &mut lse.view_mut(..).unwrap(),
            &qkv.view(..).unwrap(),
            &s,
        )
        .unwrap();
        let st = trident::runtime::last_launch_stats().expect("counters of the forward");
        // Per tile and warp: S = Q K^T is k16 x 8 mma, P V is 4 x n8.
        assert_eq!(st.warp_instructions.mma, 4 * causal_tiles * (8 * k16 + 4 * n8), "hs {hs}");
        // Q once (k16 ldmatrix per warp), then per tile k16 x 4 for K and 4 x k16 for V.
        assert_eq!(st.warp_instructions.ldmatrix, 4 * (n * k16 + causal_tiles * 8 * k16), "hs {hs}");
        assert_eq!(st.shared_loads.wavefronts * 128, st.shared_loads.bytes, "hs {hs}: bank conflicts");

        let dout = Buffer::from_slice(&device, &bf16s(&mut rng, s.out_len(), 1.0)).unwrap();
        let mut dqkv = Buffer::from_slice(&device, &vec![POISON_BF16; s.qkv_len()]).unwrap();
        let mut dsum = Buffer::from_slice(&device, &vec![POISON; s.stat_len()]).unwrap();
        let mut dq_accum = Buffer::from_slice(&device, &vec![POISON; s.out_len()]).unwrap();
        let mut main = None;
        launch::flash_attention_backward_with(
            &k,
            &mut dqkv.view_mut(..).unwrap(),
            &mut dsum.view_mut(..).unwrap(),
            &mut dq_accum.view_mut(..).unwrap(),
            &dout.view(..).unwrap(),
            &qkv.view(..).unwrap(),
            &out.view(..).unwrap(),
            &lse.view(..).unwrap(),
            &s,
            |kernel| {
                if kernel.starts_with("flash_attention_backward_hs") {
                    main = trident::runtime::last_launch_stats();
                }
            },
        )
        .unwrap();
        let st = main.expect("counters of the backward's main kernel");
        // Per (key block, query tile) and warp: S^T and dP^T k16 x 8 mma each, dV and dK
        // 4 x n8 each, dQ (hs / 16 chunks of 4 k-steps x 2 n-tiles) hs / 2.
        let per_step = 2 * 8 * k16 + 2 * 4 * n8 + hs as u64 / 2;
        assert_eq!(st.warp_instructions.mma, 4 * causal_tiles * per_step, "hs {hs}");
    }
}
