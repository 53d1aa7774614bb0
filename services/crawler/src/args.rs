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
#[command(name = "weft-crawler", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub crawl: CrawlArgs,
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

impl Args {
    /// Parses the command line; the settings flags (`--config`,
    /// `--nats-url`, `--data-dir`, `--model-dir`, `--json`) go anywhere on
    /// it, a crawl's own flags only without a subcommand.
    pub fn parse_checked() -> Self {
        Self::try_parse_checked(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// [`Args::parse_checked`] over `args` (the program name first).
    pub fn try_parse_checked<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let mut command = Self::command();
        let matches = command.try_get_matches_from_mut(args)?;
        let args = Self::from_arg_matches(&matches)?;
        if args.command.is_some()
            && let Some(flag) = args.crawl.first_given(&matches)
        {
            return Err(command.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "{flag} is an option of a crawl, not of `weft-crawler generations`; \
                     put the settings (--config, --nats-url, --data-dir, --json) anywhere, \
                     the crawl's options only without a subcommand"
                ),
            ));
        }
        Ok(args)
    }
}

/// What a crawl is given: its sources and how to run them.
#[derive(Debug, clap::Args)]
pub struct CrawlArgs {
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
    /// continued too. Set it to the Job's activeDeadlineSeconds, so that a
    /// retried pod of the same Job always continues.
    #[arg(long, default_value_t = 12 * 3600, value_name = "SECS")]
    pub resume_within_secs: u64,
    /// Where git sources are cloned (default: <data dir>/sources).
    #[arg(long, value_name = "DIR")]
    pub checkout_dir: Option<PathBuf>,
    /// List what the crawl would do and stop: per source the documents
    /// new, changed, unchanged, removed and skipped, the chunks and the
    /// tokens the embedders would embed (with `embedding.dimension` set,
    /// after reusing the live index's stored vectors), and with
    /// `embedding.price_per_million_tokens`, the cost. Publishes nothing.
    #[arg(long, conflicts_with = "rebuild")]
    pub dry_run: bool,
}

impl CrawlArgs {
    /// The first of the crawl's options given on the command line (as
    /// typed, e.g. `--rebuild` or `SOURCE`), if any.
    fn first_given(&self, matches: &clap::ArgMatches) -> Option<String> {
        use clap::parser::ValueSource;
        [
            ("sources", "SOURCE"),
            ("project", "--project"),
            ("manifest", "--manifest"),
            ("reindex", "--reindex"),
            ("rebuild", "--rebuild"),
            ("concurrency", "--concurrency"),
            ("wait_secs", "--wait-secs"),
            ("resume_within_secs", "--resume-within-secs"),
            ("checkout_dir", "--checkout-dir"),
            ("dry_run", "--dry-run"),
        ]
        .into_iter()
        .find(|(id, _)| matches.value_source(id) == Some(ValueSource::CommandLine))
        .map(|(_, flag)| flag.to_owned())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Args, clap::Error> {
        Args::try_parse_checked(std::iter::once("weft-crawler").chain(line.split_whitespace()))
    }

    #[test]
    fn the_settings_go_anywhere_on_a_generations_command() {
        // As deploy/README.md writes it, and the other orders.
        for line in [
            "--config /etc/weft/weft.toml generations list",
            "generations list --config /etc/weft/weft.toml",
            "generations --config /etc/weft/weft.toml list",
            "--json --config /etc/weft/weft.toml generations list",
        ] {
            let args = parse(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(
                matches!(
                    args.command,
                    Some(Command::Generations {
                        action: GenerationsAction::List
                    })
                ),
                "{line}: {args:?}"
            );
            assert_eq!(
                args.config.config.as_deref(),
                Some(std::path::Path::new("/etc/weft/weft.toml")),
                "{line}"
            );
            assert!(args.crawl.sources.is_empty(), "{line}");
        }
        let args = parse("--nats-url nats://n:4222 generations switch 3 --force --json").unwrap();
        assert!(matches!(
            args.command,
            Some(Command::Generations {
                action: GenerationsAction::Switch {
                    number: 3,
                    force: true
                }
            })
        ));
        assert_eq!(args.nats.nats_url.as_deref(), Some("nats://n:4222"));
        assert!(args.json);
    }

    #[test]
    fn a_crawl_keeps_its_sources_and_options() {
        let args = parse("--config w.toml ./src --project p --rebuild --json").unwrap();
        assert!(args.command.is_none());
        assert_eq!(args.crawl.sources, ["./src"]);
        assert!(args.crawl.rebuild);
        assert!(args.json);
        // A source that happens to be named like the subcommand is a path.
        let args = parse("./generations").unwrap();
        assert_eq!(args.crawl.sources, ["./generations"]);
    }

    #[test]
    fn a_crawl_option_with_a_subcommand_is_refused_naming_it() {
        for (line, flag) in [
            ("--rebuild generations list", "--rebuild"),
            ("generations gc --manifest org.toml", "--manifest"),
            (
                "--resume-within-secs 5 generations list",
                "--resume-within-secs",
            ),
        ] {
            let error = parse(line).err().unwrap_or_else(|| panic!("{line} parsed"));
            let message = error.to_string();
            assert!(message.contains(flag), "{line}: {message}");
            // Before the subcommand: a conflict named; after it: an
            // argument the subcommand does not have.
            assert!(
                matches!(
                    error.kind(),
                    clap::error::ErrorKind::ArgumentConflict
                        | clap::error::ErrorKind::UnknownArgument
                ),
                "{line}: {:?}",
                error.kind()
            );
        }
    }
}
