//! f32 tensors to and from safetensors files, with every name, dtype and shape checked.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, View};

use super::CheckpointError;

/// A borrowed f32 tensor as safetensors wants it (little-endian bytes).
pub(crate) struct F32View<'a> {
    pub shape: Vec<usize>,
    pub data: Cow<'a, [f32]>,
}

/// The little-endian bytes of `values`, borrowed where the host is little-endian.
pub(crate) fn f32_le_bytes(values: &[f32]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(values))
    } else {
        Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

impl View for F32View<'_> {
    fn dtype(&self) -> Dtype {
        Dtype::F32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        f32_le_bytes(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len() * 4
    }
}

/// CRC-32 (IEEE) of a tensor's little-endian bytes: what checkpoints record for every tensor.
/// A checksum of the on-disk bytes, so any flipped bit of the data changes it.
pub fn checksum(values: &[f32]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&f32_le_bytes(values));
    h.finalize()
}

/// Writes `tensors` to `path` as a safetensors file (the caller makes the write atomic) and
/// fsyncs it.
///
/// The file is written here rather than by the `safetensors` crate so that a failed write is
/// reported as the I/O error it is (a full disk, say), never as a malformed file. Layout, from
/// the safetensors format: an 8-byte little-endian header length `n`, then `n` bytes of JSON
/// (`{NAME: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, padded
/// with spaces to a multiple of 8), then the tensors' bytes back to back in the order given,
/// each tensor's `data_offsets` relative to the end of the header.
pub(crate) fn write_tensors(
    path: &Path,
    tensors: Vec<(String, F32View<'_>)>,
    metadata: HashMap<String, String>,
) -> Result<(), CheckpointError> {
    write_tensors_as(path, tensors, metadata, false)
}

/// [`write_tensors`], the values stored as bf16 (rounded to nearest, ties to even) when
/// `bf16`, else as f32.
pub(crate) fn write_tensors_as(
    path: &Path,
    tensors: Vec<(String, F32View<'_>)>,
    metadata: HashMap<String, String>,
    bf16: bool,
) -> Result<(), CheckpointError> {
    let (dtype, width) = if bf16 { ("BF16", 2) } else { ("F32", 4) };
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, view) in &tensors {
        let end = offset + view.data.len() * width;
        header.insert(
            name.clone(),
            serde_json::json!({ "dtype": dtype, "shape": view.shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let metadata: BTreeMap<String, String> = metadata.into_iter().collect();
    header.insert("__metadata__".into(), serde_json::json!(metadata));
    let mut json = serde_json::to_vec(&header)
        .map_err(|source| CheckpointError::Json { path: path.into(), cause: source })?;
    json.resize(json.len().next_multiple_of(8), b' ');
    let io = |e| CheckpointError::io(path, e);
    let file = File::create(path).map_err(io)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(&(json.len() as u64).to_le_bytes()).map_err(io)?;
    w.write_all(&json).map_err(io)?;
    for (_, view) in &tensors {
        if bf16 {
            let bytes: Vec<u8> =
                view.data.iter().flat_map(|&v| trident_kernels::simt::f32_to_bf16(v).to_le_bytes()).collect();
            w.write_all(&bytes).map_err(io)?;
        } else {
            w.write_all(&view.data()).map_err(io)?;
        }
    }
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)
}

/// A zeroed buffer of `len` floats, allocated fallibly: a checkpoint too large for the memory
/// left is an error naming it, not an abort.
pub(crate) fn try_zeros(path: &Path, len: usize) -> Result<Vec<f32>, CheckpointError> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| CheckpointError::OutOfMemory {
        path: path.into(),
        bytes: len.saturating_mul(4) as u64,
    })?;
    out.resize(len, 0.0);
    Ok(out)
}

/// The whole of `path`, its buffer allocated fallibly (see [`try_zeros`]).
fn read_file(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    let mut file = File::open(path).map_err(|e| CheckpointError::io(path, e))?;
    let len = file.metadata().map_err(|e| CheckpointError::io(path, e))?.len();
    let mut bytes = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| bytes.try_reserve_exact(n).ok())
        .ok_or(CheckpointError::OutOfMemory { path: path.into(), bytes: len })?;
    file.read_to_end(&mut bytes).map_err(|e| CheckpointError::io(path, e))?;
    Ok(bytes)
}

/// A tensor a reader expects: its name, shape and where it goes in the output buffer.
pub(crate) struct Expected {
    pub name: String,
    pub shape: Vec<usize>,
    pub range: Range<usize>,
}

/// Reads `path`, checks it holds exactly the `expected` f32 tensors, each matching its CRC-32 in
/// `checksums` (by tensor name) and holding only finite values, and copies each into its range
/// of `out`. `check_metadata` sees the file's metadata before any tensor is read; returns it.
pub(crate) fn read_tensors(
    path: &Path,
    expected: &[Expected],
    checksums: &BTreeMap<String, u32>,
    out: &mut [f32],
    check_metadata: impl FnOnce(&HashMap<String, String>) -> Result<(), CheckpointError>,
) -> Result<HashMap<String, String>, CheckpointError> {
    let bytes = read_file(path)?;
    let st_err = |source| CheckpointError::SafeTensors { path: path.into(), cause: source };
    let (_, metadata) = SafeTensors::read_metadata(&bytes).map_err(st_err)?;
    let metadata = metadata.metadata().clone().unwrap_or_default();
    check_metadata(&metadata)?;
    let file = SafeTensors::deserialize(&bytes).map_err(st_err)?;
    let wanted: BTreeSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    if let Some(extra) = file.names().into_iter().find(|n| !wanted.contains(n)) {
        return Err(CheckpointError::UnexpectedTensor { path: path.into(), name: extra.to_owned() });
    }
    for e in expected {
        let view = file
            .tensor(&e.name)
            .map_err(|_| CheckpointError::MissingTensor { path: path.into(), name: e.name.clone() })?;
        if view.dtype() != Dtype::F32 {
            return Err(CheckpointError::WrongDtype {
                path: path.into(),
                name: e.name.clone(),
                found: format!("{:?}", view.dtype()),
            });
        }
        if view.shape() != e.shape.as_slice() {
            return Err(CheckpointError::WrongShape {
                path: path.into(),
                name: e.name.clone(),
                expected: e.shape.clone(),
                found: view.shape().to_vec(),
            });
        }
        let Some(&recorded) = checksums.get(&e.name) else {
            return Err(CheckpointError::NoChecksum { path: path.into(), name: e.name.clone() });
        };
        let found = crc32fast::hash(view.data());
        if found != recorded {
            return Err(CheckpointError::Checksum {
                path: path.into(),
                name: e.name.clone(),
                recorded,
                found,
            });
        }
        let dst = &mut out[e.range.clone()];
        for (dst, src) in dst.iter_mut().zip(view.data().chunks_exact(4)) {
            *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
        }
        if let Some(index) = dst.iter().position(|v| !v.is_finite()) {
            return Err(CheckpointError::NonFinite {
                path: path.into(),
                name: e.name.clone(),
                index,
                value: dst[index],
            });
        }
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_past_memory_are_errors_not_aborts() {
        let path = Path::new("ck/model.safetensors");
        let err = try_zeros(path, usize::MAX / 8).unwrap_err();
        assert!(matches!(err, CheckpointError::OutOfMemory { .. }), "{err}");
        assert!(err.to_string().contains("ck/model.safetensors"), "{err}");
        assert_eq!(try_zeros(path, 3).unwrap(), [0.0; 3]);
    }
}
