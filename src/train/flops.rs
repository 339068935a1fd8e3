//! Model FLOPs and device peaks, for model FLOPs utilisation (MFU).

use trident_runtime::Device;

use crate::model::GptConfig;

/// Training FLOPs per token: `6 N` for the matrix multiplies of forward and backward over all
/// `N` parameters, plus `12 L C T` for attention's score and value products (the PaLM paper's
/// count, appendix B, which does not halve for causality).
pub fn train_flops_per_token(config: &GptConfig, num_params: usize, seq_len: usize) -> f64 {
    6.0 * num_params as f64 + 12.0 * (config.num_layers * config.channels * seq_len) as f64
}

/// Peak f32 FLOP/s of `device`, where we can estimate it.
///
/// `Cpu`: cores x clock x FLOPs per core per cycle, the last being 2 FMA units x 16 lanes x 2
/// with AVX-512, 2 x 8 x 2 with AVX2+FMA, 4 x 2 otherwise; the clock is the one the kernel
/// reports (`/proc/cpuinfo`, 2.5 GHz where unknown), so turbo clocks can push MFU past what
/// this peak allows. `None` for `Emu` (an emulator has no meaningful peak) and `Cuda` (left to
/// the GPU path).
pub fn peak_flops(device: &Device) -> Option<f64> {
    match device {
        Device::Cpu => Some(cpu_peak_flops()),
        Device::Emu | Device::Cuda(_) => None,
    }
}

fn cpu_peak_flops() -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let ghz = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map_or(2.5, |mhz| mhz / 1000.0);
    cores * ghz * 1e9 * flops_per_cycle()
}

#[cfg(target_arch = "x86_64")]
fn flops_per_cycle() -> f64 {
    if std::arch::is_x86_feature_detected!("avx512f") {
        64.0
    } else if std::arch::is_x86_feature_detected!("fma") {
        32.0
    } else {
        8.0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn flops_per_cycle() -> f64 {
    8.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_small_costs_about_six_n_per_token() {
        let c = GptConfig::new(1024, 50257, 12, 12, 768, 128).unwrap();
        let f = train_flops_per_token(&c, 124_475_904, 1024);
        assert_eq!(f, 6.0 * 124_475_904.0 + 12.0 * 12.0 * 768.0 * 1024.0);
        assert!(peak_flops(&Device::Cpu).unwrap() > 1e9);
    }
}
