//! `weft keys new`: mints an API key of the query service (`query.auth`).
//! The key is printed once and stored nowhere; the entry to put in
//! `query.api_keys_file` holds only its salted hash.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::json;
use weft_core::ContentType;

/// Arguments of `weft keys`.
#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Make a new API key: prints the key once, and the entry (salted hash)
    /// to add to query.api_keys_file.
    New(NewArgs),
}

#[derive(Debug, Args)]
struct NewArgs {
    /// A name for the key, unique in the keys file (who holds it); logged
    /// instead of the key.
    #[arg(long, value_name = "NAME")]
    id: String,
    /// A project the key may read (repeatable); `*` for every project.
    #[arg(long = "project", value_name = "PROJECT", required = true)]
    projects: Vec<String>,
    /// Only this content type (repeatable): prose, code or api_reference.
    /// Default: all.
    #[arg(long = "content-type", value_name = "TYPE", value_parser = content_type)]
    content_types: Vec<ContentType>,
    /// Requests per second this key may make (default: query.rate_limit_per_sec).
    #[arg(long, value_name = "N")]
    rate_per_sec: Option<f64>,
    /// The key may also index (the MCP `index` tool of `weft mcp
    /// --allow-index`); needs `--project '*'`. Default: it only reads.
    #[arg(long)]
    index: bool,
    /// Print JSON for machines instead of text for people.
    #[arg(long)]
    json: bool,
}

fn content_type(value: &str) -> Result<ContentType, String> {
    match value {
        "prose" => Ok(ContentType::Prose),
        "code" => Ok(ContentType::Code),
        "api_reference" => Ok(ContentType::ApiReference),
        other => Err(format!("{other:?} is not prose, code or api_reference")),
    }
}

pub fn run(args: &KeysArgs) -> anyhow::Result<ExitCode> {
    let KeysCommand::New(args) = &args.command;
    if let Some(rate) = args.rate_per_sec
        && !(rate.is_finite() && rate > 0.0)
    {
        bail!("--rate-per-sec {rate} must be a positive number");
    }
    let mut minted = weft_auth::mint(&args.id, args.projects.clone(), args.content_types.clone())?;
    minted.entry.rate_per_sec = args.rate_per_sec;
    if args.index {
        minted.entry.index = true;
        // The keys file's rule: an indexing key reads every project.
        minted.entry.check().context("--index")?;
    }
    let entry = toml::to_string(&weft_auth::KeysFile {
        keys: vec![minted.entry.clone()],
    })?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "id": minted.entry.id,
                "key": minted.key,
                "entry": minted.entry,
                "entry_toml": entry,
            }))?
        );
    } else {
        println!(
            "API key (shown only now; give it to its holder, who sends it as `authorization: Bearer <key>`, e.g. WEFT_API_KEY for weft mcp):\n"
        );
        println!("  {}\n", minted.key);
        println!(
            "Add this entry to the keys file (query.api_keys_file); the service reads it again within query.api_keys_reload_secs:\n"
        );
        print!("{entry}");
    }
    Ok(ExitCode::SUCCESS)
}
