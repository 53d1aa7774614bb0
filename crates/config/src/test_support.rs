//! Helpers of the sections' tests: load a `weft.toml` through the real
//! layering, without the process environment.

use crate::{ConfigError, WeftConfig, load_with_env};

/// Loads `toml` as the configuration file, with no environment variables.
pub(crate) fn load_toml(toml: &str) -> Result<WeftConfig, ConfigError> {
    load_toml_with_env(toml, Vec::new())
}

/// Loads `toml` as the configuration file, then `env`.
pub(crate) fn load_toml_with_env(
    toml: &str,
    env: Vec<(String, String)>,
) -> Result<WeftConfig, ConfigError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("weft.toml");
    std::fs::write(&path, toml).expect("write weft.toml");
    load_with_env(Some(&path), env).map(|loaded| loaded.config)
}

/// Asserts that each `(toml, text)` fails to load with an error mentioning
/// `text` (the key, or the bad value).
pub(crate) fn assert_refused(cases: &[(&str, &str)]) {
    for (toml, text) in cases {
        let err = load_toml(toml)
            .expect_err("the setting is refused")
            .to_string();
        assert!(err.contains(text), "{toml}: {err}");
    }
}

/// `(name, value)` pairs as the environment gives them.
pub(crate) fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
