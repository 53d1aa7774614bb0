//! What every command needs: the configuration and where the data and the
//! model are (flag → environment → weft.toml → default), and the stores and
//! engine built from them by `weft_wiring::` — the same wiring the
//! services use — with the command line's hints added to its errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use weft_config::Locations;
use weft_config::WeftConfig;
use weft_core::ports::Embedder;
use weft_wiring::{self as wiring, Load, QueryEmbedder, QueryStack};
use weft_wiring::{DataDir, DataDirError, Stores, WiringError};

/// Where the index and the model are.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The data directory (default: `data.dir` in weft.toml, else the
    /// platform's data directory, e.g. ~/.local/share/weft).
    #[arg(long, env = "WEFT_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// A BERT or MPNet sentence-embedding model directory (model.safetensors,
    /// config.json, tokenizer.json). Default: `embedding.model_dir`, else
    /// ~/.cache/weft/models/all-MiniLM-L6-v2 (fetched by tools/fetch-model.sh).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
}

/// Resolved settings.
pub struct Context {
    pub config: WeftConfig,
    pub locations: Locations,
}

impl Context {
    pub fn load(config_file: Option<&Path>, args: &StoreArgs) -> anyhow::Result<Self> {
        let config = weft_config::load(config_file)?.config;
        let locations = Locations::resolve(&config, args.data_dir.clone(), args.model_dir.clone());
        Ok(Self { config, locations })
    }

    /// The data directory.
    pub fn data_dir(&self) -> DataDir {
        weft_wiring::DataDir::new(&self.locations.data_dir)
    }

    /// Opens (or creates) the stores for indexing — the indexes `[stores]`
    /// configures and the catalog in the data directory — with the
    /// configured embedder. With data already there the local model is
    /// loaded only when something must be embedded.
    pub async fn open_for_indexing(&self) -> anyhow::Result<(Stores, Arc<dyn Embedder>)> {
        let catalog = Arc::new(self.data_dir().open_catalog()?);
        let (stores, embedder, _) =
            wiring::open_for_writing(&self.config, &self.locations, catalog, Load::WhenNeeded)
                .await
                .map_err(|e| self.hint(e, false))?;
        Ok((stores, embedder))
    }

    /// The query engine over the indexes `[stores]` configures.
    pub async fn open_query(&self, need: QueryEmbedder) -> anyhow::Result<QueryStack> {
        wiring::open_query(&self.config, &self.locations, need)
            .await
            .map_err(|e| self.hint(e, true))
    }

    /// The live generation of the data directory, for a long-running
    /// reader (`weft mcp`): the model is loaded now.
    pub async fn open_live(&self) -> anyhow::Result<wiring::LiveQuery> {
        wiring::LiveQuery::open(
            &self.config,
            &self.locations,
            QueryEmbedder::Needed,
            wiring::LiveSource::DataDir,
        )
        .await
        .map_err(|e| self.hint(e, true))
    }

    /// An index run's error, with what to do on the command line.
    pub fn run_hint(&self, error: weft_index::RunError) -> anyhow::Error {
        match error {
            weft_index::RunError::Wiring(e) => self.hint(e, false),
            other => other.into(),
        }
    }

    /// Adds what to do on the command line to an error of the wiring.
    fn hint(&self, error: WiringError, searching: bool) -> anyhow::Error {
        let hint = match &error {
            WiringError::DataDir(DataDirError::Empty(_)) => {
                "run `weft index PATH` first, or pass --data-dir".to_owned()
            }
            WiringError::ModelMismatch { indexed, .. } => {
                let text = if searching {
                    ", or use --mode text"
                } else {
                    ""
                };
                format!(
                    "pass --model-dir for {indexed}, or use another --data-dir{text} \
                     (the model in {} is not the index's)",
                    self.locations.model_dir.display()
                )
            }
            _ => return error.into(),
        };
        anyhow::Error::new(Hinted { error, hint })
    }
}

/// An error with what to do about it on the command line: one line,
/// `error; hint`, keeping the error's causes.
#[derive(Debug)]
struct Hinted {
    error: WiringError,
    hint: String,
}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.error, self.hint)
    }
}

impl std::error::Error for Hinted {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}
