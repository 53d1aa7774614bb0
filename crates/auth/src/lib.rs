//! # weft-auth
//!
//! Who may call weft's query surfaces — the gRPC query API and MCP over
//! HTTP — and what they may read (SECURITY.md). Nothing here knows a
//! transport: a caller's `authorization` header goes in as text
//! ([`Auth::authorize`]), a [`Scope`] or an [`AuthError`] comes out, and
//! each surface maps the error's [`kind`](AuthError::kind) to its own
//! answer once (`weft-grpc`: a gRPC code; `weft-mcp`: 401, 403 or 429).
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
//! By job:
//!
//! - [`keys_file`]: the file's format ([`KeysFile`], [`KeyEntry`]), parsed
//!   and checked; errors name the line or the key, never quoting the text.
//! - [`mint`](mod@mint): a new random key and its entry (`weft keys new`).
//! - [`scope`]: what one caller may read ([`Scope`]): a search's filters
//!   narrowed to it or refused, results filtered by it once more.
//! - [`rate`]: per-key token buckets ([`RateLimit`]).
//! - [`store`]: the keys in force ([`KeyStore`]), re-read when the file
//!   changes ([`KeyStore::watch`]): adding, rotating or revoking a key needs
//!   no restart.
//! - [`authorize`]: a request's `authorization` header to a [`Scope`]
//!   ([`Auth`]), and why not ([`AuthError`]).
//! - [`setup`]: the authentication `[query]` configures ([`from_config`]).

#![warn(missing_docs)]

pub mod authorize;
pub mod keys_file;
pub mod mint;
pub mod rate;
pub mod scope;
pub mod setup;
pub mod store;

pub use authorize::{Auth, AuthError};
pub use keys_file::{KeyEntry, KeysFile, KeysFileError};
pub use mint::{KEY_PREFIX, Minted, mint};
pub use rate::RateLimit;
pub use scope::Scope;
pub use setup::{AuthDefault, AuthSetupError, from_config};
pub use store::KeyStore;
