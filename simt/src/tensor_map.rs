//! Tensor maps: the descriptor a TMA copy (`cp.async.bulk.tensor`) reads, with the fields of
//! the driver's `cuTensorMapEncodeTiled`, validated by the rules its documentation states,
//! and the shared-memory swizzle the copy applies.
//!
//! Rules checked ([`TensorMap::new`], each error names the field):
//! - `rank` 1 to 5;
//! - `global_address` 16-byte aligned;
//! - `global_dims[i]` 1 to 2^32;
//! - `global_strides` (bytes, for dimensions 1.. ; dimension 0 is packed) multiples of 16,
//!   below 2^40, each at least the extent of the dimension below it (so rows do not overlap);
//! - `box_dims[i]` 1 to 256, and `box_dims[0]` times the element size a multiple of 16 bytes;
//! - `element_strides[i]` 1 to 8;
//! - with a swizzle, `box_dims[0]` times the element size at most the swizzle's span (32, 64
//!   or 128 bytes);
//! - NaN fill only for floating-point data types;
//! - (the emulator's own rule) the box, traversed with its element strides, at most
//!   [`crate::MAX_SHARED_BYTES`]: no larger box can land in shared memory.
//!
//! Interleaved layouts are not modelled (interleave is always none).
//!
//! The swizzle (CUDA C++ Programming Guide, "Tensor Memory Access": the swizzle modes; the
//! same permutation as CUTLASS's `Swizzle<B, 4, 3>` with B = 1, 2, 3 for 32, 64, 128 bytes)
//! permutes 16-byte chunks within each span-sized row by the shared address's bits 7 and up:
//! `physical = address ^ (((address >> 7) & (2^B - 1)) << 4)`. It is a function of the
//! address, so a swizzled tile keeps its pattern only at a multiple of the pattern's repeat
//! (256, 512 or 1024 bytes); the copy itself needs a 128-byte aligned destination.

use crate::error::Fault;

/// Element types of a tensor map (`CUtensorMapDataType`; the TF32 and FTZ forms are not
/// modelled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorDataType {
    /// `UINT8`.
    U8,
    /// `UINT16`.
    U16,
    /// `UINT32`.
    U32,
    /// `INT32`.
    I32,
    /// `UINT64`.
    U64,
    /// `INT64`.
    I64,
    /// `FLOAT16`.
    F16,
    /// `FLOAT32`.
    F32,
    /// `FLOAT64`.
    F64,
    /// `BFLOAT16`.
    Bf16,
}

impl TensorDataType {
    /// Bytes per element.
    pub fn bytes(self) -> u32 {
        match self {
            TensorDataType::U8 => 1,
            TensorDataType::U16 | TensorDataType::F16 | TensorDataType::Bf16 => 2,
            TensorDataType::U32 | TensorDataType::I32 | TensorDataType::F32 => 4,
            TensorDataType::U64 | TensorDataType::I64 | TensorDataType::F64 => 8,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, TensorDataType::F16 | TensorDataType::F32 | TensorDataType::F64 | TensorDataType::Bf16)
    }

    /// The NaN an out-of-bounds element reads as under [`OobFill::Nan`]: every bit set but
    /// the sign, a quiet NaN of the type.
    pub(crate) fn nan_bytes(self) -> [u8; 8] {
        let n = self.bytes() as usize;
        let mut out = [0xFF; 8];
        out[n - 1] = 0x7F;
        out
    }
}

/// `CUtensorMapSwizzle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// Rows as they are.
    None,
    /// 16-byte chunks permuted within 32-byte rows.
    B32,
    /// Within 64-byte rows.
    B64,
    /// Within 128-byte rows.
    B128,
}

impl Swizzle {
    /// The span of a swizzled row in bytes (None: no limit).
    pub fn span(self) -> Option<u32> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    /// The physical shared address of logical address `address` (see the module docs).
    pub fn apply(self, address: u32) -> u32 {
        let bits = match self {
            Swizzle::None => return address,
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        };
        address ^ (((address >> 7) & ((1 << bits) - 1)) << 4)
    }
}

/// `CUtensorMapL2promotion`: how far the L2 cache widens TMA reads (no effect in the emulator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L2Promotion {
    /// None.
    None,
    /// To 64 bytes.
    B64,
    /// To 128 bytes.
    B128,
    /// To 256 bytes.
    B256,
}

/// `CUtensorMapFloatOOBfill`: what out-of-bounds elements of a load read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OobFill {
    /// Zeros (`NONE`).
    Zero,
    /// A NaN (`NAN_REQUEST_ZERO_FMA`), floating-point types only.
    Nan,
}

/// The fields of `cuTensorMapEncodeTiled` (interleave none), validated.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMap {
    pub(crate) data_type: TensorDataType,
    pub(crate) rank: usize,
    pub(crate) global_address: u64,
    pub(crate) global_dims: [u64; 5],
    /// Byte strides of dimensions 0..rank (dimension 0's is the element size).
    pub(crate) strides: [u64; 5],
    pub(crate) box_dims: [u32; 5],
    pub(crate) element_strides: [u32; 5],
    pub(crate) swizzle: Swizzle,
    pub(crate) l2_promotion: L2Promotion,
    pub(crate) oob_fill: OobFill,
}

/// The arguments of `cuTensorMapEncodeTiled` (interleave none); [`TensorMap::new`] checks them.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMapFields<'a> {
    /// `tensorDataType`.
    pub data_type: TensorDataType,
    /// `globalAddress`: the tensor's first element.
    pub global_address: u64,
    /// `globalDim`: elements per dimension, innermost first (its length is the rank).
    pub global_dims: &'a [u64],
    /// `globalStrides`: bytes between consecutive indices of dimensions 1.. (rank - 1 values).
    pub global_strides: &'a [u64],
    /// `boxDim`: elements per dimension of the box one copy moves.
    pub box_dims: &'a [u32],
    /// `elementStrides`: the traversal step per dimension (1 for every element).
    pub element_strides: &'a [u32],
    /// `swizzle`.
    pub swizzle: Swizzle,
    /// `l2Promotion`.
    pub l2_promotion: L2Promotion,
    /// `oobFill`.
    pub oob_fill: OobFill,
}

impl TensorMap {
    /// Validates `f` as the driver would; the error names the field and the rule.
    pub fn new(f: &TensorMapFields<'_>) -> Result<TensorMap, Fault> {
        let bad = |detail: String| Err(Fault::TensorMap { detail });
        let rank = f.global_dims.len();
        if !(1..=5).contains(&rank) {
            return bad(format!("tensorRank (the length of globalDim) is {rank}, not 1 to 5"));
        }
        let elem = u64::from(f.data_type.bytes());
        for (name, len) in [
            ("globalStrides", f.global_strides.len() + 1),
            ("boxDim", f.box_dims.len()),
            ("elementStrides", f.element_strides.len()),
        ] {
            if len != rank {
                let want = if name == "globalStrides" { rank - 1 } else { rank };
                return bad(format!(
                    "{name} has {} entries, the rank {rank} needs {want}",
                    len - usize::from(name == "globalStrides")
                ));
            }
        }
        if f.global_address % 16 != 0 {
            return bad(format!("globalAddress {:#x} is not 16-byte aligned", f.global_address));
        }
        for (i, &d) in f.global_dims.iter().enumerate() {
            if !(1..=1 << 32).contains(&d) {
                return bad(format!("globalDim[{i}] is {d}, not 1 to 2^32"));
            }
        }
        let mut strides = [0u64; 5];
        strides[0] = elem;
        for (i, &s) in f.global_strides.iter().enumerate() {
            let below = strides[i] * f.global_dims[i];
            if s % 16 != 0 || s >= 1 << 40 {
                return bad(format!(
                    "globalStrides[{i}] (dimension {}) is {s} bytes: a multiple of 16 below 2^40 is needed",
                    i + 1
                ));
            }
            if s < below {
                return bad(format!(
                    "globalStrides[{i}] (dimension {}) is {s} bytes, less than the {below} bytes dimension {i} spans",
                    i + 1
                ));
            }
            strides[i + 1] = s;
        }
        for (i, &b) in f.box_dims.iter().enumerate() {
            if !(1..=256).contains(&b) {
                return bad(format!("boxDim[{i}] is {b}, not 1 to 256"));
            }
        }
        let inner = u64::from(f.box_dims[0]) * elem;
        if inner % 16 != 0 {
            return bad(format!("boxDim[0] times the element size is {inner} bytes, not a multiple of 16"));
        }
        if let Some(span) = f.swizzle.span() {
            if inner > u64::from(span) {
                return bad(format!(
                    "boxDim[0] times the element size is {inner} bytes, more than the {span}-byte span of swizzle {:?}",
                    f.swizzle
                ));
            }
        }
        for (i, &e) in f.element_strides.iter().enumerate() {
            if !(1..=8).contains(&e) {
                return bad(format!("elementStrides[{i}] is {e}, not 1 to 8"));
            }
        }
        let elements: u64 =
            f.box_dims.iter().zip(f.element_strides).map(|(&b, &e)| u64::from(b.div_ceil(e))).product();
        if elements * elem > u64::from(crate::MAX_SHARED_BYTES) {
            return bad(format!(
                "the box (boxDim over elementStrides) holds {} bytes, more than the {} bytes of shared \
                 memory a block can have",
                elements * elem,
                crate::MAX_SHARED_BYTES
            ));
        }
        if f.oob_fill == OobFill::Nan && !f.data_type.is_float() {
            return bad(format!("oobFill NaN needs a floating-point tensorDataType, not {:?}", f.data_type));
        }
        let mut map = TensorMap {
            data_type: f.data_type,
            rank,
            global_address: f.global_address,
            global_dims: [1; 5],
            strides,
            box_dims: [1; 5],
            element_strides: [1; 5],
            swizzle: f.swizzle,
            l2_promotion: f.l2_promotion,
            oob_fill: f.oob_fill,
        };
        map.global_dims[..rank].copy_from_slice(f.global_dims);
        map.box_dims[..rank].copy_from_slice(f.box_dims);
        map.element_strides[..rank].copy_from_slice(f.element_strides);
        for i in rank..5 {
            map.strides[i] = map.strides[i - 1] * map.global_dims[i - 1];
        }
        Ok(map)
    }

    /// Elements one copy moves along each dimension: `ceil(box / element stride)`.
    pub fn box_elements(&self) -> [u32; 5] {
        std::array::from_fn(|i| self.box_dims[i].div_ceil(self.element_strides[i]))
    }

    /// Bytes one copy moves to or from shared memory (the `complete_tx` of a load).
    pub fn box_bytes(&self) -> u32 {
        self.box_elements().iter().product::<u32>() * self.data_type.bytes()
    }

    /// The rank (1 to 5).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The swizzle mode.
    pub fn swizzle(&self) -> Swizzle {
        self.swizzle
    }

    /// The L2 promotion (recorded, no effect in the emulator).
    pub fn l2_promotion(&self) -> L2Promotion {
        self.l2_promotion
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(
        dims: &'a [u64],
        strides: &'a [u64],
        boxes: &'a [u32],
        estrides: &'a [u32],
    ) -> TensorMapFields<'a> {
        TensorMapFields {
            data_type: TensorDataType::Bf16,
            global_address: 0x1000,
            global_dims: dims,
            global_strides: strides,
            box_dims: boxes,
            element_strides: estrides,
            swizzle: Swizzle::B128,
            l2_promotion: L2Promotion::B128,
            oob_fill: OobFill::Zero,
        }
    }

    fn error(f: &TensorMapFields<'_>) -> String {
        TensorMap::new(f).unwrap_err().to_string()
    }

    #[test]
    fn a_valid_map_and_each_rule_named() {
        let ok = fields(&[100, 50], &[256], &[64, 32], &[1, 1]);
        let map = TensorMap::new(&ok).unwrap();
        assert_eq!((map.box_bytes(), map.rank()), (64 * 32 * 2, 2));
        assert!(error(&fields(&[100, 50], &[200], &[64, 32], &[1, 1])).contains("globalStrides[0]"));
        assert!(error(&fields(&[100, 50], &[192], &[64, 32], &[1, 1])).contains("less than the 200 bytes"));
        assert!(error(&fields(&[100, 50], &[256], &[64, 300], &[1, 1])).contains("boxDim[1] is 300"));
        assert!(error(&fields(&[100, 50], &[256], &[4, 32], &[1, 1])).contains("not a multiple of 16"));
        assert!(error(&fields(&[100, 50], &[256], &[128, 32], &[1, 1])).contains("span of swizzle B128"));
        assert!(error(&fields(&[100, 50], &[256], &[64, 32], &[1, 9])).contains("elementStrides[1]"));
        assert!(error(&fields(&[100, 0], &[256], &[64, 32], &[1, 1])).contains("globalDim[1] is 0"));
        assert!(error(&fields(&[100, 50], &[256], &[64], &[1, 1])).contains("boxDim has 1 entries"));
        assert!(error(&fields(&[1; 6], &[16; 5], &[8; 6], &[1; 6])).contains("tensorRank"));
        let (dims, strides) = ([64, 256, 256, 256, 256], [128, 32768, 1 << 23, 1 << 31]);
        assert!(
            error(&fields(&dims, &strides, &[64, 256, 256, 256, 256], &[1; 5])).contains("bytes of shared")
        );
        let mut misaligned = ok.clone();
        misaligned.global_address = 0x1008;
        assert!(error(&misaligned).contains("globalAddress"));
        let mut nan_int = ok.clone();
        nan_int.data_type = TensorDataType::U16;
        nan_int.oob_fill = OobFill::Nan;
        assert!(error(&nan_int).contains("oobFill"));
    }

    #[test]
    fn swizzle_permutes_16_byte_chunks_by_row() {
        // 128B: row r (128 bytes) has chunk c at chunk c ^ (r % 8).
        for r in 0..16u32 {
            for c in 0..8u32 {
                assert_eq!(Swizzle::B128.apply(r * 128 + c * 16 + 3), r * 128 + ((c ^ (r % 8)) * 16) + 3);
            }
        }
        // 64B: bits 7-8 into bits 4-5; 32B: bit 7 into bit 4.
        assert_eq!(Swizzle::B64.apply(3 * 128 + 16), 3 * 128 + 32);
        assert_eq!(Swizzle::B32.apply(128), 128 + 16);
        assert_eq!(Swizzle::B32.apply(256), 256);
        assert_eq!(Swizzle::None.apply(1234), 1234);
    }

    #[test]
    fn element_strides_shrink_the_box() {
        let map = TensorMap::new(&fields(&[100, 50], &[256], &[64, 30], &[1, 4])).unwrap();
        assert_eq!(map.box_elements()[..2], [64, 8]);
        assert_eq!(map.box_bytes(), 64 * 8 * 2);
    }
}
