//! Hardware as data: GPUs and the links between them, with the peak rates, capacities and
//! achievable fractions of peak that a planner or a kernel time model needs.
//!
//! The built-in table (`builtin.toml`, compiled in) names the source of every figure in a
//! comment beside it. [`Hardware::with_user_file`] reads a TOML file of the same format that
//! adds entries or overrides single fields of existing ones:
//!
//! ```toml
//! [[gpu]]
//! name = "a100-80gb"      # an existing entry: only the fields given change
//! gemm_efficiency = 0.72
//!
//! [[link]]
//! name = "my-fabric"      # a new entry: every required field
//! gb_s = 40.0
//! latency_us = 6.0
//! efficiency = 0.9
//! scope = "inter-node"
//! source = "measured with nccl-tests on our cluster"
//! ```
//!
//! Field names carry their units and stay stable: other crates key on them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The built-in table's text.
/// The built-in GPU and link table (TOML, the format [`Hardware::merge_str`] reads).
pub const BUILTIN_TOML: &str = include_str!("builtin.toml");

/// Numeric precision of a computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// FP32 FMA on the CUDA cores / vector ALUs.
    Fp32,
    /// TF32 tensor cores (inputs rounded to 10 mantissa bits, fp32 accumulation).
    Tf32,
    /// BF16 tensor cores, fp32 accumulation.
    Bf16,
    /// FP16 tensor cores, fp32 accumulation.
    Fp16,
    /// FP8 (E4M3/E5M2) tensor cores.
    Fp8,
}

impl Precision {
    /// The name as the tables and flags write it (`fp32`, `bf16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
            Precision::Fp8 => "fp8",
        }
    }
}

/// Who makes a GPU (the model's terms differ: SMs or compute units, warps or wavefronts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// NVIDIA.
    Nvidia,
    /// AMD.
    Amd,
    /// Any other vendor.
    Other,
}

/// One GPU model. Peaks are dense (no structured sparsity), per GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Key, lower case: `a100-80gb`, `h100-sxm`.
    pub name: String,
    /// The maker.
    pub vendor: Vendor,
    /// Streaming multiprocessors (NVIDIA) or compute units (AMD).
    pub sms: u32,
    /// Maximum boost clock; `None` where the vendor does not publish it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost_clock_mhz: Option<f64>,
    /// Dense FP32 peak, TFLOP/s.
    pub fp32_tflops: f64,
    /// Dense TF32 tensor peak, TFLOP/s; `None` without TF32 units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf32_tflops: Option<f64>,
    /// Dense BF16 tensor peak, TFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bf16_tflops: Option<f64>,
    /// Dense FP16 tensor peak, TFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp16_tflops: Option<f64>,
    /// Dense FP8 tensor peak, TFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_tflops: Option<f64>,
    /// HBM capacity in GiB.
    pub memory_gib: f64,
    /// HBM bandwidth, 10^12 bytes/s.
    pub memory_tb_s: f64,
    /// L2 cache, MiB.
    pub l2_mib: f64,
    /// L2 read bandwidth, 10^12 bytes/s, where published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_tb_s: Option<f64>,
    /// Most shared memory (LDS on AMD) one SM can hold, KiB.
    pub smem_per_sm_kib: f64,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Resident warps (wavefronts on AMD) per SM.
    pub max_warps_per_sm: u32,
    /// Threads per warp: 32 on NVIDIA, 64 on AMD's CDNA.
    pub warp_size: u32,
    /// The link GPUs of a node talk over: a [`Link`] name.
    pub gpu_link: String,
    /// The datasheet's aggregate GPU-to-GPU bandwidth, both directions, 10^9 bytes/s.
    pub gpu_link_gb_s: f64,
    /// The GPU's host interface: a [`Link`] name.
    pub host_link: String,
    /// Board power, watts.
    pub tdp_w: f64,
    /// Fraction of the tensor peak large GEMMs sustain.
    pub gemm_efficiency: f64,
    /// Fraction of the tensor peak the attention core sustains.
    pub attention_efficiency: f64,
    /// Fraction of `memory_tb_s` bandwidth-bound kernels sustain.
    pub memory_efficiency: f64,
}

impl Gpu {
    /// Dense peak in TFLOP/s for `precision`, `None` where the GPU has no such unit.
    pub fn peak_tflops(&self, precision: Precision) -> Option<f64> {
        match precision {
            Precision::Fp32 => Some(self.fp32_tflops),
            Precision::Tf32 => self.tf32_tflops,
            Precision::Bf16 => self.bf16_tflops,
            Precision::Fp16 => self.fp16_tflops,
            Precision::Fp8 => self.fp8_tflops,
        }
    }

    /// Dense peak in FLOP/s for `precision`.
    pub fn peak_flops(&self, precision: Precision) -> Option<f64> {
        self.peak_tflops(precision).map(|t| t * 1e12)
    }

    /// HBM capacity in bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * GIB
    }

    /// HBM bandwidth in bytes/s.
    pub fn memory_bytes_per_s(&self) -> f64 {
        self.memory_tb_s * 1e12
    }

    /// Checks every figure for range, naming the entry and the field: peaks, capacities,
    /// bandwidths and counts positive and finite (in the units the planner turns them into,
    /// too: a capacity of 1e300 GiB is no number of bytes), the power and the cache sizes
    /// finite and at least 0, the efficiencies fractions in (0, 1].
    pub fn check(&self) -> Result<(), String> {
        let name = &self.name;
        let positive = [
            ("fp32_tflops", self.fp32_tflops, 1e12),
            ("memory_gib", self.memory_gib, GIB),
            ("memory_tb_s", self.memory_tb_s, 1e12),
            ("gpu_link_gb_s", self.gpu_link_gb_s, 1e9),
            ("sms", f64::from(self.sms), 1.0),
            ("regs_per_sm", f64::from(self.regs_per_sm), 1.0),
            ("max_threads_per_sm", f64::from(self.max_threads_per_sm), 1.0),
            ("max_warps_per_sm", f64::from(self.max_warps_per_sm), 1.0),
            ("warp_size", f64::from(self.warp_size), 1.0),
        ];
        for (field, v, unit) in positive {
            if !(v > 0.0 && (v * unit).is_finite()) {
                return Err(format!("[[gpu]] {name}: {field} must be a positive, finite number, not {v}"));
            }
        }
        let optional = [
            ("boost_clock_mhz", self.boost_clock_mhz, 1e6),
            ("tf32_tflops", self.tf32_tflops, 1e12),
            ("bf16_tflops", self.bf16_tflops, 1e12),
            ("fp16_tflops", self.fp16_tflops, 1e12),
            ("fp8_tflops", self.fp8_tflops, 1e12),
            ("l2_tb_s", self.l2_tb_s, 1e12),
        ];
        for (field, v, unit) in optional {
            if let Some(v) = v.filter(|v| !(*v > 0.0 && (v * unit).is_finite())) {
                return Err(format!(
                    "[[gpu]] {name}: {field} must be a positive, finite number where given, not {v}"
                ));
            }
        }
        for (field, v) in
            [("l2_mib", self.l2_mib), ("smem_per_sm_kib", self.smem_per_sm_kib), ("tdp_w", self.tdp_w)]
        {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("[[gpu]] {name}: {field} must be a finite number >= 0, not {v}"));
            }
        }
        for (field, v) in [
            ("gemm_efficiency", self.gemm_efficiency),
            ("attention_efficiency", self.attention_efficiency),
            ("memory_efficiency", self.memory_efficiency),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(format!("[[gpu]] {name}: {field} is a fraction of peak in (0, 1], not {v}"));
            }
        }
        if self.name.is_empty() || self.gpu_link.is_empty() || self.host_link.is_empty() {
            return Err(format!("[[gpu]] {name:?}: name, gpu_link and host_link must not be empty"));
        }
        Ok(())
    }
}

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Where a link sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// Between GPUs of one node (NVLink, PCIe).
    IntraNode,
    /// Between nodes (InfiniBand, Ethernet).
    InterNode,
}

/// An interconnect, as one GPU sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Key, lower case: `nvlink4`, `ib-ndr`.
    pub name: String,
    /// Bandwidth per direction one GPU can send while receiving as much, 10^9 bytes/s.
    pub gb_s: f64,
    /// Small-message time end to end (the alpha of the alpha-beta model), microseconds.
    pub latency_us: f64,
    /// Fraction of `gb_s` a large ring collective's bus bandwidth reaches.
    pub efficiency: f64,
    /// Within a node or between nodes.
    pub scope: Scope,
    /// Where the figures come from (a datasheet, a measurement).
    pub source: String,
}

impl Link {
    /// Bus bandwidth a large ring collective reaches, bytes/s.
    pub fn busbw_bytes_per_s(&self) -> f64 {
        self.gb_s * 1e9 * self.efficiency
    }

    /// [`Link::latency_us`] in seconds.
    pub fn latency_s(&self) -> f64 {
        self.latency_us * 1e-6
    }

    /// Checks the figures for range, naming the entry and the field: the bandwidth positive
    /// and finite, the latency finite and at least 0, the efficiency a fraction in (0, 1].
    pub fn check(&self) -> Result<(), String> {
        let name = &self.name;
        if !(self.gb_s > 0.0 && (self.gb_s * 1e9).is_finite()) {
            return Err(format!(
                "[[link]] {name}: gb_s must be a positive, finite number, not {}",
                self.gb_s
            ));
        }
        if !(self.latency_us.is_finite() && self.latency_us >= 0.0) {
            return Err(format!(
                "[[link]] {name}: latency_us must be a finite number >= 0, not {}",
                self.latency_us
            ));
        }
        if !(self.efficiency > 0.0 && self.efficiency <= 1.0) {
            return Err(format!(
                "[[link]] {name}: efficiency is a fraction in (0, 1], not {}",
                self.efficiency
            ));
        }
        if self.name.is_empty() {
            return Err("a [[link]] entry has an empty name".into());
        }
        Ok(())
    }
}

/// Why a hardware table could not be read, or has no entry of that name.
#[derive(Debug, thiserror::Error)]
pub enum HardwareError {
    /// The file could not be read.
    #[error("reading the hardware file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or an entry lacks or misstates a field.
    #[error("the hardware file {path} is not valid: {message}")]
    Parse {
        /// The file (or "the built-in table").
        path: String,
        /// What is wrong, as the TOML parser or the field checks say.
        message: String,
    },
    /// No GPU of that name.
    #[error("unknown GPU {name:?}; the table has: {known}. Add it with a [[gpu]] entry in a hardware file")]
    UnknownGpu {
        /// The name asked for.
        name: String,
        /// The names the table has, comma-separated.
        known: String,
    },
    /// No link of that name.
    #[error(
        "unknown link {name:?}; the table has: {known}. Add it with a [[link]] entry in a hardware file"
    )]
    UnknownLink {
        /// The name asked for.
        name: String,
        /// The names the table has, comma-separated.
        known: String,
    },
}

/// The file format: `[[gpu]]` and `[[link]]` arrays.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTables {
    #[serde(default)]
    gpu: Vec<toml::Table>,
    #[serde(default)]
    link: Vec<toml::Table>,
}

/// The GPU and link tables, by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Hardware {
    /// GPUs by their lower-case name.
    pub gpus: BTreeMap<String, Gpu>,
    /// Links by their lower-case name.
    pub links: BTreeMap<String, Link>,
}

impl Hardware {
    /// The built-in table.
    pub fn builtin() -> Self {
        let mut hw = Hardware { gpus: BTreeMap::new(), links: BTreeMap::new() };
        hw.merge_str(BUILTIN_TOML, "the built-in table").expect("the built-in hardware table parses");
        hw
    }

    /// The built-in table with `path`'s entries added or overriding.
    pub fn with_user_file(path: &Path) -> Result<Self, HardwareError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| HardwareError::Read { path: path.display().to_string(), source })?;
        let mut hw = Self::builtin();
        hw.merge_str(&text, &path.display().to_string())?;
        Ok(hw)
    }

    /// Adds the entries of `text` (named `origin` in errors): an entry whose `name` exists
    /// overrides only the fields it gives; a new one must give every required field. On an
    /// error the table is left as it was.
    pub fn merge_str(&mut self, text: &str, origin: &str) -> Result<(), HardwareError> {
        let mut next = self.clone();
        next.merge_in_place(text, origin)?;
        *self = next;
        Ok(())
    }

    /// [`Hardware::merge_str`]'s work, which may leave part of `text` merged on an error.
    fn merge_in_place(&mut self, text: &str, origin: &str) -> Result<(), HardwareError> {
        let parse = |message: String| HardwareError::Parse { path: origin.to_string(), message };
        let tables: FileTables = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
        let mut gpus = Vec::new();
        for entry in tables.gpu {
            let gpu: Gpu = merged(&self.gpus, entry, "gpu").map_err(parse)?;
            gpu.check().map_err(parse)?;
            gpus.push(gpu.name.clone());
            self.gpus.insert(gpu.name.clone(), gpu);
        }
        for entry in tables.link {
            let link: Link = merged(&self.links, entry, "link").map_err(parse)?;
            link.check().map_err(parse)?;
            self.links.insert(link.name.clone(), link);
        }
        // The links a GPU names, once the file's own links are in.
        for name in gpus {
            let gpu = &self.gpus[&name];
            for (field, link) in [("gpu_link", &gpu.gpu_link), ("host_link", &gpu.host_link)] {
                if !self.links.contains_key(&link.to_ascii_lowercase()) {
                    return Err(parse(format!(
                        "[[gpu]] {name}: {field} {link:?} is no [[link]] of the table (it has: {})",
                        self.links.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
            }
        }
        Ok(())
    }

    /// The GPU named `name` (case-insensitive), or [`HardwareError::UnknownGpu`] listing the
    /// known names.
    pub fn gpu(&self, name: &str) -> Result<&Gpu, HardwareError> {
        self.gpus.get(&name.to_ascii_lowercase()).ok_or_else(|| HardwareError::UnknownGpu {
            name: name.to_string(),
            known: self.gpus.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// The link named `name` (case-insensitive), or [`HardwareError::UnknownLink`].
    pub fn link(&self, name: &str) -> Result<&Link, HardwareError> {
        self.links.get(&name.to_ascii_lowercase()).ok_or_else(|| HardwareError::UnknownLink {
            name: name.to_string(),
            known: self.links.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }
}

/// `entry` laid over the existing entry of the same name (if any), as a `T`.
fn merged<T>(existing: &BTreeMap<String, T>, entry: toml::Table, kind: &str) -> Result<T, String>
where
    T: Serialize + for<'de> Deserialize<'de>,
{
    let name = match entry.get("name") {
        Some(toml::Value::String(s)) => s.to_ascii_lowercase(),
        _ => return Err(format!("a [[{kind}]] entry has no `name` string")),
    };
    let mut table = match existing.get(&name) {
        Some(old) => toml::Table::try_from(old).map_err(|e| format!("[[{kind}]] {name}: {e}"))?,
        None => toml::Table::new(),
    };
    table.extend(entry);
    table.insert("name".into(), toml::Value::String(name.clone()));
    toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| format!("[[{kind}]] {name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_has_the_required_gpus_and_their_links() {
        let hw = Hardware::builtin();
        for name in
            ["v100", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi250x", "mi300x"]
        {
            let gpu = hw.gpu(name).unwrap();
            hw.link(&gpu.gpu_link).unwrap();
            hw.link(&gpu.host_link).unwrap();
            assert!(gpu.peak_tflops(Precision::Fp16).is_some(), "{name}");
        }
        for name in [
            "nvlink2", "nvlink3", "nvlink4", "nvlink5", "pcie3", "pcie4", "pcie5", "ib-hdr", "ib-ndr",
            "ib-xdr",
        ] {
            hw.link(name).unwrap();
        }
    }

    #[test]
    fn peaks_agree_with_the_architecture_arithmetic() {
        let hw = Hardware::builtin();
        // FP32: SMs x 64 FP32 lanes (V100, A100) or 128 (H100) x 2 FLOP per FMA x boost clock.
        for (name, lanes) in [("v100", 64.0), ("a100-80gb", 64.0), ("h100-sxm", 128.0), ("h100-pcie", 128.0)]
        {
            let g = hw.gpu(name).unwrap();
            let derived = f64::from(g.sms) * lanes * 2.0 * g.boost_clock_mhz.unwrap() * 1e6 / 1e12;
            assert!((derived / g.fp32_tflops - 1.0).abs() < 0.01, "{name}: {derived} vs {}", g.fp32_tflops);
        }
        // A100 tensor cores: 108 SMs x 1024 dense fp16 FMA/clk x 2 x 1410 MHz = 312 TFLOP/s.
        let a100 = hw.gpu("a100-40gb").unwrap();
        assert!((108.0 * 1024.0 * 2.0 * 1410e6 / 1e12 / a100.bf16_tflops.unwrap() - 1.0).abs() < 0.01);
        // The source document's GPU table: A100 312, H100 (PCIe) 756, MI250X 383 fp16 TFLOP/s.
        assert_eq!(a100.fp16_tflops, Some(312.0));
        assert!((hw.gpu("h100-pcie").unwrap().fp16_tflops.unwrap() - 756.0).abs() < 1.0);
        assert_eq!(hw.gpu("mi250x").unwrap().fp16_tflops, Some(383.0));
        assert_eq!(hw.gpu("v100").unwrap().bf16_tflops, None);
    }

    #[test]
    fn a_user_entry_overrides_fields_and_adds_entries() {
        let mut hw = Hardware::builtin();
        let before = hw.gpu("a100-80gb").unwrap().clone();
        hw.merge_str(
            "[[gpu]]\nname = \"A100-80GB\"\ngemm_efficiency = 0.5\n\n[[link]]\nname = \"lab\"\ngb_s = 5.0\n\
             latency_us = 20.0\nefficiency = 0.9\nscope = \"inter-node\"\nsource = \"measured\"\n",
            "test",
        )
        .unwrap();
        let after = hw.gpu("a100-80gb").unwrap();
        assert_eq!(after.gemm_efficiency, 0.5);
        assert_eq!(after.memory_gib, before.memory_gib);
        assert_eq!(hw.link("lab").unwrap().gb_s, 5.0);
    }

    #[test]
    fn bad_user_entries_are_refused_with_the_field_named() {
        let mut hw = Hardware::builtin();
        let err = hw.merge_str("[[gpu]]\nname = \"new\"\nsms = 10\n", "my.toml").unwrap_err().to_string();
        assert!(err.contains("my.toml") && err.contains("missing field"), "{err}");
        let err = hw.merge_str("[[gpu]]\nname = \"h200\"\ngemm_efficiency = 1.5\n", "my.toml").unwrap_err();
        assert!(err.to_string().contains("gemm_efficiency"), "{err}");
        let err = hw.merge_str("[[gpu]]\nname = \"h200\"\nsmz = 1\n", "my.toml").unwrap_err();
        assert!(err.to_string().contains("smz"), "{err}");
        let err = hw.gpu("tpu-v5").unwrap_err().to_string();
        assert!(err.contains("a100-80gb") && err.contains("mi300x"), "{err}");
    }

    /// Every figure of a `[[gpu]]` and `[[link]]` entry out of range is refused, naming the
    /// file and the field, and the table is left as it was.
    #[test]
    fn every_figure_out_of_range_is_refused_naming_the_field() {
        let gpu_cases: &[(&str, &str)] = &[
            ("fp32_tflops", "-19.5"),
            ("fp32_tflops", "nan"),
            ("bf16_tflops", "-312.0"),
            ("bf16_tflops", "inf"),
            ("tf32_tflops", "0.0"),
            ("fp16_tflops", "-inf"),
            ("fp8_tflops", "nan"),
            ("boost_clock_mhz", "-1.0"),
            ("memory_gib", "0.0"),
            ("memory_gib", "1e308"),
            ("memory_tb_s", "-2.0"),
            ("gpu_link_gb_s", "nan"),
            ("l2_tb_s", "0.0"),
            ("l2_mib", "-1.0"),
            ("smem_per_sm_kib", "inf"),
            ("tdp_w", "-400.0"),
            ("sms", "0"),
            ("sms", "-5"),
            ("regs_per_sm", "0"),
            ("max_threads_per_sm", "0"),
            ("max_warps_per_sm", "0"),
            ("warp_size", "0"),
            ("gemm_efficiency", "1.5"),
            ("attention_efficiency", "0.0"),
            ("memory_efficiency", "nan"),
            ("gpu_link", "\"no-such-link\""),
            ("host_link", "\"\""),
        ];
        for (field, value) in gpu_cases {
            let mut hw = Hardware::builtin();
            let text = format!("[[gpu]]\nname = \"a100-80gb\"\n{field} = {value}\n");
            let err = hw.merge_str(&text, "my.toml").expect_err(&text).to_string();
            assert!(err.contains("my.toml") && err.contains(field), "{field} = {value}: {err}");
            assert_eq!(hw, Hardware::builtin(), "{field} = {value} changed the table");
        }
        for (field, value) in [
            ("gb_s", "-25.0"),
            ("gb_s", "inf"),
            ("gb_s", "0.0"),
            ("latency_us", "-1.0"),
            ("latency_us", "nan"),
            ("efficiency", "0.0"),
            ("efficiency", "1.01"),
        ] {
            let mut hw = Hardware::builtin();
            let text = format!("[[link]]\nname = \"ib-hdr\"\n{field} = {value}\n");
            let err = hw.merge_str(&text, "my.toml").expect_err(&text).to_string();
            assert!(err.contains("my.toml") && err.contains(field), "{field} = {value}: {err}");
        }
        // A new GPU may name a link the same file adds.
        let mut hw = Hardware::builtin();
        hw.merge_str(
            "[[gpu]]\nname = \"a100-80gb\"\ngpu_link = \"lab\"\n\n[[link]]\nname = \"lab\"\ngb_s = 5.0\n\
             latency_us = 20.0\nefficiency = 0.9\nscope = \"intra-node\"\nsource = \"measured\"\n",
            "my.toml",
        )
        .unwrap();
        for gpu in Hardware::builtin().gpus.values() {
            gpu.check().unwrap();
        }
        for link in Hardware::builtin().links.values() {
            link.check().unwrap();
        }
    }
}
