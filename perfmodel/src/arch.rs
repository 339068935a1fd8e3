//! What the model needs of a GPU beyond the shared hardware table: per-SM pipe rates,
//! latencies and occupancy rules, keyed by the table's GPU name ([`Arch::for_gpu`]), and the
//! RTX A6000 — the GPU the SGEMM worklog measured on — added to the table ([`A6000_TOML`]).
//!
//! Rates are per SM per clock. Figures from NVIDIA's architecture whitepapers and the CUDA C++
//! Programming Guide (compute-capability tables) are marked as such; the few that no document
//! gives are CALIBRATED on the published measurements in `docs/TIME_MODEL.md` and say so.

use trident_hardware::{Gpu, Hardware, HardwareError};

/// The RTX A6000 as a `[[gpu]]` entry of the shared hardware table (`trident-hardware` lists
/// data-centre parts only). NVIDIA RTX A6000 datasheet (2021) and the NVIDIA Ampere GA102 GPU
/// architecture whitepaper (2021).
pub const A6000_TOML: &str = r#"
[[gpu]]
name = "rtx-a6000"
vendor = "nvidia"
sms = 84                    # datasheet: 10,752 CUDA cores = 84 SMs x 128
boost_clock_mhz = 1800      # datasheet boost clock
fp32_tflops = 38.7          # datasheet: 84 x 128 x 2 x 1800 MHz
tf32_tflops = 77.4          # datasheet 154.8 with sparsity, halved
bf16_tflops = 154.8         # datasheet "Tensor performance" 309.7 with sparsity, halved
fp16_tflops = 154.8
memory_gib = 48             # datasheet: 48 GB GDDR6 with ECC
memory_tb_s = 0.768         # datasheet: 768 GB/s
l2_mib = 6                  # GA102 whitepaper
smem_per_sm_kib = 100       # GA102 whitepaper / CUDA guide: up to 100 KB shared memory per SM (cc 8.6)
regs_per_sm = 65536
max_threads_per_sm = 1536   # CUDA guide, cc 8.6
max_warps_per_sm = 48
warp_size = 32
gpu_link = "nvlink3"
gpu_link_gb_s = 112.5       # datasheet: NVLink bridge, 112.5 GB/s bidirectional, pairs only
host_link = "pcie4"
tdp_w = 300
# cuBLAS SGEMM reaches 23.2 of the 38.7 fp32 TFLOP/s at 4096^2 (Boehm's worklog, 2022); no
# published tensor-core GEMM or attention figure for this card is used here, so the tensor
# fractions are the A100's; GDDR6 copy kernels reach ~85% of the pin bandwidth.
gemm_efficiency = 0.60
attention_efficiency = 0.35
memory_efficiency = 0.85
"#;

/// The shared hardware table with the GPUs this model adds ([`A6000_TOML`]).
pub fn hardware() -> Hardware {
    let mut hw = Hardware::builtin();
    hw.merge_str(A6000_TOML, "trident-perfmodel's A6000 entry").expect("the A6000 entry parses");
    hw
}

/// Short names accepted on the command line, and the table entry each stands for.
pub const ALIASES: &[(&str, &str)] =
    &[("h100", "h100-sxm"), ("a100", "a100-80gb"), ("a6000", "rtx-a6000"), ("h200", "h200")];

/// The table entry `name` names: an alias of [`ALIASES`] or a table name.
pub fn resolve(name: &str) -> &str {
    let lower = name.to_ascii_lowercase();
    ALIASES.iter().find(|(alias, _)| *alias == lower).map_or(name, |(_, full)| full)
}

/// Per-SM micro-architecture of one GPU, as the time model uses it.
#[derive(Clone, Debug, PartialEq)]
pub struct Arch {
    /// The `ptxas -arch` the kernel resource table is read for (`sm_80`, `sm_86`, `sm_90`).
    pub ptx_arch: &'static str,
    /// Clock the model converts cycles at, MHz: the table's boost clock unless the part is
    /// known to hold a lower one under load.
    pub clock_mhz: f64,
    /// Warp schedulers per SM; each issues one warp instruction per clock (whitepapers: 4).
    pub schedulers: f64,
    /// f32 FMA lanes per SM (GA100 64, GA102 and GH100 128; whitepapers).
    pub fp32_lanes: f64,
    /// Special-function-unit results per clock per SM (`ex2`, `lg2`, `rsqrt`, `tanh`): 16 on
    /// compute capability 8.0 to 9.0 (CUDA C++ Programming Guide, "Arithmetic Instructions",
    /// throughput of 32-bit reciprocal, reciprocal square root, base-2 logarithm and
    /// exponential).
    pub sfu_lanes: f64,
    /// Shared- and global-memory warp instructions the SM's memory-input path (MIO/LSU)
    /// accepts per clock. CALIBRATED on GA102 (worklog kernels 3 and 4): 1.0; assumed the same
    /// on GA100 and GH100, which have at least as many load/store units per SM.
    pub lsu_per_clk: f64,
    /// Shared-memory wavefronts per clock: 32 banks x 4 bytes = 128 B/clk (whitepapers).
    pub smem_wavefronts_per_clk: f64,
    /// 32-byte global sectors the L1 returns to the SM per clock. CALIBRATED on GA102 (worklog
    /// kernels 1 and 2): 1.0; assumed on the others.
    pub l1_sectors_per_clk: f64,
    /// Fraction of the table's dense bf16 tensor peak that `mma.sync.m16n8k16` can reach (the
    /// peak of Hopper needs `wgmma`; on Ampere `mma.sync` is the native instruction).
    pub mma_sync_fraction: f64,
    /// Fraction of the table's dense bf16 tensor peak that `wgmma.mma_async` sustains in a
    /// steady main loop (Hopper only; 0 elsewhere, where the instruction does not exist).
    /// FITTED to one published figure: the best public Hopper GEMM, about 808 TFLOP/s at
    /// 8192^3 on an H100 SXM (82% of the datasheet's 989; cuBLAS about 795), where epilogue,
    /// ring fill and wave tail cost a few percent, so the fraction stands mostly for the
    /// clock a power-limited H100 holds under tensor load (the datasheet's peak assumes
    /// 1830 MHz). 0.82; not validated kernel by kernel.
    pub wgmma_fraction: f64,
    /// Bytes per clock one SM's TMA unit moves between L2 and shared memory. An assumption
    /// (64 B/clk: the width of an SM's L2 read port on Ampere and Hopper as microbenchmarks
    /// report it; 132 SMs x 64 B x 1830 MHz = 15.5 TB/s, above every measured H100 L2
    /// bandwidth, so the term binds only for kernels that reuse little of what they load).
    pub tma_bytes_per_clk: f64,
    /// The `ptxas -arch` of the architecture-specific module (`sm_90a`) whose kernels run only
    /// here, where the resource table lists them (`None` where there is none).
    pub specific_ptx_arch: Option<&'static str>,
    /// Most resident blocks per SM (CUDA guide: 16 on cc 8.6, 32 on cc 8.0 and 9.0).
    pub max_blocks_per_sm: u32,
    /// Registers are allocated per warp in units of this many (CUDA occupancy calculator: 256).
    pub register_granule: u32,
    /// Shared memory the driver reserves per resident block, bytes (CUDA guide: 1 KB, cc 8.0+).
    pub smem_reserved_per_block: u32,
    /// Latency of a global load that misses L1, cycles: one round trip the warps of a block
    /// wait for at a barrier. CALIBRATED on GA102 (kernels 3-6): 600; A100 and H100 from
    /// published microbenchmarks of their L2/HBM latency (roughly 500-600 and 700-800 cycles).
    pub gmem_latency_cycles: f64,
    /// Independent global loads one warp keeps in flight in a loop without barriers (what an
    /// unrolled loop exposes; an assumption, not measured).
    pub loads_in_flight_per_warp: f64,
    /// Instructions the emulator cannot see (integer address arithmetic, loop control,
    /// predicates, moves) per counted instruction other than FMA and `mma` — in unrolled
    /// inner loops these feed the memory instructions, not the math. An assumption (one
    /// address computation per memory instruction), checked against kernels 3-6; the same
    /// compiler output is assumed on every GPU.
    pub uncounted_per_counted: f64,
    /// Fixed cost of a launch, microseconds (launch latency plus ramp; public microbenchmarks
    /// put back-to-back launches at 2-4 us).
    pub launch_us: f64,
}

impl Arch {
    /// The micro-architecture of table entry `gpu`, or an error naming the GPUs that have one.
    pub fn for_gpu(gpu: &Gpu) -> Result<Arch, ModelError> {
        let clock = gpu.boost_clock_mhz.unwrap_or(1000.0);
        let common = Arch {
            ptx_arch: "sm_90",
            clock_mhz: clock,
            schedulers: 4.0,
            fp32_lanes: 128.0,
            sfu_lanes: 16.0,
            lsu_per_clk: 1.0,
            smem_wavefronts_per_clk: 1.0,
            l1_sectors_per_clk: 1.0,
            mma_sync_fraction: 1.0,
            wgmma_fraction: 0.0,
            tma_bytes_per_clk: 64.0,
            specific_ptx_arch: None,
            max_blocks_per_sm: 32,
            register_granule: 256,
            smem_reserved_per_block: 1024,
            gmem_latency_cycles: 600.0,
            loads_in_flight_per_warp: 8.0,
            uncounted_per_counted: 1.0,
            launch_us: 3.0,
        };
        match gpu.name.as_str() {
            "rtx-a6000" => Ok(Arch { ptx_arch: "sm_86", max_blocks_per_sm: 16, ..common }),
            "a100-40gb" | "a100-80gb" => Ok(Arch { ptx_arch: "sm_80", fp32_lanes: 64.0, ..common }),
            // Hopper: tensor peaks are quoted at 1830 MHz (see the table's comment); mma.sync
            // reaches about two thirds of the wgmma peak (an estimate from public Hopper GEMM
            // worklogs, which top out near 660 TFLOP/s with mma.sync-class kernels).
            "h100-sxm" | "h100-pcie" | "h200" => Ok(Arch {
                clock_mhz: clock.min(1830.0),
                mma_sync_fraction: 0.66,
                wgmma_fraction: 0.82,
                specific_ptx_arch: Some("sm_90a"),
                gmem_latency_cycles: 800.0,
                ..common
            }),
            other => Err(ModelError::NoArch {
                gpu: other.to_string(),
                known: "rtx-a6000, a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200".into(),
            }),
        }
    }
}

/// Why a prediction cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The GPU is not in the hardware table.
    #[error(transparent)]
    Hardware(#[from] HardwareError),
    /// The GPU is in the table, but the model has no micro-architecture for it.
    #[error("the time model has no micro-architecture data for GPU `{gpu}`; it knows {known}")]
    NoArch {
        /// The GPU's name.
        gpu: String,
        /// The GPUs it has data for, comma-separated.
        known: String,
    },
    /// Not one block of the kernel fits an SM.
    #[error(
        "kernel `{kernel}` cannot be resident on {gpu}: {why}; reduce its registers, shared \
         memory or block size"
    )]
    DoesNotFit {
        /// The kernel's name.
        kernel: String,
        /// The GPU's name.
        gpu: String,
        /// Which resource runs out.
        why: String,
    },
    /// The kernel resource table lacks the kernel for that architecture.
    #[error(
        "no register count for kernel `{kernel}` on {arch} in the kernel resource table; \
         regenerate it with `TRIDENT_UPDATE_RESOURCES=1 cargo test --test kernel_resources`"
    )]
    NoResources {
        /// The kernel's name.
        kernel: String,
        /// The architecture (`sm_90`).
        arch: String,
    },
}
