//! f32 tensors to and from safetensors files, with every name, dtype and shape checked.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, View};

use super::atomic::sync_file;
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

/// Writes `tensors` to `path` (the caller makes the write atomic) and fsyncs it.
pub(crate) fn write_tensors(
    path: &Path,
    tensors: Vec<(String, F32View<'_>)>,
    metadata: HashMap<String, String>,
) -> Result<(), CheckpointError> {
    safetensors::serialize_to_file(tensors, Some(metadata), path).map_err(|source| {
        CheckpointError::SafeTensors {
            path: path.into(),
            source,
        }
    })?;
    sync_file(path)
}

/// A tensor a reader expects: its name, shape and where it goes in the output buffer.
pub(crate) struct Expected {
    pub name: String,
    pub shape: Vec<usize>,
    pub range: Range<usize>,
}

/// Reads `path`, checks it holds exactly the `expected` f32 tensors, and copies each into its
/// range of `out`. Returns the file's metadata.
pub(crate) fn read_tensors(
    path: &Path,
    expected: &[Expected],
    out: &mut [f32],
) -> Result<HashMap<String, String>, CheckpointError> {
    let bytes = std::fs::read(path).map_err(|e| CheckpointError::io(path, e))?;
    let st_err = |source| CheckpointError::SafeTensors {
        path: path.into(),
        source,
    };
    let (_, metadata) = SafeTensors::read_metadata(&bytes).map_err(st_err)?;
    let file = SafeTensors::deserialize(&bytes).map_err(st_err)?;
    let wanted: BTreeSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    if let Some(extra) = file.names().into_iter().find(|n| !wanted.contains(n)) {
        return Err(CheckpointError::UnexpectedTensor {
            path: path.into(),
            name: extra.to_owned(),
        });
    }
    for e in expected {
        let view = file
            .tensor(&e.name)
            .map_err(|_| CheckpointError::MissingTensor {
                path: path.into(),
                name: e.name.clone(),
            })?;
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
        for (dst, src) in out[e.range.clone()]
            .iter_mut()
            .zip(view.data().chunks_exact(4))
        {
            *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
        }
    }
    Ok(metadata.metadata().clone().unwrap_or_default())
}
