//! Typed launch arguments, checked against the kernel's parameter types before a launch.
//!
//! A kernel takes one 64-bit word per parameter (see [`KernelArg`](trident_simt::KernelArg)).
//! An [`Arg`] is such a word together with what it holds: a scalar of one type, or the address
//! of a view (read-only or writable, with its element type and length). [`Function::launch`]
//! compares each argument with the parameter type the kernel declares ([`ParamType`]) and
//! refuses the launch, naming kernel, parameter and both types, where they differ:
//!
//! | parameter | matching argument |
//! |---|---|
//! | `Global<T>`, `*const T` | a [`View`] or [`ViewMut`] of `T` ([`View::arg`], [`ViewMut::arg_mut`]) |
//! | `GlobalMut<T>`, `*mut T` | a [`ViewMut`] of `T` only: a read-only view is refused |
//! | `u32`, `i32`, `u64`, `i64`, `usize`, `f32` | a value of exactly that type (`Arg::from(n)`, `n.into()`) |
//!
//! Element types match by name (`f32` is not `u32`); where the kernel's element or the view's
//! is not a primitive number (a `bf16` view for a `Global<u16>` parameter, a generic `T`), the
//! sizes must agree where both are known.
//!
//! [`Function::launch`]: crate::Function::launch
//! [`View`]: crate::View
//! [`ViewMut`]: crate::ViewMut
//! [`View::arg`]: crate::View::arg
//! [`ViewMut::arg_mut`]: crate::ViewMut::arg_mut

use std::fmt;

use trident_simt::ParamType;

/// What an [`Arg`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgType {
    /// The address of a view's first element.
    Pointer {
        /// Whether the view was writable ([`ViewMut`](crate::ViewMut)).
        mutable: bool,
        /// The element type's name (`std::any::type_name`).
        elem: &'static str,
        /// The element type's size in bytes.
        elem_bytes: usize,
        /// The view's length in bytes: on `Emu` an access through the parameter outside it
        /// faults.
        bytes: u64,
    },
    /// A `u32`.
    U32,
    /// An `i32`.
    I32,
    /// A `u64`.
    U64,
    /// An `i64`.
    I64,
    /// A `usize`.
    Usize,
    /// An `f32`.
    F32,
    /// A word for a parameter of a type with a [`KernelArg`](trident_simt::KernelArg)
    /// implementation of its own, named as the kernel's signature writes it (see
    /// [`Arg::custom`]).
    Custom(&'static str),
}

/// One launch argument: a kernel parameter's word and the type of what it holds.
///
/// ```
/// use trident_runtime::{Arg, ArgType, Buffer, Device};
///
/// # fn main() -> trident_runtime::Result<()> {
/// let x = Buffer::from_slice(&Device::Emu, &[1.0f32, 2.0])?;
/// let ptr = x.view(..)?.arg();
/// assert!(matches!(ptr.ty(), ArgType::Pointer { mutable: false, elem: "f32", bytes: 8, .. }));
/// let n = Arg::from(2u32);
/// assert_eq!((n.word(), n.ty()), (2, ArgType::U32));
/// assert_eq!(Arg::from(1.5f32).word(), u64::from(1.5f32.to_bits()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg {
    word: u64,
    ty: ArgType,
}

impl Arg {
    /// The address of `len` elements of `T` at `addr`, as a view hands it out.
    pub(crate) fn pointer<T>(addr: u64, len: usize, mutable: bool) -> Arg {
        let ty = ArgType::Pointer {
            mutable,
            elem: std::any::type_name::<T>(),
            elem_bytes: size_of::<T>(),
            bytes: (len * size_of::<T>()) as u64,
        };
        Arg { word: addr, ty }
    }

    /// An absent optional pointer operand of element type `T`: address 0 and no elements, for
    /// a kernel that checks a flag before touching it (on `Emu`, any access through it faults).
    pub fn null<T>() -> Arg {
        Arg::pointer::<T>(0, 0, false)
    }

    /// [`Arg::null`] for a parameter the kernel may write through (`GlobalMut`).
    pub fn null_mut<T>() -> Arg {
        Arg::pointer::<T>(0, 0, true)
    }

    /// A word for a parameter whose type has a `KernelArg` implementation of its own: `ty` is
    /// that type as the kernel's signature writes it (its last path segment is compared), and
    /// `word` what its `to_word` returns.
    pub fn custom(ty: &'static str, word: u64) -> Arg {
        Arg { word, ty: ArgType::Custom(ty) }
    }

    /// The 64-bit word the kernel receives.
    pub fn word(&self) -> u64 {
        self.word
    }

    /// What the word holds.
    pub fn ty(&self) -> ArgType {
        self.ty
    }

    /// For a pointer on `Emu`: the view it came from, so the emulator bounds the kernel's
    /// accesses through it.
    pub(crate) fn extent(&self) -> Option<trident_simt::ArgExtent> {
        match self.ty {
            ArgType::Pointer { bytes, .. } => Some(trident_simt::ArgExtent { start: self.word, bytes }),
            _ => None,
        }
    }

    /// Whether this argument may be passed for a parameter of type `param`.
    pub(crate) fn fits(&self, param: ParamType) -> bool {
        match (param, self.ty) {
            (
                ParamType::Pointer { mutable, elem },
                ArgType::Pointer { mutable: writable, elem: ours, elem_bytes, .. },
            ) => (writable || !mutable) && elements_match(elem, ours, elem_bytes),
            (ParamType::U32, ArgType::U32)
            | (ParamType::I32, ArgType::I32)
            | (ParamType::U64, ArgType::U64)
            | (ParamType::I64, ArgType::I64)
            | (ParamType::Usize, ArgType::Usize)
            | (ParamType::F32, ArgType::F32) => true,
            (ParamType::Other(theirs), ArgType::Custom(ours)) => last_segment(theirs) == last_segment(ours),
            _ => false,
        }
    }
}

/// `ty` without its module path and spaces (`core :: primitive :: f32` is `f32`).
fn last_segment(ty: &str) -> &str {
    let ty = ty.trim();
    ty.rfind("::").map_or(ty, |i| ty[i + 2..].trim())
}

/// The size of a primitive number type, by name.
fn primitive_bytes(name: &str) -> Option<usize> {
    Some(match name {
        "u8" | "i8" => 1,
        "u16" | "i16" => 2,
        "u32" | "i32" | "f32" => 4,
        "u64" | "i64" | "f64" | "usize" | "isize" => 8,
        _ => return None,
    })
}

/// Whether a view of `ours` (`ours_bytes` each) may be passed for a pointer to `param`:
/// two primitive numbers must be the same type; otherwise the sizes must agree where the
/// parameter's is known.
fn elements_match(param: &str, ours: &str, ours_bytes: usize) -> bool {
    let (param, ours) = (last_segment(param), last_segment(ours));
    if param == ours {
        return true;
    }
    match (primitive_bytes(param), primitive_bytes(ours)) {
        (Some(_), Some(_)) => false,
        (Some(bytes), None) => bytes == ours_bytes,
        (None, _) => true,
    }
}

macro_rules! scalar_arg {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Arg {
            fn from(value: $t) -> Arg {
                Arg { word: trident_simt::KernelArg::to_word(value), ty: ArgType::$v }
            }
        }
    )*};
}
scalar_arg!(u32 => U32, i32 => I32, u64 => U64, i64 => I64, usize => Usize, f32 => F32);

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgType::Pointer { mutable, elem, bytes, elem_bytes } => write!(
                f,
                "a {} view of {} {}",
                if *mutable { "writable" } else { "read-only" },
                bytes / (*elem_bytes).max(1) as u64,
                last_segment(elem)
            ),
            ArgType::U32 => f.write_str("u32"),
            ArgType::I32 => f.write_str("i32"),
            ArgType::U64 => f.write_str("u64"),
            ArgType::I64 => f.write_str("i64"),
            ArgType::Usize => f.write_str("usize"),
            ArgType::F32 => f.write_str("f32"),
            ArgType::Custom(ty) => f.write_str(ty),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr<T>(mutable: bool) -> Arg {
        Arg::pointer::<T>(0x1000, 4, mutable)
    }

    #[test]
    fn arguments_fit_only_their_parameter_types() {
        let p = ParamType::parse;
        assert!(ptr::<f32>(false).fits(p("simt :: Global < f32 >")));
        assert!(ptr::<f32>(true).fits(p("simt :: Global < f32 >")), "a writable view may be read");
        assert!(!ptr::<f32>(false).fits(p("GlobalMut<f32>")), "a read-only view is never written");
        assert!(!ptr::<u32>(false).fits(p("Global<f32>")), "u32 elements are not f32");
        assert!(ptr::<[u8; 2]>(false).fits(p("Global<u16>")), "a 2-byte element for u16");
        assert!(!ptr::<[u8; 4]>(false).fits(p("Global<u16>")));
        assert!(ptr::<u32>(false).fits(p("Global<T>")));
        assert!(!ptr::<f32>(false).fits(p("u64")), "an address is not a scalar");
        assert!(Arg::from(3u32).fits(p("u32")));
        assert!(!Arg::from(3u32).fits(p("f32")));
        assert!(!Arg::from(3u64).fits(p("u32")));
        assert!(!Arg::from(3u32).fits(p("Global<f32>")), "a number is not a pointer");
        assert!(Arg::custom("my :: Pair", 7).fits(p("Pair")));
        assert!(!Arg::custom("Pair", 7).fits(p("u32")));
        assert_eq!(ptr::<f32>(true).ty().to_string(), "a writable view of 4 f32");
    }
}
