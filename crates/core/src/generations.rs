//! Index generations (DESIGN §6, "Re-index without downtime").
//!
//! Every index is a *generation*: a numbered set of stores (a vector index,
//! a text index and the catalog of what they hold). Queries read exactly one
//! generation, the *live* one. A rebuild writes generation N+1 beside the
//! live N; when it is complete and its counts agree, one atomic write of the
//! [`Generations`] record makes N+1 live, and N is removed later. A model, a
//! dimension or a chunker change happens only through a new generation.
//!
//! This module is the state machine and the naming; where the record lives
//! is a [`GenerationRegistry`](crate::ports::GenerationRegistry): a file in
//! the embedded data directory, a NATS key-value entry for the services.
//!
//! ```
//! use weft_core::generations::{GenerationState, Generations, store_name};
//!
//! let mut g = Generations::default();
//! let first = g.begin(100, None).unwrap();
//! g.switch_to(first, 110).unwrap();
//! let second = g.begin(200, Some(first)).unwrap();
//! assert_eq!(g.live_number(), Some(first)); // queries still read the first
//! g.switch_to(second, 210).unwrap();
//! assert_eq!(g.live_number(), Some(second));
//! assert_eq!(g.get(first).unwrap().state, GenerationState::Retired);
//! assert_eq!(store_name("weft", second), "weft_g2");
//! assert_eq!(store_name("weft", 0), "weft");
//! ```

use serde::{Deserialize, Serialize};

/// What a generation is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GenerationState {
    /// Being written; no query reads it.
    Building,
    /// What queries read. At most one generation is live.
    Live,
    /// Was live; kept for a grace period (queries that started on it
    /// finish), then removed.
    Retired,
    /// A rebuild that failed or was cancelled: removable at once.
    Aborted,
}

impl std::fmt::Display for GenerationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Building => "building",
            Self::Live => "live",
            Self::Retired => "retired",
            Self::Aborted => "aborted",
        })
    }
}

/// One generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// Its number: 0 is the unnumbered stores of a deployment made before
    /// generations (the base names), then 1, 2, …
    pub number: u32,
    /// What it is doing.
    pub state: GenerationState,
    /// The embedding model its vectors are made with, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Their dimension, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<usize>,
    /// The live generation it was started beside, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub based_on: Option<u32>,
    /// Seconds since the Unix epoch when it was started.
    pub created_at: u64,
    /// When it became live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switched_at: Option<u64>,
    /// When it stopped being live, or was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<u64>,
    /// Documents a rebuild published into it (the distributed crawler), for
    /// progress and the completeness check; `None` when not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_documents: Option<u64>,
    /// Why it was aborted, or other notes for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A transition that is not allowed, naming the generation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerationError {
    /// A rebuild is already being written.
    #[error(
        "generation {0} is already being built; finish it, or abort it (`generations abort {0}`)"
    )]
    AlreadyBuilding(u32),
    /// No such generation.
    #[error("there is no generation {0}")]
    Unknown(u32),
    /// The generation is not in the state the transition needs.
    #[error("generation {number} is {state}, not {expected}")]
    WrongState {
        /// The generation.
        number: u32,
        /// Its state.
        state: GenerationState,
        /// The state the transition needs.
        expected: GenerationState,
    },
    /// The generation's vectors are made with another model.
    #[error(
        "generation {number} holds vectors of {recorded} ({recorded_dimension} dimensions), not {model} ({dimension}); a new model needs a new generation (a rebuild)"
    )]
    OtherModel {
        /// The generation.
        number: u32,
        /// Its model.
        recorded: String,
        /// Its dimension.
        recorded_dimension: usize,
        /// The model offered.
        model: String,
        /// Its dimension.
        dimension: usize,
    },
    /// A registry that changed under a read-modify-write too often.
    #[error("the generations record kept changing under this update ({0} attempts)")]
    Contended(u32),
}

impl Generation {
    /// The model of its vectors and their dimension, once recorded.
    pub fn embedding(&self) -> Option<(&str, usize)> {
        self.model.as_deref().zip(self.dimension)
    }
}

/// Every generation of one deployment, and which one is live: the record
/// whose one atomic write is the switch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generations {
    /// Format of the record.
    #[serde(default = "record_version")]
    pub version: u32,
    /// The live generation, if any has been switched to.
    pub live: Option<u32>,
    /// All generations not yet removed, oldest first.
    #[serde(default)]
    pub generations: Vec<Generation>,
    /// The number the next generation gets: numbers are never reused, so
    /// a removed generation's leftovers never pass for a new one's.
    #[serde(default)]
    pub next_number: u32,
}

fn record_version() -> u32 {
    1
}

/// The name of a store (Qdrant collection, Meilisearch index, NATS bucket)
/// of `generation`: the base name for generation 0, `<base>_g<N>` after.
pub fn store_name(base: &str, generation: u32) -> String {
    if generation == 0 {
        base.to_owned()
    } else {
        format!("{base}_g{generation}")
    }
}

impl Generations {
    /// The record of a deployment made before generations: its unnumbered
    /// stores are generation 0, live.
    pub fn legacy(model: Option<String>, dimension: Option<usize>) -> Self {
        Self {
            version: record_version(),
            live: Some(0),
            generations: vec![Generation {
                number: 0,
                state: GenerationState::Live,
                model,
                dimension,
                based_on: None,
                created_at: 0,
                switched_at: None,
                retired_at: None,
                expected_documents: None,
                note: None,
            }],
            next_number: 1,
        }
    }

    /// The live generation's number.
    pub fn live_number(&self) -> Option<u32> {
        self.live
    }

    /// The live generation.
    pub fn live(&self) -> Option<&Generation> {
        self.live.and_then(|n| self.get(n))
    }

    /// The generation being built, if any.
    pub fn building(&self) -> Option<&Generation> {
        self.generations
            .iter()
            .find(|g| g.state == GenerationState::Building)
    }

    /// Generation `number`.
    pub fn get(&self, number: u32) -> Option<&Generation> {
        self.generations.iter().find(|g| g.number == number)
    }

    fn get_mut(&mut self, number: u32) -> Result<&mut Generation, GenerationError> {
        self.generations
            .iter_mut()
            .find(|g| g.number == number)
            .ok_or(GenerationError::Unknown(number))
    }

    /// Starts a new generation beside `based_on` (the live one, or `None`
    /// for an empty start): the next number, state building. Only one is
    /// built at a time.
    pub fn begin(&mut self, now: u64, based_on: Option<u32>) -> Result<u32, GenerationError> {
        if let Some(g) = self.building() {
            return Err(GenerationError::AlreadyBuilding(g.number));
        }
        let number = self
            .generations
            .iter()
            .map(|g| g.number + 1)
            .max()
            .unwrap_or(1)
            .max(self.live.map(|n| n + 1).unwrap_or(1))
            .max(self.next_number);
        self.next_number = number + 1;
        self.version = record_version();
        self.generations.push(Generation {
            number,
            state: GenerationState::Building,
            model: None,
            dimension: None,
            based_on,
            created_at: now,
            switched_at: None,
            retired_at: None,
            expected_documents: None,
            note: None,
        });
        Ok(number)
    }

    /// Records the model of `number`'s vectors, or checks it against the one
    /// recorded: a generation never holds vectors of two models.
    pub fn record_model(
        &mut self,
        number: u32,
        model: &str,
        dimension: usize,
    ) -> Result<(), GenerationError> {
        let generation = self.get_mut(number)?;
        if !matches!(
            generation.state,
            GenerationState::Live | GenerationState::Building
        ) {
            return Err(GenerationError::WrongState {
                number,
                state: generation.state,
                expected: GenerationState::Building,
            });
        }
        match (&generation.model, generation.dimension) {
            (Some(recorded), Some(recorded_dimension))
                if recorded != model || recorded_dimension != dimension =>
            {
                Err(GenerationError::OtherModel {
                    number,
                    recorded: recorded.clone(),
                    recorded_dimension,
                    model: model.to_owned(),
                    dimension,
                })
            }
            (Some(_), Some(_)) => Ok(()),
            _ => {
                generation.model = Some(model.to_owned());
                generation.dimension = Some(dimension);
                Ok(())
            }
        }
    }

    /// Records what a rebuild has published into the building generation
    /// `number`: the documents it left there (for progress and the
    /// completeness check), and a note for the operator.
    pub fn record_published(
        &mut self,
        number: u32,
        expected_documents: u64,
        note: &str,
    ) -> Result<(), GenerationError> {
        let generation = self.building_mut(number)?;
        generation.expected_documents = Some(expected_documents);
        generation.note = Some(note.to_owned());
        Ok(())
    }

    /// Makes the building generation `number` live; the one live before is
    /// retired (at `now`).
    pub fn switch_to(&mut self, number: u32, now: u64) -> Result<(), GenerationError> {
        // Switching to what is live already is done (a retried write).
        if self.live == Some(number) && self.get_mut(number)?.state == GenerationState::Live {
            return Ok(());
        }
        self.building_mut(number)?;
        if let Some(previous) = self.live
            && let Ok(old) = self.get_mut(previous)
        {
            old.state = GenerationState::Retired;
            old.retired_at = Some(now);
        }
        let generation = self.get_mut(number)?;
        generation.state = GenerationState::Live;
        generation.switched_at = Some(now);
        self.live = Some(number);
        Ok(())
    }

    /// Aborts the building generation `number` (with why): queries never
    /// read it; it can be removed at once.
    pub fn abort(&mut self, number: u32, now: u64, why: &str) -> Result<(), GenerationError> {
        let generation = self.building_mut(number)?;
        generation.state = GenerationState::Aborted;
        generation.retired_at = Some(now);
        generation.note = Some(why.to_owned());
        Ok(())
    }

    /// Generation `number`, which must be building: only a building
    /// generation is published into, switched to or aborted.
    fn building_mut(&mut self, number: u32) -> Result<&mut Generation, GenerationError> {
        let generation = self.get_mut(number)?;
        if generation.state != GenerationState::Building {
            return Err(GenerationError::WrongState {
                number,
                state: generation.state,
                expected: GenerationState::Building,
            });
        }
        Ok(generation)
    }

    /// Generations whose stores may be removed at `now`: aborted ones, and
    /// those retired at least `grace_secs` ago.
    pub fn removable(&self, now: u64, grace_secs: u64) -> Vec<u32> {
        self.generations
            .iter()
            .filter(|g| match g.state {
                GenerationState::Aborted => true,
                GenerationState::Retired => {
                    g.retired_at.unwrap_or(0).saturating_add(grace_secs) <= now
                }
                _ => false,
            })
            .map(|g| g.number)
            .collect()
    }

    /// Forgets generation `number` once its stores are removed. The live
    /// generation is never forgotten.
    pub fn forget(&mut self, number: u32) -> Result<(), GenerationError> {
        let generation = self.get_mut(number)?;
        if matches!(
            generation.state,
            GenerationState::Live | GenerationState::Building
        ) {
            return Err(GenerationError::WrongState {
                number,
                state: generation.state,
                expected: GenerationState::Retired,
            });
        }
        self.generations.retain(|g| g.number != number);
        Ok(())
    }
}

/// Seconds since the Unix epoch now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_goes_live_only_by_the_switch_and_retires_the_old() {
        let mut g = Generations::legacy(Some("m".into()), Some(8));
        assert_eq!(g.live_number(), Some(0));
        let next = g.begin(10, Some(0)).unwrap();
        assert_eq!(next, 1);
        assert_eq!(g.live_number(), Some(0));
        assert_eq!(
            g.begin(11, Some(0)),
            Err(GenerationError::AlreadyBuilding(1))
        );
        g.switch_to(next, 20).unwrap();
        assert_eq!(g.live_number(), Some(1));
        let old = g.get(0).unwrap();
        assert_eq!(old.state, GenerationState::Retired);
        assert_eq!(old.retired_at, Some(20));
        // Retired generations wait out the grace period.
        assert!(g.removable(25, 10).is_empty());
        assert_eq!(g.removable(30, 10), vec![0]);
        g.forget(0).unwrap();
        assert!(g.get(0).is_none());
        // The live one cannot be forgotten; switching to it again is done.
        assert!(g.forget(1).is_err());
        g.switch_to(1, 40).unwrap();
        assert_eq!(g.get(1).unwrap().switched_at, Some(20));
        // A retired one cannot be switched to, nor given a model.
        let b = g.begin(50, Some(1)).unwrap();
        g.switch_to(b, 60).unwrap();
        assert!(matches!(
            g.switch_to(1, 70),
            Err(GenerationError::WrongState { .. })
        ));
        assert!(g.record_model(1, "m", 8).is_err());
    }

    #[test]
    fn an_aborted_rebuild_leaves_the_live_generation_and_is_removable_at_once() {
        let mut g = Generations::default();
        let first = g.begin(1, None).unwrap();
        g.switch_to(first, 2).unwrap();
        let second = g.begin(3, Some(first)).unwrap();
        g.abort(second, 4, "cancelled").unwrap();
        assert_eq!(g.live_number(), Some(first));
        assert_eq!(g.removable(4, 1_000_000), vec![second]);
        assert_eq!(g.get(second).unwrap().note.as_deref(), Some("cancelled"));
        // Numbers are never reused, even after a forget.
        g.forget(second).unwrap();
        assert_eq!(g.begin(5, Some(first)).unwrap(), 3);
    }

    #[test]
    fn numbers_never_go_back_even_when_only_the_live_one_is_left() {
        let mut g = Generations::default();
        let a = g.begin(1, None).unwrap();
        g.switch_to(a, 1).unwrap();
        let b = g.begin(2, Some(a)).unwrap();
        g.switch_to(b, 2).unwrap();
        g.forget(a).unwrap();
        assert_eq!(g.begin(3, Some(b)).unwrap(), b + 1);
    }

    #[test]
    fn a_generation_holds_the_vectors_of_one_model() {
        let mut g = Generations::default();
        let n = g.begin(1, None).unwrap();
        g.record_model(n, "a", 8).unwrap();
        g.record_model(n, "a", 8).unwrap();
        let err = g.record_model(n, "b", 16).unwrap_err();
        assert!(err.to_string().contains("new generation"), "{err}");
    }

    #[test]
    fn only_a_building_generation_records_what_was_published() {
        let mut g = Generations::default();
        let n = g.begin(1, None).unwrap();
        g.record_published(n, 7, "crawling").unwrap();
        let building = g.get(n).unwrap();
        assert_eq!(building.expected_documents, Some(7));
        assert_eq!(building.note.as_deref(), Some("crawling"));
        g.abort(n, 2, "cancelled").unwrap();
        assert!(matches!(
            g.record_published(n, 8, "crawling"),
            Err(GenerationError::WrongState { .. })
        ));
        assert_eq!(g.get(n).unwrap().note.as_deref(), Some("cancelled"));
        assert_eq!(
            g.record_published(99, 1, "x"),
            Err(GenerationError::Unknown(99))
        );
    }

    #[test]
    fn the_record_reads_back_as_written() {
        let mut g = Generations::legacy(None, None);
        g.begin(7, Some(0)).unwrap();
        let json = serde_json::to_string(&g).unwrap();
        let back: Generations = serde_json::from_str(&json).unwrap();
        assert_eq!(back, g);
        assert!(json.contains("\"building\""), "{json}");
    }
}
