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
//!   atomically, and tells every rank whether that worked, so a failed save ends every rank,
//!   each saying where the previous checkpoint (untouched by the failed write) is;
//! - while a save lasts, every rank waits for the others under the save's own deadline
//!   ([`save_timeout`]: sized to the checkpoint, or `TRIDENT_SAVE_TIMEOUT_S`), not under the
//!   ordinary collective timeout, which a large checkpoint on a slow disk outlasts.
//!
//! Resuming ([`restore`]): every rank reads the checkpoint (from a file system all ranks see,
//! as Megatron-LM assumes) and takes its share ([`ShardLayout::extract`]). A vocabulary padded
//! for another tensor-parallel size is padded again first ([`repad_vocab`]): the padded rows
//! of the embedding are never a target and their logits are masked, so they are zero and stay
//! zero, in the moments too.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use trident_collectives::{Communicator, RankGrid};

use super::{Result, TrainError, Trainer};
use crate::checkpoint::{latest_checkpoint, step_dir, AdamWMoments, Checkpoint};
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

/// The most elements (f32) one rank's own host copies for a save hold: its parameter shard
/// and the part of AdamW's moments it owns, on a `tp x pp x dp` grid with `chunks` model chunks
/// per stage, under ZeRO-1 when `zero`.
pub fn save_copy_elements(
    config: &GptConfig,
    (tp, pp, dp): (usize, usize, usize),
    zero: bool,
    chunks: usize,
) -> usize {
    let mut most = 0;
    for stage in 0..pp.max(1) {
        for tp_rank in 0..tp.max(1) {
            let place =
                ShardPlace { chunks: chunks.max(1), ..ShardPlace::new(tp_rank, tp.max(1), stage, pp.max(1)) };
            let len = ShardLayout::new(*config, place).len();
            most = most.max(len + 2 * owned_range(len, dp.max(1), 0, zero).len());
        }
    }
    most
}

/// The most elements (f32) world rank 0 holds during a save beside its own copies
/// ([`save_copy_elements`]), as [`save`] allocates them: on one rank, the whole model's
/// parameters and moments less the parameter copy it frees first (2 models); on a grid, the
/// whole model and both moments (3 models), the moments of one stage while their ZeRO-1
/// shares arrive, and the largest shard's moments in flight.
pub fn save_gather_elements(
    config: &GptConfig,
    (tp, pp, dp): (usize, usize, usize),
    zero: bool,
    chunks: usize,
) -> usize {
    let whole = ParamLayout::new(*config).len();
    let (tp, pp, dp) = (tp.max(1), pp.max(1), dp.max(1));
    if tp * pp * dp == 1 {
        return 2 * whole;
    }
    let (mut largest, mut stage_most) = (0, 0);
    for stage in 0..pp {
        let mut stage_sum = 0;
        for tp_rank in 0..tp {
            let place = ShardPlace { chunks: chunks.max(1), ..ShardPlace::new(tp_rank, tp, stage, pp) };
            let len = ShardLayout::new(*config, place).len();
            largest = largest.max(len);
            stage_sum += len;
        }
        stage_most = stage_most.max(stage_sum);
    }
    let pending = if zero && dp > 1 { stage_most } else { 0 };
    3 * whole + 2 * pending + 2 * largest
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

/// Environment variable: seconds every rank waits for the others during a checkpoint save
/// (the transfers to world rank 0 and its write), in place of [`save_timeout`]'s default.
pub const ENV_SAVE_TIMEOUT: &str = "TRIDENT_SAVE_TIMEOUT_S";

/// The write rate the default save deadline allows for: a slow network file system's, well
/// under a local disk's.
const SLOWEST_WRITE_BYTES_PER_S: u64 = 20_000_000;

/// The margin of the default save deadline beside the writing time.
const SAVE_MARGIN: Duration = Duration::from_secs(600);

/// How long the ranks of a save of `config` wait for each other: [`ENV_SAVE_TIMEOUT`] when it
/// is set, else the ordinary collective timeout `ordinary`, plus ten minutes, plus the time a
/// checkpoint's bytes (the parameters and AdamW's two moments, 12 bytes a parameter) take at
/// 20 MB/s. A value of the variable that is not a positive number of seconds is an error.
pub fn save_timeout(config: &GptConfig, ordinary: Duration) -> Result<Duration> {
    if let Ok(v) = std::env::var(ENV_SAVE_TIMEOUT) {
        return match v.trim().parse::<f64>() {
            Ok(secs) if secs > 0.0 && secs < 1e9 => Ok(Duration::from_secs_f64(secs)),
            _ => Err(TrainError::Checkpoint(format!(
                "{ENV_SAVE_TIMEOUT}={v:?} is not a positive number of seconds"
            ))),
        };
    }
    let bytes = (ParamLayout::new(*config).len() as u64).saturating_mul(12);
    let writing = Duration::from_secs(bytes / SLOWEST_WRITE_BYTES_PER_S);
    Ok(ordinary.saturating_add(SAVE_MARGIN).saturating_add(writing))
}

/// What a failed save left in `dir`: the latest complete checkpoint there, which the failed
/// write did not touch (checkpoints are written beside it and renamed into place), or none.
fn previous_checkpoint_note(dir: &Path) -> String {
    match latest_checkpoint(dir) {
        Ok(Some((step, path))) => format!(
            "the previous checkpoint, {} (step {step}), is intact: --load {} resumes from it",
            path.display(),
            dir.display()
        ),
        Ok(None) => format!("{} holds no earlier checkpoint", dir.display()),
        Err(e) => format!("the earlier checkpoints in {} could not be listed: {e}", dir.display()),
    }
}

/// One (tensor rank, stage)'s AdamW moments on world rank 0 while their data-parallel
/// shares arrive: `m`, `v` and the count of shares in.
type PendingMoments = Option<(Vec<f32>, Vec<f32>, usize)>;

/// Writes the checkpoint of the step `trainer` has just finished, every rank of `world`
/// taking part, under the save's deadline ([`save_timeout`]). `loader` is this rank's
/// training data.
pub fn save(
    world: &mut Communicator,
    grid: &RankGrid,
    trainer: &Trainer,
    loader: &DataLoader,
    plan: &SavePlan,
) -> Result<()> {
    let ordinary = world.timeout();
    world.set_timeout(save_timeout(&trainer.model.layout().config, ordinary)?);
    let saved = save_under_deadline(world, grid, trainer, loader, plan);
    world.set_timeout(ordinary);
    saved
}

fn save_under_deadline(
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
            _ => Err(TrainError::Checkpoint(format!(
                "rank 0 could not write the checkpoint of step {} (its message says why); {}",
                trainer.iter,
                previous_checkpoint_note(&plan.dir)
            ))),
        };
    }

    // World rank 0: every share into the whole model, in rank order. Each buffer is freed as
    // soon as it is in place, so that rank 0 holds what [`save_gather_elements`] counts.
    let layout = ParamLayout::new(config);
    let mut full = vec![0.0f32; layout.len()];
    let mut full_moments: Option<(Vec<f32>, Vec<f32>)> = None;
    let mut own = Some((params, m, v));
    // Each (tensor rank, stage)'s moments while their data-parallel shares arrive (ZeRO-1),
    // with the count of shares in.
    let shares = if zero { grid.dp } else { 1 };
    let mut pending: Vec<PendingMoments> = (0..grid.tp * grid.pp).map(|_| None).collect();
    let mut positions = vec![[0u64; 3]; grid.dp];
    for r in 0..grid.world_size() {
        let c = grid.coords(r);
        let shard =
            ShardLayout::new(config, ShardPlace { chunks, ..ShardPlace::new(c.tp, grid.tp, c.pp, grid.pp) });
        let owned = owned_range(shard.len(), grid.dp, c.dp, zero);
        let recv = |world: &mut Communicator, n: usize| -> Result<Vec<f32>> {
            let mut buf = vec![0.0f32; n];
            world.recv(&mut buf, r, TAG)?;
            Ok(buf)
        };
        // Rank 0 comes first and hands over its own copies without another.
        let (rp, rmv) = match own.take() {
            Some((p, m, v)) => (Some(p), Some((m, v))),
            None => {
                let p = if c.dp == 0 { Some(recv(world, shard.len())?) } else { None };
                let mv = if zero || c.dp == 0 {
                    let m = recv(world, owned.len())?;
                    Some((m, recv(world, owned.len())?))
                } else {
                    None
                };
                (p, mv)
            }
        };
        if let Some(p) = rp {
            shard.insert(&p, &mut full);
        }
        if let Some((rm, rv)) = rmv {
            let slot = &mut pending[c.tp + grid.tp * c.pp];
            if shares == 1 {
                *slot = Some((rm, rv, 1));
            } else {
                let (lm, lv, n) =
                    slot.get_or_insert_with(|| (vec![0.0; shard.len()], vec![0.0; shard.len()], 0));
                lm[owned.clone()].copy_from_slice(&rm);
                lv[owned].copy_from_slice(&rv);
                *n += 1;
            }
            if let Some((lm, lv, _)) = slot.take_if(|s| s.2 == shares) {
                let (fm, fv) = full_moments
                    .get_or_insert_with(|| (vec![0.0f32; layout.len()], vec![0.0f32; layout.len()]));
                shard.insert(&lm, fm);
                shard.insert(&lv, fv);
            }
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
    }
    let (full_m, full_v) = match full_moments {
        Some(moments) if pending.iter().all(Option::is_none) => moments,
        _ => {
            return Err(TrainError::Checkpoint(
                "some tensor rank and stage sent no AdamW moments: the checkpoint would be partial".into(),
            ))
        }
    };

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
    #[cfg(test)]
    let written = faults::before_write(&plan.dir, trainer.iter).and_then(|()| ck.save(&path));
    #[cfg(not(test))]
    let written = ck.save(&path);
    world.broadcast(&mut [if written.is_ok() { 1.0f64 } else { 0.0 }], 0)?;
    written.map_err(|e| {
        TrainError::Checkpoint(format!(
            "saving a checkpoint to {}: {e}; {}",
            path.display(),
            previous_checkpoint_note(&plan.dir)
        ))
    })
}

/// Faults injected into world rank 0's write of a checkpoint, by `--save` directory and step
/// (tests only): a write that is slow, or one that fails.
#[cfg(test)]
pub(crate) mod faults {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::Duration;

    use crate::checkpoint::CheckpointError;

    /// What happens to the write.
    #[derive(Clone, Copy, Debug)]
    pub enum Fault {
        /// It starts after this delay.
        Slow(Duration),
        /// It fails with an I/O error and writes nothing.
        Fail,
    }

    static FAULTS: Mutex<Vec<(PathBuf, u64, Fault)>> = Mutex::new(Vec::new());

    /// Makes the write of step `step`'s checkpoint into `dir` suffer `fault`.
    pub fn inject(dir: &Path, step: u64, fault: Fault) {
        FAULTS.lock().unwrap_or_else(|e| e.into_inner()).push((dir.to_path_buf(), step, fault));
    }

    /// Applies the fault injected for `dir` and `step`, if any.
    pub(super) fn before_write(dir: &Path, step: u64) -> Result<(), CheckpointError> {
        let fault = FAULTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(d, s, _)| d == dir && *s == step)
            .map(|f| f.2);
        match fault {
            Some(Fault::Slow(delay)) => {
                std::thread::sleep(delay);
                Ok(())
            }
            Some(Fault::Fail) => Err(CheckpointError::io(dir, std::io::Error::other("injected write fault"))),
            None => Ok(()),
        }
    }
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
