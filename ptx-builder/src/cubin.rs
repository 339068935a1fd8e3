//! Machine code at build time: `ptxas` assembles the PTX into one cubin per architecture.
//!
//! A module that carries only PTX is JIT-compiled by the driver at every load, which for a
//! large module costs minutes per process; a cubin loads as it is. NVIDIA's compatibility
//! rules (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility"):
//!
//! - a cubin for compute capability X.y runs on devices of capability X.z with z >= y, and on
//!   no other major version;
//! - PTX for `sm_XY` is JIT-compiled by the driver for any device of capability >= X.Y, which
//!   is how a module reaches architectures newer than its cubins.
//!
//! So the builder assembles the PTX for every architecture it is given (sm_80, sm_86, sm_89,
//! sm_90 for the trident module), in parallel, keeps each `ptxas -v` report (registers and
//! static shared memory per kernel, which the emulator's launch rules and the time model read),
//! and compresses each cubin with zlib (they shrink about six times) for embedding. Reports
//! and cubins are cached under the cargo target directory, keyed by a hash of the PTX, the
//! architecture and the `ptxas` version, so the check, test and release builds of one PTX
//! assemble it once.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::checks::number_before;
use crate::{describe, find_ptxas, Error};

/// One architecture's machine code, as [`assemble`] leaves it.
#[derive(Clone, Debug)]
pub struct Cubin {
    /// The architecture, `sm_80`.
    pub arch: String,
    /// The cubin, zlib-compressed.
    pub compressed: PathBuf,
    /// The `ptxas -v` report.
    pub report: PathBuf,
}

/// What [`assemble`] produced: cubins, or the reason there are none.
#[derive(Clone, Debug)]
pub enum Assembled {
    /// One cubin per architecture asked for, in that order.
    Cubins(Vec<Cubin>),
    /// `ptxas` was not found: the module carries PTX only.
    NoPtxas,
}

/// FNV-1a, 64-bit: a hash that stays the same across Rust versions, for the cache's keys.
fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The cargo target directory above `out_dir` (the one holding cargo's `CACHEDIR.TAG`).
fn target_root(out_dir: &Path) -> Option<PathBuf> {
    out_dir.ancestors().skip(1).find(|d| d.join("CACHEDIR.TAG").is_file()).map(Path::to_path_buf)
}

/// Assembles `ptx` for each of `archs` into `out_dir` (or takes them from the cache).
pub fn assemble(ptx: &Path, archs: &[String], out_dir: &Path) -> Result<Assembled, Error> {
    let Some(ptxas) = find_ptxas() else {
        return Ok(Assembled::NoPtxas);
    };
    let text = std::fs::read(ptx).map_err(|source| Error::Read { path: ptx.to_path_buf(), source })?;
    let version = Command::new(&ptxas)
        .arg("--version")
        .output()
        .map_err(|e| Error::Ptxas { arch: "any".into(), log: format!("{}: {e}", ptxas.display()) })?;
    let key = fnv1a(&version.stdout, fnv1a(&text, 0xcbf2_9ce4_8422_2325));
    let cache = target_root(out_dir).map(|t| t.join("trident-ptxas-cache"));
    let stem = ptx.file_stem().and_then(|s| s.to_str()).unwrap_or("module");

    let mut cubins = Vec::new();
    let mut running = Vec::new();
    for arch in archs {
        let cubin = Cubin {
            arch: arch.clone(),
            compressed: out_dir.join(format!("{stem}.{arch}.cubin.z")),
            report: out_dir.join(format!("{stem}.{arch}.ptxas.txt")),
        };
        let cached = cache.as_ref().map(|c| c.join(format!("{key:016x}-{arch}")));
        if let Some(c) = &cached {
            let (z, r) = (c.with_extension("cubin.z"), c.with_extension("ptxas.txt"));
            if z.is_file()
                && r.is_file()
                && copy(&z, &cubin.compressed).is_ok()
                && copy(&r, &cubin.report).is_ok()
            {
                cubins.push(cubin);
                continue;
            }
        }
        let raw = out_dir.join(format!("{stem}.{arch}.cubin"));
        // ptxas is single-threaded: the architectures assemble side by side.
        let child = Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .args(["-v", "-o"])
            .arg(&raw)
            .arg(ptx)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| Error::Ptxas { arch: arch.clone(), log: format!("{}: {e}", ptxas.display()) })?;
        running.push((cubin, raw, cached, child));
    }
    for (cubin, raw, cached, child) in running {
        let out = child
            .wait_with_output()
            .map_err(|e| Error::Ptxas { arch: cubin.arch.clone(), log: e.to_string() })?;
        if !out.status.success() {
            return Err(Error::Ptxas { arch: cubin.arch.clone(), log: describe(&out) });
        }
        let report =
            String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
        let bytes = std::fs::read(&raw).map_err(|source| Error::Read { path: raw.clone(), source })?;
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&bytes, 6);
        write(&cubin.compressed, &z)?;
        write(&cubin.report, report.as_bytes())?;
        let _ = std::fs::remove_file(&raw);
        if let Some(c) = cached {
            // The cache is an optimisation: a failure to fill it costs only time.
            if std::fs::create_dir_all(c.parent().unwrap_or(Path::new("."))).is_ok() {
                let _ = copy(&cubin.compressed, &c.with_extension("cubin.z"));
                let _ = copy(&cubin.report, &c.with_extension("ptxas.txt"));
            }
        }
        cubins.push(cubin);
    }
    cubins.sort_by_key(|c| archs.iter().position(|a| *a == c.arch));
    Ok(Assembled::Cubins(cubins))
}

fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to).map(|_| ())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    std::fs::write(path, bytes).map_err(|source| Error::Read { path: path.to_path_buf(), source })
}

/// The rows of the resource table (`kernel<TAB>arch<TAB>registers<TAB>static_smem_bytes`) in
/// one `ptxas -v` report.
pub fn resource_rows(report: &str, arch: &str) -> Vec<String> {
    let mut rows: Vec<(String, u32, u32)> = Vec::new();
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            rows.push((rest.split('\'').next().unwrap_or_default().to_string(), 0, 0));
        } else if let (Some(row), true) = (rows.last_mut(), line.contains("Used ")) {
            row.1 = number_before(line, " registers").unwrap_or(0);
            row.2 = number_before(line, " bytes smem").unwrap_or(0);
        }
    }
    rows.into_iter().map(|(k, r, s)| format!("{k}\t{arch}\t{r}\t{s}")).collect()
}

/// The Rust source that embeds what [`assemble`] produced: `CUBINS` (architecture, zlib-
/// compressed cubin), `PTXAS_REPORTS` (architecture, `ptxas -v` report), `RESOURCES` (the
/// table of registers and static shared memory, written to `<stem>.resources.tsv` beside the
/// cubins) and `NO_CUBINS` (why there are none).
pub fn include_source(assembled: &Assembled, out_dir: &Path, stem: &str) -> Result<String, Error> {
    let mut cubins = String::new();
    let mut reports = String::new();
    let mut table = String::new();
    let why = match assembled {
        Assembled::NoPtxas => "Some(\"ptxas was not found when this crate was built (install the \
             nvidia-cuda-nvcc-cu12 wheel or set TRIDENT_PTXAS): the driver JIT-compiles the PTX at \
             every load\")"
            .to_string(),
        Assembled::Cubins(list) => {
            for c in list {
                let report = std::fs::read_to_string(&c.report)
                    .map_err(|source| Error::Read { path: c.report.clone(), source })?;
                for row in resource_rows(&report, &c.arch) {
                    table += &row;
                    table.push('\n');
                }
                cubins += &format!(
                    "    ({:?}, include_bytes!({:?})),\n",
                    c.arch,
                    c.compressed.display().to_string()
                );
                reports +=
                    &format!("    ({:?}, include_str!({:?})),\n", c.arch, c.report.display().to_string());
            }
            "None".to_string()
        }
    };
    let table_path = out_dir.join(format!("{stem}.resources.tsv"));
    write(&table_path, table.as_bytes())?;
    Ok(format!(
        "// Generated by trident-ptx-builder.\n\
         /// `(architecture, cubin)` for each architecture `ptxas` assembled, each cubin zlib-compressed.\n\
         pub const CUBINS: &[(&str, &[u8])] = &[\n{cubins}];\n\
         /// `(architecture, ptxas -v report)` for each cubin.\n\
         pub const PTXAS_REPORTS: &[(&str, &str)] = &[\n{reports}];\n\
         /// Registers per thread and static shared memory per block of every kernel, per architecture:\n\
         /// `kernel<TAB>arch<TAB>registers<TAB>static_smem_bytes` lines.\n\
         pub const RESOURCES: &str = include_str!({:?});\n\
         /// Why there is no machine code, where there is none.\n\
         pub const NO_CUBINS: Option<&str> = {why};\n",
        table_path.display().to_string()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ptxas_report_becomes_resource_rows() {
        let report = "ptxas info    : Compiling entry function 'gelu' for 'sm_80'\n\
                      ptxas info    : Function properties for gelu\n\
                      ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n\
                      ptxas info    : Compiling entry function 'add' for 'sm_80'\n\
                      ptxas info    : Used 8 registers, 372 bytes cmem[0]\n";
        assert_eq!(resource_rows(report, "sm_80"), ["gelu\tsm_80\t40\t2048", "add\tsm_80\t8\t0"]);
    }

    #[test]
    fn the_cache_key_hash_is_fixed() {
        // FNV-1a's published test vector: the cache must not change with the Rust version.
        assert_eq!(fnv1a(b"a", 0xcbf2_9ce4_8422_2325), 0xaf63_dc4c_8601_ec8c);
    }
}
