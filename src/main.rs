use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = trident::cli::Cli::parse();
    match trident::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
