//! What packing and `get_context` share: runs of consecutive chunks of one
//! document with what the search said of each ([`Run`]), their lines with
//! prose overlap written once ([`Lines`]), the fields of a span headed by
//! its best chunk ([`SpanMeta`]), and the largest part of a run that fits a
//! budget ([`fit`]).

use std::collections::{BTreeMap, HashSet};

use super::{PackedSpan, TokenCounter, citation, span_tokens};
use crate::Chunk;
use crate::retrieval::unit_of;

/// A chunk of a candidate span, with what the search said of it.
#[derive(Debug, Clone)]
pub(super) struct Piece<'a> {
    pub(super) chunk: &'a Chunk,
    pub(super) score: f64,
    pub(super) matched: bool,
}

/// Consecutive chunks of one document: a candidate for the pack.
pub(super) struct Run<'a> {
    pub(super) pieces: Vec<Piece<'a>>,
    /// The reranker's score of the span(s) it came from, if any.
    pub(super) rerank: Option<f32>,
    /// The position of its document's first span in the response.
    pub(super) first_seen: usize,
}

impl Run<'_> {
    /// Sort key: reranked spans first, by rerank score; then by the best
    /// matched score (any score when nothing matched).
    pub(super) fn relevance(&self) -> (bool, f64) {
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
    pub(super) fn best_piece(&self) -> usize {
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
    pub(super) fn best_in(&self, a: usize, b: usize) -> usize {
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
    pub(super) fn relevance_in(&self, a: usize, b: usize) -> f64 {
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
    pub(super) fn cores(&self) -> Vec<(usize, usize)> {
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
    pub(super) fn core(&self) -> (usize, usize) {
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
pub(super) struct Lines {
    /// The number of the first line.
    pub(super) first: u32,
    lines: Vec<String>,
}

impl Lines {
    pub(super) fn of(chunks: &[&Chunk]) -> Self {
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

    pub(super) fn last(&self) -> u32 {
        self.first + self.lines.len().saturating_sub(1) as u32
    }

    /// Lines `from..=to` (clamped), joined.
    pub(super) fn text(&self, from: u32, to: u32) -> String {
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
pub(super) struct SpanMeta<'a> {
    pub(super) best: &'a Chunk,
    pub(super) project: String,
    pub(super) revision: Option<String>,
    pub(super) score: f64,
    /// Set on spans cut from a larger one: that one's citation.
    pub(super) trimmed_from: Option<String>,
}

impl SpanMeta<'_> {
    fn section(&self) -> String {
        unit_of(&self.best.section).0.to_owned()
    }

    pub(super) fn packed(
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

/// The largest part of `run` around `core` (positions of its chunks) that
/// fits `budget`: whole chunks (the core, then neighbours by score) or,
/// when even the core does not fit, whole lines from `anchor` (default: the
/// first line of the core's best hit).
#[allow(clippy::too_many_arguments)]
pub(super) fn fit(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentType, DocumentId};

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
    }
}
