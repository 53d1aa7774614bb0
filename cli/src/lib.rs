//! `weft`: the all-in-one command line. The program is [`main`]; its
//! binary (and `weft-all` run as `weft`) runs it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod chunk_cmd;
mod context;
mod eval_cmd;
mod index_cmd;
mod keys_cmd;
mod mcp_cmd;
mod search_cmd;
mod serve_cmd;
mod status_cmd;

/// weft turns code repositories and documentation into retrieval context for LLMs.
#[derive(Debug, Parser)]
#[command(name = "weft", version, about, long_about = None)]
struct Cli {
    /// Configuration file (default: ./weft.toml when it exists). Settings can
    /// also be given as WEFT__SECTION__KEY environment variables. `weft
    /// eval` takes it more than once, to compare configurations.
    #[arg(long, global = true, value_name = "FILE", action = clap::ArgAction::Append)]
    config: Vec<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the chunks weft makes of a file, or of every file under a directory.
    Chunk(chunk_cmd::ChunkArgs),
    /// Index directories, git repositories or documentation sites (incrementally).
    Index(index_cmd::IndexArgs),
    /// Search the index: best chunks with their neighbours, by document.
    Search(search_cmd::SearchArgs),
    /// Serve the gRPC query API (weft.v1.QueryService) over the data directory.
    Serve(serve_cmd::ServeArgs),
    /// Show what the data directory holds: projects, chunks, generations, space on disk.
    Status(status_cmd::StatusArgs),
    /// Measure retrieval quality on labelled queries (Recall@k, MRR, nDCG, context coverage).
    Eval(eval_cmd::EvalArgs),
    /// Serve weft's tools to assistants over the Model Context Protocol (stdio or HTTP).
    Mcp(mcp_cmd::McpArgs),
    /// Make API keys of the query service (query.api_keys_file).
    Keys(keys_cmd::KeysArgs),
}

/// The program: its arguments parsed from the process's, run to its exit
/// status.
pub fn main() -> ExitCode {
    weft_telemetry::init_logging("warn");
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Mcp(_)) {
        // `weft … | head`: a closed stdout ends the command quietly, as it
        // ends any Unix filter, instead of a panic at the next print. The
        // servers keep Rust's default (a peer's closed socket is an error
        // to handle, not a reason to die).
        stdout_closed_ends_quietly();
    }
    if cli.config.len() > 1 && !matches!(cli.command, Command::Eval(_)) {
        eprintln!(
            "weft: --config is given {} times: only `weft eval` compares configurations",
            cli.config.len()
        );
        return ExitCode::from(2);
    }
    let config = cli.config.first().map(PathBuf::as_path);
    let result = match &cli.command {
        Command::Chunk(args) => chunk_cmd::run(config, args),
        Command::Index(args) => index_cmd::run(config, args),
        Command::Search(args) => search_cmd::run(config, args),
        Command::Serve(args) => match weft_telemetry::trace::init_tracing("weft") {
            // OTLP traces of the gRPC calls when OTEL_EXPORTER_OTLP_ENDPOINT is set.
            Ok(tracing) => {
                let result = serve_cmd::run(config, args);
                tracing.shutdown();
                result
            }
            Err(error) => Err(error.into()),
        },
        Command::Status(args) => status_cmd::run(config, args),
        Command::Eval(args) => eval_cmd::run(&cli.config, args),
        Command::Mcp(args) => mcp_cmd::run(config, args),
        Command::Keys(args) => keys_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("weft: {}", weft_core::error_chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Restores the default action of SIGPIPE (Rust ignores it, so that a write
/// to a closed pipe returns an error, which `println!` turns into a panic).
fn stdout_closed_ends_quietly() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default before any
    // other thread exists; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
