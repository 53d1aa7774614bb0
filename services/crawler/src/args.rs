//! `weft-crawler`'s command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Crawl sources into weft's distributed pipeline: lists each source's
/// documents, compares them with the catalog in NATS and publishes what is
/// new, changed or gone. A job over many sources (--manifest) crawls a few at
/// a time, continues where a killed run stopped, and exits 0 unless it could
/// not do its work (every source failed, or a --rebuild did not switch).
/// Settings: defaults, then the config file, then WEFT__… variables
/// (e.g. WEFT__NATS__URL).
#[derive(Debug, Parser)]
#[command(name = "weft-crawler", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Directories, git URLs or documentation-site URLs.
    #[arg(value_name = "SOURCE")]
    pub sources: Vec<String>,
    /// The project of the sources given as arguments (default: derived from each).
    #[arg(long)]
    pub project: Option<String>,
    /// A TOML file listing many sources across projects ([[sources]] with
    /// `source` and optional `project`).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Publish every document, changed or not.
    #[arg(long, conflicts_with = "rebuild")]
    pub reindex: bool,
    /// Crawl every source into a new index generation, beside the live one
    /// (queries keep reading it), and switch to the new one when the
    /// embedders have written all of it and its counts agree.
    #[arg(long)]
    pub rebuild: bool,
    /// Sources crawled at once.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub concurrency: usize,
    /// How long --rebuild waits for the embedders, in seconds.
    #[arg(long, default_value_t = 6 * 3600, value_name = "SECS")]
    pub wait_secs: u64,
    /// A run cut short (killed; the same sources, the same mode) that
    /// started less than this many seconds ago is continued: sources it
    /// finished are not crawled again. A rebuild that did not switch is
    /// continued too.
    #[arg(long, default_value_t = 12 * 3600, value_name = "SECS")]
    pub resume_within_secs: u64,
    /// Where git sources are cloned (default: <data dir>/sources).
    #[arg(long, value_name = "DIR")]
    pub checkout_dir: Option<PathBuf>,
    #[command(flatten)]
    pub nats: weft_startup::NatsArgs,
    #[command(flatten)]
    pub locations: weft_startup::LocationArgs,
    #[command(flatten)]
    pub config: weft_startup::ConfigArgs,
    /// Print the summary as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index generations: list them, switch, abort a rebuild, remove old ones.
    Generations {
        #[command(subcommand)]
        action: GenerationsAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum GenerationsAction {
    /// Every generation: state, model, when it was made and switched, and
    /// for the live and building ones what their catalog and indexes hold
    /// and what is still queued for them (a rebuild's progress).
    List,
    /// Make the building generation N live (after the completeness check a
    /// rebuild makes, unless --force); the live one is retired.
    Switch {
        /// The generation.
        number: u32,
        /// Switch even if it looks incomplete.
        #[arg(long)]
        force: bool,
    },
    /// Abort the building generation N and remove its stores; the live one
    /// stays.
    Abort {
        /// The generation.
        number: u32,
    },
    /// Remove aborted generations, and retired ones older than
    /// `generations.grace_secs` (or --grace-secs).
    Gc {
        /// Override the grace period, in seconds.
        #[arg(long, value_name = "SECS")]
        grace_secs: Option<u64>,
    },
}
