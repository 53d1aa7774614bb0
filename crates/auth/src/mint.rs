//! A new API key: 32 random bytes from the operating system's generator,
//! shown once, and the entry of the keys file that holds only its salted
//! hash (`weft keys new`).

use std::path::PathBuf;

use weft_core::ContentType;

use crate::keys_file::{Key, KeyEntry, KeysFileError, digest};

/// The prefix of every key [`mint`] makes (so secret scanners can find them).
pub const KEY_PREFIX: &str = "weft_";

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
        index: false,
    };
    entry.check()?;
    Ok(Minted { key, entry })
}

impl KeyEntry {
    /// The checks a keys file's entry passes (`index` only with every
    /// project, a valid rate, …), for an entry made or changed here.
    pub fn check(&self) -> Result<(), KeysFileError> {
        Key::from_entry(self)
            .map(drop)
            .map_err(|message| KeysFileError::Invalid {
                path: PathBuf::from("(new key)"),
                message,
            })
    }
}
