//! Checkpoints of runs on any grid, in the grid-independent format of [`crate::checkpoint`]:
//! whole logical tensors and AdamW moments in llm.c order, the step, the data position. No field
//! depends on the grid, so a run saved on any (TP, PP, DP, ZeRO-1) grid resumes on any other,
//! or on one rank, and `trident sample` and the exports read it as they read any checkpoint.
//!
//! Saving, at a step boundary, with every rank taking part ([`save`]):
//! - data-parallel replica 0 of each (tensor rank, stage) sends its parameter share to world
//!   rank 0; the moments come from every rank that owns some (replica 0 without ZeRO-1, each
//!   replica's 1/DP range of the local buffer with it);
//! - the replicas' data positions come too (from tensor rank 0 of stage 0 of each): Trident's
//!   order walks one global stream, so its position is the same on every replica and any grid
//!   resumes it; llm.c's order is per replica and resumes only at the same data-parallel size;
//! - world rank 0 puts each share in place ([`ShardLayout::insert`]), writes the checkpoint
//!   atomically, and tells every rank whether that worked, so a failed save ends every rank.
//!
//! Resuming ([`restore`]): every rank reads the checkpoint (from a file system all ranks see,
//! as Megatron-LM assumes) and takes its share ([`ShardLayout::extract`]). A vocabulary padded
//! for another tensor-parallel size is padded again first ([`repad_vocab`]): the padded rows
//! of the embedding are never a target and their logits are masked, so they are zero and stay
//! zero, in the moments too.

use std::ops::Range;

use serde_json::json;
use trident_collectives::{Communicator, RankGrid};

use super::{Result, TrainError, Trainer};
use crate::checkpoint::{step_dir, AdamWMoments, Checkpoint};
use crate::model::{GptConfig, ParamLayout, ParamTensor, ShardLayout, ShardPlace};
use trident_data::{DataLoader, DataOrder, LoaderState};

/// Tag of the transfers to world rank 0 (sends between two ranks arrive in order).
const TAG: u32 = 0x5A7E;

/// Where a run writes its checkpoints.
#[derive(Clone, Debug)]
pub struct SavePlan {
    /// `--save`: checkpoints go to `DIR/step_XXXXXXXX`.
    pub dir: std::path::PathBuf,
    /// `--save-interval` (0: only after the last step).
    pub interval: u64,
    /// Written into `trainer.json`'s state beside the run's own fields (data, tokenizer).
    pub state: serde_json::Value,
}

impl SavePlan {
    /// Whether a checkpoint is due after step `iter` of `iters`.
    pub fn due(&self, iter: u64, iters: u64) -> bool {
        (self.interval > 0 && iter % self.interval == 0) || iter == iters
    }
}

/// The local range of the moments that data-parallel rank `dp_rank` of `dp` owns in a local
/// buffer of `len` elements: all of it without ZeRO-1; with it, the `dp_rank`-th of `dp`
/// equal shares of the buffer padded to a multiple of `dp` (the last shares may be short or
/// empty).
pub fn owned_range(len: usize, dp: usize, dp_rank: usize, zero: bool) -> Range<usize> {
    if !zero {
        return 0..len;
    }
    let share = len.div_ceil(dp);
    (dp_rank * share).min(len)..((dp_rank + 1) * share).min(len)
}

/// A loader's position as exact `f64` words (u32 halves), for the transfer to rank 0.
fn position_words(s: &LoaderState) -> [f64; 6] {
    let mut w = [0.0; 6];
    for (i, v) in [s.epoch, s.part as u64, s.sample as u64].into_iter().enumerate() {
        w[2 * i] = (v >> 32) as f64;
        w[2 * i + 1] = (v & 0xffff_ffff) as f64;
    }
    w
}

fn position_of(w: &[f64; 6]) -> [u64; 3] {
    std::array::from_fn(|i| ((w[2 * i] as u64) << 32) | w[2 * i + 1] as u64)
}

/// Writes the checkpoint of the step `trainer` has just finished, every rank of `world`
/// taking part. `loader` is this rank's training data.
pub fn save(
    world: &mut Communicator,
    grid: &RankGrid,
    trainer: &Trainer,
    loader: &DataLoader,
    plan: &SavePlan,
) -> Result<()> {
    let config = trainer.model.layout().config;
    let zero = trainer.par.distributed_optimizer;
    let chunks = trainer.par.virtual_stages.max(1);
    let me = world.rank();
    let coords = grid.coords(me);
    let params = trainer.model.params().to_vec()?;
    let (m, v) = trainer.optimizer.moments()?;
    let position = position_words(&loader.state());
    if me != 0 {
        if coords.dp == 0 {
            world.send(&params, 0, TAG)?;
        }
        if zero || coords.dp == 0 {
            world.send(&m, 0, TAG)?;
            world.send(&v, 0, TAG)?;
        }
        if coords.tp == 0 && coords.pp == 0 {
            world.send(&position, 0, TAG)?;
        }
        let mut ok = [0.0f64];
        world.broadcast(&mut ok, 0)?;
        return match ok[0] {
            1.0 => Ok(()),
            _ => Err(TrainError::Checkpoint(
                "rank 0 could not write the checkpoint (its message says why); nothing after the \
                 previous checkpoint was saved"
                    .into(),
            )),
        };
    }

    // World rank 0: every share into the whole model, in rank order.
    let layout = ParamLayout::new(config);
    let (mut full, mut full_m, mut full_v) =
        (vec![0.0f32; layout.len()], vec![0.0f32; layout.len()], vec![0.0f32; layout.len()]);
    let mut local_moments: Vec<Option<(Vec<f32>, Vec<f32>)>> = vec![None; grid.tp * grid.pp];
    let mut positions = vec![[0u64; 3]; grid.dp];
    let mut received = Ok(());
    for r in 0..grid.world_size() {
        let c = grid.coords(r);
        let shard =
            ShardLayout::new(config, ShardPlace { chunks, ..ShardPlace::new(c.tp, grid.tp, c.pp, grid.pp) });
        let owned = owned_range(shard.len(), grid.dp, c.dp, zero);
        let take = |world: &mut Communicator, own: &[f32], n: usize| -> Result<Vec<f32>> {
            if r == 0 {
                return Ok(own.to_vec());
            }
            let mut buf = vec![0.0f32; n];
            world.recv(&mut buf, r, TAG)?;
            Ok(buf)
        };
        let step = (|| -> Result<()> {
            if c.dp == 0 {
                shard.insert(&take(world, &params, shard.len())?, &mut full);
            }
            if zero || c.dp == 0 {
                let (rm, rv) = (take(world, &m, owned.len())?, take(world, &v, owned.len())?);
                let slot = &mut local_moments[c.tp + grid.tp * c.pp];
                let (lm, lv) = slot.get_or_insert_with(|| (vec![0.0; shard.len()], vec![0.0; shard.len()]));
                lm[owned.clone()].copy_from_slice(&rm);
                lv[owned].copy_from_slice(&rv);
            }
            if c.tp == 0 && c.pp == 0 {
                let w = if r == 0 {
                    position
                } else {
                    let mut w = [0.0f64; 6];
                    world.recv(&mut w, r, TAG)?;
                    w
                };
                positions[c.dp] = position_of(&w);
            }
            Ok(())
        })();
        if let Err(e) = step {
            received = Err(e);
            break;
        }
    }
    received?;
    for (i, slot) in local_moments.iter().enumerate() {
        let (tp_rank, stage) = (i % grid.tp, i / grid.tp);
        let shard = ShardLayout::new(
            config,
            ShardPlace { chunks, ..ShardPlace::new(tp_rank, grid.tp, stage, grid.pp) },
        );
        let (lm, lv) = slot.as_ref().expect("every (tensor rank, stage) has moments");
        shard.insert(lm, &mut full_m);
        shard.insert(lv, &mut full_v);
    }

    let mut state = plan.state.clone();
    if let Some(obj) = state.as_object_mut() {
        obj.insert("adam_steps".into(), json!(trainer.optimizer.steps()));
        obj.insert(
            "grid".into(),
            json!({ "tensor": grid.tp, "pipeline": grid.pp, "data": grid.dp, "distributed_optimizer": zero }),
        );
        obj.insert("dp_loader_positions".into(), json!(positions));
        obj.insert("precision".into(), json!(trainer.settings.precision));
        obj.insert("skipped_iters".into(), json!(trainer.skipped));
        if let Some(scaler) = &trainer.scaler {
            obj.insert("loss_scaler".into(), json!(scaler));
        }
    }
    let ck = Checkpoint {
        config,
        step: trainer.iter,
        params: full,
        optimizer: Some(AdamWMoments { m: full_m, v: full_v }),
        loader: Some(loader.state()),
        state,
    };
    let path = step_dir(&plan.dir, trainer.iter);
    let written = ck.save(&path);
    world.broadcast(&mut [if written.is_ok() { 1.0f64 } else { 0.0 }], 0)?;
    written.map_err(|e| TrainError::Checkpoint(format!("saving a checkpoint to {}: {e}", path.display())))
}

/// Puts this rank of a resumed run where checkpoint `ck` left off: the step, its share of the
/// moments, the step count of AdamW, and the data position. The parameters came in as the
/// trainer's initial values (`ck.params`).
pub fn restore(trainer: &mut Trainer, loader: &mut DataLoader, ck: &Checkpoint) -> Result<()> {
    let layout = trainer.model.layout().clone();
    if ck.config != layout.config {
        return Err(TrainError::Checkpoint(format!(
            "the checkpoint's model ({:?}) is not this run's ({:?}); pad it with repad_vocab first",
            ck.config, layout.config
        )));
    }
    trainer.iter = ck.step;
    trainer.skipped = ck.state.get("skipped_iters").and_then(|s| s.as_u64()).unwrap_or(0);
    let saved: Option<crate::model::Precision> =
        ck.state.get("precision").and_then(|p| serde_json::from_value(p.clone()).ok());
    let saved = saved.unwrap_or_default();
    if saved != trainer.settings.precision {
        return Err(TrainError::Checkpoint(format!(
            "the checkpoint was trained in {saved} and this run is {}: resume it with --{saved}",
            trainer.settings.precision
        )));
    }
    if let (Some(scaler), Some(saved)) = (trainer.scaler.as_mut(), ck.state.get("loss_scaler")) {
        *scaler = serde_json::from_value(saved.clone()).map_err(|e| {
            TrainError::Checkpoint(format!("the checkpoint's loss scaler is unreadable: {e}"))
        })?;
    }
    if let Some(o) = &ck.optimizer {
        let owned = trainer.optimizer.owned.clone();
        let (m, v) = (layout.extract(&o.m), layout.extract(&o.v));
        let steps = ck.state.get("adam_steps").and_then(|s| s.as_u64()).unwrap_or(ck.step);
        trainer.optimizer.restore(&m[owned.clone()], &v[owned], steps)?;
    }
    let Some(mut state) = ck.loader else { return Ok(()) };
    let (dp, dp_rank) = (trainer.par.dp, trainer.groups.dp_rank);
    if state.order == DataOrder::Llmc {
        // llm.c's order is drawn per replica: each resumes its own position.
        let positions: Option<Vec<[u64; 3]>> =
            ck.state.get("dp_loader_positions").and_then(|p| serde_json::from_value(p.clone()).ok());
        let saved_dp = positions.as_ref().map_or(1, Vec::len);
        if saved_dp != dp {
            return Err(TrainError::Checkpoint(format!(
                "the checkpoint was saved with --data-order llmc on {saved_dp} data-parallel replicas, \
                 and llm.c's order is drawn per replica: resume it with data-parallel size {saved_dp}, \
                 or train with --data-order trident, whose position any grid resumes"
            )));
        }
        if let Some(p) = positions {
            let [epoch, part, sample] = p[dp_rank];
            state = LoaderState { epoch, part: part as usize, sample: sample as usize, ..state };
        }
    }
    loader.restore(state)?;
    Ok(())
}

/// `ck` with its vocabulary padded to `padded` rows (a multiple of 128 x the new
/// tensor-parallel size), in the parameters and the moments ([`repad_params`]).
pub fn repad_vocab(ck: &mut Checkpoint, padded: usize) -> Result<()> {
    let old = ck.config;
    if padded == old.padded_vocab_size {
        return Ok(());
    }
    let params = repad_params(&old, &ck.params, padded, "parameters")?;
    if let Some(o) = &mut ck.optimizer {
        o.m = repad_params(&old, &o.m, padded, "AdamW m")?;
        o.v = repad_params(&old, &o.v, padded, "AdamW v")?;
    }
    ck.params = params;
    ck.config = GptConfig { padded_vocab_size: padded, ..old };
    Ok(())
}

/// `values` (a whole model's tensors in llm.c order, of shape `config`) with the embedding's
/// rows past the vocabulary added as zeros or dropped, to `padded` rows. Fails if a dropped
/// row is not zero (`what` names the buffer).
pub fn repad_params(config: &GptConfig, values: &[f32], padded: usize, what: &str) -> Result<Vec<f32>> {
    if padded < config.vocab_size {
        return Err(TrainError::Checkpoint(format!(
            "a padded vocabulary of {padded} rows cannot hold the model's {} tokens",
            config.vocab_size
        )));
    }
    let from = ParamLayout::new(*config);
    let to = ParamLayout::new(GptConfig { padded_vocab_size: padded, ..*config });
    let wte = from.range(ParamTensor::Wte);
    let kept = wte.start + config.vocab_size * config.channels;
    if values[kept..wte.end].iter().any(|&x| x != 0.0) && padded < config.padded_vocab_size {
        return Err(TrainError::Checkpoint(format!(
            "the {what} have non-zero padded embedding rows, which a vocabulary padded to {padded} \
             rows cannot keep"
        )));
    }
    let mut out = Vec::with_capacity(to.len());
    out.extend_from_slice(&values[..kept.min(wte.end)]);
    if padded > config.padded_vocab_size {
        out.extend_from_slice(&values[kept..wte.end]);
    }
    out.resize(to.range(ParamTensor::Wte).end, 0.0);
    out.extend_from_slice(&values[wte.end..]);
    debug_assert_eq!(out.len(), to.len());
    Ok(out)
}

/// The padded vocabulary a run of tensor-parallel size `tp` needs for `config`: its own when
/// that is a multiple of 128 x `tp`, else the vocabulary rounded up to one (Megatron-LM's rule).
pub fn padded_vocab_for(config: &GptConfig, tp: usize) -> usize {
    let multiple = 128 * tp.max(1);
    if config.padded_vocab_size % multiple == 0 {
        config.padded_vocab_size
    } else {
        config.vocab_size.div_ceil(multiple) * multiple
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpt2_init;

    #[test]
    fn the_padding_follows_megatrons_rule() {
        let c = GptConfig::new(8, 300, 2, 4, 16, 128).unwrap();
        assert_eq!(c.padded_vocab_size, 384);
        assert_eq!(padded_vocab_for(&c, 1), 384);
        assert_eq!(padded_vocab_for(&c, 2), 512);
        assert_eq!(padded_vocab_for(&c, 4), 512);
        let wide = GptConfig { padded_vocab_size: 1024, ..c };
        assert_eq!(padded_vocab_for(&wide, 4), 1024, "a padding that divides is kept");
    }

    #[test]
    fn zero_shares_cover_the_buffer_once() {
        for (len, dp) in [(10, 4), (8, 4), (3, 4), (0, 2), (7, 1)] {
            let mut covered = vec![0; len];
            for r in 0..dp {
                for i in owned_range(len, dp, r, true) {
                    covered[i] += 1;
                }
            }
            assert!(covered.iter().all(|&n| n == 1), "len {len}, dp {dp}: {covered:?}");
            assert_eq!(owned_range(len, dp, dp - 1, false), 0..len);
        }
    }

    #[test]
    fn loader_positions_cross_as_exact_words() {
        let s = LoaderState {
            seed: 1,
            shuffle: true,
            seq_len: 8,
            total_tokens: 100,
            epoch: u64::MAX - 3,
            part: (1 << 40) + 7,
            sample: 12345,
            order: DataOrder::Trident,
        };
        assert_eq!(position_of(&position_words(&s)), [u64::MAX - 3, (1 << 40) + 7, 12345]);
    }

    #[test]
    fn repadding_keeps_every_real_row_and_refuses_to_drop_a_nonzero_one() {
        let config = GptConfig::new(8, 40, 2, 2, 16, 128).unwrap();
        let params = gpt2_init(&ParamLayout::new(config), 5);
        let mut ck = Checkpoint {
            config,
            step: 3,
            params: params.clone(),
            optimizer: Some(AdamWMoments { m: params.clone(), v: params.clone() }),
            loader: None,
            state: json!({}),
        };
        repad_vocab(&mut ck, 512).unwrap();
        assert_eq!(ck.config.padded_vocab_size, 512);
        let wide = ParamLayout::new(ck.config);
        assert_eq!(ck.params.len(), wide.len());
        repad_vocab(&mut ck, 128).unwrap();
        assert_eq!(ck.params, params, "padding out and back is the identity");
        assert_eq!(ck.optimizer.as_ref().unwrap().m, params);

        // A non-zero padded row cannot be dropped.
        let narrow = ParamLayout::new(config);
        ck.params[narrow.range(ParamTensor::Wte).start + 40 * 16] = 1.0;
        let e = repad_vocab(&mut ck, 64).unwrap_err().to_string();
        assert!(e.contains("non-zero padded embedding rows"), "{e}");
        // Growing keeps whatever the padded rows hold.
        assert_eq!(
            repad_params(&config, &ck.params, 256, "x").unwrap().len(),
            ParamLayout::new(GptConfig { padded_vocab_size: 256, ..config }).len()
        );
    }
}
