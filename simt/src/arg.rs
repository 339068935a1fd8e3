//! Kernel arguments as 64-bit words.
//!
//! A launch passes one `u64` per kernel parameter. The CUDA driver reads each parameter's own
//! size from the address it is given, so on a little-endian host a word whose low bytes hold a
//! `u32` or `f32` is a valid parameter value for that type too; the emulator decodes the same
//! words with [`KernelArg::from_word`].
//!
//! A word carries no type. [`ParamType`] reads a parameter's type from the text the kernel's
//! [`HostKernel::params`](crate::HostKernel::params) holds, so that a launcher (the runtime's
//! typed arguments) can check each word's type against it before the kernel runs.

use std::fmt;

/// A type a kernel may take as a parameter.
pub trait KernelArg: Copy {
    /// The value as a launch word: integers zero- or sign-extended, `f32` as its bits in the
    /// low half, pointers as their address.
    fn to_word(self) -> u64;
    /// The value a launch word holds (the inverse of [`KernelArg::to_word`]; the high half of
    /// the word is ignored for 32-bit types).
    fn from_word(word: u64) -> Self;
    /// The value of parameter number `index` of a launch: [`KernelArg::from_word`], except for
    /// pointer types that remember which parameter they came from (so the emulator can bound
    /// their accesses by the view passed for it).
    fn from_arg(word: u64, index: usize) -> Self {
        let _ = index;
        Self::from_word(word)
    }
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl KernelArg for $t {
            fn to_word(self) -> u64 {
                self as u64
            }
            fn from_word(word: u64) -> Self {
                word as $t
            }
        }
    )*};
}
int_arg!(u32, i32, u64, i64, usize);

impl KernelArg for f32 {
    fn to_word(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn from_word(word: u64) -> Self {
        f32::from_bits(word as u32)
    }
}

impl<T> KernelArg for *const T {
    fn to_word(self) -> u64 {
        self as usize as u64
    }
    fn from_word(word: u64) -> Self {
        word as usize as *const T
    }
}

impl<T> KernelArg for *mut T {
    fn to_word(self) -> u64 {
        self as usize as u64
    }
    fn from_word(word: u64) -> Self {
        word as usize as *mut T
    }
}

/// A kernel parameter's type, as a launch checks its argument against it.
///
/// Parsed from the parameter's type as written in the kernel's signature (see
/// [`ParamType::parse`]); `stringify!` spacing (`simt :: Global < f32 >`) and module paths are
/// ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamType {
    /// A pointer to global memory: `Global<T>` or `*const T` (`mutable: false`, the kernel
    /// only reads through it), `GlobalMut<T>` or `*mut T` (`mutable: true`). `elem` is `T` as
    /// written (`"f32"`, `"u32"`, `"T"`, ...).
    Pointer {
        /// Whether the kernel may write through the pointer.
        mutable: bool,
        /// The element type as written in the signature.
        elem: &'static str,
    },
    /// `u32`.
    U32,
    /// `i32`.
    I32,
    /// `u64`.
    U64,
    /// `i64`.
    I64,
    /// `usize` (64 bits on the host and on nvptx64).
    Usize,
    /// `f32`.
    F32,
    /// Any other type (one with a [`KernelArg`] implementation of its own): only an argument
    /// of the same written type matches it.
    Other(&'static str),
}

/// `ty` without spaces at its ends and without a leading module path (`a :: b :: C` is `C`).
fn last_segment(ty: &'static str) -> &'static str {
    let ty = ty.trim();
    match ty.rfind("::") {
        Some(i) => ty[i + 2..].trim(),
        None => ty,
    }
}

impl ParamType {
    /// The type a parameter declared as `ty` has.
    ///
    /// ```
    /// use trident_simt::ParamType;
    ///
    /// assert_eq!(ParamType::parse("simt :: GlobalMut < f32 >"), ParamType::Pointer { mutable: true, elem: "f32" });
    /// assert_eq!(ParamType::parse("*const u32"), ParamType::Pointer { mutable: false, elem: "u32" });
    /// assert_eq!(ParamType::parse("u32"), ParamType::U32);
    /// assert_eq!(ParamType::parse("Bf16x2"), ParamType::Other("Bf16x2"));
    /// ```
    pub fn parse(ty: &'static str) -> ParamType {
        let ty = ty.trim();
        if let Some(rest) = ty.strip_prefix('*') {
            let rest = rest.trim();
            let (mutable, elem) = match (rest.strip_prefix("mut "), rest.strip_prefix("const ")) {
                (Some(e), _) => (true, e),
                (None, Some(e)) => (false, e),
                (None, None) => return ParamType::Other(ty),
            };
            return ParamType::Pointer { mutable, elem: last_segment(elem) };
        }
        if let (Some(open), true) = (ty.find('<'), ty.ends_with('>')) {
            let elem = last_segment(&ty[open + 1..ty.len() - 1]);
            return match last_segment(&ty[..open]) {
                "Global" => ParamType::Pointer { mutable: false, elem },
                "GlobalMut" => ParamType::Pointer { mutable: true, elem },
                _ => ParamType::Other(ty),
            };
        }
        match last_segment(ty) {
            "u32" => ParamType::U32,
            "i32" => ParamType::I32,
            "u64" => ParamType::U64,
            "i64" => ParamType::I64,
            "usize" => ParamType::Usize,
            "f32" => ParamType::F32,
            _ => ParamType::Other(ty),
        }
    }

    /// Whether the parameter is a pointer.
    pub fn is_pointer(&self) -> bool {
        matches!(self, ParamType::Pointer { .. })
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamType::Pointer { mutable: false, elem } => write!(f, "Global<{elem}>"),
            ParamType::Pointer { mutable: true, elem } => write!(f, "GlobalMut<{elem}>"),
            ParamType::U32 => f.write_str("u32"),
            ParamType::I32 => f.write_str("i32"),
            ParamType::U64 => f.write_str("u64"),
            ParamType::I64 => f.write_str("i64"),
            ParamType::Usize => f.write_str("usize"),
            ParamType::F32 => f.write_str("f32"),
            ParamType::Other(ty) => f.write_str(ty),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{KernelArg, ParamType};

    #[test]
    fn parameter_types_parse_as_the_kernels_macro_writes_them() {
        let p = |mutable, elem| ParamType::Pointer { mutable, elem };
        assert_eq!(ParamType::parse("simt :: Global < u32 >"), p(false, "u32"));
        assert_eq!(ParamType::parse("GlobalMut<f32>"), p(true, "f32"));
        assert_eq!(ParamType::parse("* mut f32"), p(true, "f32"));
        assert_eq!(ParamType::parse("*const core :: primitive :: u16"), p(false, "u16"));
        assert_eq!(ParamType::parse(" f32 "), ParamType::F32);
        assert_eq!(ParamType::parse("usize"), ParamType::Usize);
        assert_eq!(ParamType::parse("Vec<u8>"), ParamType::Other("Vec<u8>"));
        assert_eq!(ParamType::parse("simt :: Global < u32 >").to_string(), "Global<u32>");
    }

    #[test]
    fn words_round_trip() {
        assert_eq!(f32::from_word((-1.5f32).to_word()), -1.5);
        assert_eq!(i32::from_word((-7i32).to_word()), -7);
        assert_eq!(u32::from_word(u32::MAX.to_word()), u32::MAX);
        let p = 0x1234_5678_9abc_usize as *const f32;
        assert_eq!(<*const f32>::from_word(p.to_word()), p);
    }
}
