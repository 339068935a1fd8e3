//! Pieces `train` and `sample` share: device choice, model presets, data and checkpoint paths.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::ValueEnum;
use trident_runtime::Device;

use crate::checkpoint::latest_checkpoint;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    Cpu,
    Emu,
    Cuda,
    /// cuda when a GPU is present, else cpu
    Auto,
}

pub fn open_device(arg: DeviceArg) -> anyhow::Result<Device> {
    Ok(match arg {
        DeviceArg::Cpu => Device::Cpu,
        DeviceArg::Emu => Device::Emu,
        DeviceArg::Cuda => Device::cuda(0)?,
        DeviceArg::Auto if Device::cuda_available() => Device::cuda(0)?,
        DeviceArg::Auto => Device::Cpu,
    })
}

/// A model shape: layers, hidden size, heads, positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
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
    if path.join("trainer.json").is_file() {
        return Ok(path.to_path_buf());
    }
    match latest_checkpoint(path).with_context(|| format!("reading checkpoints in {}", path.display()))? {
        Some((_, dir)) => Ok(dir),
        None => bail!("{} holds no checkpoint (expected trainer.json or step_* directories)", path.display()),
    }
}
