//! Pieces `train` and `sample` share: device choice, model presets, data and checkpoint paths.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::ValueEnum;
use trident_runtime::Device;

use trident::checkpoint::llmc::MODEL_MAGIC;
use trident::checkpoint::{latest_checkpoint, read_llmc_model, Checkpoint};
use trident::model::GptConfig;

/// `--device`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    /// `cpu`: the host's cores, running the ops natively.
    Cpu,
    /// `emu`: the SIMT emulator, running the GPU kernels on the host.
    Emu,
    /// `cuda`: this local rank's GPU; `cuda:N`: GPU N.
    Cuda(Option<usize>),
    /// cuda when a GPU is present, else cpu
    Auto,
}

impl std::str::FromStr for DeviceArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "emu" => Ok(Self::Emu),
            "cuda" => Ok(Self::Cuda(None)),
            "auto" => Ok(Self::Auto),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(Self::Cuda(Some(n))),
                _ => {
                    Err(format!("unknown device `{s}`: use cpu, emu, cuda, cuda:N (a GPU's ordinal) or auto"))
                }
            },
        }
    }
}

/// Opens the device `--device` names. `auto` takes this local rank's GPU when the driver
/// finds one, else the Cpu; a `cuda` device that cannot be opened is an error that says
/// which flag to use instead.
pub fn open_device(arg: DeviceArg) -> anyhow::Result<Device> {
    Ok(match arg {
        DeviceArg::Cpu => Device::Cpu,
        DeviceArg::Emu => Device::Emu,
        DeviceArg::Cuda(Some(n)) => Device::cuda(n).with_context(|| {
            format!(
                "--device cuda:{n} needs that GPU (use --device cpu or emu, or install the NVIDIA driver)"
            )
        })?,
        DeviceArg::Cuda(None) => Device::cuda_for_local_rank()
            .context("--device cuda needs a GPU (use --device cpu or emu, or install the NVIDIA driver)")?,
        DeviceArg::Auto if Device::cuda_available() => Device::cuda_for_local_rank()?,
        DeviceArg::Auto => Device::Cpu,
    })
}

/// A model shape: layers, hidden size, heads, positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// 2 layers, 128 wide, 4 heads, 256 positions
    Nano,
    /// 4 layers, 256 wide, 4 heads, 256 positions
    Tiny,
    /// 6 layers, 384 wide, 6 heads, 512 positions
    Small,
    /// GPT-2 small: 12 layers, 768 wide, 12 heads, 1024 positions
    #[value(name = "gpt2-124m")]
    Gpt2_124m,
}

impl Preset {
    /// (layers, hidden, heads, max positions)
    pub fn shape(self) -> (usize, usize, usize, usize) {
        match self {
            Preset::Nano => (2, 128, 4, 256),
            Preset::Tiny => (4, 256, 4, 256),
            Preset::Small => (6, 384, 6, 512),
            Preset::Gpt2_124m => (12, 768, 12, 1024),
        }
    }
}

/// `--data` with `builtin` as the name of the built-in addition task.
pub fn data_spec(data: &str) -> String {
    match data.strip_prefix("builtin") {
        Some(rest) if rest.is_empty() || rest.starts_with(':') => format!("addition{rest}"),
        _ => data.to_string(),
    }
}

/// A checkpoint directory: `path` itself when it holds one, else the latest `step_*` in it.
pub fn checkpoint_dir(path: &Path) -> anyhow::Result<PathBuf> {
    if !path.exists() {
        bail!(
            "{} does not exist (expected a checkpoint directory, or one holding step_* directories)",
            path.display()
        );
    }
    if path.join("trainer.json").is_file() {
        return Ok(path.to_path_buf());
    }
    match latest_checkpoint(path).with_context(|| format!("reading checkpoints in {}", path.display()))? {
        Some((_, dir)) => Ok(dir),
        None => bail!("{} holds no checkpoint (expected trainer.json or step_* directories)", path.display()),
    }
}

/// What `--load` names: a Trident checkpoint to resume, or an llm.c model file to start from.
pub enum Start {
    /// A checkpoint directory: the model, optimizer, data position and step to resume.
    Checkpoint(Box<Checkpoint<serde_json::Value>>),
    /// An llm.c model file (`gpt2_124M.bin`): weights only, a fresh optimizer.
    LlmcModel {
        /// The file.
        path: PathBuf,
        /// The shape its header gives.
        config: GptConfig,
        /// Every parameter, in llm.c order ([`ParamLayout`](trident::model::ParamLayout)).
        params: Vec<f32>,
    },
}

impl Start {
    /// A file that begins with llm.c's model magic is an llm.c model; anything else is taken
    /// for a checkpoint directory.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if path.is_file() && starts_with_llmc_magic(path)? {
            let (config, params) =
                read_llmc_model(path).with_context(|| format!("loading {}", path.display()))?;
            return Ok(Self::LlmcModel { path: path.to_path_buf(), config, params });
        }
        if path.is_file() {
            bail!(
                "{} is a file but not an llm.c model (no magic {MODEL_MAGIC}); --load takes a \
                 checkpoint directory or an llm.c model file",
                path.display()
            );
        }
        let dir = checkpoint_dir(path)?;
        let ck = Checkpoint::load(&dir)
            .with_context(|| format!("loading {}{}", dir.display(), earlier_intact(&dir)))?;
        Ok(Self::Checkpoint(Box::new(ck)))
    }

    /// The model's shape, as saved.
    pub fn config(&self) -> GptConfig {
        match self {
            Self::Checkpoint(ck) => ck.config,
            Self::LlmcModel { config, .. } => *config,
        }
    }

    /// All parameters, in llm.c order.
    pub fn params(&self) -> &[f32] {
        match self {
            Self::Checkpoint(ck) => &ck.params,
            Self::LlmcModel { params, .. } => params,
        }
    }

    /// Names the source in messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Checkpoint(ck) => format!("the checkpoint of step {}", ck.step),
            Self::LlmcModel { path, .. } => format!("the llm.c model {}", path.display()),
        }
    }
}

/// For a checkpoint `dir` that failed to load: the latest earlier checkpoint beside it that
/// loads whole, as a note that `--load` can resume from it (empty when there is none).
pub(crate) fn earlier_intact(dir: &Path) -> String {
    let (Some(parent), Some(step)) =
        (dir.parent(), dir.file_name().and_then(|n| n.to_str()?.strip_prefix("step_")?.parse::<u64>().ok()))
    else {
        return String::new();
    };
    let earlier = trident::checkpoint::list_checkpoints(parent).unwrap_or_default();
    for (s, path) in earlier.iter().rev().filter(|(s, _)| *s < step).take(3) {
        if Checkpoint::<serde_json::Value>::load(path).is_ok() {
            return format!(
                " (damaged; the earlier checkpoint of step {s} is intact: --load {} resumes from it)",
                path.display()
            );
        }
    }
    String::new()
}

fn starts_with_llmc_magic(path: &Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(file.read_exact(&mut magic).is_ok() && i32::from_le_bytes(magic) == MODEL_MAGIC)
}

/// Parsers for numeric flags, so that clap refuses a bad value at parse time and names the flag
/// itself (`invalid value '-1' for '--lr <LR>': ...`).
pub mod flag {
    fn float(s: &str) -> Result<f32, String> {
        let v: f32 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
        if !v.is_finite() {
            return Err(format!("must be a finite number, not {v}"));
        }
        Ok(v)
    }

    /// A finite value above 0 (a learning rate, AdamW's epsilon).
    pub fn positive(s: &str) -> Result<f32, String> {
        let v = float(s)?;
        if v <= 0.0 {
            return Err(format!("must be above 0 (got {v})"));
        }
        Ok(v)
    }

    /// A finite value of at least 0 (weight decay, the gradient-norm limit, a temperature).
    pub fn non_negative(s: &str) -> Result<f32, String> {
        let v = float(s)?;
        if v < 0.0 {
            return Err(format!("must be 0 or more (got {v})"));
        }
        Ok(v)
    }

    /// A moment decay of AdamW: in [0, 1), since at 1 the bias correction divides by zero.
    pub fn decay(s: &str) -> Result<f32, String> {
        let v = float(s)?;
        if !(0.0..1.0).contains(&v) {
            return Err(format!(
                "must be in [0, 1) (got {v}); 0.9 for beta1, 0.95 or 0.999 for beta2 are usual"
            ));
        }
        Ok(v)
    }

    /// A count that must be at least 1 (a size, a batch, a number of layers).
    pub fn at_least_one(s: &str) -> Result<usize, String> {
        let v: usize = s.trim().parse().map_err(|_| format!("`{s}` is not a whole number"))?;
        if v == 0 {
            return Err("must be at least 1".into());
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceArg;

    #[test]
    fn device_flags_name_a_gpu_or_the_local_ranks() {
        assert_eq!("cuda".parse::<DeviceArg>(), Ok(DeviceArg::Cuda(None)));
        assert_eq!("cuda:3".parse::<DeviceArg>(), Ok(DeviceArg::Cuda(Some(3))));
        assert_eq!("emu".parse::<DeviceArg>(), Ok(DeviceArg::Emu));
        let e = "cuda:x".parse::<DeviceArg>().unwrap_err();
        assert!(e.contains("cuda:N"), "{e}");
    }
}
