//! `weightstream`: inspect, load, convert and benchmark quantized checkpoints.

mod cache_arg;
mod cmd;
mod dtype_arg;
mod human;
mod interrupt;
mod progress;
mod report;
mod source_arg;
mod stats;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "weightstream",
    version,
    about = "Load quantized model weights (GGUF K-quants, IQ types, MXFP4/NVFP4, Q4_0-Q8_0, FP8 safetensors) as BF16, fast",
    long_about = "weightstream streams quantized checkpoint weights into memory and dequantizes \
them to BF16: on the GPU when there is one, on the CPU otherwise, with the same bits either way.\n\n\
Checkpoints: a .gguf file, a .safetensors file, or a directory of safetensors shards \
(with model.safetensors.index.json, or *.safetensors beside config.json).",
    after_help = "Examples:\n  \
weightstream inspect model.gguf                 what is inside: tensors, dtypes, shapes, metadata\n  \
weightstream inspect ./DeepSeek-FP8 --json      the same, as JSON for scripts\n  \
weightstream load model.gguf --verify           BF16 on the GPU (or CPU), timed and checked\n  \
weightstream convert ./Qwen3-FP8 -o ./Qwen3-BF16 a BF16 safetensors checkpoint\n  \
weightstream bench --threads 1                  CPU dequant speed against memcpy\n  \
weightstream formats                            the formats it reads, with block layouts\n\n\
Run `weightstream <command> --help` for each command's options."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Inspect(cmd::inspect::Args),
    Load(cmd::load::Args),
    Convert(cmd::convert::Args),
    Bench(cmd::bench::Args),
    Formats(cmd::formats::Args),
}

/// Die quietly of SIGPIPE when the reader goes away (`inspect | head`), as
/// Unix tools do, instead of panicking on the failed write: Rust ignores
/// SIGPIPE by default so that writes return EPIPE, and `println!` panics on it.
fn quiet_on_closed_pipe() {
    // SAFETY: restoring a signal's default disposition at start-up, before
    // any thread exists; no handler code is installed.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => cmd::inspect::run(&a),
        Command::Load(a) => cmd::load::run(&a),
        Command::Convert(a) => cmd::convert::run(&a),
        Command::Bench(a) => cmd::bench::run(&a),
        Command::Formats(a) => cmd::formats::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}
