//! `[generations]`: index generations (DESIGN §6).

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;

/// Where the record of the live index generation is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GenerationRegistryKind {
    /// A NATS key-value entry (`nats.generations_bucket`), shared by the
    /// distributed services.
    Nats,
    /// `generations.json` in the data directory (what `weft index` writes).
    DataDir,
}

/// `[generations]`: index generations (DESIGN §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerationsConfig {
    /// Where `weft-query` reads which generation is live: `nats` (the
    /// default: the crawler's `--rebuild` switches it there) or `data_dir`
    /// (an index `weft index` wrote into server stores). `weft serve` and
    /// `weft mcp` always read the data directory's.
    pub registry: GenerationRegistryKind,
    /// Seconds a retired generation of server stores is kept after the
    /// switch, so queries that started on it finish (and a switch can be
    /// undone by hand) before `weft-crawler generations gc` removes it.
    pub grace_secs: u64,
}

impl Default for GenerationsConfig {
    fn default() -> Self {
        Self {
            registry: GenerationRegistryKind::Nats,
            grace_secs: 600,
        }
    }
}

impl GenerationsConfig {
    /// Checks the section. Every value works: a grace of 0 removes a
    /// retired generation at the next `gc`.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        Ok(())
    }
}
