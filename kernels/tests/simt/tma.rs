//! TMA loads and stores through tensor maps on the emulator: boxes land in the swizzled
//! layout with out-of-bounds fill, counted exactly; each planted misuse fails naming the place.

use trident_kernels::simt::*;
use trident_simt::{
    AccessKind, EmuError, Fault, L2Promotion, LaunchConfig, LaunchStats, OobFill, Swizzle, TensorDataType,
    TensorMap, TensorMapFields,
};

use crate::{lend, ptr, run};

/// The tensor: `H` rows of `W` u16 elements, rows `PITCH` elements apart; element (x, y)
/// holds `1000 * y + x`.
const W: usize = 70;
const H: usize = 20;
const PITCH: usize = 80;
/// Shared memory: the box at 0, the mbarrier at `BAR_AT`.
const BAR_AT: usize = 2048;
const SMEM: u32 = BAR_AT as u32 + 8;
const THREADS: u32 = 64;

fn tensor() -> Vec<u16> {
    (0..H * PITCH).map(|i| if i % PITCH < W { (1000 * (i / PITCH) + i % PITCH) as u16 } else { 0 }).collect()
}

fn map(base: *const u16, rows: u64, boxes: [u32; 2], swizzle: Swizzle, oob_fill: OobFill) -> TensorMap {
    TensorMap::new(&TensorMapFields {
        data_type: TensorDataType::Bf16,
        global_address: base as u64,
        global_dims: &[W as u64, rows],
        global_strides: &[(PITCH * 2) as u64],
        box_dims: &boxes,
        element_strides: &[1, 1],
        swizzle,
        l2_promotion: L2Promotion::B128,
        oob_fill,
    })
    .unwrap()
}

/// How a load kernel is broken.
const FINE: u64 = 0;
const READ_BEFORE_WAIT: u64 = 1;
const OTHER_THREAD_NO_BARRIER: u64 = 2;
const EXPECT_TOO_FEW: u64 = 3;
const ONE_WAITER_THEN_BARRIER: u64 = 4;
const SMALL_DESTINATION: u64 = 5;

/// Thread 0 loads the box at (`args[2]`, `args[3]`) of the map at `args[0]`, expecting
/// `args[4]` bytes; the threads wait and copy the box's shared bytes (as u16, in shared order)
/// to `args[1]`. `args[5]` plants a bug.
fn load_box(args: &[u64]) {
    let out = args[1] as *mut u16;
    // SAFETY: the test passes the address of a TensorMap that outlives the launch.
    let map = unsafe { TensorMapRef::from_address(args[0]) };
    let (c0, c1, bytes, plant) = (args[2] as i32, args[3] as i32, args[4] as u32, args[5]);
    let elements = if plant == SMALL_DESTINATION { 100 } else { bytes as usize / 2 };
    // SAFETY: the launch has SMEM bytes of dynamic shared memory.
    let (data, bars) = unsafe { (dynamic_shared::<u16>(0, elements), dynamic_shared::<u64>(BAR_AT, 1)) };
    let t = thread_idx_x() as usize;
    if t == 0 {
        mbarrier_init(bars, 0, 1);
    }
    sync_threads();
    if t == 0 {
        let expect = if plant == EXPECT_TOO_FEW { bytes / 2 } else { bytes };
        mbarrier_arrive_expect_tx(bars, 0, expect);
        // SAFETY: the map describes a lent buffer.
        unsafe { tma_load_2d(data, 0, map, [c0, c1], bars, 0) };
    }
    match plant {
        READ_BEFORE_WAIT if t == 1 => {
            data.load(5);
        }
        OTHER_THREAD_NO_BARRIER if t == 1 => {
            data.load(5);
        }
        OTHER_THREAD_NO_BARRIER | ONE_WAITER_THEN_BARRIER => {
            if t == 0 {
                mbarrier_wait_parity(bars, 0, 0);
            }
            if plant == ONE_WAITER_THEN_BARRIER {
                sync_threads();
            }
        }
        _ => mbarrier_wait_parity(bars, 0, 0),
    }
    for i in (t..elements).step_by(THREADS as usize) {
        // SAFETY: one slot per box element.
        unsafe { *out.add(i) = data.load(i) };
    }
}

fn load(map: &TensorMap, coords: [i32; 2], plant: u64) -> Result<(Vec<u16>, LaunchStats), EmuError> {
    let bytes = map.box_bytes();
    let mut out = vec![0xABCDu16; bytes as usize / 2];
    let cfg = LaunchConfig { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem_bytes: SMEM };
    let args = [
        std::ptr::from_ref(map) as u64,
        ptr(&mut out),
        coords[0] as u64,
        coords[1] as u64,
        u64::from(bytes),
        plant,
    ];
    let stats = run(load_box, cfg, &args)?;
    Ok((out, stats))
}

/// Checks a loaded box against the tensor at `base`: element (bx, by) at its swizzled place.
/// Returns the in-bounds bytes and the 32-byte sectors they lie in.
fn check_box(
    out: &[u16],
    base: *const u16,
    boxes: [u32; 2],
    coords: [i32; 2],
    swizzle: Swizzle,
    fill: u16,
) -> (u64, u64) {
    let (mut in_bounds, mut sectors) = (0, std::collections::BTreeSet::new());
    for by in 0..boxes[1] as i32 {
        for bx in 0..boxes[0] as i32 {
            let logical = ((by * boxes[0] as i32 + bx) * 2) as u32;
            let physical = swizzle.apply(logical) as usize / 2;
            let (x, y) = (coords[0] + bx, coords[1] + by);
            let want = if (0..W as i32).contains(&x) && (0..H as i32).contains(&y) {
                in_bounds += 2;
                sectors.insert((base as usize + (y as usize * PITCH + x as usize) * 2) / 32);
                (1000 * y + x) as u16
            } else {
                fill
            };
            assert_eq!(
                out[physical], want,
                "box element ({bx}, {by}) at shared element {physical}, {swizzle:?}"
            );
        }
    }
    (in_bounds, sectors.len() as u64)
}

#[test]
fn tma_loads_land_swizzled_with_out_of_bounds_fill_and_are_counted() {
    let data = tensor();
    let _lent = lend(&data);
    let cases = [
        ([64, 8], Swizzle::B128, [0, 0], OobFill::Zero),
        ([64, 8], Swizzle::B128, [10, 16], OobFill::Zero),
        ([64, 8], Swizzle::None, [-7, -3], OobFill::Nan),
        ([32, 8], Swizzle::B64, [50, 5], OobFill::Nan),
        ([16, 4], Swizzle::B32, [-16, 0], OobFill::Zero),
    ];
    for (boxes, swizzle, coords, fill) in cases {
        let m = map(data.as_ptr(), H as u64, boxes, swizzle, fill);
        let (out, stats) = load(&m, coords, FINE).unwrap();
        let fill_bits = if fill == OobFill::Nan { 0x7FFF } else { 0 };
        let (bytes, sectors) = check_box(&out, data.as_ptr(), boxes, coords, swizzle, fill_bits);
        assert_eq!(stats.tma_loads.requests, 1);
        assert_eq!(stats.tma_loads.bytes_requested, bytes, "{boxes:?} at {coords:?}");
        assert_eq!(stats.tma_loads.sectors, sectors, "{boxes:?} at {coords:?}");
        assert_eq!(stats.tma_shared_bytes, u64::from(m.box_bytes()));
        assert_eq!(stats.thread_instructions.tma, 1);
        // init, arrive.expect_tx, and one wait per thread.
        assert_eq!(stats.thread_instructions.mbarrier, 2 + u64::from(THREADS));
    }
    // One thread waits, a barrier publishes the box to the others.
    let m = map(data.as_ptr(), H as u64, [64, 8], Swizzle::B128, OobFill::Zero);
    let (out, _) = load(&m, [3, 2], ONE_WAITER_THEN_BARRIER).unwrap();
    check_box(&out, data.as_ptr(), [64, 8], [3, 2], Swizzle::B128, 0);
}

#[test]
fn tma_load_misuses_name_the_place() {
    let data = tensor();
    let _lent = lend(&data);
    let m = map(data.as_ptr(), H as u64, [64, 8], Swizzle::B128, OobFill::Zero);
    for plant in [READ_BEFORE_WAIT, OTHER_THREAD_NO_BARRIER] {
        let error = load(&m, [0, 0], plant).unwrap_err();
        let message = error.to_string();
        let Some(Fault::TmaLoadInFlight { load, access, .. }) = error.fault() else { panic!("{message}") };
        assert!(
            load.contains("TMA load") && load.contains("phase 0") && load.contains("shared address 0x800"),
            "{message}"
        );
        assert_eq!((access.kind, access.thread.0[0]), (AccessKind::Read, 1), "{message}");
        assert!(message.contains("tests/simt/tma.rs"), "{message}");
    }
    let error = load(&m, [0, 0], EXPECT_TOO_FEW).unwrap_err();
    assert!(error.to_string().contains("transaction-count underflow"), "{error}");
    let error = load(&m, [0, 0], SMALL_DESTINATION).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::SharedOutOfRange { .. })), "{error}");
    // A map claiming more rows than the allocation holds: the box overruns it.
    let long = map(data.as_ptr(), 2 * H as u64, [64, 8], Swizzle::B128, OobFill::Zero);
    let error = load(&long, [0, 16], FINE).unwrap_err();
    assert!(matches!(error.fault(), Some(Fault::GlobalOutOfRange { .. })), "{error}");
}

/// How a store kernel is broken.
const NO_FENCE: u64 = 1;
const WRITE_BEFORE_WAIT: u64 = 2;
const NO_BARRIER: u64 = 3;
const FENCE_BEFORE_WRITE: u64 = 4;

/// The threads fill the box in shared memory (element i holds `i`), fence, synchronize, and
/// the last thread stores it to the map at `args[0]` at (`args[1]`, `args[2]`). `args[3]`
/// plants a bug.
fn store_box(args: &[u64]) {
    // SAFETY: the test passes the address of a TensorMap that outlives the launch.
    let map = unsafe { TensorMapRef::from_address(args[0]) };
    let (c0, c1, plant) = (args[1] as i32, args[2] as i32, args[3]);
    let elements = 64 * 8;
    // SAFETY: the launch has SMEM bytes of dynamic shared memory.
    let data = unsafe { dynamic_shared::<u16>(0, elements) };
    let t = thread_idx_x() as usize;
    let issuer = THREADS as usize - 1;
    if plant == FENCE_BEFORE_WRITE {
        fence_proxy_async_shared_cta();
    }
    for i in (t..elements).step_by(THREADS as usize) {
        data.store(i, i as u16);
    }
    if plant != NO_FENCE && plant != FENCE_BEFORE_WRITE {
        fence_proxy_async_shared_cta();
    }
    if plant != NO_BARRIER {
        sync_threads();
    }
    if t == issuer {
        // SAFETY: the map describes a lent buffer.
        unsafe { tma_store_2d(data, 0, map, [c0, c1]) };
        bulk_commit_group();
        if plant == WRITE_BEFORE_WAIT {
            data.store(issuer, 7);
        }
        bulk_wait_group_read::<0>();
        data.store(issuer, 7);
    }
}

fn store(coords: [i32; 2], plant: u64) -> Result<(Vec<u16>, LaunchStats), EmuError> {
    let out = vec![0xFFFFu16; H * PITCH];
    let _lent = lend(&out);
    let m = map(out.as_ptr(), H as u64, [64, 8], Swizzle::B128, OobFill::Zero);
    let cfg = LaunchConfig { grid: [1, 1, 1], block: [THREADS, 1, 1], dynamic_smem_bytes: SMEM };
    let stats =
        run(store_box, cfg, &[std::ptr::from_ref(&m) as u64, coords[0] as u64, coords[1] as u64, plant])?;
    Ok((out, stats))
}

#[test]
fn tma_stores_write_the_in_bounds_elements_of_the_box() {
    for coords in [[0, 0], [10, 15], [-5, -2]] {
        let (out, stats) = store(coords, 0).unwrap();
        let mut written = 0;
        for y in 0..H as i32 {
            for x in 0..PITCH as i32 {
                let (bx, by) = (x - coords[0], y - coords[1]);
                let inside = x < W as i32 && (0..64).contains(&bx) && (0..8).contains(&by);
                let want = if inside {
                    written += 2;
                    let physical = Swizzle::B128.apply(((by * 64 + bx) * 2) as u32) / 2;
                    physical as u16
                } else {
                    0xFFFF
                };
                assert_eq!(out[y as usize * PITCH + x as usize], want, "({x}, {y}) for a box at {coords:?}");
            }
        }
        assert_eq!((stats.tma_stores.requests, stats.tma_stores.bytes_requested), (1, written));
        assert_eq!(stats.tma_shared_bytes, 1024);
        // The store, its commit and its wait.
        assert_eq!(stats.thread_instructions.tma, 3);
        assert_eq!(stats.thread_instructions.proxy_fence, u64::from(THREADS));
    }
}

#[test]
fn tma_store_misuses_name_both_sides() {
    for plant in [NO_FENCE, FENCE_BEFORE_WRITE] {
        let error = store([0, 0], plant).unwrap_err();
        let message = error.to_string();
        let Some(Fault::AsyncProxyRace { write, read, .. }) = error.fault() else { panic!("{message}") };
        assert_eq!((write.kind, read.kind), (AccessKind::Write, AccessKind::TmaStore), "{message}");
        assert_eq!((write.thread.0[0], read.thread.0[0]), (0, 63), "{message}");
        assert!(message.contains("fence.proxy.async") && message.contains("tests/simt/tma.rs"), "{message}");
    }
    let error = store([0, 0], NO_BARRIER).unwrap_err();
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Write, AccessKind::TmaStore), "{error}");
    let error = store([0, 0], WRITE_BEFORE_WAIT).unwrap_err();
    let Some(Fault::TmaStoreInFlight { store, access, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!((store.kind, access.kind), (AccessKind::TmaStore, AccessKind::Write), "{error}");
}

/// Stages and tiles of the pipelined column sum; the tensor's last tile is 3 rows short.
const RING: usize = 3;
const TILES: usize = 7;
const COLS: usize = 64;
const ROWS: usize = 8 * TILES - 3;
/// Byte offset of the ring's mbarriers (full, then empty) after its stages.
const RING_BARS: usize = RING * 1024;

/// Threads 0..63 consume, warp 2 produces: its elected lane waits until a stage is free, then
/// loads the next 64 x 8 tile (128-byte swizzle) into it with `arrive.expect_tx`; consumer `t`
/// adds column `t` of each tile (unswizzling the address) and releases the stage. `args[0]`:
/// the map, `args[1]`: 64 u32 sums, `args[2]`: 1 to skip the producer's wait for a free stage.
fn column_sums(args: &[u64]) {
    // SAFETY: the test passes the address of a TensorMap that outlives the launch.
    let map = unsafe { TensorMapRef::from_address(args[0]) };
    let out = args[1] as *mut u32;
    // SAFETY: the launch has RING_BARS + 2 * RING * 8 bytes of dynamic shared memory.
    let (tiles, bars) =
        unsafe { (dynamic_shared::<u16>(0, RING * 512), dynamic_shared::<u64>(RING_BARS, 2 * RING)) };
    let (full, empty) = (0, RING);
    let t = thread_idx_x() as usize;
    if t == 0 {
        for s in 0..RING {
            mbarrier_init(bars, full + s, 1);
            mbarrier_init(bars, empty + s, COLS as u32);
        }
    }
    sync_threads();
    let mut sum = 0u32;
    for tile in 0..TILES {
        let (stage, parity) = (tile % RING, ((tile / RING) & 1) as u32);
        if t >= COLS {
            let (_, leader) = elect_sync(FULL_MASK);
            if leader {
                if args[2] == 0 {
                    mbarrier_wait_parity(bars, empty + stage, parity ^ 1);
                }
                mbarrier_arrive_expect_tx(bars, full + stage, 1024);
                // SAFETY: the map describes a lent buffer.
                unsafe { tma_load_2d(tiles, stage * 512, map, [0, 8 * tile as i32], bars, full + stage) };
            }
        } else {
            mbarrier_wait_parity(bars, full + stage, parity);
            for row in 0..8 {
                let logical = (row * COLS + t) * 2;
                let physical = logical ^ (((logical >> 7) & 7) << 4);
                sum += u32::from(tiles.load(stage * 512 + physical / 2));
            }
            mbarrier_arrive(bars, empty + stage);
        }
    }
    if t < COLS {
        // SAFETY: 64 sums.
        unsafe { *out.add(t) = sum };
    }
}

fn column_sums_run(skip_empty_wait: u64) -> Result<(Vec<u32>, Vec<u32>, LaunchStats), EmuError> {
    let value = |x: usize, y: usize| ((7 * y + x) % 251) as u16;
    let data: Vec<u16> = (0..ROWS * COLS).map(|i| value(i % COLS, i / COLS)).collect();
    let want = (0..COLS).map(|x| (0..ROWS).map(|y| u32::from(value(x, y))).sum()).collect();
    let _lent = lend(&data);
    let m = TensorMap::new(&TensorMapFields {
        data_type: TensorDataType::Bf16,
        global_address: data.as_ptr() as u64,
        global_dims: &[COLS as u64, ROWS as u64],
        global_strides: &[(COLS * 2) as u64],
        box_dims: &[64, 8],
        element_strides: &[1, 1],
        swizzle: Swizzle::B128,
        l2_promotion: L2Promotion::None,
        oob_fill: OobFill::Nan,
    })
    .unwrap();
    let mut out = vec![u32::MAX; COLS];
    let cfg = LaunchConfig {
        grid: [2, 1, 1],
        block: [96, 1, 1],
        dynamic_smem_bytes: (RING_BARS + 2 * RING * 8) as u32,
    };
    let stats = run(column_sums, cfg, &[std::ptr::from_ref(&m) as u64, ptr(&mut out), skip_empty_wait])?;
    Ok((out, want, stats))
}

#[test]
fn a_tma_ring_feeds_consumers_through_mbarriers() {
    let (out, want, stats) = column_sums_run(0).unwrap();
    // The last tile's missing rows read as NaN fill (0x7FFF): three per column.
    let want: Vec<u32> = want.iter().map(|w| w + 3 * 0x7FFF).collect();
    assert_eq!(out, want);
    let tiles = 2 * TILES as u64;
    assert_eq!((stats.tma_loads.requests, stats.tma_shared_bytes), (tiles, tiles * 1024));
    assert_eq!(stats.tma_loads.bytes_requested, 2 * (ROWS * COLS * 2) as u64);
    assert_eq!(stats.thread_instructions.elect, tiles * 32);
    assert_eq!(stats.warp_instructions.elect, tiles);
}

#[test]
fn a_tma_refill_before_the_consumers_released_the_stage_is_a_race() {
    let error = column_sums_run(1).unwrap_err();
    let Some(Fault::SharedRace { earlier, later, .. }) = error.fault() else { panic!("{error}") };
    assert_eq!((earlier.kind, later.kind), (AccessKind::Read, AccessKind::TmaLoad), "{error}");
    assert!(earlier.thread.0[0] < 64 && later.thread.0[0] == 64, "{error}");
    assert!(error.to_string().contains("tests/simt/tma.rs"), "{error}");
}
