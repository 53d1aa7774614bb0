//! Who may call the query API, and what they may read (SECURITY.md).
//!
//! Callers send `authorization: Bearer <API key>`. Keys live in a TOML file
//! (`query.api_keys_file`, e.g. mounted from a Kubernetes Secret) as
//! **salted SHA-256 hashes**, each with an id, the projects it may read and
//! optionally the content types and its own rate limit:
//!
//! ```toml
//! [[keys]]
//! id = "docs-bot"
//! projects = ["guava", "handbook"]     # or ["*"]: every project
//! content_types = ["prose"]            # optional: only these
//! salt = "…32 hex…"
//! sha256 = "…64 hex…"                  # sha256(salt bytes ‖ key)
//! rate_per_sec = 5.0                   # optional, overrides query.rate_limit_per_sec
//! burst = 10                           # optional
//! ```
//!
//! A plain salted SHA-256 is the right hash here, unlike for passwords: a
//! key is 32 random bytes made by [`mint`], so there is nothing to guess
//! and no dictionary to slow down; a slow password hash (argon2, bcrypt)
//! would only cost every request time. The salt makes equal keys hash
//! differently and precomputed tables useless; the digest is compared in
//! constant time.
//!
//! The file is re-read when it changes ([`KeyStore::watch`]): adding,
//! rotating or revoking a key (deleting its entry) needs no restart. A file
//! that does not parse leaves the keys in force and is logged.
//!
//! [`Scope`] is what a key may read: a search's project and content-type
//! filters are checked against it or set to it when the request gives none
//! (a project outside it is `NOT_FOUND`, answered as one that is not
//! indexed, so a key learns nothing of other projects; a content type
//! outside it is `PERMISSION_DENIED`); results and `GetChunks` answers are
//! filtered by it once more, so no chunk of another project leaves the
//! server, whatever the stores return.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::Status;
use tonic::metadata::MetadataMap;
use weft_core::retrieval::{DocumentResult, SearchFilter};
use weft_core::{Chunk, ContentType};

/// The prefix of every key [`mint`] makes (so secret scanners can find them).
pub const KEY_PREFIX: &str = "weft_";

/// The keys file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeysFileError {
    /// It could not be read.
    #[error("query.api_keys_file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a keys file. The message never quotes the file's text.
    #[error("query.api_keys_file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line or the key's id.
        message: String,
    },
}

/// The keys file: `[[keys]]` entries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysFile {
    /// The keys.
    #[serde(default)]
    pub keys: Vec<KeyEntry>,
}

/// One API key, as the keys file holds it: never the key itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// A name for the key (who holds it), unique in the file; logged with
    /// each refusal, never the key.
    pub id: String,
    /// The projects it may read; `"*"` alone: every project.
    pub projects: Vec<String>,
    /// The content types it may read; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content_types: Vec<ContentType>,
    /// 16 random bytes, hex.
    pub salt: String,
    /// SHA-256 of the salt's bytes followed by the key's, hex.
    pub sha256: String,
    /// Requests per second (token bucket); unset: `query.rate_limit_per_sec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_sec: Option<f64>,
    /// The bucket's size; unset: `query.rate_limit_burst`, else the rate
    /// rounded up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// A new key: the secret, shown once, and the entry that goes in the file.
#[derive(Debug, Clone)]
pub struct Minted {
    /// The API key: give it to its holder, it is stored nowhere.
    pub key: String,
    /// Its entry for the keys file.
    pub entry: KeyEntry,
}

/// Makes a new random key for `id` reading `projects` (and only
/// `content_types`, when not empty), with its salted hash.
pub fn mint(
    id: &str,
    projects: Vec<String>,
    content_types: Vec<ContentType>,
) -> Result<Minted, KeysFileError> {
    let random = |n: usize| -> Result<Vec<u8>, KeysFileError> {
        let mut bytes = vec![0u8; n];
        getrandom::fill(&mut bytes).map_err(|e| KeysFileError::Invalid {
            path: PathBuf::from("(new key)"),
            message: format!("the system's random number generator failed: {e}"),
        })?;
        Ok(bytes)
    };
    let key = format!("{KEY_PREFIX}{}", hex::encode(random(32)?));
    let salt = random(16)?;
    let entry = KeyEntry {
        id: id.to_owned(),
        projects,
        content_types,
        salt: hex::encode(&salt),
        sha256: hex::encode(digest(&salt, &key)),
        rate_per_sec: None,
        burst: None,
    };
    // The same checks as a file's.
    Key::from_entry(&entry).map_err(|message| KeysFileError::Invalid {
        path: PathBuf::from("(new key)"),
        message,
    })?;
    Ok(Minted { key, entry })
}

fn digest(salt: &[u8], key: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(key.as_bytes());
    hasher.finalize().into()
}

/// A key of the file, decoded.
#[derive(Debug, Clone)]
struct Key {
    id: String,
    salt: Vec<u8>,
    sha256: [u8; 32],
    scope: Scope,
    rate: Option<RateLimit>,
}

impl Key {
    fn from_entry(entry: &KeyEntry) -> Result<Self, String> {
        let id = &entry.id;
        if id.trim().is_empty() || id.chars().any(char::is_control) {
            return Err("a key's id must be a non-empty name".into());
        }
        let salt = hex::decode(&entry.salt)
            .ok()
            .filter(|s| s.len() >= 8)
            .ok_or_else(|| format!("key {id:?}: salt must be at least 8 bytes in hex"))?;
        let sha256: [u8; 32] = hex::decode(&entry.sha256)
            .ok()
            .and_then(|d| d.try_into().ok())
            .ok_or_else(|| format!("key {id:?}: sha256 must be 64 hex characters"))?;
        if entry.projects.is_empty() || entry.projects.iter().any(|p| p.trim().is_empty()) {
            return Err(format!(
                "key {id:?}: projects must name at least one project (or \"*\" for all)"
            ));
        }
        let projects = if entry.projects.iter().any(|p| p == "*") {
            if entry.projects.len() > 1 {
                return Err(format!(
                    "key {id:?}: projects holds \"*\" (every project) and names too"
                ));
            }
            None
        } else {
            Some(entry.projects.iter().cloned().collect())
        };
        let content_types = if entry.content_types.is_empty() {
            None
        } else {
            let mut types = entry.content_types.clone();
            types.sort_by_key(|t| t.as_str());
            types.dedup();
            Some(types)
        };
        let rate = match (entry.rate_per_sec, entry.burst) {
            (Some(rate), _) if !(rate.is_finite() && rate > 0.0) => {
                return Err(format!("key {id:?}: rate_per_sec must be positive"));
            }
            (_, Some(0)) => return Err(format!("key {id:?}: burst must be at least 1")),
            (Some(rate), burst) => Some(RateLimit::new(rate, burst)),
            (None, _) => None,
        };
        Ok(Self {
            id: id.clone(),
            salt,
            sha256,
            scope: Scope {
                key_id: Some(id.clone()),
                projects,
                content_types,
            },
            rate,
        })
    }

    /// Whether `presented` is this key: the digest compared in constant time.
    fn matches(&self, presented: &str) -> bool {
        digest(&self.salt, presented).ct_eq(&self.sha256).into()
    }
}

/// Parses a keys file's text; errors name the line or the key, never
/// quoting the text.
fn parse_keys(path: &Path, text: &str) -> Result<Vec<Key>, KeysFileError> {
    let invalid = |message: String| KeysFileError::Invalid {
        path: path.to_owned(),
        message,
    };
    let file: KeysFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| {
            text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        });
        invalid(match line {
            Some(line) => format!("line {line}: {}", e.message()),
            None => e.message().to_owned(),
        })
    })?;
    let mut ids = BTreeSet::new();
    let mut keys = Vec::with_capacity(file.keys.len());
    for entry in &file.keys {
        if !ids.insert(entry.id.clone()) {
            return Err(invalid(format!("key id {:?} appears twice", entry.id)));
        }
        keys.push(Key::from_entry(entry).map_err(invalid)?);
    }
    Ok(keys)
}

/// What one caller may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The key, for logs; `None` without authentication.
    pub key_id: Option<String>,
    /// The projects; `None`: every project.
    pub projects: Option<BTreeSet<String>>,
    /// The content types; `None`: all.
    pub content_types: Option<Vec<ContentType>>,
}

impl Scope {
    /// Everything: the scope of every caller when `query.auth = "none"`.
    pub fn everything() -> Self {
        Self {
            key_id: None,
            projects: None,
            content_types: None,
        }
    }

    /// Nothing: the scope of a caller no authentication let through.
    pub fn nothing() -> Self {
        Self {
            key_id: None,
            projects: Some(BTreeSet::new()),
            content_types: Some(Vec::new()),
        }
    }

    /// Whether the scope covers the project `name`.
    pub fn allows_project(&self, name: &str) -> bool {
        self.projects.as_ref().is_none_or(|p| p.contains(name))
    }

    /// Checks a search's filter against the scope and narrows it to the
    /// scope: no project filter becomes the key's projects. A project
    /// outside the scope is `NOT_FOUND`, as one that is not indexed
    /// ([`weft_core::projects`]; callers check the projects with their
    /// list first); a content type outside it is `PERMISSION_DENIED`.
    pub fn restrict(&self, filter: &mut SearchFilter) -> Result<(), Status> {
        if let Some(allowed) = &self.projects {
            // An empty filter means every project: never the widening of
            // a scope of none.
            if allowed.is_empty() {
                return Err(Status::permission_denied("this caller may read no project"));
            }
            if filter.projects.is_empty() {
                filter.projects = allowed.iter().cloned().collect();
            } else {
                weft_core::projects::check_projects(
                    "projects",
                    &filter.projects,
                    &allowed.iter().collect::<Vec<_>>(),
                    true,
                )
                .map_err(|e| Status::not_found(e.unlisted().to_string()))?;
            }
        }
        if let Some(allowed) = &self.content_types {
            if filter.content_types.is_empty() {
                filter.content_types = allowed.to_vec();
            } else if let Some(t) = filter.content_types.iter().find(|t| !allowed.contains(*t)) {
                return Err(Status::permission_denied(format!(
                    "this API key may not read content type {t}"
                )));
            }
        }
        Ok(())
    }

    /// Whether the scope covers `chunk`.
    pub fn allows(&self, chunk: &Chunk) -> bool {
        self.allows_project(&chunk.project)
            && self
                .content_types
                .as_ref()
                .is_none_or(|t| t.contains(&chunk.content_type))
    }

    /// Drops from `results` every chunk the scope does not cover, and spans
    /// and documents left empty; returns how many chunks were dropped (0
    /// unless a store returned what the filter excludes).
    pub fn retain(&self, results: &mut Vec<DocumentResult>) -> usize {
        if self.projects.is_none() && self.content_types.is_none() {
            return 0;
        }
        let mut dropped = 0;
        for document in results.iter_mut() {
            for span in &mut document.spans {
                let before = span.chunks.len();
                span.chunks.retain(|c| self.allows(&c.chunk));
                dropped += before - span.chunks.len();
            }
            document.spans.retain(|s| !s.chunks.is_empty());
        }
        results.retain(|d| !d.spans.is_empty());
        if dropped > 0 {
            tracing::warn!(
                key = self.key_id.as_deref().unwrap_or("-"),
                dropped,
                "chunks outside the API key's scope came back from the stores and were dropped"
            );
        }
        dropped
    }
}

/// A token bucket's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second.
    pub per_sec: f64,
    /// The bucket's size.
    pub burst: f64,
}

impl RateLimit {
    /// `per_sec` with a bucket of `burst` (default: `per_sec` rounded up, at least 1).
    pub fn new(per_sec: f64, burst: Option<u32>) -> Self {
        Self {
            per_sec,
            burst: burst.map(f64::from).unwrap_or(per_sec.ceil()).max(1.0),
        }
    }
}

#[derive(Debug)]
struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Takes one token; `Err(wait)` when the bucket is empty.
    fn take(&mut self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        if self.limit != limit {
            // The limit changed with the file: start full under the new one.
            self.limit = limit;
            self.tokens = limit.burst;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * limit.per_sec).min(limit.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / limit.per_sec))
        }
    }
}

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
    /// rate limit.
    fn authenticate(&self, presented: &str) -> Result<Scope, Status> {
        let keys = self.current();
        let key = keys
            .iter()
            .find(|k| k.matches(presented))
            .ok_or_else(|| Status::unauthenticated("invalid API key"))?;
        if let Some(limit) = key.rate.or(self.default_rate) {
            let now = Instant::now();
            let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
            let bucket = buckets.entry(key.id.clone()).or_insert(Bucket {
                limit,
                tokens: limit.burst,
                at: now,
            });
            if let Err(wait) = bucket.take(limit, now) {
                return Err(Status::resource_exhausted(format!(
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

/// How a server authenticates its callers.
#[derive(Debug, Clone)]
pub enum Auth {
    /// No authentication: every caller reads everything.
    Open,
    /// Bearer API keys.
    Keys(Arc<KeyStore>),
}

impl Auth {
    /// The caller's scope from the request's `authorization` metadata:
    /// `UNAUTHENTICATED` without a valid key, `RESOURCE_EXHAUSTED` over
    /// its rate limit.
    pub fn authorize(&self, metadata: &MetadataMap) -> Result<Scope, Status> {
        let store = match self {
            Auth::Open => return Ok(Scope::everything()),
            Auth::Keys(store) => store,
        };
        let value = metadata.get("authorization").ok_or_else(|| {
            Status::unauthenticated(
                "this query service requires an API key: send `authorization: Bearer <key>`",
            )
        })?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Status::unauthenticated("the authorization metadata must be `Bearer <key>`")
            })?;
        store.authenticate(token)
    }
}

/// What a binary does when `query.auth` is unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthDefault {
    /// Keys are required (`weft-query`): without `query.api_keys_file` the
    /// service does not start.
    Required,
    /// The keys of `query.api_keys_file` when set; else no authentication,
    /// but only on a loopback address (`weft serve` on a laptop).
    OpenOnLoopback,
}

/// Why authentication could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// Keys are required and no keys file is configured.
    #[error(
        "{what} requires API keys: set query.api_keys_file (WEFT__QUERY__API_KEYS_FILE) to a keys file made with `weft keys new`, or set query.auth = \"none\" (WEFT__QUERY__AUTH=none) to serve every project to anyone who reaches {listen}"
    )]
    KeysRequired {
        /// Which server and why.
        what: String,
        /// The listen address.
        listen: String,
    },
    /// The keys file could not be used.
    #[error(transparent)]
    KeysFile(#[from] KeysFileError),
}

/// The authentication `[query]` configures for a server listening on
/// `listen`; `default` decides when `query.auth` is unset. Serving without
/// authentication is logged as a warning.
pub fn from_config(
    config: &weft_config::QueryServiceConfig,
    listen: &str,
    default: AuthDefault,
) -> Result<Auth, AuthSetupError> {
    use weft_config::QueryAuth;
    let loopback = listen
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback());
    let open = |why: &str| {
        tracing::warn!(
            listen,
            "the query API has no authentication ({why}): every caller that reaches it reads every project"
        );
        Ok(Auth::Open)
    };
    let file = match (config.auth, &config.api_keys_file, default) {
        (Some(QueryAuth::None), _, _) => return open("query.auth = \"none\""),
        (_, Some(file), _) => file,
        (None, None, AuthDefault::OpenOnLoopback) if loopback => {
            return open("loopback address, no query.api_keys_file");
        }
        (_, None, AuthDefault::Required) => {
            return Err(AuthSetupError::KeysRequired {
                what: "the query service".into(),
                listen: listen.to_owned(),
            });
        }
        (_, None, AuthDefault::OpenOnLoopback) => {
            return Err(AuthSetupError::KeysRequired {
                what: format!("serving on {listen}, which is not a loopback address,"),
                listen: listen.to_owned(),
            });
        }
    };
    let default_rate = config
        .rate_limit_per_sec
        .map(|rate| RateLimit::new(rate, config.rate_limit_burst));
    let store = KeyStore::open(file, default_rate)?;
    tracing::info!(file = %file.display(), keys = store.ids().len(), "query API requires API keys");
    Ok(Auth::Keys(Arc::new(store)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_covers_no_project_and_everything_every_project() {
        assert!(!Scope::nothing().allows_project("demo"));
        assert!(Scope::everything().allows_project("demo"));
        let mut filter = SearchFilter::default();
        assert_eq!(
            Scope::nothing().restrict(&mut filter).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        let chunk = weft_core::retrieval::example_chunks().remove(0);
        assert!(!Scope::nothing().allows(&chunk));
        assert!(Scope::everything().allows(&chunk));
    }

    fn store_with(
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
            let status = store.authenticate(bad).unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unauthenticated);
        }
        // The file never holds the key.
        let text = toml::to_string(&KeysFile {
            keys: vec![a.entry],
        })
        .unwrap();
        assert!(!text.contains(&a.key[KEY_PREFIX.len()..]));
    }

    #[test]
    fn the_dev_overlay_key_is_the_one_its_file_documents() {
        let text = include_str!("../../../deploy/k8s/overlays/dev/query-keys.toml");
        let key = text
            .lines()
            .filter_map(|l| l.strip_prefix('#'))
            .map(str::trim)
            .find(|l| l.starts_with(KEY_PREFIX))
            .expect("the dev key in a comment");
        let keys = parse_keys(Path::new("query-keys.toml"), text).unwrap();
        assert_eq!(keys.len(), 1);
        assert!(keys[0].matches(key));
        assert_eq!(keys[0].scope.projects, None);
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

    #[test]
    fn the_bearer_scheme_is_required() {
        let minted = mint("a", vec!["p".into()], vec![]).unwrap();
        let (_dir, store) = store_with(vec![minted.entry], None);
        let auth = Auth::Keys(Arc::new(store));
        let mut metadata = MetadataMap::new();
        assert_eq!(
            auth.authorize(&metadata).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        for value in [minted.key.clone(), format!("Basic {}", minted.key)] {
            metadata.insert("authorization", value.parse().unwrap());
            assert_eq!(
                auth.authorize(&metadata).unwrap_err().code(),
                tonic::Code::Unauthenticated,
                "{value}"
            );
        }
        metadata.insert(
            "authorization",
            format!("bearer {}", minted.key).parse().unwrap(),
        );
        assert!(auth.authorize(&metadata).is_ok());
        assert_eq!(
            Auth::Open.authorize(&MetadataMap::new()).unwrap(),
            Scope::everything()
        );
    }

    #[test]
    fn a_scope_narrows_filters_and_refuses_what_it_does_not_cover() {
        let scope = Scope {
            key_id: Some("k".into()),
            projects: Some(BTreeSet::from(["a".to_owned(), "b".to_owned()])),
            content_types: Some(vec![ContentType::Prose]),
        };
        let mut filter = SearchFilter::default();
        scope.restrict(&mut filter).unwrap();
        assert_eq!(filter.projects, ["a", "b"]);
        assert_eq!(filter.content_types, [ContentType::Prose]);
        let mut filter = SearchFilter {
            projects: vec!["a".into(), "c".into()],
            ..Default::default()
        };
        let status = scope.restrict(&mut filter).unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert_eq!(
            status.message(),
            "projects: project \"c\" is not indexed",
            "{status:?}"
        );
        let mut filter = SearchFilter {
            content_types: vec![ContentType::Code],
            ..Default::default()
        };
        assert_eq!(
            scope.restrict(&mut filter).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        let mut filter = SearchFilter {
            projects: vec!["b".into()],
            ..Default::default()
        };
        scope.restrict(&mut filter).unwrap();
        assert_eq!(filter.projects, ["b"]);
    }

    #[test]
    fn a_token_bucket_allows_its_burst_then_its_rate() {
        let limit = RateLimit::new(2.0, Some(3));
        let start = Instant::now();
        let mut bucket = Bucket {
            limit,
            tokens: limit.burst,
            at: start,
        };
        for _ in 0..3 {
            bucket.take(limit, start).unwrap();
        }
        let wait = bucket.take(limit, start).unwrap_err();
        assert!(wait > Duration::from_millis(400) && wait <= Duration::from_millis(500));
        // Half a second later one token is back, and only one.
        let later = start + Duration::from_millis(500);
        bucket.take(limit, later).unwrap();
        assert!(bucket.take(limit, later).is_err());
        // Idle for long: the bucket holds its burst, no more.
        let much_later = later + Duration::from_secs(60);
        for _ in 0..3 {
            bucket.take(limit, much_later).unwrap();
        }
        assert!(bucket.take(limit, much_later).is_err());
    }
}
