//! The keys of `query.api_keys_file` in force, each with its rate-limit
//! bucket. The file is re-read when it changes ([`KeyStore::watch`]):
//! adding, rotating or revoking a key (deleting its entry) needs no
//! restart. A file that does not parse leaves the keys in force and is
//! logged.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::AuthError;
use crate::keys_file::{Key, KeysFileError, parse_keys};
use crate::rate::{Bucket, RateLimit};
use crate::scope::Scope;

/// The keys of `query.api_keys_file`, re-read when it changes, with each
/// key's rate-limit bucket.
#[derive(Debug)]
pub struct KeyStore {
    path: PathBuf,
    default_rate: Option<RateLimit>,
    keys: RwLock<Arc<Vec<Key>>>,
    /// The file's SHA-256 when last read, to see a change.
    read: Mutex<[u8; 32]>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl KeyStore {
    /// Reads the keys file at `path`; `default_rate` applies to keys that
    /// set no rate of their own.
    pub fn open(path: &Path, default_rate: Option<RateLimit>) -> Result<Self, KeysFileError> {
        check_permissions(path)?;
        let text = std::fs::read_to_string(path).map_err(|source| KeysFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let keys = parse_keys(path, &text)?;
        if keys.is_empty() {
            tracing::warn!(file = %path.display(), "the API keys file holds no key: every call is refused");
        }
        Ok(Self {
            path: path.to_owned(),
            default_rate,
            keys: RwLock::new(Arc::new(keys)),
            read: Mutex::new(Sha256::digest(text.as_bytes()).into()),
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// The ids of the keys in force.
    pub fn ids(&self) -> Vec<String> {
        self.current().iter().map(|k| k.id.clone()).collect()
    }

    fn current(&self) -> Arc<Vec<Key>> {
        self.keys
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Reads the file again if its contents changed; returns whether the
    /// keys were replaced. A file that cannot be read or parsed leaves the
    /// keys in force (the error says why).
    pub async fn reload(&self) -> Result<bool, KeysFileError> {
        check_permissions(&self.path)?;
        let text = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|source| KeysFileError::Read {
                path: self.path.clone(),
                source,
            })?;
        let hash: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        if *self.read.lock().unwrap_or_else(|p| p.into_inner()) == hash {
            return Ok(false);
        }
        let keys = parse_keys(&self.path, &text)?;
        let ids: BTreeSet<String> = keys.iter().map(|k| k.id.clone()).collect();
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
        *self.read.lock().unwrap_or_else(|p| p.into_inner()) = hash;
        self.buckets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, _| ids.contains(id));
        tracing::info!(file = %self.path.display(), keys = ids.len(), "API keys reloaded");
        Ok(true)
    }

    /// Re-reads the file every `every` until the task is dropped. Errors
    /// are logged (once per distinct error) and the keys in force stay.
    pub async fn watch(self: Arc<Self>, every: Duration) {
        let mut last_error = String::new();
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            match self.reload().await {
                Ok(_) => last_error.clear(),
                Err(e) => {
                    let message = e.to_string();
                    if message != last_error {
                        tracing::error!(error = %message, "API keys file not reloaded; the keys in force stay");
                        last_error = message;
                    }
                }
            }
        }
    }

    /// The scope of the key `presented`, after taking one token of its
    /// rate limit: [`AuthError::Unauthenticated`] for a key not in force,
    /// [`AuthError::RateLimited`] over its rate.
    pub fn authenticate(&self, presented: &str) -> Result<Scope, AuthError> {
        let keys = self.current();
        let key = keys
            .iter()
            .find(|k| k.matches(presented))
            .ok_or_else(|| AuthError::Unauthenticated("invalid API key".into()))?;
        if let Some(limit) = key.rate.or(self.default_rate) {
            let now = Instant::now();
            let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
            let bucket = buckets
                .entry(key.id.clone())
                .or_insert_with(|| Bucket::full(limit, now));
            if let Err(wait) = bucket.take(limit, now) {
                return Err(AuthError::RateLimited(format!(
                    "rate limit of API key {:?} ({} requests per second) reached; retry in {} ms",
                    key.id,
                    limit.per_sec,
                    wait.as_millis().max(1)
                )));
            }
        }
        Ok(key.scope.clone())
    }
}

/// Refuses a keys file others may write (anyone who can add a line holds
/// a key); warns when its group may. Kubernetes mounts a Secret's files
/// read-only (mode 0644 by default): they pass.
fn check_permissions(path: &Path) -> Result<(), KeysFileError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path)
            .map_err(|source| KeysFileError::Read {
                path: path.to_owned(),
                source,
            })?
            .permissions()
            .mode()
            & 0o7777;
        if mode & 0o002 != 0 {
            return Err(KeysFileError::WorldWritable {
                path: path.to_owned(),
                mode,
            });
        }
        if mode & 0o020 != 0 {
            tracing::warn!(
                file = %path.display(),
                mode = format!("{mode:o}"),
                "the API keys file is writable by its group: whoever is in it can add a key (chmod g-w)"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use weft_core::ContentType;

    use super::*;
    use crate::{KEY_PREFIX, KeyEntry, KeysFile, mint};

    pub(crate) fn store_with(
        entries: Vec<KeyEntry>,
        rate: Option<RateLimit>,
    ) -> (tempfile::TempDir, KeyStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let text = toml::to_string(&KeysFile { keys: entries }).unwrap();
        std::fs::write(&path, text).unwrap();
        let store = KeyStore::open(&path, rate).unwrap();
        (dir, store)
    }

    #[test]
    fn a_minted_key_matches_its_entry_and_nothing_else() {
        let a = mint("a", vec!["p".into()], vec![]).unwrap();
        let b = mint("b", vec!["*".into()], vec![ContentType::Code]).unwrap();
        assert!(a.key.starts_with(KEY_PREFIX) && a.key.len() == KEY_PREFIX.len() + 64);
        assert_ne!(a.key, b.key);
        assert_ne!(a.entry.salt, b.entry.salt);
        let (_dir, store) = store_with(vec![a.entry.clone(), b.entry.clone()], None);
        let scope = store.authenticate(&a.key).unwrap();
        assert_eq!(scope.key_id.as_deref(), Some("a"));
        assert_eq!(scope.projects, Some(BTreeSet::from(["p".to_owned()])));
        let scope = store.authenticate(&b.key).unwrap();
        assert_eq!(scope.projects, None);
        assert_eq!(scope.content_types, Some(vec![ContentType::Code]));
        let mut wrong = a.key.clone();
        wrong.pop();
        wrong.push('x');
        for bad in [wrong.as_str(), "", "weft_", a.entry.sha256.as_str()] {
            let refused = store.authenticate(bad).unwrap_err();
            assert_eq!(
                refused,
                AuthError::Unauthenticated("invalid API key".into())
            );
        }
        // The file never holds the key.
        let text = toml::to_string(&KeysFile {
            keys: vec![a.entry],
        })
        .unwrap();
        assert!(!text.contains(&a.key[KEY_PREFIX.len()..]));
    }

    #[cfg(unix)]
    #[test]
    fn a_keys_file_others_may_write_is_refused_at_start_and_on_reload() {
        use std::os::unix::fs::PermissionsExt as _;
        let minted = mint("a", vec!["p".into()], vec![]).unwrap();
        let (dir, store) = store_with(vec![minted.entry.clone()], None);
        let path = dir.path().join("keys.toml");
        let chmod =
            |mode| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        chmod(0o666);
        let Err(refused) = KeyStore::open(&path, None) else {
            panic!("a world-writable keys file was accepted");
        };
        assert!(
            matches!(refused, KeysFileError::WorldWritable { mode: 0o666, .. }),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("chmod o-w"), "{refused}");
        // A reload refuses it too, and the keys in force stay.
        let other = mint("b", vec!["p".into()], vec![]).unwrap();
        std::fs::write(
            &path,
            toml::to_string(&KeysFile {
                keys: vec![other.entry],
            })
            .unwrap(),
        )
        .unwrap();
        chmod(0o646);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(runtime.block_on(store.reload()).is_err());
        assert!(store.authenticate(&minted.key).is_ok());
        assert!(store.authenticate(&other.key).is_err());
        // Writable by its group: accepted (with a warning); by its owner only: accepted.
        chmod(0o660);
        assert!(KeyStore::open(&path, None).is_ok());
        chmod(0o600);
        assert!(KeyStore::open(&path, None).is_ok());
    }

    #[test]
    fn over_its_rate_a_key_is_refused_with_the_wait() {
        let minted = mint("slow", vec!["p".into()], vec![]).unwrap();
        let (_dir, store) = store_with(vec![minted.entry], Some(RateLimit::new(0.5, Some(1))));
        store.authenticate(&minted.key).unwrap();
        let refused = store.authenticate(&minted.key).unwrap_err();
        assert!(matches!(refused, AuthError::RateLimited(_)), "{refused:?}");
        assert!(
            refused.message().contains("\"slow\"") && refused.message().contains("retry in"),
            "{refused}"
        );
    }

    #[test]
    fn bad_files_name_the_line_or_key_and_never_quote_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let good = mint("x", vec!["p".into()], vec![]).unwrap().entry;
        for (text, expect) in [
            ("[[keys]]\nid = \"x\"\nsecret-ish = 1\n".to_owned(), "line 3"),
            (
                toml::to_string(&KeysFile {
                    keys: vec![good.clone(), good.clone()],
                })
                .unwrap(),
                "appears twice",
            ),
            (
                toml::to_string(&KeysFile {
                    keys: vec![KeyEntry {
                        projects: vec![],
                        ..good.clone()
                    }],
                })
                .unwrap(),
                "projects",
            ),
            (
                toml::to_string(&KeysFile {
                    keys: vec![KeyEntry {
                        sha256: "abc".into(),
                        ..good.clone()
                    }],
                })
                .unwrap(),
                "sha256",
            ),
            (
                "[[keys]]\nid = \"x\"\nprojects = [\"p\"]\ncontent_types = [\"binary\"]\nsalt = \"00\"\nsha256 = \"00\"\n"
                    .to_owned(),
                "binary",
            ),
        ] {
            std::fs::write(&path, &text).unwrap();
            let message = KeyStore::open(&path, None).unwrap_err().to_string();
            assert!(message.contains("query.api_keys_file"), "{message}");
            assert!(message.contains(expect), "{text}: {message}");
            assert!(!message.contains(&good.sha256), "{message}");
        }
        let message = KeyStore::open(&dir.path().join("missing.toml"), None)
            .unwrap_err()
            .to_string();
        assert!(message.contains("missing.toml"), "{message}");
    }
}
