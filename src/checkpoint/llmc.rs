//! llm.c model files (`gpt2_124M.bin`): a header of 256 little-endian i32 — `[0]` = 20240326,
//! `[1]` = 3 (f32, padded vocabulary stored), `[2]` = maxT, `[3]` = V, `[4]` = L, `[5]` = NH,
//! `[6]` = C, `[7]` = Vp — then every parameter as f32 in llm.c order, which is
//! [`ParamLayout`]'s order.

use std::io::Write;
use std::path::Path;

use super::atomic::write_file_atomically;
use super::tensors::f32_le_bytes;
use super::CheckpointError;
use crate::model::{GptConfig, ParamLayout};

/// First header word of an llm.c model file (`gpt2_124M.bin`).
pub const MODEL_MAGIC: i32 = 20240326;
/// The version read and written: f32 parameters with the padded vocabulary.
pub const MODEL_VERSION: i32 = 3;
const HEADER_BYTES: usize = 256 * 4;
const WHAT: &str = "an llm.c model file";

/// Writes `params` (in [`ParamLayout`] order for `config`) as an llm.c version-3 model file.
pub fn write_llmc_model(path: &Path, config: &GptConfig, params: &[f32]) -> Result<(), CheckpointError> {
    let layout = ParamLayout::new(*config);
    if params.len() != layout.len() {
        return Err(CheckpointError::WrongLength {
            what: "the parameter buffer",
            expected: layout.len(),
            found: params.len(),
        });
    }
    let mut header = [0i32; 256];
    let fields = [
        config.max_seq_len,
        config.vocab_size,
        config.num_layers,
        config.num_heads,
        config.channels,
        config.padded_vocab_size,
    ];
    header[0] = MODEL_MAGIC;
    header[1] = MODEL_VERSION;
    for (slot, value) in header[2..8].iter_mut().zip(fields) {
        *slot = i32::try_from(value).map_err(|_| CheckpointError::DimensionTooLarge { value })?;
    }
    write_file_atomically(path, |w| {
        for word in header {
            w.write_all(&word.to_le_bytes())?;
        }
        // In chunks, so a big-endian host converts 1 MiB at a time rather than all at once.
        for chunk in params.chunks(1 << 18) {
            w.write_all(&f32_le_bytes(chunk))?;
        }
        Ok(())
    })
}

/// Reads an llm.c version-3 model file: its config and all parameters.
pub fn read_llmc_model(path: &Path) -> Result<(GptConfig, Vec<f32>), CheckpointError> {
    let bytes = std::fs::read(path).map_err(|e| CheckpointError::io(path, e))?;
    if bytes.len() < HEADER_BYTES {
        return Err(CheckpointError::WrongSize {
            path: path.into(),
            expected: HEADER_BYTES as u64,
            found: bytes.len() as u64,
        });
    }
    let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    if word(0) != MODEL_MAGIC {
        return Err(CheckpointError::BadMagic {
            path: path.into(),
            found: word(0),
            expected: MODEL_MAGIC,
            what: WHAT,
        });
    }
    if word(1) != MODEL_VERSION {
        let hint = match word(1) {
            5 => "version 5 stores bf16; export the model from llm.c as float32 (version 3)",
            _ => "only version 3, f32 with the padded vocabulary, is read",
        };
        return Err(CheckpointError::BadVersion {
            path: path.into(),
            what: "llm.c model",
            found: word(1),
            hint,
        });
    }
    let dim = |i: usize| usize::try_from(word(i)).unwrap_or(0);
    let config = GptConfig {
        max_seq_len: dim(2),
        vocab_size: dim(3),
        num_layers: dim(4),
        num_heads: dim(5),
        channels: dim(6),
        padded_vocab_size: dim(7),
    };
    config.validate().map_err(|source| CheckpointError::Config { path: path.into(), cause: source })?;
    let n = ParamLayout::new(config).len();
    let expected = HEADER_BYTES as u64 + 4 * n as u64;
    if bytes.len() as u64 != expected {
        return Err(CheckpointError::WrongSize { path: path.into(), expected, found: bytes.len() as u64 });
    }
    let params: Vec<f32> =
        bytes[HEADER_BYTES..].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    if let Some(at) = params.iter().position(|v| !v.is_finite()) {
        let layout = ParamLayout::new(config);
        let tensor = crate::model::ParamTensor::ALL.iter().find(|&&t| layout.range(t).contains(&at));
        let (name, index) =
            tensor.map_or(("?".into(), at), |&t| (t.name().to_string(), at - layout.range(t).start));
        return Err(CheckpointError::NonFiniteWeights { path: path.into(), name, index, value: params[at] });
    }
    Ok((config, params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trident_data::SplitMix64;

    fn model(seed: u64) -> (GptConfig, Vec<f32>) {
        let config = GptConfig::new(32, 50, 2, 4, 16, 64).unwrap();
        let mut rng = SplitMix64::new(seed);
        let params = (0..ParamLayout::new(config).len()).map(|_| rng.next_f32() - 0.5).collect();
        (config, params)
    }

    #[test]
    fn round_trips_and_matches_the_documented_header() {
        let seed = 0x11c;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let (config, params) = model(seed);
        write_llmc_model(&path, &config, &params).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let word = |i: usize| i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!((0..8).map(word).collect::<Vec<_>>(), vec![20240326, 3, 32, 50, 2, 4, 16, 64]);
        assert!((8..256).all(|i| word(i) == 0));
        // The first parameter is wte[0][0], right after the header.
        assert_eq!(f32::from_le_bytes(bytes[1024..1028].try_into().unwrap()), params[0]);
        assert_eq!(read_llmc_model(&path).unwrap(), (config, params), "seed {seed}");
    }

    #[test]
    fn bad_files_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let (config, params) = model(2);
        write_llmc_model(&path, &config, &params).unwrap();
        let good = std::fs::read(&path).unwrap();
        let with = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            read_llmc_model(&path).unwrap_err()
        };

        let err = with(&good[..good.len() - 4]);
        assert!(matches!(err, CheckpointError::WrongSize { .. }), "{err}");
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(with(&longer), CheckpointError::WrongSize { .. }));
        assert!(matches!(with(&good[..100]), CheckpointError::WrongSize { .. }));

        let mut bad = good.clone();
        bad[0..4].copy_from_slice(&20240520i32.to_le_bytes());
        let err = with(&bad);
        assert!(err.to_string().contains("not an llm.c model file"), "{err}");

        let mut bf16 = good.clone();
        bf16[4..8].copy_from_slice(&5i32.to_le_bytes());
        let err = with(&bf16);
        assert!(err.to_string().contains("bf16"), "{err}");

        let mut heads = good.clone();
        heads[20..24].copy_from_slice(&3i32.to_le_bytes());
        let err = with(&heads);
        assert!(matches!(err, CheckpointError::Config { .. }), "{err}");
        // The header's own fields are named, not flags the user never passed.
        let msg = err.to_string();
        assert!(msg.contains("num_heads 3 does not divide channels 16") && !msg.contains("--"), "{msg}");

        // A NaN weight is the file's fault, named by tensor and element, with no training advice.
        let mut nan = good.clone();
        let at = 1024 + 4 * (ParamLayout::new(config).range(crate::model::ParamTensor::Wpe).start + 5);
        nan[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        let err = with(&nan);
        let msg = err.to_string();
        assert!(matches!(err, CheckpointError::NonFiniteWeights { index: 5, .. }), "{msg}");
        assert!(msg.contains("`wpe`") && !msg.contains("--lr"), "{msg}");

        assert!(matches!(
            write_llmc_model(&path, &config, &params[1..]),
            Err(CheckpointError::WrongLength { .. })
        ));
    }
}
