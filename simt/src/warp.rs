//! Warp-collective operations: lanes arrive one by one; the last member to arrive computes
//! everyone's result. Participation is checked as it happens (`arrive`) and when the block
//! stalls (`stalled_collective`).

use std::fmt;

use crate::block::{BlockInner, BlockState, Status};
use crate::error::{Access, AccessKind, EmuError, Fault, Site};
use crate::fragments;
use crate::shared::race_error;
use crate::stats::MemOp;

/// Lanes per warp.
pub const WARP_SIZE: u32 = 32;
/// The member mask naming all 32 lanes of a warp.
pub const FULL_MASK: u32 = u32::MAX;

/// Undefined results (a shuffle from a lane that does not take part) read as this word: a NaN
/// as f32, an out-of-range index as u32.
pub const POISON_WORD: u32 = 0x7FF0_DEAD;

/// `shfl.sync` source-lane modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflMode {
    /// From the lane given (`shfl.sync.idx`).
    Idx,
    /// From `lane - delta` (`shfl.sync.up`); lanes below `delta` keep their own value.
    Up,
    /// From `lane + delta` (`shfl.sync.down`); lanes past the end keep their own value.
    Down,
    /// From `lane ^ mask` (`shfl.sync.bfly`).
    Bfly,
}

/// `vote.sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMode {
    /// Whether the predicate holds on every member lane.
    All,
    /// Whether it holds on any member lane.
    Any,
    /// The mask of member lanes where it holds.
    Ballot,
}

/// Which collective a lane is at; lanes meeting in one collective must agree on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Shfl(ShflMode),
    Vote(VoteMode),
    SyncWarp,
    Mma(MmaInput),
    Ldmatrix { matrices: u8, trans: bool },
    Elect,
}

impl Op {
    fn needs_full_warp(self) -> bool {
        matches!(self, Op::Mma(_) | Op::Ldmatrix { .. })
    }

    /// Whether the instruction carries `.aligned`, so every lane must execute the same
    /// instruction (one call site). PTX ISA, "mma" and "ldmatrix" (Warp Level Matrix
    /// Multiply-Accumulate Instructions): with the mandatory `.aligned` qualifier all threads of
    /// the warp must execute the same instruction, and in conditional code only where every
    /// thread takes the same branch; anything else is undefined. `shfl.sync`, `vote.sync` and
    /// `bar.warp.sync` carry no `.aligned`.
    fn is_aligned(self) -> bool {
        matches!(self, Op::Mma(_) | Op::Ldmatrix { .. })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Shfl(mode) => write!(f, "shfl.sync.{}", format!("{mode:?}").to_lowercase()),
            Op::Vote(mode) => write!(f, "vote.sync.{}", format!("{mode:?}").to_lowercase()),
            Op::SyncWarp => f.write_str("bar.warp.sync"),
            Op::Elect => f.write_str("elect.sync"),
            Op::Mma(MmaInput::Bf16) => f.write_str("mma.sync.m16n8k16.bf16"),
            Op::Mma(MmaInput::F16) => f.write_str("mma.sync.m16n8k16.f16"),
            Op::Ldmatrix { matrices, trans } => {
                write!(f, "ldmatrix.x{matrices}{}", if *trans { ".trans" } else { "" })
            }
        }
    }
}

/// Element type of an `mma.sync.m16n8k16` A and B operand (accumulation is f32 for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaInput {
    /// bfloat16: 8 exponent bits, 7 mantissa bits.
    Bf16,
    /// IEEE binary16: 5 exponent bits, 10 mantissa bits.
    F16,
}

/// Per-lane operand words: up to 4 A + 2 B + 4 C registers of an mma.
pub(crate) const MAX_INPUT_WORDS: usize = 10;

/// A collective some lanes of a warp have reached.
pub(crate) struct Pending {
    pub op: Op,
    /// Member mask as the lanes passed it.
    pub mask: u32,
    /// `mask` restricted to lanes that exist (the last warp of a block may be partial).
    pub members: u32,
    pub arrived: u32,
    pub site: Site,
    pub inputs: [[u32; MAX_INPUT_WORDS]; WARP_SIZE as usize],
}

#[derive(Default)]
pub(crate) struct WarpState {
    /// Collectives in progress; more than one only when disjoint lane groups diverged.
    pub pending: Vec<Pending>,
}

/// Lanes of warp `warp` that exist in a block of `threads` threads.
fn present_lanes(threads: u32, warp: u32) -> u32 {
    let count = threads.saturating_sub(warp * WARP_SIZE).min(WARP_SIZE);
    if count == WARP_SIZE {
        FULL_MASK
    } else {
        (1u32 << count) - 1
    }
}

fn lanes(mask: u32) -> impl Iterator<Item = u32> {
    (0..WARP_SIZE).filter(move |l| mask & (1 << l) != 0)
}

/// Outcome of one lane's arrival.
pub(crate) enum Arrival {
    /// This lane completed the collective; here is its result.
    Done([u32; 4]),
    /// Others have yet to arrive; suspend and read the result on resume.
    Wait,
}

/// Lane `thread % 32` reaches collective `op`.
pub(crate) fn arrive(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    op: Op,
    mask: u32,
    site: Site,
    input: &[u32],
) -> Result<Arrival, EmuError> {
    let lane = thread % WARP_SIZE;
    let warp = thread / WARP_SIZE;
    let bit = 1u32 << lane;
    let fault = |detail: String| block.error_at(thread, Fault::WarpCollective { site, detail });
    if mask & bit == 0 {
        return Err(fault(format!(
            "{op} with member mask {mask:#010x} does not include this thread's own lane {lane}"
        )));
    }
    let present = present_lanes(block.threads, warp);
    if op.needs_full_warp() && (mask != FULL_MASK || present != FULL_MASK) {
        return Err(fault(format!(
            "{op} must be executed by all 32 lanes of a full warp, but the mask is {mask:#010x} \
             and the warp has lanes {present:#010x}"
        )));
    }
    let members = mask & present;
    let base = warp * WARP_SIZE;
    if let Some(l) = lanes(members).find(|&l| inner.threads[(base + l) as usize].status == Status::Exited) {
        return Err(fault(format!(
            "{op} with member mask {mask:#010x} names lane {l} (thread {}), which has exited",
            block.dim3(base + l)
        )));
    }
    let pending = &mut inner.warps[warp as usize].pending;
    let joins = |p: &Pending| p.members & bit != 0 && p.arrived & bit == 0;
    // On sm_70 and later, lanes may meet at one non-`.aligned` collective (shfl.sync,
    // vote.sync, bar.warp.sync) from different call sites; an `.aligned` one must be the same
    // instruction in every lane.
    if op.is_aligned() {
        if let Some(p) = pending.iter().find(|p| joins(p) && p.op == op && p.mask == mask && p.site != site) {
            return Err(fault(format!(
                "this lane reaches {op} here, but lanes {:#010x} of its warp wait at {op} at {}: \
                 .aligned warp instructions must be executed by every lane from the same \
                 instruction, not from different call sites (PTX ISA, \"mma\" and \"ldmatrix\": \
                 the .aligned qualifier)",
                p.arrived, p.site
            )));
        }
    }
    let index = match pending.iter().position(|p| joins(p) && p.op == op && p.mask == mask) {
        Some(i) => i,
        None => {
            // The same instruction with another operation or mask cannot be what the lanes
            // waiting there meant.
            if let Some(p) = pending.iter().find(|p| joins(p) && p.site == site) {
                return Err(fault(mismatch(op, mask, p)));
            }
            pending.push(Pending {
                op,
                mask,
                members,
                arrived: 0,
                site,
                inputs: [[0; MAX_INPUT_WORDS]; WARP_SIZE as usize],
            });
            pending.len() - 1
        }
    };
    let p = &mut pending[index];
    p.inputs[lane as usize][..input.len()].copy_from_slice(input);
    p.arrived |= bit;
    if p.arrived != p.members {
        inner.threads[thread as usize].status = Status::InCollective;
        return Ok(Arrival::Wait);
    }
    let p = pending.swap_remove(index);
    let outputs = complete(block, inner, warp, &p)?;
    for l in lanes(p.members) {
        let slot = &mut inner.threads[(base + l) as usize];
        slot.collective_out = outputs[l as usize];
        slot.status = Status::Runnable;
    }
    Ok(Arrival::Done(outputs[lane as usize]))
}

fn mismatch(op: Op, mask: u32, p: &Pending) -> String {
    format!(
        "this lane reaches {op} with member mask {mask:#010x} here, but lanes {:#010x} of its \
         warp wait for it at {} at {} with member mask {:#010x}",
        p.arrived, p.op, p.site, p.mask
    )
}

/// The error for a collective that can never complete because a member is elsewhere.
pub(crate) fn stalled_collective(block: &BlockState, inner: &BlockInner) -> Option<EmuError> {
    for (w, warp) in inner.warps.iter().enumerate() {
        let Some(p) = warp.pending.first() else {
            continue;
        };
        let base = w as u32 * WARP_SIZE;
        let waiter = base + p.arrived.trailing_zeros();
        let missing = base + (p.members & !p.arrived).trailing_zeros();
        let missing_bit = 1u32 << (missing - base);
        let where_ = match inner.threads[missing as usize].status {
            Status::AtBarrier(site) => format!("waits at the barrier at {site}"),
            Status::Exited => "has exited".to_string(),
            Status::InCollective => match warp.pending.iter().find(|q| q.arrived & missing_bit != 0) {
                Some(q) => format!("waits at {} at {} with member mask {:#010x}", q.op, q.site, q.mask),
                None => "waits at another warp collective".to_string(),
            },
            other => format!("is {other:?}"),
        };
        let detail = format!(
            "{} with member mask {:#010x} waits for lane {} (thread {}), which {where_}",
            p.op,
            p.mask,
            missing - base,
            block.dim3(missing)
        );
        return Some(block.error_at(waiter, Fault::WarpCollective { site: p.site, detail }));
    }
    None
}

/// Computes every member's result once all have arrived.
fn complete(
    block: &BlockState,
    inner: &mut BlockInner,
    warp: u32,
    p: &Pending,
) -> Result<[[u32; 4]; WARP_SIZE as usize], EmuError> {
    let mut out = [[0u32; 4]; WARP_SIZE as usize];
    match p.op {
        Op::Shfl(mode) => {
            for l in lanes(p.members) {
                out[l as usize][0] = match shfl_source(mode, l, p.inputs[l as usize][1]) {
                    Some(src) if p.members & (1 << src) != 0 => p.inputs[src as usize][0],
                    Some(_) => POISON_WORD,
                    None => p.inputs[l as usize][0],
                };
            }
        }
        Op::Vote(mode) => {
            let ballot = lanes(p.members)
                .filter(|&l| p.inputs[l as usize][0] != 0)
                .fold(0u32, |acc, l| acc | (1 << l));
            let result = match mode {
                VoteMode::All => u32::from(ballot == p.members),
                VoteMode::Any => u32::from(ballot != 0),
                VoteMode::Ballot => ballot,
            };
            for l in lanes(p.members) {
                out[l as usize][0] = result;
            }
        }
        Op::Elect => {
            // The rule implemented: the leader is the lowest lane of the member mask (PTX ISA,
            // "Parallel Synchronization and Communication Instructions: elect.sync" elects one
            // leader among the active threads of membermask; the lowest lane is what the
            // hardware elects, and the choice is made here deterministically so).
            let leader = p.members.trailing_zeros();
            for l in lanes(p.members) {
                out[l as usize] = [leader, u32::from(l == leader), 0, 0];
            }
        }
        Op::SyncWarp => {
            if p.members == present_lanes(block.threads, warp) {
                inner.smem.warp_synced(warp);
                inner.log.warp_synced(warp);
            }
        }
        Op::Mma(input) => {
            let d = fragments::mma_m16n8k16(input, &p.inputs);
            for (l, words) in d.iter().enumerate() {
                out[l] = words.map(f32::to_bits);
            }
        }
        Op::Ldmatrix { matrices, trans } => {
            let mut rows = [[0u16; 8]; WARP_SIZE as usize];
            for l in 0..u32::from(matrices) * 8 {
                let offset = p.inputs[l as usize][0];
                let thread = warp * WARP_SIZE + l;
                if let Err(c) = inner.smem.track(offset, 16, AccessKind::Read, thread, p.site) {
                    let later = Access { kind: AccessKind::Read, thread: block.dim3(thread), site: p.site };
                    return Err(race_error(block, inner, c, later, thread));
                }
                inner.log.push_shared(offset, 16, MemOp::Load, thread, p.site);
                rows[l as usize] = inner.smem.read(offset);
            }
            for (l, regs) in fragments::ldmatrix(&rows, matrices, trans).iter().enumerate() {
                out[l] = *regs;
            }
        }
    }
    Ok(out)
}

/// Source lane of `shfl.sync` with width 32 (clamp 31 for idx/down/bfly, 0 for up), or None
/// when the lane keeps its own value. Only the low five bits of `b` count, as in PTX.
fn shfl_source(mode: ShflMode, lane: u32, b: u32) -> Option<u32> {
    let b = b & (WARP_SIZE - 1);
    match mode {
        ShflMode::Idx => Some(b),
        ShflMode::Bfly => Some(lane ^ b),
        ShflMode::Down => (lane + b < WARP_SIZE).then_some(lane + b),
        ShflMode::Up => lane.checked_sub(b),
    }
}
