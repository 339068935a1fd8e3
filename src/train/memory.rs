//! What a run needs in host memory, estimated from its shape and checked against what the
//! machine (or the cgroup the process runs in) can give, before anything big is allocated.
//!
//! The estimate follows the buffers the trainers allocate, with checked arithmetic throughout,
//! so that an absurd shape is an error and never a wrapped size or an abort:
//! - parameters, gradients and AdamW's two moments: 4 bytes per parameter each;
//! - under mixed precision the compute weights: 2 bytes per parameter in a 16-bit buffer
//!   (`Emu`, `Cuda`), 4 in the `Cpu`'s f32 buffer of rounded values ([`Storage`]);
//! - the activation arena of every workspace (the tensors of [`MicroActs`](crate::model::MicroActs)
//!   and [`Workspace`](crate::model::Workspace) at their local widths, per layer where
//!   stacked; the 16-bit ones at 2 bytes an element where [`Storage::Half`]), plus 8 bytes per
//!   token of inputs and targets;
//! - on the Cpu trainer, one gradient buffer per share of rows ([`Trainer`](super::Trainer));
//! - a checkpoint save ([`save`](super::checkpoint::save), when there is `--save`): every
//!   rank's host copies of its parameter shard and the moments it owns, and on world rank 0
//!   the gather of the whole model and both moments
//!   ([`save_gather_elements`](super::checkpoint::save_gather_elements));
//! - what a run starts from, held for its whole length and once per process: the initial
//!   weights every rank takes its shard from, and a resumed checkpoint's AdamW moments;
//! - the token shards the data loaders read whole (set by the caller, [`MemoryNeed::data`]);
//! - a fixed margin for the ops' scratch (GEMM packing) and the process itself.

use std::path::Path;

use trident_runtime::Device;

use crate::model::layer_tensors::{Element, LAYER_TENSORS};
use crate::model::{GptConfig, Precision};

/// How a run stores mixed precision's 16-bit tensors: the activations the products and
/// attention read and write, and the compute weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Storage {
    /// fp32: no 16-bit tensor and no compute weights.
    #[default]
    Fp32,
    /// Mixed precision on `Cpu`: f32 buffers holding the rounded values (4 bytes each).
    Rounded,
    /// Mixed precision on `Emu` and `Cuda`: 16-bit buffers (2 bytes each).
    Half,
}

impl Storage {
    /// How a run in `precision` on `device` stores its 16-bit tensors.
    pub fn of(device: &Device, precision: Precision) -> Self {
        match (precision.format(), device) {
            (None, _) => Storage::Fp32,
            (Some(_), Device::Cpu) => Storage::Rounded,
            (Some(_), Device::Emu | Device::Cuda(_)) => Storage::Half,
        }
    }

    /// Bytes of one element of a tensor mixed precision stores in 16 bits.
    fn half_tensor_bytes(self) -> u64 {
        match self {
            Storage::Half => 2,
            Storage::Fp32 | Storage::Rounded => 4,
        }
    }

    /// Bytes per parameter of the compute weights.
    fn compute_weight_bytes(self) -> u64 {
        match self {
            Storage::Fp32 => 0,
            Storage::Rounded => 4,
            Storage::Half => 2,
        }
    }
}

/// Scratch of the ops and the process beside the buffers counted: GEMM packing buffers, thread
/// stacks, the allocator's slack.
pub const WORKSPACE_MARGIN: u64 = 256 << 20;

/// Bytes one process needs, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryNeed {
    /// The fp32 parameters held (4 bytes each).
    pub params: u64,
    /// The fp32 gradients: one buffer like the parameters, plus one per share of rows on the
    /// Cpu trainer, or the gradient shard ZeRO-1 keeps.
    pub grads: u64,
    /// AdamW's two fp32 moments (of the rank's 1/DP shard under ZeRO-1).
    pub optimizer: u64,
    /// Mixed precision's compute weights (the parameters rounded for the products).
    pub compute_weights: u64,
    /// The activation arenas of the micro-batches in flight, with their tokens and targets.
    pub activations: u64,
    /// Host copies of its own shares a checkpoint save makes on this rank.
    pub checkpoint: u64,
    /// World rank 0's gather of the whole model during a save, beside its own copies; counted
    /// once, where rank 0 runs ([`MemoryNeed::with_save`]).
    pub gather: u64,
    /// What the run starts from, held for its length, once per process: the initial weights
    /// and a resumed checkpoint's moments ([`MemoryNeed::with_start`]).
    pub start: u64,
    /// Token shards the data loaders hold (one each for training and validation).
    pub data: u64,
    /// The fixed margin for the ops' scratch and the process ([`WORKSPACE_MARGIN`]).
    pub workspace: u64,
}

/// Why the memory check refused a run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    /// A byte count of the estimate overflows `u64`: the shape is absurd.
    #[error("the memory this run needs overflows 64 bits ({what}); lower {flags}")]
    Overflow {
        /// The quantity that overflowed ("the parameter count", "the activations").
        what: &'static str,
        /// The flags that would shrink it.
        flags: &'static str,
    },
    /// The run needs more memory than the machine (or its cgroup) has left
    /// ([`MemoryNeed::check`]).
    #[error(
        "this run needs about {} of memory ({need}{ranks}) but {} is available ({from}); lower {flags}",
        gib(need.total()),
        gib(*available),
        ranks = if *ranks > 1 { format!("; {ranks} ranks on this machine") } else { String::new() },
    )]
    TooLarge {
        /// What all `ranks` processes need together, by kind.
        need: Box<MemoryNeed>,
        /// Processes or rank threads sharing the machine.
        ranks: u64,
        /// Bytes that can still be allocated.
        available: u64,
        /// Where `available` comes from (`MemAvailable` in `/proc/meminfo`, the cgroup limit).
        from: &'static str,
        /// The flags to lower first ([`MemoryNeed::flags_to_lower`]).
        flags: &'static str,
    },
}

fn gib(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

impl std::fmt::Display for MemoryNeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "parameters {}, gradients {}, optimizer state {}, compute weights {}, activations {}, \
             checkpoint copies {}, rank 0's checkpoint gather {}, initial weights and resumed state {}, \
             data {}, workspace {}",
            gib(self.params),
            gib(self.grads),
            gib(self.optimizer),
            gib(self.compute_weights),
            gib(self.activations),
            gib(self.checkpoint),
            gib(self.gather),
            gib(self.start),
            gib(self.data),
            gib(self.workspace)
        )
    }
}

const SHAPE_FLAGS: &str = "--hidden-size or --num-layers";
const BATCH_FLAGS: &str = "--micro-batch-size or --seq-length";

fn mul(a: u64, b: u64, what: &'static str, flags: &'static str) -> Result<u64, MemoryError> {
    a.checked_mul(b).ok_or(MemoryError::Overflow { what, flags })
}

fn add(a: u64, b: u64, what: &'static str, flags: &'static str) -> Result<u64, MemoryError> {
    a.checked_add(b).ok_or(MemoryError::Overflow { what, flags })
}

impl MemoryNeed {
    /// Bytes of every kind together, saturating at `u64::MAX`.
    pub fn total(&self) -> u64 {
        // Each part was computed checked; their sum saturates rather than wraps (a total past
        // u64::MAX is refused by any availability anyway).
        self.per_rank().saturating_add(self.gather).saturating_add(self.start)
    }

    /// Bytes every rank holds (all but [`gather`](Self::gather) and [`start`](Self::start)).
    fn per_rank(&self) -> u64 {
        [
            self.params,
            self.grads,
            self.optimizer,
            self.compute_weights,
            self.activations,
            self.checkpoint,
            self.data,
            self.workspace,
        ]
        .iter()
        .fold(0u64, |acc, &b| acc.saturating_add(b))
    }

    /// This need with a save of `config` on a `tp x pp x dp` grid (`chunks` model chunks per
    /// stage, ZeRO-1 when `zero`): each rank's copies of its shares, and, when world rank 0
    /// runs in this process (`rank_zero_here`), its gather of the whole model.
    pub fn with_save(
        mut self,
        config: &GptConfig,
        grid: (usize, usize, usize),
        zero: bool,
        chunks: usize,
        rank_zero_here: bool,
    ) -> Result<Self, MemoryError> {
        let copies = super::checkpoint::save_copy_elements(config, grid, zero, chunks) as u64;
        self.checkpoint = mul(copies, 4, "a checkpoint's copies", SHAPE_FLAGS)?;
        self.gather = if rank_zero_here {
            let gather = super::checkpoint::save_gather_elements(config, grid, zero, chunks) as u64;
            mul(gather, 4, "a checkpoint's gather", SHAPE_FLAGS)?
        } else {
            0
        };
        Ok(self)
    }

    /// This need with `processes` processes each holding the whole model's `params` initial
    /// weights (every rank takes its shard from them) and, when `resumed_moments`, the two
    /// AdamW moments of the checkpoint it resumes, for the run's whole length.
    pub fn with_start(
        mut self,
        params: u64,
        resumed_moments: bool,
        processes: u64,
    ) -> Result<Self, MemoryError> {
        let copies = if resumed_moments { 3 } else { 1 };
        let one = mul(params, 4 * copies, "the initial weights", SHAPE_FLAGS)?;
        self.start = mul(one, processes.max(1), "the initial weights", SHAPE_FLAGS)?;
        Ok(self)
    }

    /// The flag to lower first: the batch's when activations are the largest part, else the
    /// model's.
    pub fn flags_to_lower(&self, parallel: bool) -> &'static str {
        let state = self.params.saturating_add(self.grads).saturating_add(self.optimizer);
        match (self.activations > state, parallel) {
            (true, false) => BATCH_FLAGS,
            (true, true) => "--micro-batch-size or --seq-length, or set --recompute-granularity full",
            (false, false) => "--hidden-size or --num-layers (or train on more ranks)",
            (false, true) => {
                "--hidden-size or --num-layers, or raise --tensor-model-parallel-size or \
                 --pipeline-model-parallel-size, or set --use-distributed-optimizer"
            }
        }
    }

    /// One process training `config` alone: micro-batches of `micro_batch` sequences of
    /// `seq_len` tokens split into `shares` shares of rows (1: one workspace), with a
    /// checkpoint save when `saves`, storing its 16-bit tensors as `storage` says.
    pub fn single(
        config: &GptConfig,
        micro_batch: usize,
        seq_len: usize,
        shares: usize,
        saves: bool,
        storage: Storage,
    ) -> Result<Self, MemoryError> {
        let p = config
            .checked_num_params()
            .ok_or(MemoryError::Overflow { what: "the parameter count", flags: SHAPE_FLAGS })?
            as u64;
        let bytes = mul(p, 4, "the parameters' bytes", SHAPE_FLAGS)?;
        let shares = shares.clamp(1, micro_batch.max(1)) as u64;
        // Share s takes rows s*b/n .. (s+1)*b/n; every share's arena is that of its rows.
        let b = micro_batch as u64;
        let mut activations = 0u64;
        for s in 0..shares {
            let rows = (s + 1) * b / shares - s * b / shares;
            let tokens = mul(rows, seq_len as u64, "the tokens of a micro-batch", BATCH_FLAGS)?;
            activations = add(
                activations,
                arena_bytes(config, config.num_layers, tokens, 1, storage)?,
                "",
                BATCH_FLAGS,
            )?;
        }
        let share_grads =
            if shares >= 2 { mul(bytes, shares, "the shares' gradients", SHAPE_FLAGS)? } else { 0 };
        Self {
            params: bytes,
            grads: add(bytes, share_grads, "the gradients", SHAPE_FLAGS)?,
            optimizer: mul(bytes, 2, "the optimizer state", SHAPE_FLAGS)?,
            compute_weights: mul(p, storage.compute_weight_bytes(), "the compute weights", SHAPE_FLAGS)?,
            activations,
            checkpoint: 0,
            gather: 0,
            start: 0,
            data: 0,
            workspace: WORKSPACE_MARGIN,
        }
        .with_save_if(saves, config)
    }

    /// [`with_save`](Self::with_save) for one rank, when `saves`.
    fn with_save_if(self, saves: bool, config: &GptConfig) -> Result<Self, MemoryError> {
        if saves {
            self.with_save(config, (1, 1, 1), false, 1, true)
        } else {
            Ok(self)
        }
    }

    /// One rank of a `tp x pp x dp` run: its share of the parameters (the layers of one stage,
    /// split over the tensor-parallel ranks; the embedding, split over them too, on the first
    /// stage and, for the tied LM head, on the last), gradients like them, AdamW's moments (a
    /// 1/dp shard of them under ZeRO-1, plus the gradient shard it keeps), and the activations
    /// of up to `min(pp, micro_batches)` micro-batches in flight under 1F1B, their head- and
    /// column-split tensors divided over the tensor-parallel ranks; 16-bit tensors stored as
    /// `storage` says.
    #[allow(clippy::too_many_arguments)]
    pub fn parallel_rank(
        config: &GptConfig,
        tp: usize,
        pp: usize,
        dp: usize,
        distributed_optimizer: bool,
        micro_batch: usize,
        seq_len: usize,
        micro_batches: usize,
        storage: Storage,
    ) -> Result<Self, MemoryError> {
        let (tp, pp, dp) = (tp.max(1) as u64, pp.max(1) as u64, dp.max(1) as u64);
        let p = config
            .checked_num_params()
            .ok_or(MemoryError::Overflow { what: "the parameter count", flags: SHAPE_FLAGS })?
            as u64;
        let c = config.channels as u64;
        let embedding = mul(config.padded_vocab_size as u64, c, "the embedding", SHAPE_FLAGS)?;
        let layers = (config.num_layers as u64).div_ceil(pp);
        // Layer parameters of one stage on one tensor-parallel rank, rounded up.
        let layer_params = (p - embedding.min(p)).div_ceil(pp).div_ceil(tp);
        let stage_embeddings = if pp > 1 { 2 } else { 1 };
        let params = add(
            layer_params,
            mul(embedding.div_ceil(tp), stage_embeddings, "", SHAPE_FLAGS)?,
            "",
            SHAPE_FLAGS,
        )?;
        let bytes = mul(params, 4, "a rank's parameters", SHAPE_FLAGS)?;
        let (optimizer, shard) = if distributed_optimizer {
            let shard = bytes.div_ceil(dp);
            (mul(shard, 2, "", SHAPE_FLAGS)?, shard)
        } else {
            (mul(bytes, 2, "", SHAPE_FLAGS)?, 0)
        };
        let in_flight = pp.min(micro_batches.max(1) as u64);
        let tokens = mul(micro_batch as u64, seq_len as u64, "the tokens of a micro-batch", BATCH_FLAGS)?;
        let arena = arena_bytes(config, layers as usize, tokens, tp, storage)?;
        Ok(Self {
            params: bytes,
            grads: add(bytes, shard, "", SHAPE_FLAGS)?,
            optimizer,
            compute_weights: mul(params, storage.compute_weight_bytes(), "the compute weights", SHAPE_FLAGS)?,
            activations: mul(arena, in_flight, "the activations in flight", BATCH_FLAGS)?,
            checkpoint: 0,
            gather: 0,
            start: 0,
            data: 0,
            workspace: WORKSPACE_MARGIN,
        })
    }

    /// Refuses a need (per rank, for `ranks` processes or rank threads sharing the machine;
    /// [`gather`](Self::gather) and [`start`](Self::start) as they are, already for the whole
    /// machine) larger than `available` bytes (`source` says where that figure comes from).
    pub fn check(
        &self,
        ranks: u64,
        available: u64,
        source: &'static str,
        parallel: bool,
    ) -> Result<(), MemoryError> {
        let all = self
            .per_rank()
            .saturating_mul(ranks.max(1))
            .saturating_add(self.gather)
            .saturating_add(self.start);
        if all > available {
            return Err(MemoryError::TooLarge {
                need: Box::new(MemoryNeed {
                    params: self.params.saturating_mul(ranks),
                    grads: self.grads.saturating_mul(ranks),
                    optimizer: self.optimizer.saturating_mul(ranks),
                    compute_weights: self.compute_weights.saturating_mul(ranks),
                    activations: self.activations.saturating_mul(ranks),
                    checkpoint: self.checkpoint.saturating_mul(ranks),
                    gather: self.gather,
                    start: self.start,
                    data: self.data.saturating_mul(ranks),
                    workspace: self.workspace.saturating_mul(ranks),
                }),
                ranks,
                available,
                from: source,
                flags: self.flags_to_lower(parallel),
            });
        }
        Ok(())
    }
}

/// Bytes of a training arena for `tokens` tokens over `layers` layers, the tensors split by
/// heads or columns (QKV, the attention output and its log-sum-exp, the MLP's hidden layer, the
/// logits over the vocabulary) divided over `tp` ranks, the 16-bit ones at `storage`'s bytes;
/// plus 8 bytes per token of inputs and targets.
fn arena_bytes(
    config: &GptConfig,
    layers: usize,
    tokens: u64,
    tp: u64,
    storage: Storage,
) -> Result<u64, MemoryError> {
    let (c, nh, vp) = (config.channels as u64, config.num_heads as u64, config.padded_vocab_size as u64);
    // Per token: every tensor a layer saves (the layer table, with its attention output, at
    // most what a layer holds), once per layer; then, once, (elements, split over TP, 16-bit
    // under mixed precision) of the stage's input, the head's tensors and the backward's
    // scratch (`model::activations`).
    let overflow = || MemoryError::Overflow { what: "the activations", flags: BATCH_FLAGS };
    let layer = LAYER_TENSORS.iter().map(|t| {
        let width = t.per_token(c, nh, tp).ok_or_else(overflow)?;
        Ok((width, layers as u64, t.element == Element::Half))
    });
    let once: [(u64, bool, bool); 11] = [
        (c, false, false),   // the stage's input (embedding)
        (c, false, true),    // lnf
        (1, false, false),   // lnf mean
        (1, false, false),   // lnf rstd
        (vp, true, true),    // logits (and their gradient, in place)
        (1, false, false),   // losses
        (c, false, false),   // dres
        (c, false, false),   // dln
        (c, true, true),     // datty
        (3 * c, true, true), // dqkv
        (4 * c, true, true), // dfch
    ];
    let once = once.map(|(width, split, half)| Ok((if split { width.div_ceil(tp) } else { width }, 1, half)));
    let mut bytes = 0u64;
    for tensor in layer.chain(once) {
        let (width, stacked, half): (u64, u64, bool) = tensor?;
        let n = mul(
            mul(stacked, tokens, "the activations", BATCH_FLAGS)?,
            width,
            "the activations",
            BATCH_FLAGS,
        )?;
        let size = if half { storage.half_tensor_bytes() } else { 4 };
        bytes =
            add(bytes, mul(n, size, "the activations' bytes", BATCH_FLAGS)?, "the activations", BATCH_FLAGS)?;
    }
    add(bytes, mul(tokens, 8, "the batch's tokens", BATCH_FLAGS)?, "the activations", BATCH_FLAGS)
}

/// Bytes this process can still allocate, and where the figure comes from: the least of
/// `/proc/meminfo`'s MemAvailable and the room left under every memory limit of the cgroups
/// the process is in, from its own up to the root ([`cgroup_room`]). `None` where neither can
/// be read (not Linux): then nothing is checked.
pub fn available_memory() -> Option<(u64, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| mem_available(&t));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| cgroup_room(&t, Path::new("/sys/fs/cgroup")));
    match (meminfo, cgroup) {
        (Some(m), Some(c)) if c < m => Some((c, CGROUP_SOURCE)),
        (Some(m), _) => Some((m, "MemAvailable in /proc/meminfo")),
        (None, Some(c)) => Some((c, CGROUP_SOURCE)),
        (None, None) => None,
    }
}

const CGROUP_SOURCE: &str = "the tightest cgroup memory limit of this process less its usage";

/// The room left under the tightest memory limit of the cgroups that `proc_self_cgroup` (the
/// text of `/proc/self/cgroup`) puts this process in, with the cgroup file systems mounted at
/// `mount`: for cgroup v2 (the `0::PATH` line) `memory.max` less `memory.current` in
/// `mount/PATH` and each directory above it up to `mount`; for v1 (the line whose controllers
/// include `memory`) `memory.limit_in_bytes` less `memory.usage_in_bytes` in
/// `mount/memory/PATH` and up. The smallest room wins; `None` where no limit is set or read
/// (`max`, missing files). A path that leaves the mount (`..`, a cgroup namespace's view of
/// an outside cgroup) is read at the mount's root only.
pub fn cgroup_room(proc_self_cgroup: &str, mount: &Path) -> Option<u64> {
    let read = |p: &Path| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u64>().ok());
    let mut room: Option<u64> = None;
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let (root, limit_file, usage_file) = if controllers.is_empty() {
            (mount.to_path_buf(), "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (mount.join("memory"), "memory.limit_in_bytes", "memory.usage_in_bytes")
        } else {
            continue;
        };
        let parts: Vec<&str> = path.trim().split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        let mut dir = root.clone();
        if !parts.contains(&"..") {
            dir.extend(&parts);
        }
        loop {
            if let (Some(limit), Some(usage)) = (read(&dir.join(limit_file)), read(&dir.join(usage_file))) {
                let left = limit.saturating_sub(usage);
                room = Some(room.map_or(left, |r| r.min(left)));
            }
            if dir == root || !dir.pop() {
                break;
            }
        }
    }
    room
}

/// MemAvailable of a `/proc/meminfo` text, in bytes (the file gives kB).
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{gpt2_init, ParamLayout};
    use crate::train::{DecayStyle, LrSchedule, TrainSettings, Trainer};

    fn config(layers: usize, hidden: usize) -> GptConfig {
        GptConfig::new(64, 256, layers, 4, hidden, 128).unwrap()
    }

    /// What a one-rank trainer of `c` holds, from its own report of the buffers it allocated.
    fn allocated(
        c: GptConfig,
        micro_batch: usize,
        seq_len: usize,
        lanes: usize,
    ) -> crate::train::MemoryReport {
        allocated_on(&Device::Cpu, Precision::Fp32, c, micro_batch, seq_len, lanes)
    }

    /// [`allocated`] on `device` in `precision`.
    fn allocated_on(
        device: &Device,
        precision: Precision,
        c: GptConfig,
        micro_batch: usize,
        seq_len: usize,
        lanes: usize,
    ) -> crate::train::MemoryReport {
        let settings = TrainSettings {
            micro_batch,
            global_batch: micro_batch,
            seq_len,
            lr_schedule: LrSchedule {
                max_lr: 1e-3,
                min_lr: 0.0,
                warmup_iters: 0,
                decay_iters: 1,
                style: DecayStyle::Cosine,
            },
            adamw: Default::default(),
            clip_grad: 1.0,
            precision,
            loss_scale: Default::default(),
        };
        let init = gpt2_init(&ParamLayout::new(c), 1);
        Trainer::single_with_lanes(device, c, &init, settings, lanes).unwrap().memory()
    }

    #[test]
    fn the_estimate_counts_what_the_trainer_allocates() {
        let c = config(2, 64);
        let p = ParamLayout::new(c).len() as u64;
        assert_eq!(c.checked_num_params(), Some(p as usize));
        for (lanes, saves) in [(2, true), (1, false)] {
            let need = MemoryNeed::single(&c, 5, 32, lanes, saves, Storage::Fp32).unwrap();
            let got = allocated(c, 5, 32, lanes);
            assert_eq!(need.params, got.params as u64, "{lanes} lanes: parameters");
            assert_eq!(need.grads, got.grads as u64, "{lanes} lanes: the model's gradients and the lanes'");
            assert_eq!(need.optimizer, got.optimizer as u64, "{lanes} lanes: AdamW's moments");
            assert_eq!(need.activations, got.activations as u64, "{lanes} lanes: activations and scratch");
            assert_eq!(need.checkpoint, if saves { 12 * p } else { 0 });
            assert_eq!((need.compute_weights, got.compute_weights), (0, 0), "fp32 has no compute weights");
        }
    }

    /// Under `--bf16` the `Cpu` keeps f32 buffers of rounded values and `Emu` real 16-bit ones:
    /// the estimate counts both exactly, and on `Emu` every 16-bit tensor (per token: per layer
    /// `ln1, ln2` of `c`, `qkv` of `3c`, the attention output of `c`, `fch` and its GeLU of
    /// `4c` each; then `lnf`, the logits of `Vp` (their gradient written over them), and the
    /// backward's `datty, dqkv, dfch` of `8c`) and the compute weights take half the bytes.
    #[test]
    fn the_estimate_counts_the_16_bit_buffers_of_mixed_precision() {
        let c = config(2, 64);
        let p = ParamLayout::new(c).len() as u64;
        let (b, t) = (2, 16);
        let mut got = Vec::new();
        for (device, storage) in [(Device::Cpu, Storage::Rounded), (Device::Emu, Storage::Half)] {
            assert_eq!(Storage::of(&device, Precision::Bf16), storage);
            let need = MemoryNeed::single(&c, b, t, 1, false, storage).unwrap();
            let report = allocated_on(&device, Precision::Bf16, c, b, t, 1);
            let case = format!("{}", device.kind());
            assert_eq!(need.params, report.params as u64, "{case}: master weights");
            assert_eq!(need.grads, report.grads as u64, "{case}: gradients");
            assert_eq!(need.optimizer, report.optimizer as u64, "{case}: AdamW's moments");
            assert_eq!(need.compute_weights, report.compute_weights as u64, "{case}: compute weights");
            assert_eq!(need.activations, report.activations as u64, "{case}: activations and scratch");
            got.push(report);
        }
        let (cpu, emu) = (got[0], got[1]);
        assert_eq!(cpu.compute_weights as u64, 4 * p);
        assert_eq!(emu.compute_weights as u64, 2 * p);
        let (layers, width, tokens) = (c.num_layers as u64, c.channels as u64, (b * t) as u64);
        let vp = c.padded_vocab_size as u64;
        let half_elems = tokens * (width * (layers * (1 + 3 + 1 + 1 + 4 + 4) + 1 + 1 + 3 + 4) + vp);
        assert_eq!((cpu.activations - emu.activations) as u64, 2 * half_elems, "2 bytes saved per element");
    }

    #[test]
    fn too_little_memory_is_refused_with_both_figures_and_the_flag_to_lower() {
        let c = config(2, 64);
        let need = MemoryNeed::single(&c, 64, 64, 1, false, Storage::Fp32).unwrap();
        need.check(1, need.total(), "test", false).unwrap();
        let err = need.check(1, need.total() - 1, "MemAvailable in /proc/meminfo", false).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("available (MemAvailable in /proc/meminfo)"), "{msg}");
        assert!(msg.contains("--micro-batch-size"), "activations dominate: {msg}");
        // The loaders' shards count too.
        let mut with_data = need;
        with_data.data = 1 << 30;
        let err = with_data.check(1, need.total() + (1 << 29), "test", false).unwrap_err();
        assert!(err.to_string().contains("data 1.00 GiB"), "{err}");
        // Buffers that fit one by one but not together: each under the limit, the sum over.
        let big = config(8, 512);
        let need = MemoryNeed::single(&big, 1, 16, 1, true, Storage::Fp32).unwrap();
        let limit = need.total() - 1;
        assert!([need.params, need.grads, need.optimizer, need.checkpoint].iter().all(|&b| b < limit));
        let msg = need.check(1, limit, "test", false).unwrap_err().to_string();
        assert!(msg.contains("--hidden-size or --num-layers"), "{msg}");
        // Ranks on one machine add up.
        let msg = need.check(4, need.total() * 3, "test", true).unwrap_err().to_string();
        assert!(
            msg.contains("4 ranks on this machine") && msg.contains("--tensor-model-parallel-size"),
            "{msg}"
        );
    }

    #[test]
    fn absurd_shapes_are_errors_not_wraps() {
        let huge = GptConfig::new(64, 256, 1 << 40, 4, 1 << 20, 128);
        assert!(matches!(huge, Err(crate::model::ConfigError::TooLarge { .. })), "{huge:?}");
        let wide = GptConfig::new(64, 256, 1, 4, 1 << 33, 128);
        assert!(matches!(wide, Err(crate::model::ConfigError::TooLarge { .. })), "{wide:?}");
        let c = config(2, 64);
        let err = MemoryNeed::single(&c, usize::MAX / 2, 1 << 20, 1, false, Storage::Fp32).unwrap_err();
        assert!(matches!(err, MemoryError::Overflow { flags: BATCH_FLAGS, .. }), "{err}");
        let err =
            MemoryNeed::parallel_rank(&c, 1, 1, 1, false, usize::MAX / 4, 64, 1, Storage::Fp32).unwrap_err();
        assert!(err.to_string().contains("--micro-batch-size"), "{err}");
    }

    /// Cgroup trees as fixture files: the process's own cgroup, its parents up to the mount,
    /// v2 and v1, each limit less its usage, the smallest room winning.
    #[test]
    fn the_tightest_cgroup_limit_from_the_process_up_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path();
        let write = |rel: &str, name: &str, value: &str| {
            let d = m.join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(name), value).unwrap();
        };
        // v2: no limit at the root, 8 GiB on the slice, 2 GiB on the job (1.5 GiB used).
        write("", "memory.max", "max\n");
        write("system.slice", "memory.max", "8589934592\n");
        write("system.slice", "memory.current", "1073741824\n");
        write("system.slice/job_7", "memory.max", "2147483648\n");
        write("system.slice/job_7", "memory.current", "1610612736\n");
        let job = "0::/system.slice/job_7\n";
        assert_eq!(cgroup_room(job, m), Some(512 << 20), "the job's own limit, not the top one");
        // A parent with less room left than the child: the parent's room counts.
        write("system.slice", "memory.current", "8388608000\n");
        assert_eq!(cgroup_room(job, m), Some(8589934592 - 8388608000));
        // No limit anywhere on the path, or a path outside the mount: the root only.
        assert_eq!(cgroup_room("0::/user.slice\n", m), None);
        assert_eq!(cgroup_room("0::/../elsewhere\n", m), None);
        // v1: the memory controller's own hierarchy (not cpuacct's), up to its root.
        write("memory", "memory.limit_in_bytes", "9223372036854771712\n");
        write("memory", "memory.usage_in_bytes", "5000\n");
        write("memory/slurm/uid_0/job_9", "memory.limit_in_bytes", "4096\n");
        write("memory/slurm/uid_0/job_9", "memory.usage_in_bytes", "1024\n");
        let v1 = "4:cpu,cpuacct:/slurm/uid_0/job_9\n12:memory:/slurm/uid_0/job_9\n";
        assert_eq!(cgroup_room(v1, m), Some(3072));
        assert_eq!(cgroup_room("12:cpuacct:/slurm/uid_0/job_9\n", m), None);
        // Both hierarchies listed: the smallest room wins; malformed lines are skipped.
        let both = format!("garbage\n{v1}{job}");
        assert_eq!(cgroup_room(&both, m), Some(3072));
        assert_eq!(cgroup_room("", m), None);
    }

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       24684084 kB\nMemFree:  100 kB\nMemAvailable:   22222948 kB\n";
        assert_eq!(mem_available(text), Some(22222948 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        let (bytes, _) = available_memory().expect("this test runs on Linux");
        assert!(bytes > 0);
    }
}
