//! Element types a collective can carry, and the reduction hook.

/// Wire identifier of an element type, carried in every message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DType {
    /// `f32`.
    F32 = 1,
    /// `f64`.
    F64 = 2,
    /// bfloat16, carried as its 16 bits.
    Bf16 = 3,
    /// Bytes.
    U8 = 4,
}

impl DType {
    /// The type a header byte names, `None` for an unknown byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => DType::F32,
            2 => DType::F64,
            3 => DType::Bf16,
            4 => DType::U8,
            _ => return None,
        })
    }

    /// The type's name (`f32`, `bf16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bf16 => "bf16",
            DType::U8 => "u8",
        }
    }
}

/// How values from different ranks are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum = 1,
    /// Elementwise maximum.
    Max = 2,
}

impl ReduceOp {
    /// The operation a header byte names, `None` for an unknown byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(ReduceOp::Sum),
            2 => Some(ReduceOp::Max),
            _ => None,
        }
    }
}

/// An element type the collectives move and reduce. Sizes must divide 8 (the
/// shared-memory ring keeps 8-byte alignment). A bf16 type plugs in by implementing this.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The type's wire identifier.
    const DTYPE: DType;
    /// `self (op) other`. Must be commutative so every rank gets bitwise equal results.
    fn combine(self, other: Self, op: ReduceOp) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        match op {
            ReduceOp::Sum => self + other,
            ReduceOp::Max => self.max(other),
        }
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    #[inline(always)]
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        match op {
            ReduceOp::Sum => self + other,
            ReduceOp::Max => self.max(other),
        }
    }
}

/// bf16 reduces through f32 and rounds once per combine (each ring hop), as NCCL does.
impl Element for half::bf16 {
    const DTYPE: DType = DType::Bf16;
    #[inline(always)]
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        match op {
            ReduceOp::Sum => half::bf16::from_f32(self.to_f32() + other.to_f32()),
            ReduceOp::Max => self.max(other),
        }
    }
}

/// The reduction step of every reducing collective, so that a device backend can run it as a
/// kernel. Implementations must be elementwise and commutative.
pub trait Combine<T: Element>: Sync {
    /// `acc[i] = acc[i] (op) incoming[i]`.
    fn reduce(&self, op: ReduceOp, acc: &mut [T], incoming: &[T]);

    /// `out[i] = a[i] (op) b[i]`.
    fn reduce_into(&self, op: ReduceOp, out: &mut [T], a: &[T], b: &[T]) {
        out.copy_from_slice(a);
        self.reduce(op, out, b);
    }
}

/// Reduction on host memory with loops the compiler vectorises.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostCombine;

impl<T: Element> Combine<T> for HostCombine {
    fn reduce(&self, op: ReduceOp, acc: &mut [T], incoming: &[T]) {
        // Matching on `op` outside the loop keeps each loop body branch-free.
        match op {
            ReduceOp::Sum => {
                for (a, b) in acc.iter_mut().zip(incoming) {
                    *a = a.combine(*b, ReduceOp::Sum);
                }
            }
            ReduceOp::Max => {
                for (a, b) in acc.iter_mut().zip(incoming) {
                    *a = a.combine(*b, ReduceOp::Max);
                }
            }
        }
    }

    fn reduce_into(&self, op: ReduceOp, out: &mut [T], a: &[T], b: &[T]) {
        match op {
            ReduceOp::Sum => {
                for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                    *o = x.combine(*y, ReduceOp::Sum);
                }
            }
            ReduceOp::Max => {
                for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                    *o = x.combine(*y, ReduceOp::Max);
                }
            }
        }
    }
}
