//! Context around one place in a document, for `get_context`: the cited
//! lines or chunk widened to their whole section or function, then to
//! neighbouring chunks, while it fits the budget.

use super::runs::{Lines, Piece, Run, SpanMeta, fit};
use super::{ContextPack, PackedSpan, TokenCounter};
use crate::Chunk;
use crate::retrieval::unit_of;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::pack::ApproxTokenCounter;
    use crate::retrieval::pack::fixtures::doc;

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
}
