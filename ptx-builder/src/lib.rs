//! Compiles a crate of SIMT Rust kernels to PTX from a build script.
//!
//! The nvptx64 target needs a nightly toolchain with the `rust-src` component (the kernels are
//! built with `-Zbuild-std=core`), while the crate that embeds the PTX builds on stable. A
//! build script therefore runs a *nested* cargo on the pinned nightly:
//!
//! - the channel comes from the kernels crate's `rust-toolchain.toml` (or the
//!   `TRIDENT_NVPTX_TOOLCHAIN` variable);
//! - when that toolchain or its `rust-src` is missing, the builder installs it through rustup
//!   (`rustup toolchain install CHANNEL --component rust-src --profile minimal`) and says so
//!   with a cargo warning; `TRIDENT_NO_TOOLCHAIN_INSTALL=1` turns the install off, and a failed
//!   install ends the build with the exact command to run;
//! - the nested cargo gets a clean environment (no `CARGO*`/`RUST*` variable of the outer build,
//!   which would pin it to the outer toolchain; `RUSTUP_HOME` and `CARGO_HOME` are kept) and a
//!   target directory of its own under `OUT_DIR` (the outer cargo holds the lock on `target/`);
//! - cargo is told to rerun the build script when any file of the kernels crate changes.
//!
//! A downstream `build.rs`:
//!
//! ```no_run
//! // The whole `build.rs` of a crate whose kernels crate is in `kernels/`:
//! let ptx = trident_ptx_builder::PtxBuild::new("kernels")
//!     .arch("sm_90")
//!     .output("my_kernels.ptx")
//!     .build()
//!     .unwrap_or_else(|e| trident_ptx_builder::fail(&e));
//! // `ptx` is `$OUT_DIR/my_kernels.ptx`; the crate embeds it with
//! // `include_str!(concat!(env!("OUT_DIR"), "/my_kernels.ptx"))`.
//! assert!(ptx.ends_with("my_kernels.ptx"));
//! ```
//!
//! With [`PtxBuild::cubins`] the builder also assembles the PTX into machine code for each
//! architecture named, with NVIDIA's `ptxas` (see [`find_ptxas`]), and writes a Rust file that
//! embeds the cubins beside the PTX (module [`cubin`]); where `ptxas` is missing the build keeps
//! the PTX alone and says so with a cargo warning.
//!
//! The nested build turns off rustc's MIR jump threading (`-Zmir-enable-passes=-JumpThreading`):
//! it can copy a block that ends in an aligned barrier (`bar.sync`, which Rust's inline
//! assembly cannot mark convergent) into both arms of a divergent branch, after which the
//! threads of a block wait at different barrier instructions, which the PTX ISA leaves
//! undefined for `.aligned` barriers (rust-lang/rust#137086).
//!
//! The kernels crate is a plain `rlib` with `#![cfg_attr(target_arch = "nvptx64", no_std)]`
//! and its nightly features behind the same `cfg_attr`; see `examples/custom-kernel/` in the
//! Trident repository for a complete one.

#![warn(missing_docs)]

use std::env;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod checks;
pub mod cubin;

/// The target the kernels are compiled for.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// Variable that names the toolchain to use instead of the kernels crate's `rust-toolchain.toml`.
pub const TOOLCHAIN_VAR: &str = "TRIDENT_NVPTX_TOOLCHAIN";

/// Variable that, set to `1`, stops the builder from installing a missing toolchain.
pub const NO_INSTALL_VAR: &str = "TRIDENT_NO_TOOLCHAIN_INSTALL";

/// Why a PTX build failed; its `Display` says what to do.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file the build needs could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `rust-toolchain.toml` names no channel.
    NoChannel(PathBuf),
    /// `rustup` could not be run at all.
    NoRustup(std::io::Error),
    /// The pinned toolchain (or its `rust-src`) is missing and was not installed.
    Missing {
        /// The toolchain channel.
        toolchain: String,
        /// What is missing and why it was not installed.
        why: String,
    },
    /// The nested nvptx64 build failed.
    Compile {
        /// The toolchain channel.
        toolchain: String,
        /// The nested cargo's exit status and standard error.
        log: String,
    },
    /// `ptxas` rejected the PTX for an architecture.
    Ptxas {
        /// The architecture.
        arch: String,
        /// `ptxas`'s exit status and output.
        log: String,
    },
    /// The build succeeded but wrote no usable PTX.
    NoPtx {
        /// Where the PTX was expected.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read { path, source } => write!(f, "could not read {}: {source}", path.display()),
            Error::NoChannel(path) => {
                write!(f, "{} names no `channel = \"...\"` for the nvptx64 toolchain", path.display())
            }
            Error::NoRustup(e) => write!(
                f,
                "the GPU kernels are built with a pinned nightly toolchain, run through rustup, \
                 but `rustup` could not be started ({e}). Install rustup (https://rustup.rs), \
                 or put it on PATH"
            ),
            Error::Missing { toolchain, why } => write!(
                f,
                "the GPU kernels need the Rust toolchain `{toolchain}` with the `rust-src` \
                 component, and {why}. Install it with\n\n    \
                 rustup toolchain install {toolchain} --component rust-src --profile minimal\n\n\
                 then build again (or set {TOOLCHAIN_VAR} to an installed nightly that has rust-src)"
            ),
            Error::Compile { toolchain, log } => {
                write!(f, "the nvptx64 build of the kernels with `{toolchain}` failed:\n\n{log}")
            }
            Error::Ptxas { arch, log } => {
                write!(f, "ptxas could not assemble the kernels' PTX for {arch}:\n\n{log}")
            }
            Error::NoPtx { path, why } => {
                write!(f, "the nvptx64 build wrote no usable PTX at {}: {why}", path.display())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Read { source, .. } | Error::NoRustup(source) => Some(source),
            _ => None,
        }
    }
}

/// Ends a build script with `error` on standard error (cargo shows it), exit status 1.
pub fn fail(error: &Error) -> ! {
    eprintln!("\nerror: {error}\n");
    std::process::exit(1)
}

/// One PTX build of a kernels crate: configure, then [`PtxBuild::build`].
///
/// The toolchain comes from the kernels crate's `rust-toolchain.toml`; a crate without one is
/// refused before anything is compiled or installed:
///
/// ```
/// use trident_ptx_builder::{Error, PtxBuild};
///
/// let dir = std::env::temp_dir().join(format!("ptx-build-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("rust-toolchain.toml"), "[toolchain]\ncomponents = [\"rust-src\"]\n").unwrap();
/// if std::env::var_os("TRIDENT_NVPTX_TOOLCHAIN").is_none() {
///     let err = PtxBuild::new(&dir).arch("sm_90").output("mine.ptx").build().unwrap_err();
///     assert!(matches!(err, Error::NoChannel(_)), "{err}");
/// }
/// std::fs::write(dir.join("rust-toolchain.toml"), "[toolchain]\nchannel = \"nightly-2025-01-01\"\n").unwrap();
/// if std::env::var_os("TRIDENT_NVPTX_TOOLCHAIN").is_none() {
///     assert_eq!(trident_ptx_builder::toolchain_channel(&dir).unwrap(), "nightly-2025-01-01");
/// }
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct PtxBuild {
    crate_dir: PathBuf,
    arch: String,
    output: String,
    watch: Vec<PathBuf>,
    features: Vec<String>,
    cubins: Vec<String>,
    max_threads: Vec<(String, u32)>,
}

impl PtxBuild {
    /// A build of the kernels crate in `crate_dir` (relative paths are taken from the calling
    /// package's `CARGO_MANIFEST_DIR`), for `sm_90`, written to `$OUT_DIR/kernels.ptx`.
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        let dir = crate_dir.as_ref();
        let crate_dir = match env::var_os("CARGO_MANIFEST_DIR") {
            Some(root) if dir.is_relative() => PathBuf::from(root).join(dir),
            _ => dir.to_path_buf(),
        };
        PtxBuild {
            crate_dir,
            arch: "sm_90".into(),
            output: "kernels.ptx".into(),
            watch: Vec::new(),
            features: Vec::new(),
            cubins: Vec::new(),
            max_threads: Vec::new(),
        }
    }

    /// The GPU architecture (`-Ctarget-cpu`), e.g. `sm_80`, `sm_90`, `sm_90a`.
    pub fn arch(mut self, arch: &str) -> Self {
        self.arch = arch.into();
        self
    }

    /// A target feature for the nvptx64 backend (`-Ctarget-feature`), e.g. `+ptx78` for a PTX
    /// ISA version above the architecture's minimum (sm_80's is 7.0), which inline assembly of
    /// newer instructions needs.
    pub fn target_feature(mut self, feature: &str) -> Self {
        self.features.push(feature.into());
        self
    }

    /// Also assemble the PTX with `ptxas` into a cubin for each of `archs` (`sm_80`, `sm_86`,
    /// ...; each at least [`PtxBuild::arch`]) and write `$OUT_DIR/<output stem>.machine.rs`,
    /// which the crate includes with
    /// `include!(concat!(env!("OUT_DIR"), "/<output stem>.machine.rs"))` and which defines
    /// `CUBINS`, `PTXAS_REPORTS`, `RESOURCES` and `NO_CUBINS` (see [`cubin::include_source`]).
    /// Where no `ptxas` is found the file still exists, with no cubins, and the build warns.
    pub fn cubins(mut self, archs: &[&str]) -> Self {
        self.cubins = archs.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Declares that the kernels whose names start with `prefix` run with at most `threads`
    /// threads per block: the builder writes `.maxntid threads, 1, 1` into each one's `.entry`
    /// (PTX ISA, "Performance-Tuning Directives: .maxntid"), which Rust has no attribute for.
    /// `ptxas` then keeps their registers within what that many threads may use, and can
    /// honour `setmaxnreg`, which it otherwise ignores for want of the register count at entry.
    pub fn max_threads(mut self, prefix: &str, threads: u32) -> Self {
        self.max_threads.push((prefix.into(), threads));
        self
    }

    /// The file name of the PTX under `OUT_DIR`.
    pub fn output(mut self, file_name: &str) -> Self {
        self.output = file_name.into();
        self
    }

    /// Another directory or file whose changes rebuild the PTX (a path dependency of the
    /// kernels crate, say); the kernels crate's own `src/`, `Cargo.toml` and
    /// `rust-toolchain.toml` are always watched.
    pub fn watch(mut self, path: impl AsRef<Path>) -> Self {
        self.watch.push(path.as_ref().to_path_buf());
        self
    }

    /// Builds the PTX, installing the pinned toolchain first when it is missing, and returns
    /// the path of the PTX file. Prints the `cargo:rerun-if-*` lines for the build script.
    pub fn build(self) -> Result<PathBuf, Error> {
        let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_else(|| OsString::from("target")));
        rerun_if_changed(&self.crate_dir.join("src"));
        for f in ["Cargo.toml", "rust-toolchain.toml"] {
            println!("cargo:rerun-if-changed={}", self.crate_dir.join(f).display());
        }
        for p in &self.watch {
            rerun_if_changed(p);
        }
        println!("cargo:rerun-if-env-changed={TOOLCHAIN_VAR}");
        println!("cargo:rerun-if-env-changed={NO_INSTALL_VAR}");
        println!("cargo:rerun-if-env-changed=TRIDENT_PTXAS");

        let toolchain = toolchain_channel(&self.crate_dir)?;
        ensure_toolchain(&toolchain)?;

        let ptx = out_dir.join(&self.output);
        // One target directory per output, so that two builds of one crate with different
        // flags (an sm_80 and an sm_90a module, say) neither wait for each other's lock nor
        // rebuild each other's artifacts.
        let stem = Path::new(&self.output).file_stem().and_then(|s| s.to_str()).unwrap_or("kernels");
        let target_dir = out_dir.join(format!("nvptx-target-{stem}"));
        let output = nested(&toolchain, "cargo")
            .current_dir(&self.crate_dir)
            .args(["rustc", "--release", "--lib", "--target", TARGET, "-Zbuild-std=core"])
            .arg("--target-dir")
            .arg(&target_dir)
            // An outer release profile may keep debug info for host profiling; PTX needs none.
            .args(["--config", "profile.release.debug=0", "--config", "profile.release.codegen-units=1"])
            .arg("--")
            .arg(format!("--emit=asm={}", ptx.display()))
            .env("RUSTFLAGS", self.rustflags())
            .output()
            .map_err(Error::NoRustup)?;
        if !output.status.success() {
            return Err(Error::Compile { toolchain, log: describe(&output) });
        }
        let text = std::fs::read_to_string(&ptx)
            .map_err(|e| Error::NoPtx { path: ptx.clone(), why: e.to_string() })?;
        if !text.contains(".entry") {
            return Err(Error::NoPtx { path: ptx, why: "the module has no kernel entry point".into() });
        }
        if !self.max_threads.is_empty() {
            let patched = with_max_threads(&text, &self.max_threads);
            std::fs::write(&ptx, patched).map_err(|source| Error::Read { path: ptx.clone(), source })?;
        }
        if !self.cubins.is_empty() {
            let assembled = cubin::assemble(&ptx, &self.cubins, &out_dir)?;
            if matches!(assembled, cubin::Assembled::NoPtxas) {
                println!(
                    "cargo:warning=ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set \
                     TRIDENT_PTXAS): {} carries PTX only, which the driver JIT-compiles at every load",
                    self.output
                );
            }
            let include = out_dir.join(format!("{stem}.machine.rs"));
            let source = cubin::include_source(&assembled, &out_dir, stem)?;
            std::fs::write(&include, source).map_err(|source| Error::Read { path: include, source })?;
        }
        Ok(ptx)
    }

    /// The nested build's `RUSTFLAGS`.
    fn rustflags(&self) -> String {
        let mut flags = format!(
            "-Zunstable-options -Cpanic=immediate-abort -Ctarget-cpu={} -Ccodegen-units=1 \
             -Zmir-enable-passes=-JumpThreading",
            self.arch
        );
        for f in &self.features {
            flags += &format!(" -Ctarget-feature={f}");
        }
        flags
    }
}

/// `ptx` with `.maxntid N, 1, 1` after the parameter list of every entry whose name starts
/// with one of the prefixes of `bounds` (the first that matches gives N).
fn with_max_threads(ptx: &str, bounds: &[(String, u32)]) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut pending = None;
    for line in ptx.lines() {
        out.push_str(line);
        out.push('\n');
        if let Some(name) = line.split(".entry ").nth(1) {
            let name = name.split('(').next().unwrap_or_default();
            pending = bounds.iter().find(|(prefix, _)| name.starts_with(prefix.as_str())).map(|b| b.1);
            // An entry without parameters closes its list on the same line.
            if let (Some(threads), true) = (pending, line.trim_end().ends_with(')')) {
                out.push_str(&format!(".maxntid {threads}, 1, 1\n"));
                pending = None;
            }
        } else if let (Some(threads), ")") = (pending, line.trim()) {
            out.push_str(&format!(".maxntid {threads}, 1, 1\n"));
            pending = None;
        }
    }
    out
}

/// The toolchain channel for the kernels crate in `crate_dir`: `TRIDENT_NVPTX_TOOLCHAIN`, or
/// the `channel` of its `rust-toolchain.toml`.
pub fn toolchain_channel(crate_dir: &Path) -> Result<String, Error> {
    if let Ok(t) = env::var(TOOLCHAIN_VAR) {
        if !t.trim().is_empty() {
            return Ok(t.trim().to_string());
        }
    }
    let file = crate_dir.join("rust-toolchain.toml");
    let text = std::fs::read_to_string(&file).map_err(|source| Error::Read { path: file.clone(), source })?;
    parse_channel(&text).ok_or(Error::NoChannel(file))
}

/// The value of the `channel = "..."` line of a `rust-toolchain.toml`.
fn parse_channel(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("channel")?.trim_start();
        let value = rest.strip_prefix('=')?.trim().trim_matches('"').trim();
        (!value.is_empty()).then(|| value.to_string())
    })
}

/// What of `toolchain` is missing: `None` when it is installed with cargo and `rust-src`.
fn missing_part(toolchain: &str) -> Result<Option<&'static str>, Error> {
    let run = |program: &str, args: &[&str]| {
        nested(toolchain, program)
            .args(args)
            .env("RUSTUP_AUTO_INSTALL", "0")
            .output()
            .map_err(Error::NoRustup)
    };
    let out = run("rustc", &["--print", "sysroot"])?;
    if !out.status.success() || !run("cargo", &["--version"])?.status.success() {
        return Ok(Some("toolchain"));
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let core = sysroot.join("lib/rustlib/src/rust/library/core");
    Ok(if core.is_dir() { None } else { Some("rust-src") })
}

/// Installs `toolchain` (or only its `rust-src`) through rustup when it is missing. Build
/// scripts of several crates may ask at once (cargo runs them in parallel): the check and the
/// install run under a lock file, so one installs and the others find it installed.
pub fn ensure_toolchain(toolchain: &str) -> Result<(), Error> {
    // Checked under the lock too: a toolchain another build is installing may look whole
    // before it is.
    let lock_path = env::temp_dir().join("trident-ptx-builder-toolchain.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| Error::Read { path: lock_path.clone(), source })?;
    // Released when `lock` is dropped, or by the kernel if this process dies.
    lock.lock().map_err(|source| Error::Read { path: lock_path, source })?;
    let Some(part) = missing_part(toolchain)? else {
        return Ok(());
    };
    let what = if part == "toolchain" {
        "it is not installed (or not whole)"
    } else {
        "its `rust-src` component is missing"
    };
    if env::var(NO_INSTALL_VAR).is_ok_and(|v| v == "1") {
        return Err(Error::Missing {
            toolchain: toolchain.into(),
            why: format!("{what} ({NO_INSTALL_VAR}=1)"),
        });
    }
    println!(
        "cargo:warning=installing the Rust toolchain {toolchain} with rust-src for the GPU kernels \
         (one time; {NO_INSTALL_VAR}=1 turns this off)"
    );
    let mut cmd = clean(Command::new("rustup"));
    if part == "toolchain" {
        cmd.args(["toolchain", "install", toolchain, "--component", "rust-src", "--profile", "minimal"]);
    } else {
        cmd.args(["component", "add", "rust-src", "--toolchain", toolchain]);
    }
    let out = cmd.output().map_err(Error::NoRustup)?;
    if !out.status.success() {
        return Err(Error::Missing {
            toolchain: toolchain.into(),
            why: format!("{what}; rustup could not install it:\n\n{}", describe(&out)),
        });
    }
    match missing_part(toolchain)? {
        None => Ok(()),
        Some(p) => Err(Error::Missing {
            toolchain: toolchain.into(),
            why: format!("the {p} is still missing after rustup installed it"),
        }),
    }
}

/// NVIDIA's PTX assembler, for tests that assemble the PTX a build wrote: `TRIDENT_PTXAS`,
/// then `ptxas` on `PATH`, then the one in the `nvidia-cuda-nvcc-cu12` Python wheel (which
/// works without a GPU); `None` where there is none.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = env::var_os("TRIDENT_PTXAS") {
        return Some(p.into());
    }
    if Command::new("ptxas").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("ptxas".into());
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])"])
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    let p = PathBuf::from(dir.trim()).join("bin").join("ptxas");
    p.exists().then_some(p)
}

/// NVIDIA's cubin disassembler, for tests that read the SASS of what `ptxas` assembled:
/// `TRIDENT_CUOBJDUMP`, then `cuobjdump` on `PATH`, then the `bin/` of any `nvidia` Python
/// wheel (`nvidia-cuda-cuobjdump`, which works without a GPU); `None` where there is none.
pub fn find_cuobjdump() -> Option<PathBuf> {
    if let Some(p) = env::var_os("TRIDENT_CUOBJDUMP") {
        return Some(p.into());
    }
    if Command::new("cuobjdump").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("cuobjdump".into());
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia; print(list(nvidia.__path__)[0])"])
        .output()
        .ok()?;
    let root = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    std::fs::read_dir(root)
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin").join("cuobjdump"))
        .find(|p| p.exists())
}

/// `rustup run TOOLCHAIN PROGRAM` with the outer build's environment removed.
fn nested(toolchain: &str, program: &str) -> Command {
    let mut cmd = clean(Command::new("rustup"));
    cmd.args(["run", toolchain, program]);
    cmd
}

/// Removes every `CARGO*` and `RUST*` variable of this build's environment ([`clean_of`]).
fn clean(cmd: Command) -> Command {
    clean_of(cmd, env::vars_os().map(|(key, _)| key))
}

/// Removes the variables named by `keys` that would steer the nested build: every `CARGO*`
/// and `RUST*` one but `CARGO_HOME` and rustup's own settings (`RUSTUP_*`: its home, and the
/// mirror a `RUSTUP_DIST_SERVER` or `RUSTUP_UPDATE_ROOT` names for the self-install), except
/// `RUSTUP_TOOLCHAIN`, which would pin the outer build's toolchain.
fn clean_of(mut cmd: Command, keys: impl Iterator<Item = std::ffi::OsString>) -> Command {
    for key in keys {
        let key = key.to_string_lossy();
        let keep = key == "CARGO_HOME" || (key.starts_with("RUSTUP_") && key != "RUSTUP_TOOLCHAIN");
        if !keep && (key.starts_with("CARGO") || key.starts_with("RUST")) {
            cmd.env_remove(key.as_ref());
        }
    }
    cmd
}

fn describe(out: &Output) -> String {
    let mut s = format!("({})", out.status);
    for stream in [&out.stderr, &out.stdout] {
        let text = String::from_utf8_lossy(stream);
        if !text.trim().is_empty() {
            s.push('\n');
            s.push_str(text.trim_end());
        }
    }
    s
}

fn rerun_if_changed(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                rerun_if_changed(&p);
            } else {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_line_is_read_whatever_its_spacing() {
        assert_eq!(
            parse_channel("[toolchain]\nchannel = \"nightly-2026-05-20\"\n").as_deref(),
            Some("nightly-2026-05-20")
        );
        assert_eq!(parse_channel("channel=\"nightly\"").as_deref(), Some("nightly"));
        assert_eq!(parse_channel("[toolchain]\ncomponents = [\"rust-src\"]\n"), None);
        assert_eq!(parse_channel("channel = \"\""), None);
        assert_eq!(parse_channel("channels = \"x\""), None);
    }

    #[test]
    fn max_threads_lands_between_the_parameters_and_the_body_of_the_entries_named() {
        let ptx = ".visible .entry big_a(\n\t.param .u64 big_a_param_0\n)\n{\n\tret;\n}\n\
                   .visible .entry small(\n\t.param .u64 small_param_0\n)\n{\n\tret;\n}\n\
                   .visible .entry big_b()\n{\n\tret;\n}\n";
        let patched = with_max_threads(ptx, &[("big_".into(), 384)]);
        assert_eq!(
            patched,
            ".visible .entry big_a(\n\t.param .u64 big_a_param_0\n)\n.maxntid 384, 1, 1\n{\n\tret;\n}\n\
             .visible .entry small(\n\t.param .u64 small_param_0\n)\n{\n\tret;\n}\n\
             .visible .entry big_b()\n.maxntid 384, 1, 1\n{\n\tret;\n}\n"
        );
    }

    #[test]
    fn the_nested_environment_keeps_only_rustups_homes() {
        let cmd = clean(Command::new("true"));
        let removed: Vec<String> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        // Under `cargo test`, cargo sets CARGO_PKG_NAME and friends: every one is removed.
        assert!(removed.iter().any(|k| k == "CARGO_PKG_NAME"), "{removed:?}");
        assert!(!removed.iter().any(|k| k == "RUSTUP_HOME" || k == "CARGO_HOME"));
        assert!(removed.iter().all(|k| k.starts_with("CARGO") || k.starts_with("RUST")));
    }

    #[test]
    fn a_configured_rustup_mirror_reaches_the_self_install() {
        let keys = [
            "RUSTUP_DIST_SERVER",
            "RUSTUP_UPDATE_ROOT",
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
            "RUSTFLAGS",
            "CARGO_HOME",
        ];
        let cmd = clean_of(Command::new("true"), keys.iter().map(std::ffi::OsString::from));
        let mut removed: Vec<String> =
            cmd.get_envs().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        removed.sort();
        assert_eq!(removed, ["RUSTFLAGS", "RUSTUP_TOOLCHAIN"]);
    }

    #[test]
    fn a_missing_toolchain_error_gives_the_install_command() {
        let e = Error::Missing { toolchain: "nightly-2000-01-01".into(), why: "it is not installed".into() };
        let text = e.to_string();
        assert!(
            text.contains(
                "rustup toolchain install nightly-2000-01-01 --component rust-src --profile minimal"
            ),
            "{text}"
        );
        assert!(text.contains(TOOLCHAIN_VAR));
    }

    #[test]
    fn an_unknown_toolchain_is_reported_missing() {
        // Detection never installs (RUSTUP_AUTO_INSTALL=0): an unknown name is "missing".
        let channel = "nightly-1999-01-01-trident-test-does-not-exist";
        assert!(matches!(missing_part(channel), Ok(Some("toolchain"))));
    }
}
