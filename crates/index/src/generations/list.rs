//! Every generation with what it holds: what
//! [`GenerationManager::list`](super::GenerationManager::list) returns and
//! `weft-crawler generations list` prints.

use serde::Serialize;
use weft_core::generations::Generation;

use super::Counts;

/// One generation and what it holds.
#[derive(Debug, Clone, Serialize)]
pub struct GenerationStatus {
    /// The record's entry.
    #[serde(flatten)]
    pub generation: Generation,
    /// What it holds now (counted for the live and the building one).
    pub counts: Option<Counts>,
}

/// Every generation of the record, with what it holds.
#[derive(Debug, Clone, Serialize)]
pub struct GenerationList {
    /// The live generation.
    pub live: Option<u32>,
    /// Every generation of the record.
    pub generations: Vec<GenerationStatus>,
}

impl std::fmt::Display for GenerationList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for s in &self.generations {
            let generation = &s.generation;
            let counts = s.counts.map(|c| describe(&c)).unwrap_or_default();
            let expected = generation
                .expected_documents
                .map(|e| format!(" (of {e} expected)"))
                .unwrap_or_default();
            writeln!(
                f,
                "{:>4}  {:<8} {}{counts}{expected}",
                generation.number,
                generation.state.to_string(),
                generation.model.as_deref().unwrap_or("-"),
            )?;
        }
        if self.generations.is_empty() {
            writeln!(
                f,
                "no generations recorded: generation 0 (the unnumbered stores) is live"
            )?;
        }
        Ok(())
    }
}

fn describe(c: &Counts) -> String {
    let indexed = c
        .indexed
        .map(|(v, t)| format!(", indexes {v}/{t}"))
        .unwrap_or_default();
    format!(
        "; {} documents, {} chunks{indexed}; queued {} documents, {} batches",
        c.documents, c.catalog_chunks, c.queued.0, c.queued.1
    )
}
