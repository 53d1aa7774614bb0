//! `[data]`: the data directory.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;

/// `[data]`: the data directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// The data directory; `--data-dir` and `WEFT_DATA_DIR` override it.
    /// Default: `$XDG_DATA_HOME/weft`, else `~/.local/share/weft`.
    pub dir: Option<PathBuf>,
}

impl DataConfig {
    /// Checks the section. Any directory will do here: whether it can be
    /// created and written is found out when it is opened.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        Ok(())
    }
}
