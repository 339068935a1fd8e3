//! Builds `kernels/` for `nvptx64-nvidia-cuda` with the nightly pinned in
//! `kernels/rust-toolchain.toml` and hands the PTX to the library as `$OUT_DIR/trident.ptx`.
//!
//! The outer build runs on stable and holds the lock on `target/`, so the nested build gets a
//! clean environment (no inherited `CARGO*`/`RUST*` variables, which would pin it to the outer
//! toolchain) and a target directory of its own under `OUT_DIR`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "nvptx64-nvidia-cuda";
const ARCH: &str = "sm_90";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernels = root.join("kernels");
    rerun_if_changed(&kernels.join("src"));
    for f in ["Cargo.toml", "rust-toolchain.toml"] {
        println!("cargo:rerun-if-changed={}", kernels.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=TRIDENT_NVPTX_TOOLCHAIN");

    let toolchain = toolchain_channel(&kernels);
    let ptx = out_dir.join("trident.ptx");
    let target_dir = out_dir.join("nvptx-target");
    let output = nested_cargo(&toolchain)
        .current_dir(&kernels)
        .args(["rustc", "--release", "--lib", "--target", TARGET, "-Zbuild-std=core"])
        .arg("--target-dir")
        .arg(&target_dir)
        // The workspace's release profile keeps debug info for host profiling; PTX needs none.
        .args(["--config", "profile.release.debug=0", "--config", "profile.release.codegen-units=1"])
        .arg("--")
        .arg(format!("--emit=asm={}", ptx.display()))
        .env(
            "RUSTFLAGS",
            format!("-Zunstable-options -Cpanic=immediate-abort -Ctarget-cpu={ARCH} -Ccodegen-units=1"),
        )
        .output();
    match output {
        Ok(o) if o.status.success() => {}
        Ok(o) => fail(
            &format!(
                "the nvptx64 build of kernels/ failed ({}):\n\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ),
            &toolchain,
        ),
        Err(e) => fail(&format!("could not run `cargo +{toolchain}`: {e}"), &toolchain),
    }
    let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| {
        fail(&format!("the nvptx64 build wrote no PTX at {}: {e}", ptx.display()), &toolchain)
    });
    if !text.contains(".entry") {
        fail("the PTX module has no kernel entry points", &toolchain);
    }
}

/// A `cargo` for the pinned nightly, with the outer build's environment removed.
fn nested_cargo(toolchain: &str) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", toolchain, "cargo"]);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO") || key.starts_with("RUST") {
            cmd.env_remove(key.as_ref());
        }
    }
    // rustup itself must stay findable.
    if let Some(home) = env::var_os("RUSTUP_HOME") {
        cmd.env("RUSTUP_HOME", home);
    }
    if let Some(home) = env::var_os("CARGO_HOME") {
        cmd.env("CARGO_HOME", home);
    }
    cmd
}

fn toolchain_channel(kernels: &Path) -> String {
    if let Ok(t) = env::var("TRIDENT_NVPTX_TOOLCHAIN") {
        return t;
    }
    let file = kernels.join("rust-toolchain.toml");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    text.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("channel")
                .map(|r| r.trim_start_matches([' ', '=']).trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("{} names no channel", file.display()))
}

fn fail(what: &str, toolchain: &str) -> ! {
    panic!(
        "\n\nTrident's GPU kernels could not be built: {what}.\n\
         They need the Rust toolchain `{toolchain}` with the `rust-src` component:\n\
         \n    rustup toolchain install {toolchain} --component rust-src --profile minimal\n\n\
         (rustup installs it by itself on first use when it can reach its distribution server.)\n"
    )
}

fn rerun_if_changed(dir: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    if let Ok(entries) = std::fs::read_dir(dir) {
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
