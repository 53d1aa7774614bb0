//! Where the data directory and the local model are, resolved once for
//! every command and service.

use std::path::PathBuf;

use crate::{EmbeddingProvider, WeftConfig};

/// Where the data directory and the local model are: a flag (or its
/// environment variable, `WEFT_DATA_DIR` / `WEFT_MODEL_DIR`), else
/// `data.dir` / `embedding.model_dir`, else the platform's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locations {
    /// The data directory.
    pub data_dir: PathBuf,
    /// The local embedding model's directory.
    pub model_dir: PathBuf,
}

impl Locations {
    /// Resolves the locations: `data_dir` / `model_dir` given on the command
    /// line win over the configuration, which wins over the defaults.
    pub fn resolve(
        config: &WeftConfig,
        data_dir: Option<PathBuf>,
        model_dir: Option<PathBuf>,
    ) -> Self {
        if let (EmbeddingProvider::Local, Some(name), Some(dir)) = (
            config.embedding.provider,
            &config.embedding.model,
            &model_dir,
        ) && dir.file_name() != Some(std::ffi::OsStr::new(name))
        {
            tracing::warn!(
                model = %name,
                model_dir = %dir.display(),
                "embedding.model names one model, but --model-dir or WEFT_MODEL_DIR gives another directory: the directory is used"
            );
        }
        Self {
            data_dir: data_dir
                .or_else(|| config.data.dir.clone())
                .unwrap_or_else(default_data_dir),
            model_dir: model_dir
                .or_else(|| config.embedding.model_dir.clone())
                .unwrap_or_else(default_model_dir),
        }
    }
}

/// The platform's data directory for weft: `$XDG_DATA_HOME/weft`, else
/// `~/Library/Application Support/weft` on macOS, `%APPDATA%\weft` on
/// Windows, `~/.local/share/weft` elsewhere.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("weft");
    }
    if let Some(appdata) = std::env::var_os("APPDATA").filter(|_| cfg!(windows)) {
        return PathBuf::from(appdata).join("weft");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    if cfg!(target_os = "macos") {
        home.join("Library/Application Support/weft")
    } else {
        home.join(".local/share/weft")
    }
}

/// Where `tools/fetch-model.sh` puts the default model:
/// `~/.cache/weft/models/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> PathBuf {
    crate::EmbeddingConfig::fetched_model_dir(crate::DEFAULT_LOCAL_MODEL)
}
