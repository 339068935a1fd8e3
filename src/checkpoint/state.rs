//! Resumable training checkpoints.
//!
//! A checkpoint is a directory, written whole or not at all:
//! - `model.safetensors`: the 16 parameter tensors under their llm.c names (`wte`, `qkvw`, ...)
//!   with the layer-stacked shapes of [`ParamLayout`];
//! - `optimizer.safetensors` (when present): AdamW's moments as `adamw.m.NAME`, `adamw.v.NAME`;
//! - `trainer.json`: the config, the step, the data loader's position and the trainer's own
//!   state (any serde type).
//!
//! Every tensor is verified on load against its CRC-32, which `trainer.json` records
//! (`checksums`, by file and tensor name), and every value must be finite. Both safetensors
//! files carry the step and the CRC-32 of the exact bytes of `trainer.json` in their metadata,
//! so an edited `trainer.json` (even one whose shapes still fit the tensors, such as another
//! `num_heads`) and a directory that mixes files from two saves are both refused.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::atomic::{sync_file, write_dir_atomically};
use super::tensors::{checksum, read_tensors, try_zeros, write_tensors, Expected, F32View};
use super::CheckpointError;
use crate::model::{GptConfig, ParamLayout, ParamTensor};
use trident_data::LoaderState;

const MODEL_FILE: &str = "model.safetensors";
const OPTIMIZER_FILE: &str = "optimizer.safetensors";
const TRAINER_FILE: &str = "trainer.json";
/// 2: tensors checksummed, `trainer.json` checksummed in the tensors' metadata.
const FORMAT_VERSION: u32 = 2;
/// Metadata key of the CRC-32 of `trainer.json`'s bytes, as 8 hex digits.
const TRAINER_CRC_KEY: &str = "trainer_json_crc32";

/// AdamW's first and second moments, laid out like the parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct AdamWMoments {
    /// First moments, one per parameter.
    pub m: Vec<f32>,
    /// Second moments, one per parameter.
    pub v: Vec<f32>,
}

/// Everything needed to resume training. `S` is the trainer's own state (learning-rate schedule
/// position, RNG, ...); anything serde can write as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint<S = serde_json::Value> {
    /// The model's shape.
    pub config: GptConfig,
    /// Optimizer steps taken.
    pub step: u64,
    /// All parameters in [`ParamLayout`] order.
    pub params: Vec<f32>,
    /// The optimizer's moments, where they were saved.
    pub optimizer: Option<AdamWMoments>,
    /// Where the data loader stood, where it was saved.
    pub loader: Option<LoaderState>,
    /// The trainer's own state (step, schedule, RNG), as it serializes it.
    pub state: S,
}

#[derive(Serialize, Deserialize)]
struct TrainerFile<S> {
    format_version: u32,
    config: GptConfig,
    step: u64,
    has_optimizer: bool,
    loader: Option<LoaderState>,
    state: S,
    /// CRC-32 of every tensor's little-endian bytes: file name -> tensor name -> checksum.
    checksums: BTreeMap<String, BTreeMap<String, u32>>,
}

/// Only the version, read first so that an older file is named as such rather than failing on
/// a field it lacks.
#[derive(Deserialize)]
struct FormatVersion {
    format_version: u32,
}

/// `DIR/step_00001234`, the directory [`latest_checkpoint`] looks for.
pub fn step_dir(out_dir: &Path, step: u64) -> PathBuf {
    out_dir.join(format!("step_{step:08}"))
}

/// Complete checkpoints (`step_N` directories with a `trainer.json`) under `out_dir`, by step.
pub fn list_checkpoints(out_dir: &Path) -> Result<Vec<(u64, PathBuf)>, CheckpointError> {
    let entries = match fs::read_dir(out_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CheckpointError::io(out_dir, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| CheckpointError::io(out_dir, e))?.path();
        let step = path.file_name().and_then(|n| n.to_str()?.strip_prefix("step_")?.parse::<u64>().ok());
        if let Some(step) = step {
            if path.join(TRAINER_FILE).is_file() {
                found.push((step, path));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The checkpoint with the highest step under `out_dir`, if any.
pub fn latest_checkpoint(out_dir: &Path) -> Result<Option<(u64, PathBuf)>, CheckpointError> {
    Ok(list_checkpoints(out_dir)?.pop())
}

/// Deletes all but the newest `keep` checkpoints under `out_dir`; returns what it deleted.
pub fn prune_checkpoints(out_dir: &Path, keep: usize) -> Result<Vec<PathBuf>, CheckpointError> {
    let all = list_checkpoints(out_dir)?;
    let old = all.len().saturating_sub(keep);
    let mut removed = Vec::with_capacity(old);
    for (_, path) in all.into_iter().take(old) {
        fs::remove_dir_all(&path).map_err(|e| CheckpointError::io(&path, e))?;
        removed.push(path);
    }
    Ok(removed)
}

fn layout_entries(layout: &ParamLayout, prefix: &str) -> Vec<Expected> {
    ParamTensor::ALL
        .iter()
        .map(|&t| Expected {
            name: format!("{prefix}{}", t.name()),
            shape: t.shape(&layout.config),
            range: layout.range(t),
        })
        .collect()
}

fn views<'a>(layout: &ParamLayout, prefix: &str, values: &'a [f32]) -> Vec<(String, F32View<'a>)> {
    layout_entries(layout, prefix)
        .into_iter()
        .map(|e| {
            let view = F32View { shape: e.shape, data: values[e.range].into() };
            (e.name, view)
        })
        .collect()
}

fn file_metadata(step: u64, trainer_crc: u32) -> HashMap<String, String> {
    HashMap::from([
        ("format".to_owned(), "pt".to_owned()),
        ("step".to_owned(), step.to_string()),
        (TRAINER_CRC_KEY.to_owned(), format!("{trainer_crc:08x}")),
    ])
}

fn checksums_of(views: &[(String, F32View<'_>)]) -> BTreeMap<String, u32> {
    views.iter().map(|(name, view)| (name.clone(), checksum(&view.data))).collect()
}

impl<S: Serialize + DeserializeOwned> Checkpoint<S> {
    fn check_lengths(&self, layout: &ParamLayout) -> Result<(), CheckpointError> {
        let mut buffers = vec![("the parameter buffer", self.params.len())];
        if let Some(o) = &self.optimizer {
            buffers.push(("AdamW's m", o.m.len()));
            buffers.push(("AdamW's v", o.v.len()));
        }
        for (what, found) in buffers {
            if found != layout.len() {
                return Err(CheckpointError::WrongLength { what, expected: layout.len(), found });
            }
        }
        Ok(())
    }

    /// Writes the checkpoint to `dir` atomically (replacing an older one there).
    pub fn save(&self, dir: &Path) -> Result<(), CheckpointError> {
        let layout = ParamLayout::new(self.config);
        self.check_lengths(&layout)?;
        let model = views(&layout, "", &self.params);
        let optimizer = self.optimizer.as_ref().map(|o| {
            let mut tensors = views(&layout, "adamw.m.", &o.m);
            tensors.extend(views(&layout, "adamw.v.", &o.v));
            tensors
        });
        let mut checksums = BTreeMap::from([(MODEL_FILE.to_owned(), checksums_of(&model))]);
        if let Some(o) = &optimizer {
            checksums.insert(OPTIMIZER_FILE.to_owned(), checksums_of(o));
        }
        let file = TrainerFile {
            format_version: FORMAT_VERSION,
            config: self.config,
            step: self.step,
            has_optimizer: self.optimizer.is_some(),
            loader: self.loader,
            state: &self.state,
            checksums,
        };
        // trainer.json is serialised first: its checksum goes into the tensors' metadata.
        let json = serde_json::to_vec_pretty(&file)
            .map_err(|source| CheckpointError::Json { path: dir.join(TRAINER_FILE), cause: source })?;
        let meta = file_metadata(self.step, crc32fast::hash(&json));
        write_dir_atomically(dir, |tmp| {
            write_tensors(&tmp.join(MODEL_FILE), model, meta.clone())?;
            if let Some(o) = optimizer {
                write_tensors(&tmp.join(OPTIMIZER_FILE), o, meta.clone())?;
            }
            let trainer = tmp.join(TRAINER_FILE);
            fs::File::create(&trainer)
                .and_then(|mut f| f.write_all(&json))
                .map_err(|e| CheckpointError::io(&trainer, e))?;
            sync_file(&trainer)
        })
    }

    /// Reads and checks a checkpoint written by [`save`](Self::save).
    pub fn load(dir: &Path) -> Result<Self, CheckpointError> {
        let trainer_path = dir.join(TRAINER_FILE);
        let json = fs::read(&trainer_path).map_err(|e| CheckpointError::io(&trainer_path, e))?;
        let json_err = |source| CheckpointError::Json { path: trainer_path.clone(), cause: source };
        let version: FormatVersion = serde_json::from_slice(&json).map_err(json_err)?;
        match version.format_version {
            FORMAT_VERSION => {}
            1 => {
                return Err(CheckpointError::NoChecksums {
                    path: trainer_path,
                    found: 1,
                    supported: FORMAT_VERSION,
                })
            }
            found => {
                return Err(CheckpointError::BadVersion {
                    path: trainer_path,
                    what: "checkpoint format",
                    found: found.try_into().unwrap_or(i32::MAX),
                    hint: "this build reads format 2",
                })
            }
        }
        let file: TrainerFile<S> = serde_json::from_slice(&json).map_err(json_err)?;
        let trainer_crc = crc32fast::hash(&json);
        file.config
            .validate()
            .map_err(|source| CheckpointError::Config { path: trainer_path.clone(), cause: source })?;
        let layout = ParamLayout::new(file.config);
        let no_checksums = BTreeMap::new();
        let read = |name: &str, entries: Vec<Expected>, len: usize| {
            let path = dir.join(name);
            let mut out = try_zeros(&path, len)?;
            let checksums = file.checksums.get(name).unwrap_or(&no_checksums);
            read_tensors(&path, &entries, checksums, &mut out, |meta| {
                // Exactly the keys a save writes, so that no byte of the header goes unchecked
                // (the tensors' entries are checked against the config and their checksums).
                let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
                keys.sort_unstable();
                if keys != ["format", "step", TRAINER_CRC_KEY] || meta["format"] != "pt" {
                    return Err(CheckpointError::BadMetadata {
                        path: path.clone(),
                        found: format!("{meta:?}"),
                    });
                }
                let found = meta.get("step").and_then(|s| s.parse::<u64>().ok());
                if found != Some(file.step) {
                    return Err(CheckpointError::StepMismatch {
                        path: path.clone(),
                        dir: dir.into(),
                        expected: file.step,
                        found: found.unwrap_or(u64::MAX),
                    });
                }
                let recorded = meta.get(TRAINER_CRC_KEY).and_then(|s| u32::from_str_radix(s, 16).ok());
                if recorded != Some(trainer_crc) {
                    return Err(CheckpointError::MetadataMismatch {
                        trainer: trainer_path.clone(),
                        tensors: path.clone(),
                        recorded: recorded.unwrap_or(0),
                        found: trainer_crc,
                    });
                }
                Ok(())
            })?;
            Ok(out)
        };
        let params = read(MODEL_FILE, layout_entries(&layout, ""), layout.len())?;
        let optimizer = if file.has_optimizer {
            let n = layout.len();
            let mut entries = layout_entries(&layout, "adamw.m.");
            entries.extend(layout_entries(&layout, "adamw.v.").into_iter().map(|mut e| {
                e.range = e.range.start + n..e.range.end + n;
                e
            }));
            let mut both = read(OPTIMIZER_FILE, entries, 2 * n)?;
            let v = both.split_off(n);
            Some(AdamWMoments { m: both, v })
        } else {
            let stray = dir.join(OPTIMIZER_FILE);
            if stray.exists() {
                return Err(CheckpointError::Unexpected {
                    path: stray,
                    trainer: trainer_path,
                    what: "optimizer state",
                });
            }
            None
        };
        Ok(Self {
            config: file.config,
            step: file.step,
            params,
            optimizer,
            loader: file.loader,
            state: file.state,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_data::SplitMix64;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct MyState {
        lr_step: u64,
        rng: SplitMix64,
    }

    fn random(n: usize, rng: &mut SplitMix64) -> Vec<f32> {
        (0..n).map(|_| rng.next_f32() * 2.0 - 1.0).collect()
    }

    fn sample(seed: u64, with_optimizer: bool) -> Checkpoint<MyState> {
        let config = GptConfig::new(16, 13, 2, 2, 8, 16).unwrap();
        let n = ParamLayout::new(config).len();
        let mut rng = SplitMix64::new(seed);
        Checkpoint {
            config,
            step: 1234,
            params: random(n, &mut rng),
            optimizer: with_optimizer
                .then(|| AdamWMoments { m: random(n, &mut rng), v: random(n, &mut rng) }),
            loader: Some(LoaderState {
                seed,
                shuffle: true,
                seq_len: 16,
                total_tokens: 999,
                epoch: 3,
                part: 0,
                sample: 17,
                order: trident_data::DataOrder::Llmc,
            }),
            state: MyState { lr_step: 7, rng: SplitMix64::new(seed ^ 1) },
        }
    }

    #[test]
    fn round_trips_bit_exactly() {
        let seed = 0xc4e;
        let root = tempfile::tempdir().unwrap();
        for with_optimizer in [true, false] {
            let ck = sample(seed, with_optimizer);
            let dir = step_dir(root.path(), ck.step);
            ck.save(&dir).unwrap();
            let back = Checkpoint::<MyState>::load(&dir).unwrap();
            assert_eq!(back, ck, "seed {seed}");
        }
        assert_eq!(latest_checkpoint(root.path()).unwrap(), Some((1234, step_dir(root.path(), 1234))));
    }

    #[test]
    fn latest_picks_the_highest_complete_step() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(latest_checkpoint(&root.path().join("none")).unwrap(), None);
        let mut ck = sample(5, false);
        for step in [20, 100, 3] {
            ck.step = step;
            ck.save(&step_dir(root.path(), step)).unwrap();
        }
        fs::create_dir(step_dir(root.path(), 500)).unwrap(); // no trainer.json: incomplete
        assert_eq!(latest_checkpoint(root.path()).unwrap().unwrap().0, 100);
        let removed = prune_checkpoints(root.path(), 2).unwrap();
        assert_eq!(removed, vec![step_dir(root.path(), 3)]);
        let left: Vec<u64> = list_checkpoints(root.path()).unwrap().into_iter().map(|(s, _)| s).collect();
        assert_eq!(left, vec![20, 100]);
        assert!(step_dir(root.path(), 500).exists(), "incomplete directories are left alone");
    }

    fn layout_of(ck: &Checkpoint<MyState>) -> ParamLayout {
        ParamLayout::new(ck.config)
    }

    /// The metadata a save gives its tensor files, read back from `dir`'s trainer.json: what a
    /// forged file needs to get past the metadata check to the check under test.
    fn metadata_of(dir: &Path, step: u64) -> HashMap<String, String> {
        file_metadata(step, crc32fast::hash(&fs::read(dir.join(TRAINER_FILE)).unwrap()))
    }

    #[test]
    fn corrupt_or_mismatched_files_are_rejected_with_the_reason() {
        let root = tempfile::tempdir().unwrap();
        let ck = sample(9, true);
        let dir = root.path().join("ck");
        ck.save(&dir).unwrap();
        let model = dir.join(MODEL_FILE);
        let good = fs::read(&model).unwrap();
        let load = || Checkpoint::<MyState>::load(&dir).unwrap_err();

        fs::write(&model, &good[..good.len() - 100]).unwrap();
        assert!(matches!(load(), CheckpointError::SafeTensors { .. }), "{}", load());

        // Another save's model file.
        let mut other = ck.clone();
        other.step = 1;
        other.save(&root.path().join("other")).unwrap();
        fs::copy(root.path().join("other").join(MODEL_FILE), &model).unwrap();
        assert!(matches!(load(), CheckpointError::StepMismatch { found: 1, .. }), "{}", load());

        // Another save's model file of the same step: its trainer.json differs.
        let mut twin = ck.clone();
        twin.params[0] += 1.0;
        twin.save(&root.path().join("twin")).unwrap();
        fs::copy(root.path().join("twin").join(MODEL_FILE), &model).unwrap();
        assert!(matches!(load(), CheckpointError::MetadataMismatch { .. }), "{}", load());

        // A model of another shape, with metadata that passes.
        let mut wide = sample(9, false);
        wide.config = GptConfig::new(16, 13, 2, 2, 16, 16).unwrap();
        wide.params = vec![0.5; ParamLayout::new(wide.config).len()];
        let wide_views = views(&ParamLayout::new(wide.config), "", &wide.params);
        write_tensors(&model, wide_views, metadata_of(&dir, ck.step)).unwrap();
        let err = load();
        assert!(matches!(&err, CheckpointError::WrongShape { name, .. } if name == "wte"), "{err}");

        // Metadata a save does not write.
        let mut meta = metadata_of(&dir, ck.step);
        meta.insert("format".into(), "pu".into());
        write_tensors(&model, views(&layout_of(&ck), "", &ck.params), meta.clone()).unwrap();
        assert!(matches!(load(), CheckpointError::BadMetadata { .. }), "{}", load());
        meta.insert("format".into(), "pt".into());
        meta.insert("extra".into(), "1".into());
        write_tensors(&model, views(&layout_of(&ck), "", &ck.params), meta).unwrap();
        assert!(load().to_string().contains("corrupt"), "{}", load());

        // A missing tensor.
        let layout = ParamLayout::new(ck.config);
        let mut partial = views(&layout, "", &ck.params);
        partial.retain(|(n, _)| n != "fcprojb");
        write_tensors(&model, partial, metadata_of(&dir, ck.step)).unwrap();
        assert!(matches!(load(), CheckpointError::MissingTensor { name, .. } if name == "fcprojb"));

        fs::write(&model, &good).unwrap();
        Checkpoint::<MyState>::load(&dir).unwrap();
        fs::remove_file(dir.join(OPTIMIZER_FILE)).unwrap();
        assert!(matches!(load(), CheckpointError::Io { .. }));

        fs::write(dir.join(TRAINER_FILE), b"{\"format_version\": 2,").unwrap();
        assert!(matches!(load(), CheckpointError::Json { .. }));
    }

    #[test]
    fn every_flipped_bit_of_a_tensor_is_refused_naming_file_and_tensor() {
        let root = tempfile::tempdir().unwrap();
        let ck = sample(21, true);
        let dir = root.path().join("ck");
        ck.save(&dir).unwrap();
        let layout = ParamLayout::new(ck.config);
        for (file, prefix) in [(MODEL_FILE, ""), (OPTIMIZER_FILE, "adamw.v.")] {
            let path = dir.join(file);
            let good = fs::read(&path).unwrap();
            let header = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
            let mut rng = SplitMix64::new(0xb17);
            // One bit of each tensor's data, at a random place within it; the tensors of the
            // optimizer file's second half are offset by the first half's.
            let skip = if prefix.is_empty() { 0 } else { layout.len() * 4 };
            for t in ParamTensor::ALL {
                let r = layout.range(t);
                let byte = header + skip + 4 * r.start + rng.below(4 * r.len() as u64) as usize;
                let mut bad = good.clone();
                bad[byte] ^= 1 << rng.below(8);
                fs::write(&path, &bad).unwrap();
                let err = Checkpoint::<MyState>::load(&dir).unwrap_err();
                let want = format!("{prefix}{}", t.name());
                assert!(
                    matches!(&err, CheckpointError::Checksum { name, path: p, .. } if *name == want && *p == path),
                    "byte {byte} of {file}: {err}"
                );
                assert!(err.to_string().contains(&want) && err.to_string().contains(file), "{err}");
            }
            fs::write(&path, &good).unwrap();
        }
        assert_eq!(Checkpoint::<MyState>::load(&dir).unwrap(), ck);
    }

    #[test]
    fn edited_metadata_and_older_formats_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let ck = sample(4, true);
        let dir = root.path().join("ck");
        ck.save(&dir).unwrap();
        let trainer = dir.join(TRAINER_FILE);
        let good = fs::read_to_string(&trainer).unwrap();
        let edit = |from: &str, to: &str| {
            assert!(good.contains(from), "{from} not in {good}");
            fs::write(&trainer, good.replacen(from, to, 1)).unwrap();
            Checkpoint::<MyState>::load(&dir).unwrap_err()
        };
        // Edits that keep every tensor's shape: heads (8 channels divide by 1 and 2 alike), the
        // optimizer flag, the step in the loader's state.
        let err = edit("\"num_heads\": 2", "\"num_heads\": 1");
        assert!(matches!(&err, CheckpointError::MetadataMismatch { .. }), "{err}");
        assert!(err.to_string().contains("edited or is corrupt"), "{err}");
        let err = edit("\"has_optimizer\": true", "\"has_optimizer\": false");
        assert!(matches!(&err, CheckpointError::MetadataMismatch { .. }), "{err}");
        let err = edit("\"sample\": 17", "\"sample\": 18");
        assert!(matches!(&err, CheckpointError::MetadataMismatch { .. }), "{err}");
        let err = edit("\"format_version\": 2", "\"format_version\": 1");
        assert!(matches!(&err, CheckpointError::NoChecksums { found: 1, .. }), "{err}");
        assert!(err.to_string().contains("older Trident without checksums"), "{err}");

        // A trainer.json that agrees with its tensors but lacks the optimizer, beside a stray
        // optimizer file.
        fs::write(&trainer, &good).unwrap();
        let mut bare = ck.clone();
        bare.optimizer = None;
        let other = root.path().join("bare");
        bare.save(&other).unwrap();
        fs::copy(other.join(MODEL_FILE), dir.join(MODEL_FILE)).unwrap();
        fs::copy(other.join(TRAINER_FILE), &trainer).unwrap();
        let err = Checkpoint::<MyState>::load(&dir).unwrap_err();
        assert!(matches!(&err, CheckpointError::Unexpected { what: "optimizer state", .. }), "{err}");
        fs::remove_file(dir.join(OPTIMIZER_FILE)).unwrap();
        assert_eq!(Checkpoint::<MyState>::load(&dir).unwrap(), bare);
    }

    #[test]
    fn non_finite_weights_are_refused_naming_the_tensor() {
        let root = tempfile::tempdir().unwrap();
        let layout = ParamLayout::new(sample(1, false).config);
        for (i, bad) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY].into_iter().enumerate() {
            let mut ck = sample(30 + i as u64, true);
            let r = layout.range(ParamTensor::ALL[3 + i]);
            let at = r.start + r.len() / 2;
            ck.params[at] = bad;
            let dir = root.path().join(format!("p{i}"));
            ck.save(&dir).unwrap();
            let err = Checkpoint::<MyState>::load(&dir).unwrap_err();
            let want = ParamTensor::ALL[3 + i].name();
            assert!(
                matches!(&err, CheckpointError::NonFinite { name, index, .. } if name == want && *index == at - r.start),
                "{err}"
            );
            assert!(err.to_string().contains(MODEL_FILE), "{err}");
            // In the optimizer's moments too.
            let mut ck = sample(40 + i as u64, true);
            ck.optimizer.as_mut().unwrap().m[at] = bad;
            ck.save(&dir).unwrap();
            let err = Checkpoint::<MyState>::load(&dir).unwrap_err();
            let want = format!("adamw.m.{want}");
            assert!(matches!(&err, CheckpointError::NonFinite { name, .. } if *name == want), "{err}");
        }
    }

    #[test]
    fn refuses_buffers_of_the_wrong_length() {
        let mut ck = sample(3, true);
        ck.optimizer.as_mut().unwrap().v.pop();
        let root = tempfile::tempdir().unwrap();
        let err = ck.save(&root.path().join("x")).unwrap_err();
        assert!(matches!(err, CheckpointError::WrongLength { what: "AdamW's v", .. }), "{err}");
        assert!(!root.path().join("x").exists());
    }
}
