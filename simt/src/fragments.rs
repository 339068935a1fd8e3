//! Tensor-core fragment layouts of the PTX ISA, for `mma.sync.m16n8k16` with bf16 or f16 inputs
//! and f32 accumulators (both input types share one layout), and for `ldmatrix.m8n8` with b16 elements.
//!
//! For a lane, `g = lane / 4` (its group) and `p = lane % 4` (its pair within the group). A
//! 32-bit register holding two b16 elements keeps the lower column (or row, for B) index in
//! its low half.
//! - A (16x16, row-major): `a0` holds `A(g, 2p)` and `A(g, 2p+1)`; `a1` the same at row `g+8`;
//!   `a2` at columns `2p+8`, `2p+9`; `a3` at row `g+8`, columns `2p+8`, `2p+9`.
//! - B (16x8, k by n): `b0` holds `B(2p, g)` and `B(2p+1, g)`; `b1` rows `2p+8`, `2p+9`.
//! - C and D (16x8): `c0`, `c1` are `C(g, 2p)`, `C(g, 2p+1)`; `c2`, `c3` the same at row `g+8`.
//! - ldmatrix: lanes `8i..8i+7` address the 8 rows of matrix i; register i of a lane holds
//!   row `lane/4`, columns `2(lane%4)` and `2(lane%4)+1` of matrix i (`.trans`: column
//!   `lane/4`, rows `2(lane%4)` and `2(lane%4)+1`).

use crate::warp::{MmaInput, MAX_INPUT_WORDS, WARP_SIZE};

const LANES: usize = WARP_SIZE as usize;

/// f32 value of a bf16 bit pattern.
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// f32 value of an IEEE binary16 bit pattern (subnormals, infinities and NaNs included).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1F);
    let mantissa = f32::from(bits & 0x3FF);
    match exponent {
        0 => sign * mantissa * (-24f32).exp2(),
        0x1F if mantissa == 0.0 => sign * f32::INFINITY,
        0x1F => f32::NAN,
        e => sign * (1.0 + mantissa / 1024.0) * ((e - 15) as f32).exp2(),
    }
}

fn decode(input: MmaInput, bits: u16) -> f64 {
    f64::from(match input {
        MmaInput::Bf16 => bf16_to_f32(bits),
        MmaInput::F16 => f16_to_f32(bits),
    })
}

/// D = A x B + C for one warp, A and B of element type `input`. Lane `l`'s operands are
/// `inputs[l]`: a0..a3, b0, b1, then c0..c3 as f32 bits. The emulator sums the (exact) products in f64 and rounds once; the
/// hardware accumulates in f32 in an unspecified order, so the two agree to f32 accumulation
/// error, not bit for bit.
pub(crate) fn mma_m16n8k16(input: MmaInput, inputs: &[[u32; MAX_INPUT_WORDS]; LANES]) -> [[f32; 4]; LANES] {
    let low = |word: u32| decode(input, word as u16);
    let high = |word: u32| decode(input, (word >> 16) as u16);
    let mut a = [[0f64; 16]; 16];
    let mut b = [[0f64; 8]; 16];
    let mut c = [[0f64; 8]; 16];
    for (lane, words) in inputs.iter().enumerate() {
        let (group, pair) = (lane / 4, lane % 4);
        let col = 2 * pair;
        for (reg, (row, k)) in
            [(group, col), (group + 8, col), (group, col + 8), (group + 8, col + 8)].into_iter().enumerate()
        {
            a[row][k] = low(words[reg]);
            a[row][k + 1] = high(words[reg]);
        }
        for (reg, k) in [col, col + 8].into_iter().enumerate() {
            b[k][group] = low(words[4 + reg]);
            b[k + 1][group] = high(words[4 + reg]);
        }
        for (reg, (row, n)) in
            [(group, col), (group, col + 1), (group + 8, col), (group + 8, col + 1)].into_iter().enumerate()
        {
            c[row][n] = f64::from(f32::from_bits(words[6 + reg]));
        }
    }
    let mut d = [[0f32; 4]; LANES];
    for (lane, out) in d.iter_mut().enumerate() {
        let (group, pair) = (lane / 4, lane % 4);
        let col = 2 * pair;
        for (reg, (row, n)) in
            [(group, col), (group, col + 1), (group + 8, col), (group + 8, col + 1)].into_iter().enumerate()
        {
            let dot: f64 = (0..16).map(|k| a[row][k] * b[k][n]).sum();
            out[reg] = (dot + c[row][n]) as f32;
        }
    }
    d
}

/// Registers of every lane after `ldmatrix.x{matrices}`; `rows[8i + r]` is row r of matrix i.
pub(crate) fn ldmatrix(rows: &[[u16; 8]; LANES], matrices: u8, trans: bool) -> [[u32; 4]; LANES] {
    let mut out = [[0u32; 4]; LANES];
    for (lane, regs) in out.iter_mut().enumerate() {
        let (group, pair) = (lane / 4, lane % 4);
        for (i, reg) in regs.iter_mut().enumerate().take(matrices as usize) {
            let matrix = &rows[8 * i..8 * i + 8];
            let (lo, hi) = if trans {
                (matrix[2 * pair][group], matrix[2 * pair + 1][group])
            } else {
                (matrix[group][2 * pair], matrix[group][2 * pair + 1])
            };
            *reg = u32::from(lo) | (u32::from(hi) << 16);
        }
    }
    out
}
