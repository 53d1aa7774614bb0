//! Index generations, one manager for both deployments (DESIGN §6,
//! "Re-index without downtime"): a new generation is begun beside the live
//! one, written, checked and switched to atomically; old ones are removed
//! once nobody reads them.
//!
//! | piece | holds | where |
//! |---|---|---|
//! | the record and its transitions | `Generations` (`begin`, `switch_to`, `abort`, `forget`, …) | `weft_core::generations` |
//! | where the record lives | `GenerationRegistry`: `generations.json` ([`FileRegistry`](weft_wiring::generations::FileRegistry)), a NATS key-value entry | `weft_core::ports`, `weft-wiring`, `weft-nats` |
//! | what differs per deployment: counting, removing, syncing a generation's stores, the alias | [`GenerationStores`]: [`DataDirStores`] (embedded), `weft-crawler`'s (servers, catalog buckets) | [`stores`] |
//! | every lifecycle decision: resume, completeness, what is collected | [`GenerationManager`] | here |
//!
//! The manager is the one writer of the record (through the state
//! machine's transitions): `weft index`, `weft-crawler --rebuild` and
//! `weft-crawler generations list|switch|abort|gc` go through it, and a
//! writer of a generation records its model with [`record_model`]. The
//! copying of a generation's files stays with the data directory
//! (`weft_wiring::generations::GenerationBuild`); a reader of the data
//! directory (`LiveQuery`, in `weft-wiring` which this crate builds on)
//! removes the generations it let go of with the same transitions
//! (`weft_wiring::generations::collect_garbage`).
//!
//! ```text
//!  begin ──► (write) ──► switch ──► gc
//!    │ resume: an interrupted run's generation     │ complete? catalog = indexes, nothing
//!    │ continued, or aborted and begun again       │ queued or dead-lettered, all published
//!    └──────────────► abort ◄──────────────────────┘ (unless forced)
//! ```

mod data_dir;
mod error;
mod list;
pub mod stores;

use std::time::Duration;

use weft_core::generations::{Generation, GenerationError, GenerationState, Generations, now_secs};
use weft_core::ports::{GenerationChange, GenerationRegistry};

pub use data_dir::DataDirStores;
pub use error::{GenerationsError, Incomplete};
pub use list::{GenerationList, GenerationStatus};
pub use stores::{Counts, GenerationStores, Removal};
pub use weft_wiring::generations::Collected;

/// The note of a generation whose rebuild is still publishing.
const PUBLISHING: &str = "crawling";
/// The note of a generation whose rebuild has published everything.
const PUBLISHED: &str = "published: waiting for the embedders";

/// How [`GenerationManager::begin`] treats a generation left building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// The caller holds the deployment's write lock (`weft index`), so a
    /// building generation is an interrupted run's. A first index (begun
    /// from nothing, nothing live, the same model) is continued: it has no
    /// base to lose. Any other is aborted and a new one begun (copying the
    /// live one is cheap; continuing a copy cut short could switch to an
    /// index without the other projects).
    Interrupted,
    /// The caller's own generation from an earlier attempt (a crawl job's
    /// run record), continued while it is building; else a new one is
    /// begun, which is refused while another is building.
    Own(Option<u32>),
}

/// What [`GenerationManager::begin`] begins.
#[derive(Debug, Clone, Copy)]
pub struct Begin<'a> {
    /// The model of the vectors written and their dimension, recorded now;
    /// `None` when the writers record it ([`record_model`]).
    pub model: Option<(&'a str, usize)>,
    /// The vectors are of another model than the live generation's: an
    /// unfinished generation is never continued.
    pub model_changed: bool,
    /// How a generation left building is treated.
    pub resume: Resume,
}

/// The generation [`GenerationManager::begin`] began or continued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begun {
    /// Its number.
    pub number: u32,
    /// The live generation it is built beside.
    pub live: Option<u32>,
    /// Whether it was left building by an earlier attempt and is continued.
    pub resumed: bool,
}

/// How [`GenerationManager::switch`] checks that a generation is complete.
#[derive(Debug, Clone, Copy)]
pub enum SwitchCheck {
    /// Count its stores through the [`GenerationStores`].
    Count,
    /// Use these counts, taken by the caller from the stores it holds open.
    Counted(Counts),
    /// Do not check (the operator's `--force`).
    Force,
}

/// What [`GenerationManager::switch`] did.
#[derive(Debug)]
pub struct Switched {
    /// The generation live before.
    pub from: Option<u32>,
    /// The record as written.
    pub record: Generations,
    /// What the generation held when checked (`None`: forced).
    pub counts: Option<Counts>,
    /// Whether the name readers outside weft use now names it (`Ok(None)`:
    /// no such name). The switch is done even when this failed.
    pub alias: weft_core::ports::PortResult<Option<bool>>,
}

/// Begins, checks, switches, aborts and collects the generations of one
/// deployment: the record in `registry`, the stores through `stores`.
pub struct GenerationManager<'a> {
    registry: &'a dyn GenerationRegistry,
    stores: &'a dyn GenerationStores,
    grace: Duration,
}

impl<'a> GenerationManager<'a> {
    /// The manager of the generations `registry` records and `stores`
    /// holds. Retired generations are collected at once (the embedded
    /// deployment: a reader's lease keeps what it reads) unless
    /// [`with_grace`](Self::with_grace) says otherwise.
    pub fn new(registry: &'a dyn GenerationRegistry, stores: &'a dyn GenerationStores) -> Self {
        Self {
            registry,
            stores,
            grace: Duration::ZERO,
        }
    }

    /// Keeps retired generations `grace` after their switch before
    /// [`gc`](Self::gc) removes them (`generations.grace_secs`: queries
    /// that started on them finish, a switch can be undone by hand).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The record.
    pub async fn record(&self) -> Result<Generations, GenerationsError> {
        self.registry
            .load()
            .await
            .map_err(GenerationsError::Registry)
    }

    async fn update(&self, change: &GenerationChange<'_>) -> Result<Generations, GenerationsError> {
        Ok(self.registry.update(change).await?)
    }

    /// Every generation, the live and the building one with what they
    /// hold (one that cannot be counted is listed without counts).
    pub async fn list(&self) -> Result<GenerationList, GenerationsError> {
        let record = self.record().await?;
        let mut generations = Vec::new();
        for g in &record.generations {
            let counts = match g.state {
                GenerationState::Live | GenerationState::Building => self
                    .stores
                    .count(g)
                    .await
                    .map_err(|e| {
                        tracing::warn!(
                            generation = g.number,
                            "cannot count it: {}",
                            weft_core::error_chain(&e)
                        )
                    })
                    .ok(),
                _ => None,
            };
            generations.push(GenerationStatus {
                generation: g.clone(),
                counts,
            });
        }
        Ok(GenerationList {
            live: record.live_number(),
            generations,
        })
    }

    /// Begins a generation beside the live one, or continues one an
    /// earlier attempt left building (see [`Resume`]); a new one gets the
    /// model of [`Begin::model`] and its stores are made room for.
    pub async fn begin(&self, begin: &Begin<'_>) -> Result<Begun, GenerationsError> {
        let record = self.record().await?;
        let live = record.live_number();
        if let Some(building) = record.building() {
            let number = building.number;
            if continues(building, live, begin) {
                tracing::info!(
                    generation = number,
                    "continuing the index generation an interrupted run left"
                );
                return Ok(Begun {
                    number,
                    live,
                    resumed: true,
                });
            }
            if begin.resume == Resume::Interrupted {
                self.abort(number, "left building by an interrupted run")
                    .await?;
            }
        }
        let now = now_secs();
        let model = begin.model;
        let written = self
            .update(&|g: &mut Generations| {
                let n = g.begin(now, live)?;
                match model {
                    Some((model, dimension)) => g.record_model(n, model, dimension),
                    None => Ok(()),
                }
            })
            .await?;
        let number = written
            .building()
            .map(|g| g.number)
            .ok_or(GenerationsError::NotRecorded)?;
        self.stores
            .prepare(number)
            .await
            .map_err(GenerationsError::stores(number))?;
        Ok(Begun {
            number,
            live,
            resumed: false,
        })
    }

    /// Records what a rebuild has published into the building generation
    /// `number` so far (`finished`: all of it), for `generations list`, a
    /// switch by hand and the completeness check.
    pub async fn record_published(
        &self,
        number: u32,
        documents: u64,
        finished: bool,
    ) -> Result<Generations, GenerationsError> {
        let note = if finished { PUBLISHED } else { PUBLISHING };
        self.update(&|g: &mut Generations| g.record_published(number, documents, note))
            .await
    }

    /// Checks that the building generation `number` is complete (see
    /// [`Incomplete`]): what it holds.
    pub async fn check(&self, number: u32) -> Result<Counts, GenerationsError> {
        let record = self.record().await?;
        self.complete(&record, number, None).await
    }

    /// Makes the building generation `number` live, after the completeness
    /// check `check` asks for; the one live before is retired, and the
    /// alias of readers outside weft moved.
    pub async fn switch(
        &self,
        number: u32,
        check: SwitchCheck,
    ) -> Result<Switched, GenerationsError> {
        let record = self.record().await?;
        let from = record.live_number();
        let counts = match check {
            SwitchCheck::Force => None,
            SwitchCheck::Count => Some(self.complete(&record, number, None).await?),
            SwitchCheck::Counted(c) => Some(self.complete(&record, number, Some(c)).await?),
        };
        self.stores
            .prepare_switch(number)
            .await
            .map_err(GenerationsError::stores(number))?;
        let now = now_secs();
        let record = self
            .update(&|g: &mut Generations| g.switch_to(number, now))
            .await?;
        tracing::info!(from = ?from, to = number, "switched the live index generation");
        let alias = self.stores.point_live(number).await;
        Ok(Switched {
            from,
            record,
            counts,
            alias,
        })
    }

    /// Aborts the building generation `number` (with why; the live one
    /// stays) and removes the aborted generations' stores. One no longer
    /// building is left as it is.
    pub async fn abort(&self, number: u32, why: &str) -> Result<Collected, GenerationsError> {
        let now = now_secs();
        self.update(
            &|g: &mut Generations| match g.get(number).map(|x| x.state) {
                Some(GenerationState::Building) => g.abort(number, now, why),
                Some(_) => Ok(()),
                None => Err(GenerationError::Unknown(number)),
            },
        )
        .await?;
        self.collect(Duration::MAX).await
    }

    /// Removes the stores of aborted generations and of those retired
    /// longer than the grace period, and forgets them. Never the live or
    /// a building one, nor one a reader announced it reads
    /// (`GenerationRegistry::read_generations`) or holds (the stores say
    /// [`Removal::StillRead`]): those wait for a later collection. A
    /// generation that cannot be removed now is logged and kept.
    pub async fn gc(&self) -> Result<Collected, GenerationsError> {
        self.collect(self.grace).await
    }

    async fn collect(&self, grace: Duration) -> Result<Collected, GenerationsError> {
        let record = self.record().await?;
        let announced = self
            .registry
            .read_generations()
            .await
            .map_err(GenerationsError::Registry)?;
        let mut collected = Collected::default();
        for number in record.removable(now_secs(), grace.as_secs()) {
            if announced.contains(&number) {
                tracing::warn!(
                    generation = number,
                    "a query replica still reads it (it has not followed the switch): not removed"
                );
                collected.still_read.push(number);
                continue;
            }
            match self.stores.remove(number).await {
                Ok(Removal::Removed(what)) => {
                    tracing::info!(generation = number, removed = ?what, "removed an old index generation");
                    self.forget(number).await?;
                    collected.removed.push(number);
                }
                Ok(Removal::StillRead) => collected.still_read.push(number),
                Err(e) => tracing::warn!(
                    generation = number,
                    "cannot remove it yet: {}",
                    weft_core::error_chain(&e)
                ),
            }
        }
        if collected.removed.contains(&0) {
            self.alias_after_generation_zero().await?;
        }
        Ok(collected)
    }

    async fn forget(&self, number: u32) -> Result<Generations, GenerationsError> {
        self.update(&|g: &mut Generations| {
            // Already forgotten by a concurrent collection: fine.
            let _ = g.forget(number);
            Ok(())
        })
        .await
    }

    /// Once generation 0's unnumbered stores are gone, their name can be
    /// the alias of the live one.
    async fn alias_after_generation_zero(&self) -> Result<(), GenerationsError> {
        if let Some(live) = self.record().await?.live_number()
            && let Err(e) = self.stores.point_live(live).await
        {
            tracing::warn!("the alias was not made after removing generation 0: {e}");
        }
        Ok(())
    }

    /// Whether generation `number` of `record` is complete; `counted`:
    /// counts the caller took, else counted through the stores.
    async fn complete(
        &self,
        record: &Generations,
        number: u32,
        counted: Option<Counts>,
    ) -> Result<Counts, GenerationsError> {
        let generation = record.get(number).ok_or(GenerationError::Unknown(number))?;
        if generation.state != GenerationState::Building {
            return Err(GenerationsError::not_building(number, generation.state));
        }
        let incomplete = |why| GenerationsError::Incomplete { number, why };
        if self.stores.published_through_queue()
            && (generation.expected_documents.is_none()
                || generation.note.as_deref() == Some(PUBLISHING))
        {
            return Err(incomplete(Incomplete::Publishing));
        }
        let counts = match counted {
            Some(c) => c,
            None => self
                .stores
                .count(generation)
                .await
                .map_err(GenerationsError::stores(number))?,
        };
        self.judge(generation, &counts).map_err(incomplete)?;
        Ok(counts)
    }

    /// The completeness rule: nothing dead-lettered or queued, every
    /// published document written (by a writer that recorded its model),
    /// and the catalog and both indexes holding the same chunks.
    fn judge(&self, generation: &Generation, counts: &Counts) -> Result<(), Incomplete> {
        if counts.dead_letters > 0 {
            return Err(Incomplete::DeadLettered {
                count: counts.dead_letters,
                place: self.stores.dead_letters_at(generation.number),
            });
        }
        if counts.queued != (0, 0) {
            return Err(Incomplete::Queued {
                documents: counts.queued.0,
                batches: counts.queued.1,
            });
        }
        let expected = generation.expected_documents.unwrap_or(0);
        if counts.documents < expected {
            return Err(Incomplete::Documents {
                written: counts.documents,
                expected,
            });
        }
        if expected > 0 && generation.embedding().is_none() {
            return Err(Incomplete::NoModel);
        }
        if let Some((vectors, text)) = counts.indexed
            && (vectors != counts.catalog_chunks || text != counts.catalog_chunks)
        {
            return Err(Incomplete::Disagree {
                documents: counts.documents,
                catalog_chunks: counts.catalog_chunks,
                vector_chunks: vectors,
                text_chunks: text,
            });
        }
        Ok(())
    }
}

/// Whether [`GenerationManager::begin`] continues `building`.
fn continues(building: &Generation, live: Option<u32>, begin: &Begin<'_>) -> bool {
    match begin.resume {
        Resume::Interrupted => {
            let same_model = match (begin.model, building.model.as_deref()) {
                (Some((model, _)), Some(recorded)) => model == recorded,
                _ => true,
            };
            building.based_on.is_none() && live.is_none() && same_model && !begin.model_changed
        }
        Resume::Own(own) => own == Some(building.number),
    }
}

/// Records that generation `number`'s vectors are made with `model` of
/// `dimension`, or checks it against the one recorded: what a writer of a
/// generation (`weft-embedder`) does before its first write. Needs no
/// stores.
pub async fn record_model(
    registry: &dyn GenerationRegistry,
    number: u32,
    model: &str,
    dimension: usize,
) -> Result<Generations, GenerationsError> {
    Ok(registry
        .update(&|g: &mut Generations| g.record_model(number, model, dimension))
        .await?)
}

#[cfg(test)]
mod tests;
