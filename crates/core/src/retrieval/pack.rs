//! Context packing under a token budget (DESIGN §10): what an assistant is
//! handed. The spans of a search response are deduplicated, merged per
//! document, ordered by relevance and filled into `max_tokens`; every packed
//! span carries a stable citation `uri#L<start>-L<end>` with its project
//! (and commit, for git sources) and its heading path or symbol. Spans that
//! do not fit are listed as further references.
//!
//! The budget goes first to the hits, each on its own with the rest of the
//! split function or section it belongs to (a search told its budget
//! fetches every hit's whole unit and a window around it,
//! [`super::AdjacencyConfig::for_packing`]),
//! by relevance discounted by cost ([`COST_EXPONENT`]), each whole or not
//! at all; then to the context chunks around them, by relevance
//! ([`PackStrategy::HitsFirst`]): as many relevant places as fit, then
//! their surroundings. Hits of one document that meet become one span. A
//! span is cut only between chunks, and only when no hit fits whole is the
//! best one cut between lines, never inside one.
//!
//! Tokens are counted by a [`TokenCounter`]; [`ApproxTokenCounter`] (one
//! token per four characters, rounded up) is the one weft uses everywhere,
//! because the tokenizer that matters is the assistant's, which weft does
//! not know, and an estimate independent of the embedding model packs the
//! same way whichever model or API embedded the index, in the CLI and in
//! the query service alike.
//!
//! ```
//! use std::collections::HashMap;
//! use weft_core::retrieval::{self, ApproxTokenCounter, PackOptions, RetrievalConfig, ScoredChunk};
//! # let chunks = weft_core::retrieval::example_chunks();
//! let hits = retrieval::fuse(
//!     vec![ScoredChunk { chunk: chunks[2].clone(), score: 0.9 }],
//!     Vec::new(),
//!     &RetrievalConfig::default().fusion,
//! );
//! let results = retrieval::assemble(hits, &Default::default(), Vec::new());
//! let pack = retrieval::pack(&results, &HashMap::new(), &PackOptions { max_tokens: 500 }, &ApproxTokenCounter);
//! assert_eq!(pack.spans[0].citation, "src/config/parse.rs#L21-L29");
//! assert!(pack.used_tokens <= 500);
//! assert!(pack.to_markdown().contains("fn part2() {}"));
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{DocumentResult, unit_of};
use crate::{Chunk, ContentType};

/// Counts the tokens a text costs in an assistant's context.
pub trait TokenCounter: Send + Sync {
    /// Tokens of `text`.
    fn count(&self, text: &str) -> usize;
    /// What counts, for the output (e.g. `"chars/4"`).
    fn name(&self) -> &str;
}

/// One token per four characters, rounded up: the usual rule of thumb for
/// the BPE tokenizers of assistants on English and code, and the measure
/// `weft eval` reports context in.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxTokenCounter;

impl TokenCounter for ApproxTokenCounter {
    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
    fn name(&self) -> &str {
        "chars/4"
    }
}

/// How to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackOptions {
    /// The budget: packed spans, with their headers, cost at most this many tokens.
    pub max_tokens: usize,
}

/// In what order the budget is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PackStrategy {
    /// First every span's hits (with the rest of their split function or
    /// section), by relevance; then the context around them, by relevance,
    /// while it fits. As many relevant places as the budget holds.
    #[default]
    HitsFirst,
    /// Each span whole (or as much of it as fits) by relevance, before the
    /// next one.
    SpansInOrder,
}

/// The smallest budget worth packing a span into: below it, the rest is
/// listed as references.
const MIN_SPAN_TOKENS: usize = 24;

/// Hits-first packs each hit (with the rest of its split unit) in the order
/// of its relevance divided by its cost in tokens to this power: a hit
/// twice as long as another goes first only when it is ~19% more
/// relevant, so one long function or 7-part section of a middling hit does
/// not take the budget of several shorter ones. 0 is relevance alone, 1
/// relevance per token (which packs small, weak hits before the best one).
/// Measured on the responses `eval-sweep --dump-spans` wrote for the
/// Node.js docs and guava dev sets (bench/RESULTS.md): at 1k and 2k tokens
/// 0.25 holds the whole answer at least as often as 0, 0.5 or 1 on both.
const COST_EXPONENT: f64 = 0.25;

/// One span of a document in a [`ContextPack`]: whole lines, with a citation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackedSpan {
    /// `uri#L<start>-L<end>`: where the content is, stable across runs.
    pub citation: String,
    /// The project the document belongs to.
    pub project: String,
    /// For git sources, the indexed commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The document's id (16 hex characters).
    pub document_id: String,
    /// The document's path or URL.
    pub uri: String,
    /// The document's title.
    pub title: String,
    /// Heading path (`Guide > Install`) or symbol path (`Outer.method`) of
    /// the best chunk in the span, without a part suffix.
    pub section: String,
    /// The name of the best chunk's definition, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Language of the content (`java`, `markdown`…).
    pub language: String,
    /// Prose, code or API reference.
    pub content_type: ContentType,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, inclusive.
    pub end_line: u32,
    /// Index of the first chunk the span draws on.
    pub first_chunk: u32,
    /// Index of the last chunk the span draws on.
    pub last_chunk: u32,
    /// Relevance: the reranker's score when one ran, else the best fused score.
    pub score: f64,
    /// What the span costs, with its header.
    pub tokens: usize,
    /// When only part of the retrieved span fit: the whole span's citation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed_from: Option<String>,
    /// Lines `start_line..=end_line` of the document.
    pub content: String,
}

/// A retrieved span that was not packed: where to look for more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// `uri#L<start>-L<end>`.
    pub citation: String,
    /// The project.
    pub project: String,
    /// For git sources, the indexed commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The document's id.
    pub document_id: String,
    /// The document's path or URL.
    pub uri: String,
    /// Heading path or symbol path of its best chunk.
    pub section: String,
    /// First line.
    pub start_line: u32,
    /// Last line.
    pub end_line: u32,
    /// Relevance, as for packed spans.
    pub score: f64,
    /// What packing it would have cost.
    pub tokens: usize,
}

/// Spans filled into a token budget, by document (best first), each
/// document's spans in line order, plus references to what did not fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPack {
    /// The budget.
    pub max_tokens: usize,
    /// What the packed spans cost, headers included.
    pub used_tokens: usize,
    /// How tokens were counted ([`TokenCounter::name`]).
    pub tokenizer: String,
    /// The packed spans.
    pub spans: Vec<PackedSpan>,
    /// Retrieved spans left out, best first.
    pub references: Vec<Reference>,
}

/// `uri#L<start>-L<end>`.
pub fn citation(uri: &str, start_line: u32, end_line: u32) -> String {
    format!("{uri}#L{start_line}-L{end_line}")
}

/// A parsed citation: `uri`, `uri#L12` or `uri#L12-L30` (also `#L12-30`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    /// The document's path or URL.
    pub uri: String,
    /// The cited lines, when given.
    pub lines: Option<(u32, u32)>,
}

impl std::str::FromStr for Citation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let Some((uri, fragment)) = s.rsplit_once("#L") else {
            if s.is_empty() {
                return Err("the citation is empty".into());
            }
            return Ok(Citation {
                uri: s.to_owned(),
                lines: None,
            });
        };
        let bad = || format!("{s:?} is not a citation of the form uri#L<start>-L<end>");
        let (start, end) = match fragment.split_once('-') {
            Some((a, b)) => (a, b.strip_prefix('L').unwrap_or(b)),
            None => (fragment, fragment),
        };
        let start: u32 = start.parse().map_err(|_| bad())?;
        let end: u32 = end.parse().map_err(|_| bad())?;
        if uri.is_empty() || start == 0 || end < start {
            return Err(bad());
        }
        Ok(Citation {
            uri: uri.to_owned(),
            lines: Some((start, end)),
        })
    }
}

/// A chunk of a candidate span, with what the search said of it.
#[derive(Debug, Clone)]
struct Piece<'a> {
    chunk: &'a Chunk,
    score: f64,
    matched: bool,
}

/// Consecutive chunks of one document: a candidate for the pack.
struct Run<'a> {
    pieces: Vec<Piece<'a>>,
    /// The reranker's score of the span(s) it came from, if any.
    rerank: Option<f32>,
    first_seen: usize,
}

impl Run<'_> {
    /// Sort key: reranked spans first, by rerank score; then by the best
    /// matched score (any score when nothing matched).
    fn relevance(&self) -> (bool, f64) {
        match self.rerank {
            Some(r) => (true, f64::from(r)),
            None => (false, self.best_score()),
        }
    }

    fn best_score(&self) -> f64 {
        let best = |matched_only: bool| {
            self.pieces
                .iter()
                .filter(|p| p.matched || !matched_only)
                .map(|p| p.score)
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let m = best(true);
        if m.is_finite() { m } else { best(false) }
    }

    /// The position of the best matched piece (else the best piece).
    fn best_piece(&self) -> usize {
        let key = |p: &Piece<'_>| (p.matched, p.score);
        self.pieces
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| {
                let (ma, sa) = key(a);
                let (mb, sb) = key(b);
                ma.cmp(&mb).then(sa.total_cmp(&sb))
            })
            .map_or(0, |(i, _)| i)
    }

    /// The position of the best piece in `a..=b`: matched first, then by score.
    fn best_in(&self, a: usize, b: usize) -> usize {
        (a..=b)
            .max_by(|&x, &y| {
                let (px, py) = (&self.pieces[x], &self.pieces[y]);
                px.matched
                    .cmp(&py.matched)
                    .then(px.score.total_cmp(&py.score))
                    // On a tie, the first.
                    .then(y.cmp(&x))
            })
            .unwrap_or(a)
    }

    /// The relevance of pieces `a..=b`: the reranker's score of the run
    /// when one ran, else their best matched score (any score when none
    /// matched).
    fn relevance_in(&self, a: usize, b: usize) -> f64 {
        if let Some(r) = self.rerank {
            return f64::from(r);
        }
        let best = self.best_in(a, b);
        self.pieces[best].score
    }

    /// What hits-first packs before any context, each on its own: every
    /// matched chunk, with the other parts of its split function or section
    /// next to it in the run (`X (Part i/n)`, consecutive part numbers), so
    /// that a hit is packed whole or not at all. Several hits of one unit
    /// share one core. Without a matched chunk, the best one.
    fn cores(&self) -> Vec<(usize, usize)> {
        let part = |i: usize| match unit_of(&self.pieces[i].chunk.section) {
            (base, Some((part, _))) => Some((base, part)),
            _ => None,
        };
        // Whether piece `j` continues the unit of its neighbour `i` (j = i ± 1).
        let continues = |i: usize, j: usize| match (part(i), part(j)) {
            (Some((bi, pi)), Some((bj, pj))) => {
                bi == bj && if j > i { pj == pi + 1 } else { pj + 1 == pi }
            }
            _ => false,
        };
        let mut cores: Vec<(usize, usize)> = Vec::new();
        for (i, _) in self.pieces.iter().enumerate().filter(|(_, p)| p.matched) {
            let (mut a, mut b) = (i, i);
            while a > 0 && continues(a, a - 1) {
                a -= 1;
            }
            while b + 1 < self.pieces.len() && continues(b, b + 1) {
                b += 1;
            }
            if !cores.contains(&(a, b)) {
                cores.push((a, b));
            }
        }
        if cores.is_empty() {
            let best = self.best_piece();
            cores.push((best, best));
        }
        cores
    }

    /// The pieces that must stay together: from the first to the last chunk
    /// that matched or belongs to a matched chunk's split unit.
    fn core(&self) -> (usize, usize) {
        let units: HashSet<&str> = self
            .pieces
            .iter()
            .filter(|p| p.matched)
            .filter_map(|p| match unit_of(&p.chunk.section) {
                (base, Some(_)) => Some(base),
                _ => None,
            })
            .collect();
        let in_core = |p: &Piece<'_>| {
            p.matched
                || matches!(unit_of(&p.chunk.section), (base, Some(_)) if units.contains(base))
        };
        let first = self.pieces.iter().position(in_core);
        let last = self.pieces.iter().rposition(in_core);
        match (first, last) {
            (Some(a), Some(b)) => (a, b),
            _ => {
                let best = self.best_piece();
                (best, best)
            }
        }
    }
}

/// The lines of consecutive chunks of one document, overlap written once.
struct Lines {
    first: u32,
    lines: Vec<String>,
}

impl Lines {
    fn of(chunks: &[&Chunk]) -> Self {
        let first = chunks.first().map_or(1, |c| c.start_line);
        let last = chunks.iter().map(|c| c.end_line).max().unwrap_or(first);
        let mut map: BTreeMap<u32, String> = BTreeMap::new();
        let mut previous: Option<u32> = None;
        for c in chunks {
            let mut content = c.content.as_str();
            let mut line = c.start_line;
            if previous.is_some_and(|p| p + 1 == c.chunk_index) && c.overlap_bytes > 0 {
                // Prose overlap repeats the end of the previous chunk: skip it.
                if let Some(rest) = content.get(c.overlap_bytes as usize..) {
                    let skipped = &content[..c.overlap_bytes as usize];
                    line += skipped.bytes().filter(|&b| b == b'\n').count() as u32;
                    content = rest;
                }
            }
            for (i, part) in content.split('\n').enumerate() {
                let at = line + i as u32;
                if at > c.end_line && part.is_empty() {
                    break;
                }
                map.entry(at)
                    .or_default()
                    .push_str(part.trim_end_matches('\r'));
            }
            previous = Some(c.chunk_index);
        }
        let lines = (first..=last)
            .map(|n| map.remove(&n).unwrap_or_default())
            .collect();
        Lines { first, lines }
    }

    fn last(&self) -> u32 {
        self.first + self.lines.len().saturating_sub(1) as u32
    }

    /// Lines `from..=to` (clamped), joined.
    fn text(&self, from: u32, to: u32) -> String {
        let a = from.saturating_sub(self.first) as usize;
        let b = (to.saturating_sub(self.first) as usize).min(self.lines.len().saturating_sub(1));
        if a > b || self.lines.is_empty() {
            return String::new();
        }
        self.lines[a..=b].join("\n")
    }
}

/// The fields of a span that do not depend on which lines were packed.
#[derive(Clone)]
struct SpanMeta<'a> {
    best: &'a Chunk,
    project: String,
    revision: Option<String>,
    score: f64,
    /// Set on spans cut from a larger one: that one's citation.
    trimmed_from: Option<String>,
}

impl SpanMeta<'_> {
    fn section(&self) -> String {
        unit_of(&self.best.section).0.to_owned()
    }

    fn packed(
        &self,
        lines: &Lines,
        from: u32,
        to: u32,
        chunks: (u32, u32),
        counter: &dyn TokenCounter,
    ) -> PackedSpan {
        let mut span = PackedSpan {
            citation: citation(&self.best.uri, from, to),
            project: self.project.clone(),
            revision: self.revision.clone(),
            document_id: self.best.document_id.as_str().to_owned(),
            uri: self.best.uri.clone(),
            title: self.best.title.clone(),
            section: self.section(),
            symbol: self.best.node_name.clone(),
            language: self.best.language.clone(),
            content_type: self.best.content_type,
            start_line: from,
            end_line: to,
            first_chunk: chunks.0,
            last_chunk: chunks.1,
            score: self.score,
            tokens: 0,
            trimmed_from: self.trimmed_from.clone(),
            content: lines.text(from, to),
        };
        span.tokens = span_tokens(&span, counter);
        span
    }
}

/// What a packed span costs: its Markdown header and fenced content.
pub fn span_tokens(span: &PackedSpan, counter: &dyn TokenCounter) -> usize {
    let mut out = String::new();
    render_span(&mut out, span);
    counter.count(&out)
}

/// Packs the spans of `results` (a search response) into `options.max_tokens`
/// ([`PackStrategy::HitsFirst`]). `revisions` maps a project to its indexed
/// commit (git sources).
pub fn pack(
    results: &[DocumentResult],
    revisions: &HashMap<String, String>,
    options: &PackOptions,
    counter: &dyn TokenCounter,
) -> ContextPack {
    pack_with(
        results,
        revisions,
        options,
        PackStrategy::HitsFirst,
        counter,
    )
}

/// A candidate span while packing: one run of consecutive chunks, of which
/// some ranges are packed.
struct Candidate<'a> {
    rank: usize,
    run: &'a Run<'a>,
    chunks: Vec<&'a Chunk>,
    lines: Lines,
    full: PackedSpan,
    /// The packed ranges (positions in `chunks`: sorted, apart, never
    /// touching) and their spans.
    chosen: Vec<Packed>,
    /// Packed as lines cut from its hit: not grown further.
    cut: bool,
    /// The same text as a better candidate's (a copied file): left out.
    duplicate: bool,
}

/// Chunks `a..=b` of a candidate, packed as `span`.
type Packed = (usize, usize, PackedSpan);

impl Candidate<'_> {
    /// Chunks `a..=b` as a span, headed by their best chunk.
    fn span(&self, a: usize, b: usize, counter: &dyn TokenCounter) -> PackedSpan {
        let whole = a == 0 && b + 1 == self.chunks.len();
        let best = self.run.best_in(a, b);
        let meta = SpanMeta {
            best: self.run.pieces[best].chunk,
            project: self.full.project.clone(),
            revision: self.full.revision.clone(),
            score: self.run.relevance_in(a, b),
            trimmed_from: (!whole).then(|| self.full.citation.clone()),
        };
        meta.packed(
            &self.lines,
            self.chunks[a].start_line.max(self.lines.first),
            self.chunks[b].end_line.min(self.lines.last()),
            (self.chunks[a].chunk_index, self.chunks[b].chunk_index),
            counter,
        )
    }

    /// The packed ranges with chunks `a..=b` added: ranges that overlap or
    /// touch become one span (one header, no line twice).
    fn with(&self, a: usize, b: usize, counter: &dyn TokenCounter) -> Vec<Packed> {
        let mut ranges: Vec<(usize, usize)> =
            self.chosen.iter().map(|(x, y, _)| (*x, *y)).collect();
        ranges.push((a, b));
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for (x, y) in ranges {
            match merged.last_mut() {
                Some(last) if x <= last.1 + 1 => last.1 = last.1.max(y),
                _ => merged.push((x, y)),
            }
        }
        merged
            .into_iter()
            .map(|(x, y)| {
                let kept = self
                    .chosen
                    .iter()
                    .find(|(cx, cy, _)| (*cx, *cy) == (x, y))
                    .map(|(_, _, s)| s.clone());
                (x, y, kept.unwrap_or_else(|| self.span(x, y, counter)))
            })
            .collect()
    }

    fn cost(ranges: &[Packed]) -> usize {
        ranges.iter().map(|(_, _, s)| s.tokens).sum()
    }

    /// Adds chunks `a..=b` when what that adds costs at most `remaining`;
    /// returns what it cost.
    fn try_add(
        &mut self,
        a: usize,
        b: usize,
        remaining: usize,
        counter: &dyn TokenCounter,
    ) -> Option<usize> {
        let next = self.with(a, b, counter);
        let (before, after) = (Self::cost(&self.chosen), Self::cost(&next));
        let added = after.saturating_sub(before);
        (added <= remaining).then(|| {
            self.chosen = next;
            added
        })
    }

    /// Widens the packed ranges by the best-scored chunk next to one of
    /// them, one at a time, while what it adds fits `remaining`; returns
    /// what it all cost.
    fn grow(&mut self, mut remaining: usize, counter: &dyn TokenCounter) -> usize {
        let mut spent = 0;
        loop {
            let mut next: Vec<(usize, f64)> = Vec::new();
            for (a, b, _) in &self.chosen {
                if *a > 0 {
                    next.push((a - 1, self.run.pieces[a - 1].score));
                }
                if b + 1 < self.chunks.len() {
                    next.push((b + 1, self.run.pieces[b + 1].score));
                }
            }
            // Best score first; on a tie, the earlier chunk.
            next.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            next.dedup_by_key(|x| x.0);
            let added = next
                .into_iter()
                .find_map(|(i, _)| self.try_add(i, i, remaining, counter));
            match added {
                Some(cost) => {
                    remaining -= cost;
                    spent += cost;
                }
                None => return spent,
            }
        }
    }
}

/// [`pack`] with a choice of [`PackStrategy`].
pub fn pack_with(
    results: &[DocumentResult],
    revisions: &HashMap<String, String>,
    options: &PackOptions,
    strategy: PackStrategy,
    counter: &dyn TokenCounter,
) -> ContextPack {
    let mut runs = runs_of(results);
    runs.sort_by(|a, b| {
        let (ra, sa) = a.relevance();
        let (rb, sb) = b.relevance();
        rb.cmp(&ra)
            .then(sb.total_cmp(&sa))
            .then(a.first_seen.cmp(&b.first_seen))
    });
    let mut seen_texts: HashSet<String> = HashSet::new();
    let mut candidates: Vec<Candidate<'_>> = runs
        .iter()
        .enumerate()
        .map(|(rank, run)| {
            let chunks: Vec<&Chunk> = run.pieces.iter().map(|p| p.chunk).collect();
            let lines = Lines::of(&chunks);
            let best = run.pieces[run.best_piece()].chunk;
            let meta = SpanMeta {
                best,
                project: best.project.clone(),
                revision: revisions.get(&best.project).cloned(),
                score: run.relevance().1,
                trimmed_from: None,
            };
            let full = meta.packed(
                &lines,
                lines.first,
                lines.last(),
                (chunks[0].chunk_index, chunks[chunks.len() - 1].chunk_index),
                counter,
            );
            // The same text in another document (a vendored or copied
            // file) is context the assistant already has.
            let duplicate = !seen_texts.insert(full.content.clone());
            Candidate {
                rank,
                run,
                chunks,
                lines,
                full,
                chosen: Vec::new(),
                cut: false,
                duplicate,
            }
        })
        .collect();
    let mut remaining = options.max_tokens;
    // Pass 1: what must come first, by relevance — each hit with the rest
    // of its split unit (hits-first), or each span whole (spans-in-order).
    let cores: Vec<(usize, usize, usize)> = match strategy {
        PackStrategy::HitsFirst => {
            let mut cores: Vec<(usize, usize, usize, (bool, f64))> = candidates
                .iter()
                .filter(|c| !c.duplicate)
                .flat_map(|c| {
                    c.run.cores().into_iter().map(move |(a, b)| {
                        let cost = c.span(a, b, counter).tokens.max(1) as f64;
                        let key = match c.run.rerank {
                            Some(r) => (true, f64::from(r)),
                            None => (false, c.run.relevance_in(a, b) / cost.powf(COST_EXPONENT)),
                        };
                        (c.rank, a, b, key)
                    })
                })
                .collect();
            cores.sort_by(|x, y| {
                y.3.0
                    .cmp(&x.3.0)
                    .then(y.3.1.total_cmp(&x.3.1))
                    .then(x.0.cmp(&y.0))
                    .then(x.1.cmp(&y.1))
            });
            cores.into_iter().map(|(r, a, b, _)| (r, a, b)).collect()
        }
        PackStrategy::SpansInOrder => candidates
            .iter()
            .filter(|c| !c.duplicate)
            .map(|c| (c.rank, 0, c.chunks.len() - 1))
            .collect(),
    };
    let mut any = false;
    let first = cores.first().copied();
    for (rank, a, b) in cores {
        let c = &mut candidates[rank];
        if c.cut || remaining < MIN_SPAN_TOKENS {
            continue;
        }
        if let Some(cost) = c.try_add(a, b, remaining, counter) {
            remaining -= cost;
            any = true;
            continue;
        }
        if strategy == PackStrategy::SpansInOrder {
            // As much of the span as fits, from its hits out.
            let (a, b) = c.run.core();
            if let Some(cost) = c.try_add(a, b, remaining, counter) {
                remaining -= cost;
                remaining -= c.grow(remaining, counter);
                any = true;
            }
        }
    }
    if let (false, Some((rank, a, b))) = (any, first)
        && remaining >= MIN_SPAN_TOKENS
    {
        // No hit fits whole: whole lines of the best one.
        let c = &mut candidates[rank];
        let meta = SpanMeta {
            best: c.run.pieces[c.run.best_in(a, b)].chunk,
            project: c.full.project.clone(),
            revision: c.full.revision.clone(),
            score: c.run.relevance_in(a, b),
            trimmed_from: Some(c.full.citation.clone()),
        };
        let span = fit(
            c.run,
            &c.chunks,
            &c.lines,
            &meta,
            remaining,
            None,
            (a, b),
            counter,
        );
        if let Some(span) = span {
            remaining -= span.tokens.min(remaining);
            c.chosen = vec![(a, b, span)];
            c.cut = true;
        }
    }
    // Pass 2 (hits-first): the context around the packed hits, by relevance.
    if strategy == PackStrategy::HitsFirst {
        for c in &mut candidates {
            if !c.cut && !c.chosen.is_empty() {
                remaining -= c.grow(remaining, counter);
            }
        }
    }
    let mut packed: Vec<(usize, PackedSpan)> = Vec::new();
    let mut references = Vec::new();
    for c in candidates {
        if c.chosen.is_empty() {
            let full = c.full;
            references.push(Reference {
                citation: full.citation,
                project: full.project,
                revision: full.revision,
                document_id: full.document_id,
                uri: full.uri,
                section: full.section,
                start_line: full.start_line,
                end_line: full.end_line,
                score: full.score,
                tokens: full.tokens,
            });
        }
        for (_, _, span) in c.chosen {
            packed.push((c.rank, span));
        }
    }
    // By document, best first; a document's spans in line order.
    let mut doc_rank: HashMap<String, usize> = HashMap::new();
    for (rank, span) in &packed {
        let r = doc_rank.entry(span.document_id.clone()).or_insert(*rank);
        *r = (*r).min(*rank);
    }
    packed.sort_by_key(|(_, s)| (doc_rank[&s.document_id], s.start_line));
    let spans: Vec<PackedSpan> = packed.into_iter().map(|(_, s)| s).collect();
    ContextPack {
        max_tokens: options.max_tokens,
        used_tokens: spans.iter().map(|s| s.tokens).sum(),
        tokenizer: counter.name().to_owned(),
        spans,
        references,
    }
}

/// The largest part of `run` around `core` (positions of its chunks) that
/// fits `budget`: whole chunks (the core, then neighbours by score) or,
/// when even the core does not fit, whole lines from `anchor` (default: the
/// first line of the core's best hit).
#[allow(clippy::too_many_arguments)]
fn fit(
    run: &Run<'_>,
    chunks: &[&Chunk],
    lines: &Lines,
    meta: &SpanMeta<'_>,
    budget: usize,
    anchor: Option<u32>,
    core: (usize, usize),
    counter: &dyn TokenCounter,
) -> Option<PackedSpan> {
    let of = |a: usize, b: usize| {
        meta.packed(
            lines,
            chunks[a].start_line.max(lines.first),
            chunks[b].end_line.min(lines.last()),
            (chunks[a].chunk_index, chunks[b].chunk_index),
            counter,
        )
    };
    let (mut a, mut b) = core;
    let mut best = of(a, b);
    if best.tokens <= budget {
        // Grow by the better-scored neighbour while it fits.
        loop {
            let left = (a > 0).then(|| (a - 1, run.pieces[a - 1].score));
            let right = (b + 1 < chunks.len()).then(|| (b + 1, run.pieces[b + 1].score));
            let order = match (left, right) {
                (Some(l), Some(r)) if r.1 > l.1 => [Some(r), Some(l)],
                (l, r) => [l, r],
            };
            let grown = order.into_iter().flatten().find_map(|(i, _)| {
                let (na, nb) = (a.min(i), b.max(i));
                let span = of(na, nb);
                (span.tokens <= budget).then_some((na, nb, span))
            });
            match grown {
                Some((na, nb, span)) => {
                    (a, b, best) = (na, nb, span);
                }
                None => return Some(best),
            }
        }
    }
    // Whole lines from the best hit's first line on, as many as fit
    // (binary search: the counter need not be additive).
    let hit = run.best_in(core.0, core.1);
    let from = anchor
        .unwrap_or(chunks[hit].start_line)
        .clamp(lines.first, lines.last());
    let chunk_at = |line: u32| {
        chunks
            .iter()
            .rposition(|c| c.start_line <= line)
            .unwrap_or(hit)
    };
    let span_to = |to: u32| {
        meta.packed(
            lines,
            from,
            to,
            (chunks[hit].chunk_index, chunks[chunk_at(to)].chunk_index),
            counter,
        )
    };
    let (mut lo, mut hi) = (from, lines.last());
    if span_to(lo).tokens > budget {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if span_to(mid).tokens <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(span_to(lo))
}

/// The candidate spans of a response: each document's chunks (from every
/// span and every time the document appears) once, in runs of
/// consecutive chunk indices.
fn runs_of(results: &[DocumentResult]) -> Vec<Run<'_>> {
    struct Doc<'a> {
        first_seen: usize,
        chunks: BTreeMap<u32, (Piece<'a>, Option<f32>)>,
    }
    let mut docs: Vec<Doc<'_>> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut seen = 0usize;
    for document in results {
        let slot = *index
            .entry(document.document_id.as_str())
            .or_insert_with(|| {
                docs.push(Doc {
                    first_seen: seen,
                    chunks: BTreeMap::new(),
                });
                docs.len() - 1
            });
        for span in &document.spans {
            seen += 1;
            for c in &span.chunks {
                let piece = Piece {
                    chunk: &c.chunk,
                    score: c.score,
                    matched: c.matched,
                };
                let entry = docs[slot]
                    .chunks
                    .entry(c.chunk.chunk_index)
                    .or_insert((piece.clone(), span.rerank_score));
                entry.0.matched |= piece.matched;
                entry.0.score = entry.0.score.max(piece.score);
                entry.1 = match (entry.1, span.rerank_score) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    }
    let mut runs = Vec::new();
    for doc in docs {
        let mut current: Option<Run<'_>> = None;
        let mut last: Option<u32> = None;
        for (i, (piece, rerank)) in doc.chunks {
            let touching = last.is_some_and(|l| l + 1 == i);
            match current.as_mut() {
                Some(run) if touching => {
                    run.pieces.push(piece);
                    run.rerank = match (run.rerank, rerank) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                }
                _ => {
                    runs.extend(current.take());
                    current = Some(Run {
                        pieces: vec![piece],
                        rerank,
                        first_seen: doc.first_seen,
                    });
                }
            }
            last = Some(i);
        }
        runs.extend(current);
    }
    runs
}

/// Context around a place in one document, for `get_context`: the chunks
/// overlapping `lines` (or chunk `index`), widened to the whole section or
/// function they belong to, then to neighbouring chunks, while the result
/// fits `max_tokens`. `chunks` are the document's chunks (any order, each
/// once); `None` when there are none.
pub fn expand_context(
    chunks: &[Chunk],
    target: ContextTarget,
    revision: Option<&str>,
    max_tokens: usize,
    counter: &dyn TokenCounter,
) -> Option<ContextPack> {
    let mut sorted: Vec<&Chunk> = chunks.iter().collect();
    sorted.sort_by_key(|c| c.chunk_index);
    sorted.dedup_by_key(|c| c.chunk_index);
    let (from, to) = match target {
        ContextTarget::Lines(a, b) => (a, b),
        ContextTarget::Chunk(i) => {
            let c = sorted.iter().find(|c| c.chunk_index == i)?;
            (c.start_line, c.end_line)
        }
    };
    let overlapping = |c: &&&Chunk| c.start_line <= to && c.end_line >= from;
    let nearest = || {
        sorted
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.start_line.abs_diff(from).min(c.end_line.abs_diff(from)))
            .map(|(i, _)| i)
    };
    let first = sorted
        .iter()
        .position(|c| overlapping(&c))
        .or_else(nearest)?;
    let last = sorted
        .iter()
        .rposition(|c| overlapping(&c))
        .unwrap_or(first);
    // The whole unit: chunks of the same section or function, or of its
    // subsections / members, next to the cited ones.
    let base = unit_of(&sorted[first].section).0.to_owned();
    let within = |c: &Chunk| {
        let s = unit_of(&c.section).0;
        !base.is_empty()
            && (s == base
                || s.strip_prefix(base.as_str())
                    .is_some_and(|rest| rest.starts_with(" > ") || rest.starts_with('.')))
    };
    let (mut ua, mut ub) = (first, last);
    while ua > 0 && within(sorted[ua - 1]) {
        ua -= 1;
    }
    while ub + 1 < sorted.len() && within(sorted[ub + 1]) {
        ub += 1;
    }
    let pieces = sorted
        .iter()
        .enumerate()
        .map(|(i, c)| Piece {
            chunk: c,
            matched: (first..=last).contains(&i),
            // Nearer chunks first when growing.
            score: -(i.abs_diff(first).min(i.abs_diff(last)) as f64),
        })
        .collect();
    let run = Run {
        pieces,
        rerank: None,
        first_seen: 0,
    };
    let lines = Lines::of(&sorted);
    let best = sorted[first];
    let mut meta = SpanMeta {
        best,
        project: best.project.clone(),
        revision: revision.map(str::to_owned),
        score: 0.0,
        trimmed_from: None,
    };
    let of = |a: usize, b: usize| {
        meta.packed(
            &lines,
            sorted[a].start_line,
            sorted[b].end_line,
            (sorted[a].chunk_index, sorted[b].chunk_index),
            counter,
        )
    };
    let unit = of(ua, ub);

    let span = if unit.tokens <= max_tokens {
        // The unit, grown by neighbours while they fit.
        let mut widened = Run {
            pieces: run.pieces.clone(),
            rerank: None,
            first_seen: 0,
        };
        for (i, p) in widened.pieces.iter_mut().enumerate() {
            p.matched = (ua..=ub).contains(&i);
        }
        fit(
            &widened,
            &sorted,
            &lines,
            &meta,
            max_tokens,
            Some(from),
            widened.core(),
            counter,
        )
    } else {
        meta.trimmed_from = Some(unit.citation);
        fit(
            &run,
            &sorted,
            &lines,
            &meta,
            max_tokens,
            Some(from),
            run.core(),
            counter,
        )
    };
    let spans: Vec<PackedSpan> = span.into_iter().collect();
    Some(ContextPack {
        max_tokens,
        used_tokens: spans.iter().map(|s| s.tokens).sum(),
        tokenizer: counter.name().to_owned(),
        spans,
        references: Vec::new(),
    })
}

/// What [`expand_context`] widens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextTarget {
    /// Lines `start..=end` (1-based).
    Lines(u32, u32),
    /// One chunk, by index.
    Chunk(u32),
}

fn fence_for(content: &str) -> String {
    let longest = content
        .lines()
        .map(|l| l.trim_start().chars().take_while(|&c| c == '`').count())
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

fn render_span(out: &mut String, span: &PackedSpan) {
    let _ = write!(out, "### {}\n\n", span.citation);
    let _ = write!(out, "project `{}`", span.project);
    if let Some(rev) = &span.revision {
        let _ = write!(out, " @ `{}`", &rev[..rev.len().min(12)]);
    }
    if !span.section.is_empty() {
        let _ = write!(out, " · {}", span.section);
    }
    if let Some(t) = &span.trimmed_from {
        // The same document: its lines are enough (`part of L10-L80`).
        let lines = t
            .strip_prefix(span.uri.as_str())
            .and_then(|rest| rest.strip_prefix('#'))
            .unwrap_or(t);
        let _ = write!(out, " · part of {lines}");
    }
    let fence = fence_for(&span.content);
    let _ = write!(
        out,
        "\n\n{fence}{}\n{}\n{fence}\n\n",
        span.language, span.content
    );
}

impl ContextPack {
    /// The pack as Markdown, ready to paste into a prompt: each span under
    /// its citation, fenced, then the references.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        if self.spans.is_empty() {
            out.push_str("No context fits (or matched).\n\n");
        }
        for span in &self.spans {
            render_span(&mut out, span);
        }
        if !self.references.is_empty() {
            out.push_str("#### More references (not included)\n\n");
            for r in &self.references {
                let _ = write!(out, "- {} (project `{}`", r.citation, r.project);
                if !r.section.is_empty() {
                    let _ = write!(out, ", {}", r.section);
                }
                let _ = writeln!(out, ", ~{} tokens)", r.tokens);
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "<!-- weft: {} spans, {} of {} tokens ({}); cite as uri#Lstart-Lend -->",
            self.spans.len(),
            self.used_tokens,
            self.max_tokens,
            self.tokenizer
        );
        out
    }

    /// Whether lines `start..=end` of `uri` lie inside one packed span.
    pub fn contains(&self, uri: &str, start: u32, end: u32) -> bool {
        self.spans
            .iter()
            .any(|s| s.uri == uri && s.start_line <= start && end <= s.end_line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DocumentId;
    use crate::retrieval::{ResultChunk, Span};

    /// A document of `n` chunks of `lines` lines each, 40 chars a line.
    fn doc(uri: &str, n: u32, lines: u32) -> Vec<Chunk> {
        let id = DocumentId::new("p", uri);
        (0..n)
            .map(|i| {
                let start = i * lines + 1;
                let content = (start..start + lines)
                    .map(|l| format!("{uri} line {l:>4} {}", "x".repeat(20)))
                    .collect::<Vec<_>>()
                    .join("\n");
                Chunk {
                    document_id: id.clone(),
                    chunk_index: i,
                    total_chunks: n,
                    project: "p".into(),
                    uri: uri.into(),
                    title: uri.into(),
                    section: format!("S{i}"),
                    content_type: ContentType::Code,
                    language: "java".into(),
                    node_type: "method_declaration".into(),
                    node_name: Some(format!("m{i}")),
                    start_line: start,
                    end_line: start + lines - 1,
                    start_byte: 0,
                    end_byte: 0,
                    content_hash: String::new(),
                    content,
                    is_index_doc: false,
                    embedding_format: String::new(),
                    overlap_bytes: 0,
                    outline: None,
                }
            })
            .collect()
    }

    fn result(chunks: &[Chunk], spans: &[&[(u32, f64, bool)]]) -> DocumentResult {
        DocumentResult {
            document_id: chunks[0].document_id.clone(),
            uri: chunks[0].uri.clone(),
            title: chunks[0].title.clone(),
            score: 0.0,
            spans: spans
                .iter()
                .map(|s| Span {
                    start_line: chunks[s[0].0 as usize].start_line,
                    end_line: chunks[s[s.len() - 1].0 as usize].end_line,
                    rerank_score: None,
                    chunks: s
                        .iter()
                        .map(|&(i, score, matched)| ResultChunk {
                            chunk: chunks[i as usize].clone(),
                            score,
                            matched,
                            vector: None,
                            text: None,
                            boost: 1.0,
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn pack_of(results: &[DocumentResult], max_tokens: usize) -> ContextPack {
        pack(
            results,
            &HashMap::from([("p".to_owned(), "abc123".to_owned())]),
            &PackOptions { max_tokens },
            &ApproxTokenCounter,
        )
    }

    #[test]
    fn everything_fits_in_a_large_budget_ordered_by_relevance_then_position() {
        let a = doc("a.java", 6, 5);
        let b = doc("b.java", 3, 5);
        let results = vec![
            result(&a, &[&[(0, 0.2, true), (1, 0.1, false)], &[(4, 0.9, true)]]),
            result(&b, &[&[(1, 0.5, true)]]),
        ];
        let pack = pack_of(&results, 10_000);
        let cites: Vec<&str> = pack.spans.iter().map(|s| s.citation.as_str()).collect();
        // a.java has the best span, so it comes first, its spans by line.
        assert_eq!(cites, ["a.java#L1-L10", "a.java#L21-L25", "b.java#L6-L10"]);
        assert!(pack.references.is_empty());
        assert_eq!(pack.spans[0].revision.as_deref(), Some("abc123"));
        assert_eq!(pack.spans[1].section, "S4");
        assert_eq!(pack.spans[1].symbol.as_deref(), Some("m4"));
        let lines: Vec<&str> = pack.spans[0].content.lines().collect();
        assert_eq!(lines.len(), 10);
        assert!(lines[0].starts_with("a.java line    1"));
        assert!(lines[9].starts_with("a.java line   10"));
        assert_eq!(
            pack.used_tokens,
            pack.spans.iter().map(|s| s.tokens).sum::<usize>()
        );
    }

    #[test]
    fn duplicates_and_overlapping_spans_merge_into_one() {
        let a = doc("a.java", 5, 4);
        // The same document twice, with overlapping and touching spans.
        let results = vec![
            result(&a, &[&[(1, 0.9, true), (2, 0.4, false)]]),
            result(&a, &[&[(2, 0.3, true), (3, 0.2, false)]]),
        ];
        let pack = pack_of(&results, 10_000);
        assert_eq!(pack.spans.len(), 1);
        let s = &pack.spans[0];
        assert_eq!((s.start_line, s.end_line), (5, 16));
        assert_eq!((s.first_chunk, s.last_chunk), (1, 3));
        assert_eq!(s.content.lines().count(), 12, "no line twice");
    }

    #[test]
    fn the_budget_holds_and_what_does_not_fit_becomes_a_reference() {
        let a = doc("a.java", 8, 10);
        let b = doc("b.java", 8, 10);
        let results = vec![
            result(&a, &[&[(2, 0.4, false), (3, 0.9, true), (4, 0.4, false)]]),
            result(&b, &[&[(5, 0.5, true), (6, 0.2, false)]]),
        ];
        // One chunk of 10 lines is ~ 10 * 38 / 4 ≈ 95 tokens.
        for budget in [60, 150, 250, 400, 700, 2000] {
            let pack = pack_of(&results, budget);
            assert!(pack.used_tokens <= budget, "{budget}: {}", pack.used_tokens);
            for s in &pack.spans {
                assert_eq!(s.tokens, span_tokens(s, &ApproxTokenCounter));
                let n = s.content.lines().count() as u32;
                assert_eq!(n, s.end_line - s.start_line + 1, "whole lines only");
            }
            let packed: usize = pack.spans.len() + pack.references.len();
            assert!(packed >= 2, "{budget}: every span is packed or referenced");
        }
        // A small budget: the best hit's chunk, trimmed from its span.
        let pack = pack_of(&results, 150);
        assert_eq!(pack.spans.len(), 1);
        assert_eq!(pack.spans[0].citation, "a.java#L31-L40");
        assert_eq!(
            pack.spans[0].trimmed_from.as_deref(),
            Some("a.java#L21-L50")
        );
        assert_eq!(pack.references[0].citation, "b.java#L51-L70");
        // Too small for even the hit: whole lines of it, from its start.
        let pack = pack_of(&results, 60);
        let s = &pack.spans[0];
        assert_eq!(s.start_line, 31);
        assert!(s.end_line < 40 && s.end_line > 31, "{}", s.citation);
        // Everything fits.
        let pack = pack_of(&results, 2000);
        assert_eq!(pack.spans.len(), 2);
        assert!(pack.spans.iter().all(|s| s.trimmed_from.is_none()));
    }

    #[test]
    fn hits_first_packs_more_hits_than_whole_spans_in_order() {
        let a = doc("a.java", 8, 10);
        let b = doc("b.java", 8, 10);
        let results = vec![
            result(&a, &[&[(2, 0.4, false), (3, 0.9, true), (4, 0.4, false)]]),
            result(&b, &[&[(5, 0.5, true)]]),
        ];
        // Room for two chunks (~105 tokens each with its header) and a bit.
        let options = PackOptions { max_tokens: 240 };
        let counter = ApproxTokenCounter;
        let hits = pack_with(
            &results,
            &HashMap::new(),
            &options,
            PackStrategy::HitsFirst,
            &counter,
        );
        let cites: Vec<&str> = hits.spans.iter().map(|s| s.citation.as_str()).collect();
        assert_eq!(cites, ["a.java#L31-L40", "b.java#L51-L60"]);
        let spans = pack_with(
            &results,
            &HashMap::new(),
            &options,
            PackStrategy::SpansInOrder,
            &counter,
        );
        assert_eq!(spans.spans.len(), 1, "the best span's context comes first");
        assert_eq!(spans.spans[0].end_line - spans.spans[0].start_line + 1, 20);
        assert_eq!(spans.references[0].uri, "b.java");
        // With room for everything, both strategies give the whole spans.
        let all = PackOptions { max_tokens: 5000 };
        for strategy in [PackStrategy::HitsFirst, PackStrategy::SpansInOrder] {
            let p = pack_with(&results, &HashMap::new(), &all, strategy, &counter);
            let cites: Vec<&str> = p.spans.iter().map(|s| s.citation.as_str()).collect();
            assert_eq!(cites, ["a.java#L21-L50", "b.java#L51-L60"], "{strategy:?}");
        }
    }

    #[test]
    fn each_hit_is_packed_on_its_own_when_its_whole_span_does_not_fit() {
        // a.java: hits on chunks 1 (0.9) and 5 (0.6), context between them;
        // b.java: one hit (0.8). Each chunk ~105 tokens with a header.
        let a = doc("a.java", 8, 10);
        let b = doc("b.java", 4, 10);
        let span: Vec<(u32, f64, bool)> = (1..=5)
            .map(|i| match i {
                1 => (1, 0.9, true),
                5 => (5, 0.6, true),
                i => (i, 0.3, false),
            })
            .collect();
        let results = vec![result(&a, &[&span]), result(&b, &[&[(2, 0.8, true)]])];
        let pack = pack_of(&results, 360);
        let cites: Vec<&str> = pack.spans.iter().map(|s| s.citation.as_str()).collect();
        // The best hit, then b's, then a's second: three hits, no context,
        // where the span of a's hits (five chunks) would not fit at all.
        assert_eq!(
            cites,
            ["a.java#L11-L20", "a.java#L51-L60", "b.java#L21-L30"]
        );
        assert!(pack.used_tokens <= 360);
        assert_eq!(pack.spans[1].section, "S5", "headed by its own hit");
        assert_eq!(
            pack.spans[1].trimmed_from.as_deref(),
            Some("a.java#L11-L60")
        );
        assert!(
            pack.to_markdown().contains("· S5 · part of L11-L60\n"),
            "{}",
            pack.to_markdown()
        );
        // With room, the context between a's hits joins them into one span.
        let pack = pack_of(&results, 2000);
        let cites: Vec<&str> = pack.spans.iter().map(|s| s.citation.as_str()).collect();
        assert_eq!(cites, ["a.java#L11-L60", "b.java#L21-L30"]);
    }

    #[test]
    fn a_long_hit_goes_first_only_when_clearly_more_relevant() {
        // One 40-line hit (~425 tokens) or three 10-line ones (~110 each):
        // a budget for either.
        let long = doc("long.java", 1, 40);
        let short: Vec<Vec<Chunk>> = ["b.java", "c.java", "d.java"]
            .iter()
            .map(|uri| doc(uri, 1, 10))
            .collect();
        let results = |short_score: f64| {
            let mut r = vec![result(&long, &[&[(0, 0.9, true)]])];
            for (i, s) in short.iter().enumerate() {
                r.push(result(s, &[&[(0, short_score - 0.01 * i as f64, true)]]));
            }
            r
        };
        // Nearly as relevant: three places rather than one.
        let pack = pack_of(&results(0.85), 440);
        let uris: Vec<&str> = pack.spans.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(uris, ["b.java", "c.java", "d.java"]);
        assert_eq!(pack.references[0].uri, "long.java");
        // Far less relevant: the long hit first, and nothing else fits.
        let pack = pack_of(&results(0.3), 440);
        let uris: Vec<&str> = pack.spans.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(uris, ["long.java"]);
    }

    #[test]
    fn a_hit_in_a_split_unit_is_packed_with_the_whole_unit_or_not_at_all() {
        // a.java: chunks 0..=3 are parts 1/4..4/4 of `A.big`, the hit is
        // part 2 (0.9); b.java: one whole method (0.5).
        let mut a = doc("a.java", 5, 10);
        for (i, c) in a.iter_mut().enumerate().take(4) {
            c.section = format!("A.big (Part {}/4)", i + 1);
        }
        let b = doc("b.java", 2, 10);
        let unit: Vec<(u32, f64, bool)> = (0..4)
            .map(|i| (i, if i == 1 { 0.9 } else { 0.45 }, i == 1))
            .collect();
        let results = vec![result(&a, &[&unit]), result(&b, &[&[(0, 0.5, true)]])];
        // Room for the unit (four chunks, ~400 tokens) and b's method.
        let pack = pack_of(&results, 540);
        let cites: Vec<&str> = pack.spans.iter().map(|s| s.citation.as_str()).collect();
        assert_eq!(cites, ["a.java#L1-L40", "b.java#L1-L10"]);
        assert_eq!(pack.spans[0].section, "A.big");
        // Room for two chunks only: the unit does not fit, so the next hit
        // is packed, not a fragment of the unit.
        let pack = pack_of(&results, 250);
        let cites: Vec<&str> = pack.spans.iter().map(|s| s.citation.as_str()).collect();
        assert_eq!(cites, ["b.java#L1-L10"]);
        assert_eq!(pack.references[0].citation, "a.java#L1-L40");
        // Two units with one name (overloads) are two cores: part numbers
        // must follow each other.
        let mut c = doc("c.java", 4, 10);
        for (i, chunk) in c.iter_mut().enumerate() {
            chunk.section = format!("C.f (Part {}/2)", i % 2 + 1);
        }
        let both: Vec<(u32, f64, bool)> = (0..4).map(|i| (i, 0.5, i == 3)).collect();
        let pack = pack_of(&[result(&c, &[&both])], 230);
        assert_eq!(pack.spans[0].citation, "c.java#L21-L40");
    }

    #[test]
    fn reranked_spans_are_ordered_by_the_rerank_score() {
        let a = doc("a.java", 3, 3);
        let b = doc("b.java", 3, 3);
        let mut ra = result(&a, &[&[(0, 0.9, true)]]);
        let mut rb = result(&b, &[&[(0, 0.1, true)]]);
        ra.spans[0].rerank_score = Some(0.1);
        rb.spans[0].rerank_score = Some(0.8);
        let pack = pack_of(&[ra, rb], 10_000);
        assert_eq!(pack.spans[0].uri, "b.java");
    }

    #[test]
    fn the_same_text_in_two_documents_is_packed_once() {
        let a = doc("vendor/x.java", 2, 3);
        let mut b = a.clone();
        for c in &mut b {
            c.document_id = DocumentId::new("p", "copy/x.java");
            c.uri = "copy/x.java".into();
        }
        // Contents differ by uri prefix in `doc`; make them equal.
        for (x, y) in a.iter().zip(b.iter_mut()) {
            y.content = x.content.clone();
        }
        let results = vec![
            result(&a, &[&[(0, 0.9, true)]]),
            result(&b, &[&[(0, 0.8, true)]]),
        ];
        let pack = pack_of(&results, 10_000);
        assert_eq!(pack.spans.len(), 1);
        assert_eq!(pack.references[0].uri, "copy/x.java");
    }

    #[test]
    fn prose_overlap_and_gaps_keep_line_numbers() {
        let id = DocumentId::new("p", "d.md");
        let mk = |i: u32, start: u32, end: u32, content: &str, overlap: u32| Chunk {
            document_id: id.clone(),
            chunk_index: i,
            total_chunks: 3,
            project: "p".into(),
            uri: "d.md".into(),
            title: "d".into(),
            section: "Guide > Install".into(),
            content_type: ContentType::Prose,
            language: "markdown".into(),
            node_type: "section".into(),
            node_name: None,
            start_line: start,
            end_line: end,
            start_byte: 0,
            end_byte: 0,
            content_hash: String::new(),
            content: content.into(),
            is_index_doc: false,
            embedding_format: String::new(),
            overlap_bytes: overlap,
            outline: None,
        };
        // Lines: 1 "# A", 2 "", 3 "one", 4 "two", 5 "", 6 "three"
        let chunks = [
            mk(0, 1, 1, "# A", 0),
            mk(1, 3, 4, "one\ntwo", 0),
            // Repeats "two\n" (4 bytes), then a blank line, then "three".
            mk(2, 4, 6, "two\n\nthree", 4),
        ];
        let lines = Lines::of(&chunks.iter().collect::<Vec<_>>());
        assert_eq!(lines.text(1, 6), "# A\n\none\ntwo\n\nthree");
        let md_fence = fence_for("```js\nx\n```");
        assert_eq!(md_fence, "````");
    }

    #[test]
    fn expand_context_takes_the_whole_unit_then_neighbours() {
        let mut a = doc("a.java", 6, 4);
        for (i, c) in a.iter_mut().enumerate() {
            c.section = match i {
                1 => "A.run (Part 1/3)".into(),
                2 => "A.run (Part 2/3)".into(),
                3 => "A.run (Part 3/3)".into(),
                n => format!("A.m{n}"),
            };
        }
        // Lines 9-10 are in part 2 (chunk 2: lines 9-12).
        let pack = expand_context(
            &a,
            ContextTarget::Lines(9, 10),
            Some("abc"),
            10_000,
            &ApproxTokenCounter,
        )
        .unwrap();
        let s = &pack.spans[0];
        assert_eq!((s.start_line, s.end_line), (1, 24), "all fits");
        assert_eq!(s.section, "A.run");
        // A budget for the unit (lines 5-16, ~128 tokens) and one more
        // chunk (~38), not two.
        let pack = expand_context(
            &a,
            ContextTarget::Lines(9, 10),
            None,
            200,
            &ApproxTokenCounter,
        )
        .unwrap();
        let s = &pack.spans[0];
        assert!(s.start_line <= 5 && s.end_line >= 16, "{}", s.citation);
        assert_eq!(s.end_line - s.start_line + 1, 16, "{}", s.citation);
        // One chunk larger than the budget: lines from the cited one on.
        let whole = {
            let mut c = doc("b.java", 1, 30);
            c[0].section = "B".into();
            c
        };
        let pack = expand_context(
            &whole,
            ContextTarget::Lines(12, 14),
            None,
            80,
            &ApproxTokenCounter,
        )
        .unwrap();
        let s = &pack.spans[0];
        assert_eq!(s.start_line, 12, "{}", s.citation);
        assert!(s.end_line >= 13 && pack.used_tokens <= 80, "{}", s.citation);
        // Too small for the unit: lines from the cited chunk, trimmed.
        let pack = expand_context(
            &a,
            ContextTarget::Lines(9, 10),
            None,
            60,
            &ApproxTokenCounter,
        )
        .unwrap();
        let s = &pack.spans[0];
        assert_eq!(s.start_line, 9);
        assert_eq!(s.trimmed_from.as_deref(), Some("a.java#L5-L16"));
        assert!(pack.used_tokens <= 60);
    }

    #[test]
    fn citations_parse() {
        let c: Citation = "src/A.java#L12-L30".parse().unwrap();
        assert_eq!(c.uri, "src/A.java");
        assert_eq!(c.lines, Some((12, 30)));
        let c: Citation = "https://x.org/a#b#L3".parse().unwrap();
        assert_eq!(
            (c.uri.as_str(), c.lines),
            ("https://x.org/a#b", Some((3, 3)))
        );
        let c: Citation = "docs/a.md".parse().unwrap();
        assert_eq!(c.lines, None);
        assert!("a.md#L9-L3".parse::<Citation>().is_err());
        assert!("a.md#Lx".parse::<Citation>().is_err());
        assert_eq!(citation("a", 1, 2), "a#L1-L2");
    }
}
