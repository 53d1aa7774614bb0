//! The checkout cache: the git checkouts of every project kept under one
//! root (`<data dir>/sources`, a PVC in prod) and fetched run after run,
//! within a disk budget (`crawl.max_checkout_bytes`).
//!
//! A crawl leases its project's checkout ([`CheckoutCache::lease`]) before
//! syncing it and holds the lease while the checkout's files are read. With
//! a budget, a lease first removes the checkouts indexed least recently
//! (never a leased one) until the cache has room for the leased checkout as
//! it was last measured, and the end of a lease removes more until the
//! cache is within the budget again. Each checkout records its size and
//! when it was last synced in `.git/weft-checkout.json`, so a budget check
//! reads one small file per checkout, not their trees. A removed checkout is
//! cloned again (partially) the next time its source is crawled, and still
//! diffed from the last indexed commit: the clone has the whole history.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::checkout_name;

/// The file in a checkout's `.git` recording its size and last sync.
const MARKER: &str = "weft-checkout.json";

/// Git checkouts under one root, within an optional disk budget.
#[derive(Debug, Clone)]
pub struct CheckoutCache {
    root: PathBuf,
    budget: Option<u64>,
    state: Arc<Mutex<State>>,
}

/// What the cache knows, shared by its clones.
#[derive(Debug, Default)]
struct State {
    /// Leases held, per checkout.
    leased: HashMap<PathBuf, usize>,
    /// Checkouts a planned run has still to read ([`CheckoutCache::plan_run`]).
    pending: std::collections::HashSet<PathBuf>,
    /// Every checkout's marker: read from disk at the first budget check
    /// (one small file per checkout), then kept up to date by syncs and
    /// removals, so a check reads nothing.
    known: Option<HashMap<PathBuf, Marker>>,
}

/// A checkout in use: not removed by the cache until dropped.
#[derive(Debug)]
pub struct CheckoutLease {
    cache: CheckoutCache,
    dir: PathBuf,
}

/// What a checkout's marker records.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Marker {
    /// Its disk usage in bytes, working tree and `.git`.
    bytes: u64,
    /// When it was last synced for a crawl (nanoseconds since the epoch).
    synced_unix_nanos: u64,
}

impl CheckoutCache {
    /// The checkouts under `root`, together at most `budget` bytes when
    /// given.
    pub fn new(root: impl Into<PathBuf>, budget: Option<u64>) -> Self {
        Self {
            root: root.into(),
            budget,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The directory all checkouts are under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `project`'s checkout is kept.
    pub fn dir(&self, project: &str) -> PathBuf {
        self.root.join(checkout_name(project))
    }

    /// Leases `project`'s checkout: it is not removed until the lease is
    /// dropped. With a budget, the least recently synced checkouts that no
    /// lease holds are removed first until the cache has room for this one
    /// as it was last measured (nothing, for a new one).
    pub fn lease(&self, project: &str) -> CheckoutLease {
        let dir = self.dir(project);
        {
            let mut state = self.lock();
            *state.leased.entry(dir.clone()).or_default() += 1;
            state.pending.remove(&dir);
        }
        let lease = CheckoutLease {
            cache: self.clone(),
            dir,
        };
        self.evict();
        lease
    }

    /// Whether `project` has a checkout kept here.
    pub fn kept(&self, project: &str) -> bool {
        self.dir(project).join(".git").is_dir()
    }

    /// Plans a run over `items` (its sources; `project` gives an item's
    /// project, `None` for one without a checkout, not git): orders them
    /// (stably) so that those with a kept checkout come first, and keeps
    /// the checkouts of the run's sources until their turn: past the
    /// budget, the checkouts the run has read already, or that it does not
    /// read, are removed first (least recently synced first), and one still
    /// to be read only when no other is left. A run over every source in
    /// the same order each time would otherwise, once the checkouts no
    /// longer fit, remove each checkout just before its turn (the least
    /// recently synced is the next to be read) and clone every repository
    /// again.
    pub fn plan_run<T>(&self, items: &mut [T], project: impl Fn(&T) -> Option<&str>) {
        items.sort_by_cached_key(|item| !project(item).is_some_and(|p| self.kept(p)));
        let dirs: Vec<PathBuf> = items
            .iter()
            .filter_map(|item| project(item).map(|p| self.dir(p)))
            .collect();
        self.lock().pending.extend(dirs);
    }

    /// The disk every checkout takes, as last measured.
    pub fn usage(&self) -> u64 {
        let mut state = self.lock();
        self.known(&mut state).values().map(|m| m.bytes).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves a state that is still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes the least recently synced unleased checkouts until the cache
    /// is within its budget (or only leased ones are left). Holds the lock
    /// throughout: no lease is taken on a checkout being removed.
    fn evict(&self) {
        let Some(budget) = self.budget else { return };
        let mut state = self.lock();
        let known = self.known(&mut state).clone();
        let mut total: u64 = known.values().map(|m| m.bytes).sum();
        if total <= budget {
            return;
        }
        let mut candidates: Vec<(PathBuf, Marker)> = known
            .into_iter()
            .filter(|(dir, _)| !state.leased.contains_key(dir))
            .collect();
        // Those a planned run has still to read last; then least recently
        // synced first.
        candidates.sort_by_cached_key(|(dir, marker)| {
            (
                state.pending.contains(dir),
                marker.synced_unix_nanos,
                dir.clone(),
            )
        });
        for (dir, marker) in candidates {
            if total <= budget {
                break;
            }
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {
                    total = total.saturating_sub(marker.bytes);
                    if let Some(known) = state.known.as_mut() {
                        known.remove(&dir);
                    }
                    tracing::info!(
                        checkout = %dir.display(),
                        bytes = marker.bytes,
                        cache_bytes = total,
                        budget,
                        "removed the checkout synced least recently: the checkouts were over crawl.max_checkout_bytes"
                    );
                }
                Err(e) => tracing::warn!(
                    checkout = %dir.display(),
                    "could not remove a checkout over crawl.max_checkout_bytes: {e}"
                ),
            }
        }
        if total > budget {
            tracing::warn!(
                cache_bytes = total,
                budget,
                "the checkouts in use alone are over crawl.max_checkout_bytes"
            );
        }
    }

    /// The checkouts' markers, read from the root the first time. A
    /// checkout without one (made before the cache kept them) is measured
    /// once and given one.
    fn known<'s>(&self, state: &'s mut State) -> &'s mut HashMap<PathBuf, Marker> {
        state.known.get_or_insert_with(|| {
            let Ok(read) = std::fs::read_dir(&self.root) else {
                return HashMap::new();
            };
            read.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|dir| dir.join(".git").is_dir())
                .map(|dir| {
                    let marker = read_marker(&dir).unwrap_or_else(|| {
                        let marker = Marker {
                            bytes: disk_usage(&dir),
                            synced_unix_nanos: modified_unix_nanos(&dir),
                        };
                        write_marker(&dir, &marker);
                        marker
                    });
                    (dir, marker)
                })
                .collect()
        })
    }
}

impl CheckoutLease {
    /// The checkout's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records the checkout's size and now as its last sync: call it once
    /// the checkout is synced. Returns the size.
    pub fn record_sync(&self) -> u64 {
        let marker = Marker {
            bytes: disk_usage(&self.dir),
            synced_unix_nanos: now_unix_nanos(),
        };
        write_marker(&self.dir, &marker);
        if let Some(known) = self.cache.lock().known.as_mut() {
            known.insert(self.dir.clone(), marker);
        }
        marker.bytes
    }
}

impl Drop for CheckoutLease {
    fn drop(&mut self) {
        {
            let mut state = self.cache.lock();
            if let Some(n) = state.leased.get_mut(&self.dir) {
                *n -= 1;
                if *n == 0 {
                    state.leased.remove(&self.dir);
                }
            }
        }
        self.cache.evict();
    }
}

fn write_marker(dir: &Path, marker: &Marker) {
    if let Ok(json) = serde_json::to_vec(marker)
        && let Err(e) = std::fs::write(dir.join(".git").join(MARKER), json)
    {
        tracing::warn!(checkout = %dir.display(), "could not record the checkout's size: {e}");
    }
}

fn read_marker(dir: &Path) -> Option<Marker> {
    let bytes = std::fs::read(dir.join(".git").join(MARKER)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn now_unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn modified_unix_nanos(dir: &Path) -> u64 {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The disk `dir` takes: its files' allocated blocks, symlinks not
/// followed.
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in read.filter_map(Result::ok) {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout(
        cache: &CheckoutCache,
        project: &str,
        bytes: usize,
        synced_unix_nanos: u64,
    ) -> PathBuf {
        let dir = cache.dir(project);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join("file"), vec![b'x'; bytes]).unwrap();
        let marker = Marker {
            bytes: disk_usage(&dir),
            synced_unix_nanos,
        };
        std::fs::write(
            dir.join(".git").join(MARKER),
            serde_json::to_vec(&marker).unwrap(),
        )
        .unwrap();
        dir
    }

    #[test]
    fn the_least_recently_synced_unleased_checkouts_go_first() {
        let root = tempfile::tempdir().unwrap();
        let unlimited = CheckoutCache::new(root.path(), None);
        let old = checkout(&unlimited, "old", 100_000, 10);
        let middle = checkout(&unlimited, "middle", 100_000, 20);
        let busy = checkout(&unlimited, "busy", 100_000, 5);
        let each = disk_usage(&old);
        let cache = CheckoutCache::new(root.path(), Some(3 * each));

        // Within the budget: nothing goes.
        let busy_lease = cache.lease("busy");
        assert!(old.exists() && middle.exists());

        // A fourth checkout: the oldest unleased one makes room once it is
        // synced and its lease ends; the leased one, older still, stays.
        let new = cache.lease("new");
        std::fs::create_dir_all(new.dir().join(".git")).unwrap();
        std::fs::write(new.dir().join("file"), vec![b'x'; 100_000]).unwrap();
        assert!(new.record_sync() >= 100_000, "its size recorded");
        drop(new);
        assert!(
            !old.exists(),
            "the least recently synced checkout was removed"
        );
        assert!(middle.exists() && busy.exists() && cache.dir("new").exists());
        assert!(cache.usage() <= 3 * each + 4096);

        // Released, the leased checkout is the oldest: next to go.
        drop(busy_lease);
        let cache = CheckoutCache::new(root.path(), Some(2 * each));
        drop(cache.lease("middle"));
        assert!(!busy.exists(), "the oldest, no longer leased");
        assert!(middle.exists() && cache.dir("new").exists());
    }

    /// Runs over the same ten sources in the same order, night after
    /// night, with room for about half their checkouts, and each night
    /// one kept checkout grows: planned, every kept checkout is fetched,
    /// not cloned; in the given order with least-recently-synced removal
    /// alone, none is.
    #[test]
    fn a_planned_run_over_more_than_fits_reuses_every_kept_checkout() {
        let nights = |planned: bool| {
            let root = tempfile::tempdir().unwrap();
            let unlimited = CheckoutCache::new(root.path(), None);
            let one = disk_usage(&checkout(&unlimited, "probe", 100_000, 0));
            std::fs::remove_dir_all(unlimited.dir("probe")).unwrap();
            let cache = CheckoutCache::new(root.path(), Some(5 * one + one / 2));
            let sources: Vec<String> = (0..10).map(|i| format!("repo{i}")).collect();
            let mut fetched = Vec::new();
            for night in 0..4 {
                let mut order = sources.clone();
                if planned {
                    cache.plan_run(&mut order, |p| Some(p.as_str()));
                }
                let (mut hits, mut kept) = (0, 0);
                for project in &sources {
                    kept += usize::from(cache.kept(project));
                }
                for (i, project) in order.iter().enumerate() {
                    let lease = cache.lease(project);
                    if cache.kept(project) {
                        hits += 1;
                        if i == 0 {
                            // A commit: this checkout grows.
                            let grown = format!("grown-{night}");
                            std::fs::write(lease.dir().join(grown), vec![b'y'; 30_000]).unwrap();
                        }
                    } else {
                        std::fs::create_dir_all(lease.dir().join(".git")).unwrap();
                        std::fs::write(lease.dir().join("file"), vec![b'x'; 100_000]).unwrap();
                    }
                    lease.record_sync();
                }
                fetched.push((hits, kept));
            }
            fetched
        };
        let planned = nights(true);
        assert_eq!(planned[0], (0, 0));
        for &(hits, kept) in &planned[1..] {
            assert!(kept >= 4 && hits == kept, "{planned:?}");
        }
        let unplanned = nights(false);
        assert!(
            unplanned.iter().all(|&(hits, _)| hits == 0),
            "{unplanned:?}"
        );
    }

    #[test]
    fn checkouts_without_a_record_are_measured_and_files_beside_them_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("legacy");
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join("file"), vec![b'x'; 50_000]).unwrap();
        std::fs::write(root.path().join("notes.txt"), b"not a checkout").unwrap();
        std::fs::create_dir_all(root.path().join("not-git")).unwrap();
        let cache = CheckoutCache::new(root.path(), Some(1));
        assert!(cache.usage() >= 50_000);
        drop(cache.lease("other"));
        assert!(
            !dir.exists(),
            "over the budget, the unrecorded checkout goes"
        );
        assert!(root.path().join("notes.txt").exists());
        assert!(root.path().join("not-git").exists());
    }
}
