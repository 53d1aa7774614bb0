//! The chunkers' settings (`[chunking]`): sizes and windows, with validation that names the key.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;

/// All chunking settings. Sizes are in characters (Unicode scalar values).
///
/// Every field has a default; [`ChunkingConfig::validate`] rejects settings
/// that cannot work, naming the key (`chunking.code.min_chars`…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChunkingConfig {
    /// Files larger than this many bytes are refused.
    pub max_file_bytes: u64,
    /// Globs (over the repo-relative path) whose files are `api_reference`
    /// rather than `code`/`prose`, e.g. `"docs/api/**"`. `.d.ts` always is.
    pub api_reference_paths: Vec<String>,
    /// Tree-sitter code chunking.
    pub code: CodeConfig,
    /// Markdown (and HTML, which becomes markdown).
    pub markdown: MarkdownConfig,
    /// Plain text: paragraphs merged to a target size, with overlap.
    pub text: TextConfig,
    /// The fallback for everything else: windows of lines, with overlap.
    pub lines: LinesConfig,
}

impl Default for ChunkingConfig {
    fn default() -> Self {
        ChunkingConfig {
            max_file_bytes: 64 * 1024 * 1024,
            api_reference_paths: Vec::new(),
            code: CodeConfig::default(),
            markdown: MarkdownConfig::default(),
            text: TextConfig::default(),
            lines: LinesConfig::default(),
        }
    }
}

/// Settings of the tree-sitter code chunker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CodeConfig {
    /// A definition larger than this is split: a class into a header and its
    /// members, a function at statement boundaries into parts.
    pub max_chars: usize,
    /// Neighbouring definitions smaller than this merge (up to `max_chars`).
    pub min_chars: usize,
    /// Files larger than this many bytes are not parsed; they fall back to
    /// line windows, with a warning.
    pub max_parse_bytes: u64,
    /// When more than this share of a file's bytes lie in syntax errors, the
    /// file falls back to line windows, with a warning.
    pub max_error_ratio: f64,
}

impl Default for CodeConfig {
    fn default() -> Self {
        CodeConfig {
            max_chars: 1200,
            min_chars: 200,
            max_parse_bytes: 4 * 1024 * 1024,
            max_error_ratio: 0.3,
        }
    }
}

/// Settings of the markdown chunker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MarkdownConfig {
    /// A section larger than this is split at block boundaries into parts.
    /// Fenced code blocks are never split, whatever their size.
    pub max_chars: usize,
    /// README and index documents up to this size stay one chunk.
    pub index_max_chars: usize,
}

impl Default for MarkdownConfig {
    fn default() -> Self {
        MarkdownConfig {
            max_chars: 1200,
            index_max_chars: 2000,
        }
    }
}

/// Settings of the plain-text chunker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TextConfig {
    /// Paragraphs are merged up to this size.
    pub target_chars: usize,
    /// Each chunk repeats about this much of the end of the previous one.
    pub overlap_chars: usize,
}

impl Default for TextConfig {
    fn default() -> Self {
        TextConfig {
            target_chars: 1000,
            overlap_chars: 150,
        }
    }
}

/// Settings of the line-window fallback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinesConfig {
    /// Lines per window.
    pub window_lines: usize,
    /// Lines each window repeats from the previous one.
    pub overlap_lines: usize,
    /// A window is also cut at this size (minified code has long lines).
    pub max_chars: usize,
}

impl Default for LinesConfig {
    fn default() -> Self {
        LinesConfig {
            window_lines: 50,
            overlap_lines: 10,
            max_chars: 4000,
        }
    }
}

impl ChunkingConfig {
    /// Checks every setting; the first bad one is named in the error.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let bad = |key: &str, message: String| {
            Err(InvalidSetting {
                key: format!("chunking.{key}"),
                message,
            })
        };
        if self.max_file_bytes == 0 {
            return bad("max_file_bytes", "must be greater than 0".into());
        }
        for (key, value) in [
            ("code.max_chars", self.code.max_chars),
            ("markdown.max_chars", self.markdown.max_chars),
            ("markdown.index_max_chars", self.markdown.index_max_chars),
            ("text.target_chars", self.text.target_chars),
            ("lines.window_lines", self.lines.window_lines),
            ("lines.max_chars", self.lines.max_chars),
        ] {
            if value == 0 {
                return bad(key, "must be greater than 0".into());
            }
        }
        if self.code.min_chars >= self.code.max_chars {
            return bad(
                "code.min_chars",
                format!(
                    "{} must be less than chunking.code.max_chars ({})",
                    self.code.min_chars, self.code.max_chars
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.code.max_error_ratio) {
            return bad(
                "code.max_error_ratio",
                format!("{} must be between 0 and 1", self.code.max_error_ratio),
            );
        }
        if self.text.overlap_chars >= self.text.target_chars {
            return bad(
                "text.overlap_chars",
                format!(
                    "{} must be less than chunking.text.target_chars ({})",
                    self.text.overlap_chars, self.text.target_chars
                ),
            );
        }
        if self.lines.overlap_lines >= self.lines.window_lines {
            return bad(
                "lines.overlap_lines",
                format!(
                    "{} must be less than chunking.lines.window_lines ({})",
                    self.lines.overlap_lines, self.lines.window_lines
                ),
            );
        }
        for (i, glob) in self.api_reference_paths.iter().enumerate() {
            if let Err(e) = globset::Glob::new(glob) {
                return bad(
                    &format!("api_reference_paths[{i}]"),
                    format!("{glob:?} is not a valid glob: {e}"),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(ChunkingConfig::default().validate(), Ok(()));
    }

    #[test]
    fn errors_name_the_key() {
        let mut c = ChunkingConfig::default();
        c.code.min_chars = 5000;
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "chunking.code.min_chars");
        assert!(
            e.to_string()
                .contains("must be less than chunking.code.max_chars"),
            "{e}"
        );

        let mut c = ChunkingConfig::default();
        c.lines.overlap_lines = 50;
        assert_eq!(
            c.validate().unwrap_err().key,
            "chunking.lines.overlap_lines"
        );

        let c = ChunkingConfig {
            api_reference_paths: vec!["docs/**".into(), "a[".into()],
            ..ChunkingConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err().key,
            "chunking.api_reference_paths[1]"
        );

        let mut c = ChunkingConfig::default();
        c.markdown.max_chars = 0;
        assert_eq!(c.validate().unwrap_err().key, "chunking.markdown.max_chars");
    }
}
