//! The reference point: BM25 over fixed line windows (40 lines of code, 30
//! of prose), as `shared/eval/tools/eval_baseline.py` computes it, but
//! judged by this crate's metrics so that its figures sit beside weft's
//! like for like. No chunker, no model: what a grep-like tool would return.

use std::collections::HashMap;

use weft_core::retrieval::{
    DocumentResult, FusedHit, NeighbourPlan, PackStrategy, PlannedNeighbour, assemble,
};
use weft_core::{Chunk, ContentType, DocumentId};

use crate::metrics::{judge, judge_packs};
use crate::queries::EvalQuery;
use crate::runner::QueryOutcome;

/// Lines per window of code (and of anything that is not prose).
pub const CODE_WINDOW: usize = 40;
/// Lines per window of prose (markdown, reST, AsciiDoc, plain text).
pub const PROSE_WINDOW: usize = 30;
/// Words no query is about.
const STOP: &[&str] = &[
    "the", "a", "an", "of", "to", "in", "is", "and", "or", "for", "be", "this", "that", "it", "on",
    "with", "as", "by", "are", "from", "at", "if",
];
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The baseline's tokens: a letter and the lowercase letters and digits
/// after it, or a run of digits; lowercased, stop words out.
fn tokens(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_ascii_alphabetic() {
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_lowercase() || chars[i].is_ascii_digit()) {
                i += 1;
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
        } else {
            i += 1;
            continue;
        }
        let token: String = chars[start..i].iter().collect::<String>().to_lowercase();
        if !STOP.contains(&token.as_str()) {
            out.push(token);
        }
    }
    out
}

/// A BM25 index of every file cut into fixed windows of lines.
pub struct LineWindows {
    windows: Vec<Chunk>,
    lengths: Vec<usize>,
    postings: HashMap<String, Vec<(u32, u32)>>,
    idf: HashMap<String, f64>,
    average_length: f64,
}

impl LineWindows {
    /// Indexes `files`, each as (path relative to the corpus root, text).
    pub fn new<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut windows = Vec::new();
        let mut lengths = Vec::new();
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        for (path, text) in files {
            let prose = is_prose(path);
            let size = if prose { PROSE_WINDOW } else { CODE_WINDOW };
            let lines: Vec<&str> = text.split('\n').collect();
            let total = lines.len().div_ceil(size);
            let path_words = path.replace('/', " ");
            for (w, block) in lines.chunks(size).enumerate() {
                let content = block.join("\n");
                let start = (w * size + 1) as u32;
                let toks = tokens(&format!("{path_words} {content}"));
                let id = windows.len() as u32;
                let mut tf: HashMap<&str, u32> = HashMap::new();
                for t in &toks {
                    *tf.entry(t.as_str()).or_default() += 1;
                }
                for (t, n) in tf {
                    postings.entry(t.to_owned()).or_default().push((id, n));
                }
                lengths.push(toks.len());
                windows.push(Chunk {
                    document_id: DocumentId::new("baseline", path),
                    chunk_index: w as u32,
                    total_chunks: total as u32,
                    project: "baseline".into(),
                    uri: path.to_owned(),
                    title: path.to_owned(),
                    section: String::new(),
                    content_type: if prose {
                        ContentType::Prose
                    } else {
                        ContentType::Code
                    },
                    language: String::new(),
                    node_type: "window".into(),
                    node_name: None,
                    start_line: start,
                    end_line: start + block.len() as u32 - 1,
                    start_byte: 0,
                    end_byte: 0,
                    content,
                    content_hash: String::new(),
                    is_index_doc: false,
                    embedding_format: String::new(),
                    overlap_bytes: 0,
                    outline: None,
                });
            }
        }
        let n = windows.len() as f64;
        let idf = postings
            .iter()
            .map(|(t, p)| {
                let d = p.len() as f64;
                (t.clone(), (1.0 + (n - d + 0.5) / (d + 0.5)).ln())
            })
            .collect();
        let average_length = if lengths.is_empty() {
            1.0
        } else {
            (lengths.iter().sum::<usize>() as f64 / n).max(1.0)
        };
        Self {
            windows,
            lengths,
            postings,
            idf,
            average_length,
        }
    }

    /// How many windows it holds.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// Whether it holds no window.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// The best `limit` windows for `query` as a response: each window a
    /// matched chunk; with `expand`, the windows either side of each as
    /// context (the ±1 neighbours of the reference figures).
    pub fn search(&self, query: &str, limit: usize, expand: bool) -> Vec<DocumentResult> {
        self.respond(&self.rank(query, limit), expand)
    }

    /// The best `limit` windows for `query`, as (window, BM25 score).
    fn rank(&self, query: &str, limit: usize) -> Vec<(u32, f64)> {
        let mut scores: HashMap<u32, f64> = HashMap::new();
        let mut seen = Vec::new();
        for t in tokens(query) {
            if seen.contains(&t) {
                continue;
            }
            if let (Some(list), Some(idf)) = (self.postings.get(&t), self.idf.get(&t)) {
                for &(id, n) in list {
                    let n = f64::from(n);
                    let dl = self.lengths[id as usize] as f64;
                    *scores.entry(id).or_default() +=
                        idf * n * (K1 + 1.0) / (n + K1 * (1.0 - B + B * dl / self.average_length));
                }
            }
            seen.push(t);
        }
        let mut ranked: Vec<(u32, f64)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        ranked
    }

    /// `ranked` as a response, with the windows either side when `expand`.
    fn respond(&self, ranked: &[(u32, f64)], expand: bool) -> Vec<DocumentResult> {
        let mut neighbours = Vec::new();
        let mut fetched = Vec::new();
        if expand {
            for &(id, score) in ranked {
                let hit = &self.windows[id as usize];
                for next in [id.checked_sub(1), Some(id + 1)].into_iter().flatten() {
                    let Some(w) = self.windows.get(next as usize) else {
                        continue;
                    };
                    if w.document_id != hit.document_id {
                        continue;
                    }
                    neighbours.push(PlannedNeighbour {
                        id: w.id(),
                        document_id: w.document_id.clone(),
                        chunk_index: w.chunk_index,
                        score: score / 2.0,
                        distance: 1,
                        unit: None,
                    });
                    fetched.push(w.clone());
                }
            }
        }
        let hits = ranked
            .iter()
            .map(|&(id, score)| FusedHit {
                chunk: self.windows[id as usize].clone(),
                score,
                vector: None,
                text: None,
                boost: 1.0,
            })
            .collect();
        assemble(hits, &NeighbourPlan { neighbours }, fetched)
    }
}

/// Whether the file at `path` is prose by its extension.
fn is_prose(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [
        ".md",
        ".markdown",
        ".rst",
        ".rest",
        ".adoc",
        ".asciidoc",
        ".asc",
        ".txt",
    ]
    .iter()
    .any(|e| lower.ends_with(e))
}

/// Runs `queries` against `windows`: the top `limit` windows judged with
/// and without their neighbours, and the expanded response packed into
/// `budgets` (empty: no packing), as [`crate::run_queries`] judges weft.
pub fn run_baseline(
    windows: &LineWindows,
    queries: &[EvalQuery],
    limit: usize,
    budgets: &[usize],
    strategy: PackStrategy,
) -> Vec<QueryOutcome> {
    queries
        .iter()
        .map(|query| {
            let targets = query.targets();
            // Scored once; judged with and without the neighbours.
            let ranked = windows.rank(&query.query, limit);
            let on = windows.respond(&ranked, true);
            let off = windows.respond(&ranked, false);
            QueryOutcome {
                id: query.id.clone(),
                long: query.is_long(),
                off: Some(judge(&targets, &off, limit)),
                on: Some(judge(&targets, &on, limit)),
                packed: if budgets.is_empty() {
                    Vec::new()
                } else {
                    judge_packs(&targets, &on, &on, budgets, strategy)
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_words_as_the_reference_does() {
        assert_eq!(
            tokens("getHTTPServer of the v2 API, 42x"),
            [
                "get", "h", "t", "t", "p", "server", "v2", "p", "i", "42", "x"
            ],
            "\"a\" is a stop word"
        );
    }

    #[test]
    fn windows_rank_by_bm25_and_expand_to_their_neighbours() {
        let code: String = (1..=100)
            .map(|i| {
                if i == 55 {
                    "fn evict_oldest_entry() {}\n".to_owned()
                } else {
                    format!("let x{i} = {i};\n")
                }
            })
            .collect();
        let doc = "# Guide\n\nNothing about caches.\n";
        let index = LineWindows::new([("src/cache.rs", code.as_str()), ("guide.md", doc)]);
        assert_eq!(index.len(), 3 + 1, "101 lines in 40s, 4 lines in 30s");
        let results = index.search("evict oldest entry", 10, false);
        assert_eq!(results.len(), 1);
        let span = &results[0].spans[0];
        assert_eq!((span.start_line, span.end_line), (41, 80));
        let results = index.search("evict oldest entry", 10, true);
        let span = &results[0].spans[0];
        assert_eq!((span.start_line, span.end_line), (1, 101));
        let query: EvalQuery = serde_json::from_str(
            r#"{"query": "evict the oldest entry", "corpus": "c", "path": "src/cache.rs", "start_line": 55, "end_line": 55}"#,
        )
        .unwrap();
        let out = run_baseline(&index, &[query], 10, &[2000], PackStrategy::HitsFirst);
        assert_eq!(out[0].main().rank, Some(1));
        assert_eq!(out[0].off.as_ref().unwrap().coverage, Some(1.0));
        assert!(out[0].packed[0].answer_in_context);
    }
}
