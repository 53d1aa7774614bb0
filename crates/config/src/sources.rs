//! `[sources]`: which files of a directory or repository are indexed.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::bad;

/// `[sources]`: which files of a directory or repository are indexed.
/// `.gitignore` and hidden files are always honoured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    /// If not empty, only paths matching one of these globs are indexed.
    pub include: Vec<String>,
    /// Paths matching one of these globs are skipped.
    pub exclude: Vec<String>,
    /// Directory names skipped anywhere: vendored code and build output.
    pub skip_dirs: Vec<String>,
    /// Follow symlinks of a walked directory that lead outside it. Off: a
    /// tree may come from someone else (an archive, a pull request), and a
    /// link to `~/.ssh/id_rsa` would put the key into the index; such links
    /// are reported and not read. Links within the tree are followed.
    pub follow_outside_symlinks: bool,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        Self {
            include: Vec::new(),
            exclude: Vec::new(),
            skip_dirs: [
                "node_modules",
                "vendor",
                "third_party",
                "target",
                "build",
                "dist",
                "out",
                "bin",
                "obj",
                "__pycache__",
                "venv",
                "bower_components",
                "Pods",
            ]
            .map(String::from)
            .to_vec(),
            follow_outside_symlinks: false,
        }
    }
}

impl SourcesConfig {
    /// Checks the section: `include` and `exclude` are globs.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        for (key, globs) in [
            ("sources.include", &self.include),
            ("sources.exclude", &self.exclude),
        ] {
            for glob in globs {
                if let Err(e) = globset::Glob::new(glob) {
                    return bad(key, format!("{glob:?} is not a glob: {e}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::assert_refused;

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_refused(&[("[sources]\nexclude = [\"a/[\"]\n", "sources.exclude")]);
    }
}
