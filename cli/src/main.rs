//! The `trident` command: `train`, `sample`, `launch`, `bench` and `plan` (see [`trident_cli`]).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = trident_cli::Cli::parse();
    match trident_cli::run(cli) {
        Ok(code) => std::process::ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
