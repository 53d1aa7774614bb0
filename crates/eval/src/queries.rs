//! Labelled query files: one JSON object per line.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A correct answer: lines `start_line..=end_line` (1-based) of `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// File path relative to the corpus root, `/`-separated.
    pub path: String,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, inclusive.
    pub end_line: u32,
}

impl Target {
    /// Number of lines.
    pub fn lines(&self) -> u32 {
        self.end_line.saturating_sub(self.start_line) + 1
    }

    /// Whether lines `start..=end` of `path` overlap this target.
    pub fn overlaps(&self, path: &str, start: u32, end: u32) -> bool {
        self.path == path && start <= self.end_line && end >= self.start_line
    }
}

/// One labelled query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalQuery {
    /// Its id (line number in the file when the file has none).
    #[serde(default)]
    pub id: String,
    /// The question.
    pub query: String,
    /// The corpus it is asked of.
    pub corpus: String,
    /// The target's file, relative to the corpus root.
    pub path: String,
    /// The target's first line.
    pub start_line: u32,
    /// The target's last line.
    pub end_line: u32,
    /// Other correct targets.
    #[serde(default)]
    pub alt_targets: Vec<Target>,
    /// Root of the corpus as users have it, relative to the corpus directory.
    #[serde(default)]
    pub corpus_root: Option<String>,
    /// Root of the hard variant, relative to the corpus directory.
    #[serde(default)]
    pub hard_root: Option<String>,
    /// Lines of a code target (code rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_lines: Option<u32>,
    /// Whether a markdown section is longer than one 256-token chunk.
    #[serde(default, rename = "long@256", skip_serializing_if = "Option::is_none")]
    pub long_256: Option<bool>,
    /// The target's language (`java`, `rust`, `md`, …), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    /// What the target is (`method`, `function`, `section`, …), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A code target's symbol path (`Cache.evict`), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// A section's breadcrumb of headings above it, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading_path: Option<String>,
}

impl EvalQuery {
    /// The main target, then the alternatives.
    pub fn targets(&self) -> Vec<Target> {
        let mut out = vec![Target {
            path: self.path.clone(),
            start_line: self.start_line,
            end_line: self.end_line,
        }];
        out.extend(self.alt_targets.iter().cloned());
        out
    }

    /// Whether the target is long (the adjacency subset): `long@256` for
    /// markdown rows, otherwise more than 50 lines (`n_lines`, or the
    /// target's own line count).
    pub fn is_long(&self) -> bool {
        match self.long_256 {
            Some(long) => long,
            None => {
                self.n_lines
                    .unwrap_or(self.end_line.saturating_sub(self.start_line) + 1)
                    > 50
            }
        }
    }

    /// Whether the target is prose (a markup section) rather than code:
    /// a `heading_path`, or a markup `lang`.
    pub fn is_prose(&self) -> bool {
        self.heading_path.is_some()
            || self
                .lang
                .as_deref()
                .is_some_and(|l| matches!(l, "md" | "markdown" | "rst" | "adoc" | "asciidoc"))
    }

    /// The corpus root of `variant`, relative to the corpus directory.
    pub fn root(&self, variant: Variant) -> Option<&str> {
        match variant {
            Variant::Docs => self.corpus_root.as_deref(),
            Variant::Hard => self.hard_root.as_deref(),
        }
    }
}

/// Which tree of a corpus is indexed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Doc comments blanked / queried headings masked: measures semantic retrieval.
    #[default]
    Hard,
    /// The tree as users have it (queries appear verbatim in it).
    Docs,
}

impl Variant {
    /// Its name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Hard => "hard",
            Variant::Docs => "docs",
        }
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hard" => Ok(Variant::Hard),
            "docs" => Ok(Variant::Docs),
            other => Err(format!("unknown variant {other:?}: use hard or docs")),
        }
    }
}

/// Why a query file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum QueryFileError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a query object.
    #[error("{path}:{line}: not a labelled query ({message})")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The file holds no query.
    #[error("{path}: no queries in the file")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Reads a query file. Blank lines are skipped; any other line that is not
/// a labelled query is an error naming the file and line.
pub fn load_queries(path: &Path) -> Result<Vec<EvalQuery>, QueryFileError> {
    let io = |source| QueryFileError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let mut query: EvalQuery =
            serde_json::from_str(&line).map_err(|e| QueryFileError::Line {
                path: path.to_owned(),
                line: i + 1,
                message: e.to_string(),
            })?;
        if query.start_line == 0 || query.end_line < query.start_line {
            return Err(QueryFileError::Line {
                path: path.to_owned(),
                line: i + 1,
                message: format!(
                    "lines {}..{} are not a 1-based inclusive range",
                    query.start_line, query.end_line
                ),
            });
        }
        if query.id.is_empty() {
            query.id = format!("line-{}", i + 1);
        }
        out.push(query);
    }
    if out.is_empty() {
        return Err(QueryFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(out)
}

/// Groups queries by corpus (in name order), keeping only `corpora` when it
/// is not empty, and at most `limit` per corpus, spread evenly over the
/// corpus's queries in file order (deterministic).
pub fn select_queries(
    queries: Vec<EvalQuery>,
    corpora: &[String],
    limit: Option<usize>,
) -> BTreeMap<String, Vec<EvalQuery>> {
    let mut by_corpus: BTreeMap<String, Vec<EvalQuery>> = BTreeMap::new();
    for query in queries {
        if corpora.is_empty() || corpora.contains(&query.corpus) {
            by_corpus
                .entry(query.corpus.clone())
                .or_default()
                .push(query);
        }
    }
    if let Some(limit) = limit {
        for list in by_corpus.values_mut() {
            if list.len() > limit {
                let n = list.len();
                let keep: Vec<EvalQuery> =
                    (0..limit).map(|i| list[i * n / limit].clone()).collect();
                *list = keep;
            }
        }
    }
    by_corpus
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE_ROW: &str = r#"{"id": "g-1", "query": "Returns the sum.", "corpus": "guava", "lang": "java", "path": "a/B.java", "start_line": 10, "end_line": 80, "n_lines": 71, "alt_targets": [{"path": "a/C.java", "start_line": 3, "end_line": 4}], "corpus_root": "src/g", "hard_root": "nodoc/g", "symbol": "B.sum"}"#;
    const MD_ROW: &str = r#"{"id": "n-1", "query": "Hello world", "corpus": "node", "path": "addons.md", "start_line": 5, "end_line": 9, "long@256": false, "corpus_root": "d", "hard_root": "m"}"#;

    fn write(lines: &[&str]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        use std::io::Write;
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        f
    }

    #[test]
    fn reads_code_and_markdown_rows_with_unknown_fields() {
        let f = write(&[CODE_ROW, "", MD_ROW]);
        let q = load_queries(f.path()).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].targets().len(), 2);
        assert!(q[0].is_long(), "71 lines is long");
        assert!(!q[1].is_long(), "long@256 false wins");
        assert_eq!(q[0].root(Variant::Hard), Some("nodoc/g"));
        assert_eq!(q[1].root(Variant::Docs), Some("d"));
    }

    #[test]
    fn a_bad_line_is_named() {
        let f = write(&[CODE_ROW, r#"{"query": "no corpus"}"#]);
        let err = load_queries(f.path()).unwrap_err().to_string();
        assert!(err.contains(":2:") && err.contains("corpus"), "{err}");
        let f = write(&[
            r#"{"query": "q", "corpus": "c", "path": "p", "start_line": 9, "end_line": 3}"#,
        ]);
        let err = load_queries(f.path()).unwrap_err().to_string();
        assert!(err.contains(":1:") && err.contains("9..3"), "{err}");
        let f = write(&[""]);
        assert!(matches!(
            load_queries(f.path()),
            Err(QueryFileError::Empty { .. })
        ));
    }

    #[test]
    fn selection_filters_corpora_and_spreads_the_limit() {
        let mut rows = Vec::new();
        for i in 0..10 {
            let mut q: EvalQuery = serde_json::from_str(CODE_ROW).unwrap();
            q.id = format!("g-{i}");
            rows.push(q);
        }
        rows.push(serde_json::from_str(MD_ROW).unwrap());
        let all = select_queries(rows.clone(), &[], Some(3));
        assert_eq!(all.len(), 2);
        let ids: Vec<&str> = all["guava"].iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["g-0", "g-3", "g-6"]);
        let only = select_queries(rows, &["node".to_owned()], None);
        assert_eq!(only.keys().collect::<Vec<_>>(), ["node"]);
    }

    #[test]
    fn overlap_is_inclusive_and_per_file() {
        let t = Target {
            path: "a.rs".into(),
            start_line: 10,
            end_line: 20,
        };
        assert!(t.overlaps("a.rs", 20, 30));
        assert!(t.overlaps("a.rs", 1, 10));
        assert!(!t.overlaps("a.rs", 21, 30));
        assert!(!t.overlaps("b.rs", 10, 20));
        assert_eq!(t.lines(), 11);
    }
}
