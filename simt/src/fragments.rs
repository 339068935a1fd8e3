//! Tensor-core fragment layouts of the PTX ISA, for `mma.sync.m16n8k16` with bf16 inputs and
//! f32 accumulators, and for `ldmatrix.m8n8` with b16 elements.
//!
//! For a lane, `group = lane / 4` and `pair = lane % 4`. A 32-bit register holding two b16
//! elements keeps the lower column (or row, for B) index in its low half.
//! - A (16x16, row-major): a0 = A[group][2pair..+2], a1 = A[group+8][2pair..+2],
//!   a2 = A[group][2pair+8..+2], a3 = A[group+8][2pair+8..+2].
//! - B (16x8, k by n): b0 = B[2pair..+2][group], b1 = B[2pair+8..+2][group].
//! - C and D (16x8): c0, c1 = C[group][2pair], C[group][2pair+1]; c2, c3 = the same at row
//!   group+8.
//! - ldmatrix: lanes 8i..8i+8 address the 8 rows of matrix i; register i of a lane holds row
//!   lane/4, columns 2(lane%4) and +1 of matrix i (`.trans`: column lane/4, rows 2(lane%4), +1).

use crate::warp::{MAX_INPUT_WORDS, WARP_SIZE};

const LANES: usize = WARP_SIZE as usize;

/// f32 value of a bf16 bit pattern.
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

fn low(word: u32) -> f32 {
    bf16_to_f32(word as u16)
}

fn high(word: u32) -> f32 {
    bf16_to_f32((word >> 16) as u16)
}

/// D = A x B + C for one warp. Lane `l`'s operands are `inputs[l]`: a0..a3, b0, b1, then
/// c0..c3 as f32 bits. Products of bf16 values are exact in f64 and the sum is rounded once,
/// which bounds the error of the hardware's f32 accumulation from above.
pub(crate) fn mma_m16n8k16_bf16(inputs: &[[u32; MAX_INPUT_WORDS]; LANES]) -> [[f32; 4]; LANES] {
    let mut a = [[0f64; 16]; 16];
    let mut b = [[0f64; 8]; 16];
    let mut c = [[0f64; 8]; 16];
    for (lane, words) in inputs.iter().enumerate() {
        let (group, pair) = (lane / 4, lane % 4);
        let col = 2 * pair;
        for (reg, (row, k)) in
            [(group, col), (group + 8, col), (group, col + 8), (group + 8, col + 8)].into_iter().enumerate()
        {
            a[row][k] = f64::from(low(words[reg]));
            a[row][k + 1] = f64::from(high(words[reg]));
        }
        for (reg, k) in [col, col + 8].into_iter().enumerate() {
            b[k][group] = f64::from(low(words[4 + reg]));
            b[k + 1][group] = f64::from(high(words[4 + reg]));
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
