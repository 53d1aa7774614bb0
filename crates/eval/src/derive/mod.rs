//! Deriving a labelled query set from a project's own code and docs, the
//! way `shared/eval` derives its sets, with weft's own parsers:
//!
//! - **code**: the first sentence of a function's or method's doc comment
//!   asks for the definition, and the hard copy blanks every doc comment
//!   (line numbers kept). Java, Kotlin, C#, C, C++, PHP, JavaScript and
//!   TypeScript `/** */`; Rust, C# and C/C++ `///`; Go's and Ruby's
//!   comment above a definition; Python docstrings.
//! - **prose**: a markdown, reStructuredText or AsciiDoc heading asks for
//!   its section (to the next heading of any level), and the hard copy
//!   replaces each asked heading by "Section N".
//!
//! The filters are those of `shared/eval/tools/derive_*_queries.py`: no
//! tests, examples or generated code; no constructors, `toString`-likes,
//! bodiless or trivial accessors or definitions under three lines; no
//! query under three or over forty words, boilerplate, or one that only
//! echoes the symbol's name; no generic heading ("Examples"), short
//! heading that is not an API name, section under forty words, or heading
//! that occurs twice. Copies of one body become alternative targets;
//! one query asked of several definitions is kept when they are in one file
//! (overloads), else dropped.
//!
//! [`Deriver::add`] takes each file of the tree; [`Deriver::finish`] gives
//! the queries, the hard copy of the files it held back, and the counts.

mod code;
mod text;

use std::collections::{BTreeMap, HashMap};

use weft_chunking::{Chunker, Strategy};

use crate::queries::{EvalQuery, Target};
use text::DocStyle;

/// Names whose doc comments make poor queries.
const SKIP_NAMES: &[&str] = &[
    "toString",
    "equals",
    "hashCode",
    "clone",
    "finalize",
    "main",
    "compareTo",
    "constructor",
    "readObject",
    "writeObject",
    "readResolve",
    "writeReplace",
    "valueOf",
    "values",
    "toJSON",
    "new",
    "default",
    "fmt",
    "drop",
];

/// What the derived rows record as where they come from.
#[derive(Debug, Clone)]
pub struct DeriveOptions {
    /// The corpus name on every row (and the prefix of its ids).
    pub corpus: String,
    /// `corpus_root` of every row: the tree as it is.
    pub corpus_root: String,
    /// `hard_root` of every row: where the hard copy is written.
    pub hard_root: String,
    /// Definitions shorter than this many lines are not asked for.
    pub min_lines: u32,
    /// Sections with fewer words under their heading are not asked for.
    pub min_body_words: usize,
}

impl DeriveOptions {
    /// The shared derivation's thresholds (3 lines, 40 words).
    pub fn new(corpus: &str, corpus_root: &str, hard_root: &str) -> Self {
        Self {
            corpus: corpus.to_owned(),
            corpus_root: corpus_root.to_owned(),
            hard_root: hard_root.to_owned(),
            min_lines: 3,
            min_body_words: 40,
        }
    }
}

/// What the hard copy of a file is.
#[derive(Debug)]
pub enum HardCopy {
    /// These bytes, now (code with its doc comments blanked, or the file
    /// as it is).
    Now(Vec<u8>),
    /// Held until [`Deriver::finish`]: a markup file whose asked headings
    /// are masked once the set is known.
    Later,
}

/// What a derivation kept and dropped, by reason.
pub type DeriveStats = BTreeMap<String, usize>;

/// A code query before grouping.
struct CodeRow {
    query: String,
    path: String,
    lang: &'static str,
    lines: (u32, u32),
    symbol: String,
    kind: &'static str,
    normalised: String,
}

/// A heading query before the ambiguity filter.
struct HeadingRow {
    query: String,
    path: String,
    lang: &'static str,
    title_lines: (u32, u32),
    lines: (u32, u32),
    heading_path: String,
    long: bool,
}

/// Derives a query set from the files of one tree.
pub struct Deriver<'c> {
    chunker: &'c Chunker,
    options: DeriveOptions,
    code: Vec<CodeRow>,
    headings: Vec<HeadingRow>,
    /// Markup files held for masking, by path.
    held: BTreeMap<String, String>,
    stats: DeriveStats,
}

/// The derived set.
#[derive(Debug)]
pub struct Derived {
    /// The queries, by path and line, with ids `<corpus>-00000` on.
    pub queries: Vec<EvalQuery>,
    /// The hard copy of each held file, as (path, text).
    pub held: Vec<(String, String)>,
    /// Counts of what was kept and dropped.
    pub stats: DeriveStats,
}

impl<'c> Deriver<'c> {
    /// A derivation with `chunker`'s file detection and parsers.
    pub fn new(chunker: &'c Chunker, options: DeriveOptions) -> Self {
        Self {
            chunker,
            options,
            code: Vec::new(),
            headings: Vec::new(),
            held: BTreeMap::new(),
            stats: DeriveStats::new(),
        }
    }

    fn count(&mut self, what: &str) {
        *self.stats.entry(what.to_owned()).or_default() += 1;
    }

    /// Reads the file at `path` (relative, `/`-separated) and says what its
    /// hard copy is. Files that are not UTF-8 text are copied as they are.
    pub fn add(&mut self, path: &str, bytes: &[u8]) -> HardCopy {
        self.count("files");
        let Ok(text) = std::str::from_utf8(bytes) else {
            return HardCopy::Now(bytes.to_vec());
        };
        if bytes.contains(&0) {
            return HardCopy::Now(bytes.to_vec());
        }
        let kind = self.chunker.detect_text(path, text);
        match kind.strategy {
            Strategy::Code(language) => HardCopy::Now(self.add_code(path, language, text)),
            Strategy::Markdown | Strategy::Rst | Strategy::AsciiDoc => {
                let lang = match kind.strategy {
                    Strategy::Markdown => "md",
                    Strategy::Rst => "rst",
                    _ => "adoc",
                };
                self.add_markup(path, lang, text);
                HardCopy::Later
            }
            _ => HardCopy::Now(bytes.to_vec()),
        }
    }

    fn add_code(
        &mut self,
        path: &str,
        language: weft_chunking::CodeLanguage,
        text: &str,
    ) -> Vec<u8> {
        self.count("code_files");
        let Some(scanned) = code::scan(language, text) else {
            self.count("code_files_unparsed");
            return text.as_bytes().to_vec();
        };
        let hard = code::blank(text, &scanned.doc_spans).into_bytes();
        if let Some(why) = excluded_code(path) {
            self.count(why);
            return hard;
        }
        let head = text.get(..text.len().min(2000)).unwrap_or(text);
        if head.contains("@generated")
            || head.contains("DO NOT EDIT")
            || text
                .get(..text.len().min(500))
                .unwrap_or(text)
                .contains("Generated by")
        {
            self.count("code_files_generated");
            return hard;
        }
        *self.stats.entry("definitions".into()).or_default() += scanned.definitions;
        for d in scanned.documented {
            self.count("definitions_documented");
            if let Some(why) = self.keep_definition(&d) {
                self.count(why);
                continue;
            }
            let mut query = match text::first_sentence(&text::doc_description(&d.doc, d.style)) {
                Some(q) => q,
                None => {
                    self.count("drop_query_empty");
                    continue;
                }
            };
            // Go's convention opens a doc comment with the name itself.
            if d.style == DocStyle::Lines
                && let Some(rest) = query.strip_prefix(d.name.as_str())
                && rest.starts_with(' ')
            {
                query = rest.trim_start().to_owned();
            }
            if let Some(why) = text::bad_query(&query) {
                self.count(&format!("drop_query_{why}"));
                continue;
            }
            if text::name_echo(&query, &d.name, &d.owner) {
                self.count("drop_name_echo");
                continue;
            }
            self.code.push(CodeRow {
                query,
                path: path.to_owned(),
                lang: language.name(),
                lines: d.lines,
                symbol: if d.owner.is_empty() {
                    d.name.clone()
                } else {
                    format!("{}.{}", d.owner, d.name)
                },
                kind: d.kind,
                normalised: d.normalised,
            });
        }
        hard
    }

    /// Why a documented definition is not asked for, if it is not.
    fn keep_definition(&self, d: &code::Documented) -> Option<&'static str> {
        if d.kind == "constructor" {
            return Some("drop_constructor");
        }
        let n = d.name.as_str();
        let test_name = n
            .strip_prefix("test")
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase() || c == '_'));
        if SKIP_NAMES.contains(&n) || test_name || (n.starts_with("__") && n.ends_with("__")) {
            return Some("drop_name");
        }
        let Some(statements) = d.statements else {
            return Some("drop_nobody");
        };
        if d.lines.1 + 1 - d.lines.0 < self.options.min_lines {
            return Some("drop_short_code");
        }
        let accessor = ["get", "set", "is", "has"].iter().any(|p| {
            n.strip_prefix(p)
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_uppercase() || c == '_'))
        });
        if accessor && statements <= 1 {
            return Some("drop_getter_setter");
        }
        None
    }

    fn add_markup(&mut self, path: &str, lang: &'static str, text: &str) {
        self.count("markup_files");
        self.held.insert(path.to_owned(), text.to_owned());
        if let Some(why) = excluded_markup(path) {
            self.count(why);
            return;
        }
        let lines: Vec<&str> = text.split('\n').collect();
        let titles = self.chunker.section_titles(path, text);
        let mut breadcrumb: Vec<(usize, String)> = Vec::new();
        for title in titles {
            self.count("headings");
            while breadcrumb.last().is_some_and(|(l, _)| *l >= title.level) {
                breadcrumb.pop();
            }
            let heading_path = breadcrumb
                .iter()
                .map(|(_, t)| t.as_str())
                .collect::<Vec<_>>()
                .join(" > ");
            // Markdown's titles come plain from its parser (code spans
            // verbatim: `fs.read(fd[, options])`); reST and AsciiDoc
            // titles are as written.
            let query = if lang == "md" {
                text::collapse(&title.text)
            } else {
                text::clean_heading(&title.text)
            };
            breadcrumb.push((title.level, query.clone()));
            if query.is_empty() {
                self.count("drop_empty");
                continue;
            }
            if text::generic_heading(&query) {
                self.count("drop_generic");
                continue;
            }
            if text::words(&query) < 3 && !text::api_like(&query) {
                self.count("drop_short_heading");
                continue;
            }
            let body_words: usize = lines
                .get(title.title_lines.1 as usize..title.lines.1 as usize)
                .unwrap_or_default()
                .iter()
                .map(|l| text::words(l))
                .sum();
            if body_words < self.options.min_body_words {
                self.count("drop_short_body");
                continue;
            }
            self.headings.push(HeadingRow {
                query,
                path: path.to_owned(),
                lang,
                title_lines: title.title_lines,
                lines: title.lines,
                heading_path,
                long: body_words as f64 * 1.3 > 256.0,
            });
        }
    }

    /// A row of this corpus asking `query` of `lines` of `path`, the
    /// fields of one kind left empty.
    fn row(
        &self,
        query: String,
        path: String,
        lines: (u32, u32),
        lang: &str,
        kind: &str,
    ) -> EvalQuery {
        EvalQuery {
            id: String::new(),
            query,
            corpus: self.options.corpus.clone(),
            path,
            start_line: lines.0,
            end_line: lines.1,
            alt_targets: Vec::new(),
            corpus_root: Some(self.options.corpus_root.clone()),
            hard_root: Some(self.options.hard_root.clone()),
            n_lines: None,
            long_256: None,
            lang: Some(lang.to_owned()),
            kind: Some(kind.to_owned()),
            symbol: None,
            heading_path: None,
        }
    }

    /// Groups, filters and numbers the queries, and masks the held files.
    pub fn finish(mut self) -> Derived {
        let mut rows: Vec<(EvalQuery, Option<(u32, u32)>)> = Vec::new();
        // Copies of one body: one target with alternatives.
        let mut by_body: Vec<(CodeRow, Vec<Target>)> = Vec::new();
        let mut body_index: HashMap<String, usize> = HashMap::new();
        for row in std::mem::take(&mut self.code) {
            let target = target(row.path.clone(), row.lines);
            match body_index.get(&row.normalised) {
                Some(&i) => {
                    self.count("merged_copies");
                    by_body[i].1.push(target);
                }
                None => {
                    body_index.insert(row.normalised.clone(), by_body.len());
                    by_body.push((row, Vec::new()));
                }
            }
        }
        // One query of several definitions: overloads in one file are one
        // query with alternatives, anything else is too generic.
        let mut by_query: BTreeMap<String, Vec<(CodeRow, Vec<Target>)>> = BTreeMap::new();
        for (row, alts) in by_body {
            by_query
                .entry(text::normalise(&row.query))
                .or_default()
                .push((row, alts));
        }
        for (_, group) in by_query {
            let one_file = group.iter().all(|(r, _)| r.path == group[0].0.path);
            if group.len() > 1 && !(one_file && group.len() <= 10) {
                *self
                    .stats
                    .entry("drop_generic_query_rows".into())
                    .or_default() += group.len();
                continue;
            }
            if group.len() > 1 {
                self.count("merged_overload_queries");
            }
            let mut group = group.into_iter();
            let Some((main, mut alts)) = group.next() else {
                continue;
            };
            for (other, more) in group {
                alts.push(target(other.path, other.lines));
                alts.extend(more);
            }
            let n_lines = main.lines.1 + 1 - main.lines.0;
            let row = EvalQuery {
                alt_targets: alts,
                n_lines: Some(n_lines),
                symbol: Some(main.symbol),
                ..self.row(main.query, main.path, main.lines, main.lang, main.kind)
            };
            rows.push((row, None));
        }
        // A heading asked twice is ambiguous: neither is kept.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for h in &self.headings {
            *seen.entry(text::normalise(&h.query)).or_default() += 1;
        }
        for h in std::mem::take(&mut self.headings) {
            if seen.get(&text::normalise(&h.query)).copied().unwrap_or(0) > 1 {
                self.count("drop_ambiguous");
                continue;
            }
            let row = EvalQuery {
                long_256: Some(h.long),
                heading_path: Some(h.heading_path),
                ..self.row(h.query, h.path, h.lines, h.lang, "section")
            };
            rows.push((row, Some(h.title_lines)));
        }
        rows.sort_by(|a, b| {
            (a.0.path.as_str(), a.0.start_line).cmp(&(b.0.path.as_str(), b.0.start_line))
        });
        // Number the rows; mask each asked heading with its number.
        let mut masks: HashMap<String, Vec<TitleMask>> = HashMap::new();
        let mut queries = Vec::with_capacity(rows.len());
        for (i, (mut q, title)) in rows.into_iter().enumerate() {
            q.id = format!("{}-{i:05}", self.options.corpus);
            if let Some(lines) = title {
                masks.entry(q.path.clone()).or_default().push((lines, i));
            }
            queries.push(q);
        }
        let code = queries.iter().filter(|q| q.heading_path.is_none()).count();
        self.stats.insert("queries_code".into(), code);
        self.stats
            .insert("queries_prose".into(), queries.len() - code);
        let held = std::mem::take(&mut self.held)
            .into_iter()
            .map(|(path, text)| {
                let masked = match masks.get(&path) {
                    Some(m) => mask_titles(&text, m),
                    None => text,
                };
                (path, masked)
            })
            .collect();
        Derived {
            queries,
            held,
            stats: self.stats,
        }
    }
}

/// The target `lines` of `path`.
fn target(path: String, lines: (u32, u32)) -> Target {
    Target {
        path,
        start_line: lines.0,
        end_line: lines.1,
    }
}

/// A heading to mask: its title lines, and the number of its query.
type TitleMask = ((u32, u32), usize);

/// Lines `title_lines` of each entry replaced by "Section N": an adornment
/// line (an underline or overline) keeps its character at the new title's
/// length, any other keeps its `#`/`=` markers.
fn mask_titles(text: &str, masks: &[TitleMask]) -> String {
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    for &((first, last), n) in masks {
        let title = format!("Section {n}");
        for line in lines
            .iter_mut()
            .take(last as usize)
            .skip(first.saturating_sub(1) as usize)
        {
            let cr = line.ends_with('\r');
            let body = line.trim_end_matches('\r');
            let trimmed = body.trim();
            let adornment = trimmed.len() >= 2
                && trimmed
                    .chars()
                    .all(|c| c.is_ascii_punctuation() && trimmed.starts_with(c))
                && !trimmed.starts_with('#');
            let new = if adornment {
                let c = trimmed.chars().next().unwrap_or('=');
                c.to_string().repeat(title.len())
            } else {
                let indent = body.len() - body.trim_start().len();
                let rest = &body[indent..];
                let marks = rest.len() - rest.trim_start_matches(['#', '=']).len();
                let prefix = if marks > 0 && rest[marks..].starts_with([' ', '\t']) {
                    format!("{} ", &rest[..marks])
                } else {
                    String::new()
                };
                format!("{}{prefix}{title}", &body[..indent])
            };
            *line = if cr { format!("{new}\r") } else { new };
        }
    }
    lines.join("\n")
}

/// Directory names whose code is not asked about.
const EXCLUDED_DIRS: &[&str] = &[
    "test",
    "tests",
    "__tests__",
    "testdata",
    "test-utils",
    "testutils",
    "testutil",
    "test-util",
    "example",
    "examples",
    "sample",
    "samples",
    "benchmark",
    "benchmarks",
    "benches",
    "jmh",
    "generated",
    "gen",
    "node_modules",
    "vendor",
    "third_party",
];

/// Why code at `path` is not asked about: tests, examples, generated code.
fn excluded_code(path: &str) -> Option<&'static str> {
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop().unwrap_or(path);
    if parts.iter().any(|p| EXCLUDED_DIRS.contains(p)) {
        return Some("code_files_excluded");
    }
    let test_file = [
        "Test.java",
        "Tests.java",
        "TestCase.java",
        "IT.java",
        "_test.go",
    ]
    .iter()
    .any(|s| name.ends_with(s))
        || ["package-info.java", "module-info.java", "conftest.py"].contains(&name)
        || (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || name.ends_with("_spec.rb")
        || name.ends_with("_test.rb")
        || [".test.", ".spec.", ".bench."]
            .iter()
            .any(|m| name.contains(m))
        || [".d.ts", ".d.mts", ".d.cts"]
            .iter()
            .any(|s| name.ends_with(s));
    test_file.then_some("code_files_excluded")
}

/// Why markup at `path` is not asked about: change logs, licences.
fn excluded_markup(path: &str) -> Option<&'static str> {
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop().unwrap_or(path).to_ascii_uppercase();
    let dirs = parts
        .iter()
        .any(|p| matches!(*p, "changelog" | "changelogs" | "node_modules" | "vendor"));
    let names = [
        "CHANGELOG",
        "CHANGES",
        "HISTORY",
        "LICENSE",
        "LICENCE",
        "CODE_OF_CONDUCT",
        "SUMMARY",
        "NEWS",
    ]
    .iter()
    .any(|n| name.starts_with(n));
    (dirs || names).then_some("markup_files_excluded")
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_chunking::ChunkingConfig;

    #[test]
    fn masking_keeps_markers_lines_and_adornment_lengths() {
        let text = "## Install the thing ##\n\nTitle here\n==========\n\n=====\nTop\n=====\n";
        let masked = mask_titles(text, &[((1, 1), 3), ((3, 4), 12), ((6, 8), 4)]);
        assert_eq!(
            masked,
            "## Section 3\n\nSection 12\n==========\n\n=========\nSection 4\n=========\n"
        );
        assert_eq!(
            mask_titles("== Part one\r\nx", &[((1, 1), 0)]),
            "== Section 0\r\nx"
        );
    }

    #[test]
    fn code_and_headings_become_queries_and_the_hard_copy_hides_them() {
        let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
        let mut d = Deriver::new(&chunker, DeriveOptions::new("demo", "/src", "hard"));
        let java = "class Cache {\n  /** Evicts the least recently used entry when full. */\n  void evict() {\n    map.remove(oldest());\n    size--;\n  }\n\n  /** Returns the size. */\n  int getSize() {\n    return size;\n  }\n}\n";
        let HardCopy::Now(hard) = d.add("src/Cache.java", java.as_bytes()) else {
            panic!("code is copied at once");
        };
        let hard = String::from_utf8(hard).unwrap();
        assert!(!hard.contains("Evicts") && hard.contains("map.remove"));
        assert!(matches!(
            d.add("src/CacheTest.java", java.as_bytes()),
            HardCopy::Now(_)
        ));
        let body = "word ".repeat(50);
        let md = format!(
            "# Cache guide\n\n{body}\n\n## Tuning the eviction policy\n\n{body}\n\n## Examples\n\n{body}\n"
        );
        assert!(matches!(
            d.add("docs/guide.md", md.as_bytes()),
            HardCopy::Later
        ));
        let derived = d.finish();
        let asked: Vec<(&str, &str, u32, u32)> = derived
            .queries
            .iter()
            .map(|q| (q.query.as_str(), q.path.as_str(), q.start_line, q.end_line))
            .collect();
        assert_eq!(
            asked,
            [
                ("Tuning the eviction policy", "docs/guide.md", 5, 7),
                (
                    "Evicts the least recently used entry when full.",
                    "src/Cache.java",
                    3,
                    6
                ),
            ],
            "{:?}",
            derived.stats
        );
        assert_eq!(derived.queries[0].id, "demo-00000");
        assert_eq!(derived.stats["drop_getter_setter"], 1);
        assert_eq!(derived.stats["code_files_excluded"], 1);
        assert_eq!(derived.stats["drop_generic"], 1);
        let (path, masked) = &derived.held[0];
        assert_eq!(path, "docs/guide.md");
        assert!(masked.contains("## Section 0") && !masked.contains("eviction policy"));
        assert!(masked.contains("# Cache guide"), "an unasked heading stays");
    }
}
