//! The manager's decisions, against the embedded data directory's record
//! (`generations.json` in a temporary directory).

use async_trait::async_trait;
use weft_core::generations::{GenerationError, GenerationState, Generations};
use weft_core::ports::{GenerationChange, GenerationRegistry, PortResult, RegistryError};
use weft_wiring::DataDir;
use weft_wiring::generations::FileRegistry;

use super::*;

/// The data directory's registry, with readers that announced what they
/// read (as the NATS registry's readers do).
struct Announcing {
    inner: FileRegistry,
    announced: Vec<u32>,
}

#[async_trait]
impl GenerationRegistry for Announcing {
    async fn load(&self) -> PortResult<Generations> {
        self.inner.load().await
    }

    async fn update(&self, change: &GenerationChange<'_>) -> Result<Generations, RegistryError> {
        self.inner.update(change).await
    }

    async fn read_generations(&self) -> PortResult<Vec<u32>> {
        Ok(self.announced.clone())
    }
}

/// Stores reached through queues, holding `counts`.
struct Queued {
    counts: Counts,
}

#[async_trait]
impl GenerationStores for Queued {
    async fn count(&self, _generation: &Generation) -> PortResult<Counts> {
        Ok(self.counts)
    }

    async fn remove(&self, _number: u32) -> PortResult<Removal> {
        Ok(Removal::Removed(Vec::new()))
    }

    fn published_through_queue(&self) -> bool {
        true
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    data: DataDir,
    registry: FileRegistry,
    stores: DataDirStores,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let data = DataDir::new(tmp.path());
    Fixture {
        registry: FileRegistry::new(data.clone()),
        stores: DataDirStores::new(data.clone(), &weft_config::StoresConfig::default()),
        data,
        _tmp: tmp,
    }
}

const MODEL: Option<(&str, usize)> = Some(("m", 4));

fn first_index() -> Begin<'static> {
    Begin {
        model: MODEL,
        model_changed: false,
        resume: Resume::Interrupted,
    }
}

fn agreeing(chunks: u64) -> Counts {
    Counts {
        documents: 1,
        catalog_chunks: chunks,
        indexed: Some((chunks, chunks)),
        ..Counts::default()
    }
}

/// Begins and switches to a generation; its number.
async fn generation(manager: &GenerationManager<'_>) -> u32 {
    let n = manager.begin(&first_index()).await.unwrap().number;
    manager
        .switch(n, SwitchCheck::Counted(agreeing(3)))
        .await
        .unwrap();
    n
}

#[tokio::test]
async fn gc_keeps_the_live_and_the_announced_generations() {
    let f = fixture();
    let registry = Announcing {
        inner: f.registry.clone(),
        announced: vec![1],
    };
    let manager = GenerationManager::new(&registry, &f.stores);
    for expected in 1..=3 {
        assert_eq!(generation(&manager).await, expected);
    }
    // Within the grace period nothing retired goes.
    let patient =
        GenerationManager::new(&registry, &f.stores).with_grace(Duration::from_secs(3600));
    assert_eq!(patient.gc().await.unwrap(), Collected::default());
    let collected = manager.gc().await.unwrap();
    assert_eq!(collected.removed, vec![2]);
    assert_eq!(collected.still_read, vec![1], "announced by a reader");
    let record = f.data.generations().unwrap();
    assert_eq!(record.live_number(), Some(3));
    assert!(record.get(2).is_none());
    assert_eq!(record.get(1).unwrap().state, GenerationState::Retired);
    assert!(f.data.generation(1).path().exists());
    assert!(!f.data.generation(2).path().exists());
    assert!(f.data.generation(3).path().exists());

    // A generation a process holds a lease on is kept, the live one always.
    let unannounced = GenerationManager::new(&f.registry, &f.stores);
    let lease = f.data.generation(1).lease().unwrap();
    let collected = unannounced.gc().await.unwrap();
    assert_eq!(collected.still_read, vec![1]);
    drop(lease);
    assert_eq!(unannounced.gc().await.unwrap().removed, vec![1]);
    assert_eq!(f.data.live().unwrap().unwrap().number(), 3);
}

#[tokio::test]
async fn switch_refuses_an_incomplete_generation_unless_forced() {
    let f = fixture();
    let manager = GenerationManager::new(&f.registry, &f.stores);
    let live = generation(&manager).await;
    let n = manager.begin(&first_index()).await.unwrap().number;
    let short = Counts {
        indexed: Some((3, 2)),
        ..agreeing(3)
    };
    let err = manager
        .switch(n, SwitchCheck::Counted(short))
        .await
        .unwrap_err();
    assert!(matches!(err, GenerationsError::Incomplete { .. }), "{err}");
    assert!(err.waits());
    assert!(err.to_string().contains("the text index 2"), "{err}");
    assert_eq!(f.data.generations().unwrap().live_number(), Some(live));
    // The operator's --force switches anyway.
    let switched = manager.switch(n, SwitchCheck::Force).await.unwrap();
    assert_eq!((switched.from, switched.counts), (Some(live), None));
    assert_eq!(switched.record.live_number(), Some(n));
    // A generation no longer building is not switched to.
    let err = manager
        .switch(live, SwitchCheck::Counted(agreeing(3)))
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        weft_core::ErrorKind::FailedPrecondition,
        "{err}"
    );
}

#[tokio::test]
async fn a_queued_generation_is_complete_once_all_it_published_is_written() {
    let f = fixture();
    let mut stores = Queued {
        counts: agreeing(3),
    };
    let n = {
        let manager = GenerationManager::new(&f.registry, &stores);
        let begun = manager
            .begin(&Begin {
                model: None,
                model_changed: false,
                resume: Resume::Own(None),
            })
            .await
            .unwrap();
        let incomplete = |e: GenerationsError| match e {
            GenerationsError::Incomplete { why, .. } => why,
            other => panic!("{other}"),
        };
        let n = begun.number;
        // Still publishing: nothing says what it should hold.
        let why = incomplete(manager.check(n).await.unwrap_err());
        assert_eq!(why, Incomplete::Publishing);
        manager.record_published(n, 2, false).await.unwrap();
        assert_eq!(
            incomplete(manager.check(n).await.unwrap_err()),
            Incomplete::Publishing
        );
        manager.record_published(n, 2, true).await.unwrap();
        assert_eq!(
            incomplete(manager.check(n).await.unwrap_err()),
            Incomplete::Documents {
                written: 1,
                expected: 2
            }
        );
        n
    };
    stores.counts.documents = 2;
    let manager = GenerationManager::new(&f.registry, &stores);
    let why = match manager.check(n).await.unwrap_err() {
        GenerationsError::Incomplete { why, .. } => why,
        other => panic!("{other}"),
    };
    assert_eq!(why, Incomplete::NoModel);
    record_model(&f.registry, n, "m", 4).await.unwrap();
    assert_eq!(manager.check(n).await.unwrap().documents, 2);
    // Dead letters: waiting does not help.
    stores.counts.dead_letters = 1;
    let manager = GenerationManager::new(&f.registry, &stores);
    let err = manager.switch(n, SwitchCheck::Count).await.unwrap_err();
    assert!(!err.waits(), "{err}");
    stores.counts.dead_letters = 0;
    let manager = GenerationManager::new(&f.registry, &stores);
    let switched = manager.switch(n, SwitchCheck::Count).await.unwrap();
    assert_eq!(switched.counts.unwrap().documents, 2);
}

#[tokio::test]
async fn begin_continues_an_interrupted_first_index_only() {
    let f = fixture();
    let manager = GenerationManager::new(&f.registry, &f.stores);
    let first = manager.begin(&first_index()).await.unwrap();
    assert_eq!((first.number, first.live, first.resumed), (1, None, false));
    assert!(f.data.generation(1).path().is_dir());
    // Begun again after a kill: the first index is continued.
    let again = manager.begin(&first_index()).await.unwrap();
    assert_eq!((again.number, again.resumed), (1, true));
    // With another model it is begun again, the old one removed.
    let other = manager
        .begin(&Begin {
            model: Some(("other", 8)),
            ..first_index()
        })
        .await
        .unwrap();
    assert_eq!((other.number, other.resumed), (2, false));
    let record = f.data.generations().unwrap();
    assert!(record.get(1).is_none(), "aborted and collected: {record:?}");
    assert!(!f.data.generation(1).path().exists());
    manager
        .switch(2, SwitchCheck::Counted(agreeing(1)))
        .await
        .unwrap();
    // Beside a live generation an interrupted build is begun again.
    let beside = manager.begin(&first_index()).await.unwrap();
    assert_eq!((beside.number, beside.live), (3, Some(2)));
    let again = manager.begin(&first_index()).await.unwrap();
    assert_eq!((again.number, again.resumed), (4, false));
    // A job continues its own generation, and no other.
    let own = manager
        .begin(&Begin {
            model: None,
            model_changed: false,
            resume: Resume::Own(Some(4)),
        })
        .await
        .unwrap();
    assert_eq!((own.number, own.resumed), (4, true));
    let err = manager
        .begin(&Begin {
            model: None,
            model_changed: false,
            resume: Resume::Own(Some(3)),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            GenerationsError::Refused(GenerationError::AlreadyBuilding(4))
        ),
        "{err}"
    );
}

#[tokio::test]
async fn abort_leaves_the_live_generation_and_removes_the_aborted_one() {
    let f = fixture();
    let manager = GenerationManager::new(&f.registry, &f.stores);
    let live = generation(&manager).await;
    let n = manager.begin(&first_index()).await.unwrap().number;
    let collected = manager.abort(n, "cancelled").await.unwrap();
    assert_eq!(collected.removed, vec![n]);
    assert_eq!(f.data.generations().unwrap().live_number(), Some(live));
    assert!(!f.data.generation(n).path().exists());
    let err = manager.abort(99, "no such").await.unwrap_err();
    assert_eq!(err.kind(), weft_core::ErrorKind::NotFound);
}
