use trident_collectives::CommError;

#[derive(Debug, thiserror::Error)]
pub enum ParallelError {
    #[error(
        "--world-size {world} is not --tensor-model-parallel-size {tp} x --pipeline-model-parallel-size {pp} \
         x a data-parallel size: {world} is not a multiple of {}",
        tp * pp
    )]
    WorldSize { world: usize, tp: usize, pp: usize },
    #[error("{what} must be at least 1")]
    Zero { what: &'static str },
    #[error("--num-attention-heads {heads} is not divisible by --tensor-model-parallel-size {tp}")]
    HeadsNotDivisible { heads: usize, tp: usize },
    #[error("--num-layers {layers} is not divisible by --pipeline-model-parallel-size {pp}")]
    LayersNotDivisible { layers: usize, pp: usize },
    #[error(
        "--global-batch-size {global} is not divisible by --micro-batch-size {micro} x data-parallel size {dp} \
         (= {})",
        micro * dp
    )]
    GlobalBatch { global: usize, micro: usize, dp: usize },
    #[error(
        "--num-layers-per-virtual-pipeline-stage {}: the interleaved schedule splits each of the \
         --pipeline-model-parallel-size {pp} stages' {} layers into {chunks} chunks, which needs at least 2 \
         stages and the stage's layers divisible by the chunk size",
        *layers / (*pp * *chunks).max(1),
        *layers / (*pp).max(1)
    )]
    VirtualStages { layers: usize, pp: usize, chunks: usize },
    #[error(
        "the interleaved schedule runs micro-batches in groups of --pipeline-model-parallel-size {pp}: \
         {micro_batches} micro-batches per step (--global-batch-size / (--micro-batch-size x data-parallel \
         size)) is not a multiple of {pp}"
    )]
    InterleavedMicroBatches { micro_batches: usize, pp: usize },
    #[error("the padded vocabulary {padded} is not a multiple of 128 x --tensor-model-parallel-size {tp}")]
    PaddedVocab { padded: usize, tp: usize },
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Comm(Box<CommError>),
    #[error(transparent)]
    Runtime(Box<trident_runtime::RuntimeError>),
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

pub type Result<T> = std::result::Result<T, ParallelError>;
