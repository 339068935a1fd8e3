//! Kernel arguments as 64-bit words.
//!
//! A launch passes one `u64` per kernel parameter. The CUDA driver reads each parameter's own
//! size from the address it is given, so on a little-endian host a word whose low bytes hold a
//! `u32` or `f32` is a valid parameter value for that type too; the emulator decodes the same
//! words with [`KernelArg::from_word`].

/// A type a kernel may take as a parameter.
pub trait KernelArg: Copy {
    fn to_word(self) -> u64;
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

#[cfg(test)]
mod tests {
    use super::KernelArg;

    #[test]
    fn words_round_trip() {
        assert_eq!(f32::from_word((-1.5f32).to_word()), -1.5);
        assert_eq!(i32::from_word((-7i32).to_word()), -7);
        assert_eq!(u32::from_word(u32::MAX.to_word()), u32::MAX);
        let p = 0x1234_5678_9abc_usize as *const f32;
        assert_eq!(<*const f32>::from_word(p.to_word()), p);
    }
}
