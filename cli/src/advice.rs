//! What the command line adds to a library's error: the libraries say what went wrong, in
//! their own terms; this says which flag of the `trident` command changes it.

use trident_hardware::HardwareError;

use trident::checkpoint::CheckpointError;
use trident::ops::OpsError;
use trident_data::DataError;

/// An error and the advice the command line gives with it; it prints as the error's whole
/// chain (`{:#}`) followed by the advice.
#[derive(Debug)]
struct Advised {
    error: anyhow::Error,
    advice: String,
}

impl std::fmt::Display for Advised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}; {}", self.error, self.advice)
    }
}

impl std::error::Error for Advised {}

/// `error` with the advice for the first error in its chain that has one, else unchanged.
pub(super) fn advise(error: anyhow::Error) -> anyhow::Error {
    match error.chain().find_map(advice) {
        Some(advice) => anyhow::Error::new(Advised { error, advice }),
        None => error,
    }
}

/// The error a transparent wrapper holds. `#[error(transparent)]` hands `source()` on to the
/// wrapped error's own source, so the wrapped error itself never appears in a chain.
fn wrapped<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a (dyn std::error::Error + 'static)> {
    use trident::llmc::LlmcError;
    use trident::model::ModelError;
    use trident::parallel::ParallelError;
    use trident::train::TrainError;
    if let Some(e) = e.downcast_ref::<TrainError>() {
        return match e {
            TrainError::Model(e) => Some(&**e),
            TrainError::Ops(e) => Some(&**e),
            TrainError::Data(e) => Some(&**e),
            TrainError::Parallel(e) => Some(&**e),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<ModelError>() {
        return match e {
            ModelError::Ops(e) => Some(e),
            ModelError::Parallel(e) => Some(e),
            _ => None,
        };
    }
    if let Some(ParallelError::Comm(e)) = e.downcast_ref::<ParallelError>() {
        return Some(&**e);
    }
    if let Some(e) = e.downcast_ref::<LlmcError>() {
        return match e {
            LlmcError::Checkpoint(e) => Some(e),
            LlmcError::Data(e) => Some(e),
            LlmcError::Model(e) => Some(e),
            LlmcError::Ops(e) => Some(e),
            LlmcError::Train(e) => Some(e),
            _ => None,
        };
    }
    None
}

/// The flag that changes what `e`, or the error it transparently wraps, reports.
fn advice(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    if let Some(inner) = wrapped(e) {
        return advice(inner);
    }
    if let Some(trident::train::TrainError::NonFinite { .. }) = e.downcast_ref::<trident::train::TrainError>()
    {
        return Some("lower --lr or set --clip-grad".into());
    }
    if let Some(e) = e.downcast_ref::<OpsError>() {
        return match e {
            OpsError::Unsupported { .. } => Some("use --device cpu".into()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<DataError>() {
        return match e {
            DataError::TooFewTokens { .. } => Some("use more data or a shorter --seq-length".into()),
            DataError::ResumeMismatch { setting: "sequence length", saved, .. } => {
                Some(format!("resume with --seq-length {saved}"))
            }
            DataError::ResumeMismatch { setting: "data order", saved, .. } => {
                Some(format!("resume with --data-order {saved}"))
            }
            DataError::InvalidSpec { .. } => Some("check --data".into()),
            DataError::AdditionTokenizer => Some("drop --tokenizer".into()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<HardwareError>() {
        return match e {
            HardwareError::UnknownGpu { .. } | HardwareError::UnknownLink { .. } => {
                Some("pass that file with --hardware".into())
            }
            _ => None,
        };
    }
    if let Some(CheckpointError::DiskFull { .. }) = e.downcast_ref::<CheckpointError>() {
        return Some("free space or pass another --save directory".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_get_the_flag_that_fixes_them_through_transparent_wrappers() {
        let ops = OpsError::Unsupported { op: "attention", device: trident_runtime::DeviceKind::Emu };
        let wrapped = trident::train::TrainError::from(trident::model::ModelError::from(ops));
        let text = format!("{:#}", advise(anyhow::Error::new(wrapped).context("training")));
        assert_eq!(text, "training: attention is not implemented on emu yet; use --device cpu");
        let data =
            DataError::ResumeMismatch { setting: "data order", saved: "llmc".into(), now: "trident".into() };
        let text = advise(data.into()).to_string();
        assert!(text.ends_with("this run uses trident; resume with --data-order llmc"), "{text}");
        let plain = advise(anyhow::anyhow!("no advice"));
        assert_eq!(plain.to_string(), "no advice");
    }
}
