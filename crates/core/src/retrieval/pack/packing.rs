//! Packing a search response into a token budget: candidate spans (each
//! document's chunks in runs), hits first by relevance discounted by cost,
//! then their context; what does not fit becomes a reference.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::runs::{Lines, Piece, Run, SpanMeta, fit};
use super::{ContextPack, PackOptions, PackStrategy, PackedSpan, Reference, TokenCounter};
use crate::Chunk;
use crate::retrieval::DocumentResult;

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
pub(super) const COST_EXPONENT: f64 = 0.25;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DocumentId;
    use crate::retrieval::pack::fixtures::{doc, pack_of, result};
    use crate::retrieval::pack::{ApproxTokenCounter, span_tokens};

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
}
