//! The error type of the parallel layout, its groups and its links.

use trident_collectives::CommError;

/// A parallel layout that cannot run (the checks of [`ParallelConfig`](super::ParallelConfig),
/// each naming the Megatron-LM flags to change), or a failure of a collective, a link or a
/// rank thread.
#[derive(Debug, thiserror::Error)]
pub enum ParallelError {
    /// `world % (tp * pp) != 0`: the world does not split into whole data-parallel replicas
    /// ([`ParallelConfig::from_world`](super::ParallelConfig::from_world)).
    #[error(
        "--world-size {world} is not --tensor-model-parallel-size {tp} x --pipeline-model-parallel-size {pp} \
         x a data-parallel size: {world} is not a multiple of {}",
        tp * pp
    )]
    WorldSize {
        /// Ranks in all (`--world-size`).
        world: usize,
        /// `--tensor-model-parallel-size`.
        tp: usize,
        /// `--pipeline-model-parallel-size`.
        pp: usize,
    },
    /// A size that must be at least 1 is 0: the world, TP, PP, the micro- or the global
    /// batch.
    #[error("{what} must be at least 1")]
    Zero {
        /// The flag (or flags) holding the 0.
        what: &'static str,
    },
    /// `heads % tp != 0`: tensor parallelism splits whole attention heads.
    #[error("--num-attention-heads {heads} is not divisible by --tensor-model-parallel-size {tp}")]
    HeadsNotDivisible {
        /// `--num-attention-heads`.
        heads: usize,
        /// `--tensor-model-parallel-size`.
        tp: usize,
    },
    /// `layers % pp != 0`: every pipeline stage holds the same number of layers.
    #[error("--num-layers {layers} is not divisible by --pipeline-model-parallel-size {pp}")]
    LayersNotDivisible {
        /// `--num-layers`.
        layers: usize,
        /// `--pipeline-model-parallel-size`.
        pp: usize,
    },
    /// `global % (micro * dp) != 0`: a step is not a whole number of micro-batches on every
    /// data-parallel rank.
    #[error(
        "--global-batch-size {global} is not divisible by --micro-batch-size {micro} x data-parallel size {dp} \
         (= {})",
        micro * dp
    )]
    GlobalBatch {
        /// Sequences per step (`--global-batch-size`).
        global: usize,
        /// Sequences per micro-batch (`--micro-batch-size`).
        micro: usize,
        /// Data-parallel size (`world / (tp pp)`).
        dp: usize,
    },
    /// Interleaving asked for where it cannot split the stages: fewer than 2 stages, or a
    /// stage's `layers / pp` layers not divisible into `chunks` chunks.
    #[error(
        "--num-layers-per-virtual-pipeline-stage {}: the interleaved schedule splits each of the \
         --pipeline-model-parallel-size {pp} stages' {} layers into {chunks} chunks, which needs at least 2 \
         stages and the stage's layers divisible by the chunk size",
        *layers / (*pp * *chunks).max(1),
        *layers / (*pp).max(1)
    )]
    VirtualStages {
        /// `--num-layers`.
        layers: usize,
        /// `--pipeline-model-parallel-size`.
        pp: usize,
        /// Model chunks per stage asked for ([`ParallelConfig::virtual_stages`](super::ParallelConfig::virtual_stages)).
        chunks: usize,
    },
    /// Under interleaving, micro-batches per step not a multiple of PP (the schedule runs them
    /// in groups of `pp`).
    #[error(
        "the interleaved schedule runs micro-batches in groups of --pipeline-model-parallel-size {pp}: \
         {micro_batches} micro-batches per step (--global-batch-size / (--micro-batch-size x data-parallel \
         size)) is not a multiple of {pp}"
    )]
    InterleavedMicroBatches {
        /// Micro-batches per step: `global / (micro dp)`.
        micro_batches: usize,
        /// `--pipeline-model-parallel-size`.
        pp: usize,
    },
    /// At TP > 1, a padded vocabulary that is not a multiple of `128 tp` (each rank's rows
    /// a multiple of 128).
    #[error("the padded vocabulary {padded} is not a multiple of 128 x --tensor-model-parallel-size {tp}")]
    PaddedVocab {
        /// [`GptConfig::padded_vocab_size`](crate::model::GptConfig::padded_vocab_size).
        padded: usize,
        /// `--tensor-model-parallel-size`.
        tp: usize,
    },
    /// A use the groups and links cannot serve: a data-parallel bucket whose size differs from
    /// the layer's gradients, a pipeline link this stage does not have, a send thread that has
    /// stopped. The message says which.
    #[error("{0}")]
    Unsupported(String),
    /// A collective or point-to-point transfer failed (or a peer did: see
    /// [`PeerEcho`](super::PeerEcho)).
    #[error(transparent)]
    Comm(Box<CommError>),
    /// A device copy to or from a communication buffer failed.
    #[error(transparent)]
    Runtime(Box<trident_runtime::RuntimeError>),
    /// A group's device collectives cannot start or cannot run: ranks on different kinds of
    /// device or on one emulated device, a peer's buffer this rank cannot reach, a length or a
    /// collective that differs between ranks, a view on another device. The message names the
    /// ranks.
    #[error("{0}")]
    DeviceCollective(String),
    /// A device collective's kernel waited for `peer` past its deadline (the peer never
    /// arrived or stopped); the message names the collective, this rank and the peer.
    #[error("{message}")]
    PeerTimeout {
        /// The world rank that never arrived.
        peer: usize,
        /// What the kernel's status words say.
        message: String,
    },
    /// A rank thread of [`run_ranks`](super::run_ranks), or the data-parallel communication
    /// thread, panicked or stopped; the payload is its message.
    #[error("a rank thread panicked: {0}")]
    Panicked(String),
}

/// The wrapped errors are large; boxing keeps every `Result` of this module small.
macro_rules! boxed_from {
    ($($variant:ident($t:ty)),*) => {$(
        impl From<$t> for ParallelError {
            fn from(e: $t) -> Self {
                ParallelError::$variant(Box::new(e))
            }
        }
    )*};
}

boxed_from!(Comm(CommError), Runtime(trident_runtime::RuntimeError));

/// The result of the parallel layer's operations.
pub type Result<T> = std::result::Result<T, ParallelError>;
