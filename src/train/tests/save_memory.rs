//! What a checkpoint save really holds, measured with the counting allocator, against what the
//! memory check counts for it ([`MemoryNeed::with_save`]).

use std::cell::Cell;

use serde_json::json;
use trident_runtime::Device;

use super::alloc_count;
use super::grids::{data, settings, SEQ, VOCAB};
use crate::data::DataOrder;
use crate::model::{gpt2_init, GptConfig, ParamLayout};
use crate::parallel::{run_ranks, ParallelConfig};
use crate::train::checkpoint::SavePlan;
use crate::train::run::{train_rank, RankData, RunSpec};
use crate::train::{MemoryNeed, Storage};

/// The most bytes world rank 0's thread holds during the save of the initial checkpoint of a
/// `tp x pp x dp` run (`--train-iters 0`: the save follows the trainer's start at once).
fn measured_save(config: GptConfig, (tp, pp, dp): (usize, usize, usize), zero: bool) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let mut par = ParallelConfig::from_world(tp * pp * dp, tp, pp).unwrap();
    par.distributed_optimizer = zero;
    let spec = RunSpec {
        config,
        par,
        settings: settings(2, 2 * dp),
        data_seed: 1,
        data_order: DataOrder::Trident,
        iters: 0,
        eval_interval: 0,
        eval_iters: 1,
        save: Some(SavePlan { dir: dir.path().to_path_buf(), interval: 0, state: json!({}) }),
        resume: None,
        exit: Default::default(),
    };
    let init = gpt2_init(&ParamLayout::new(config), 1);
    let peaks = run_ranks(par.world_size(), |mut world| {
        let from = Cell::new(0);
        let data = RankData { train: data(1), val: None };
        train_rank(
            &mut world,
            &Device::Cpu,
            &spec,
            &init,
            data,
            &mut |_| from.set(alloc_count::start()),
            &mut |_, _, _| {},
        )?;
        Ok::<_, crate::train::TrainError>(alloc_count::peak_since(from.get()))
    })
    .unwrap();
    peaks[0]
}

/// One rank holds exactly what is counted (its three copies and two more models while the
/// moments are put in place), give or take the file writer's buffer; rank 0 of a ZeRO-1 grid
/// holds no more than counted, and at least the whole model and its moments.
#[test]
fn the_memory_check_counts_what_a_save_holds() {
    let config = GptConfig::new(SEQ, VOCAB, 2, 4, 256, 256).unwrap();
    let whole = 4 * ParamLayout::new(config).len() as u64;
    let need = MemoryNeed::single(&config, 2, SEQ, 1, true, Storage::Fp32).unwrap();
    assert_eq!(need.checkpoint + need.gather, 5 * whole, "{need}");
    let got = measured_save(config, (1, 1, 1), false);
    let slack = 2 << 20;
    assert!(got >= 5 * whole && got <= 5 * whole + slack, "one rank: measured {got}, counted {}", 5 * whole);

    let grid = (2, 1, 2);
    let counted = MemoryNeed::default().with_save(&config, grid, true, 1, true).unwrap();
    let got = measured_save(config, grid, true);
    let counted = counted.checkpoint + counted.gather;
    assert!(
        got >= 3 * whole && got <= counted + slack,
        "TP 2 x DP 2, ZeRO-1: measured {got}, counted {counted}"
    );
}
