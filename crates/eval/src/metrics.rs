//! Scoring one response against its targets, and aggregating.

use serde::Serialize;
use weft_core::retrieval::{
    ApproxTokenCounter, DocumentResult, PackOptions, PackStrategy, ResultChunk, pack_with,
};

use crate::queries::Target;
use crate::runner::QueryOutcome;

/// What one response scored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// 1-based position of the first hit among the matched chunks (best
    /// first), if one is within the first `limit`.
    pub rank: Option<usize>,
    /// When the rank-1 chunk is a hit: the share of that target's lines
    /// inside the span holding it.
    pub coverage: Option<f64>,
    /// Returned context in tokens: characters of every returned chunk / 4.
    pub context_tokens: f64,
    /// The first three matched chunks, best first, as `uri:start-end`.
    pub top: Vec<String>,
}

/// Scores `results` (a search response) against `targets`, looking at the
/// first `limit` matched chunks. Coverage counts the target lines between
/// the first and last line of the rank-1 hit's span.
///
/// Matched chunks are ranked by score, best first (the order the retrieval
/// chose them in; ties keep the response's order). Context chunks added by
/// expansion do not count for the rank, but do for coverage and tokens.
pub fn judge(targets: &[Target], results: &[DocumentResult], limit: usize) -> Judgement {
    let mut matched: Vec<(usize, usize, &ResultChunk)> = Vec::new();
    for (d, document) in results.iter().enumerate() {
        for (s, span) in document.spans.iter().enumerate() {
            for chunk in span.chunks.iter().filter(|c| c.matched) {
                matched.push((d, s, chunk));
            }
        }
    }
    matched.sort_by(|a, b| b.2.score.total_cmp(&a.2.score));
    matched.truncate(limit);
    let hit_target = |c: &ResultChunk| {
        targets
            .iter()
            .find(|t| t.overlaps(&c.chunk.uri, c.chunk.start_line, c.chunk.end_line))
    };
    let rank = matched
        .iter()
        .position(|(_, _, c)| hit_target(c).is_some())
        .map(|i| i + 1);
    let coverage = match (rank, matched.first()) {
        (Some(1), Some((d, s, top))) => hit_target(top).map(|target| {
            // A span is consecutive chunks: it returns its document from its
            // first line to its last (only blank lines fall between chunks).
            let span = &results[*d].spans[*s];
            let from = target.start_line.max(span.start_line);
            let to = target.end_line.min(span.end_line);
            let covered = if from <= to { to - from + 1 } else { 0 };
            f64::from(covered) / f64::from(target.lines())
        }),
        _ => None,
    };
    let chars: usize = results
        .iter()
        .flat_map(|d| d.spans.iter())
        .map(span_chars)
        .sum();
    Judgement {
        rank,
        coverage,
        context_tokens: chars as f64 / 4.0,
        top: matched
            .iter()
            .take(3)
            .map(|(_, _, c)| {
                format!(
                    "{}:{}-{}",
                    c.chunk.uri, c.chunk.start_line, c.chunk.end_line
                )
            })
            .collect(),
    }
}

/// What packing one response into one budget gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PackJudgement {
    /// The budget in tokens; `None`: every span, unpacked.
    pub budget: Option<usize>,
    /// Whether a whole target (main or alternative) lies inside one packed span.
    pub answer_in_context: bool,
    /// Tokens the packed spans cost, headers included (chars / 4).
    pub tokens: usize,
}

/// Packs `packing` (the response of a search told its budget) into each of
/// `budgets`, then `unpacked` (the response without a budget) without a
/// budget (every span: what it returns, counted the same way), and says
/// for each whether a whole target is inside the context.
pub fn judge_packs(
    targets: &[Target],
    packing: &[DocumentResult],
    unpacked: &[DocumentResult],
    budgets: &[usize],
    strategy: PackStrategy,
) -> Vec<PackJudgement> {
    let no_revisions = std::collections::HashMap::new();
    budgets
        .iter()
        .map(|&b| Some(b))
        .chain(std::iter::once(None))
        .map(|budget| {
            let options = PackOptions {
                max_tokens: budget.unwrap_or(usize::MAX),
            };
            let results = if budget.is_some() { packing } else { unpacked };
            let packed = pack_with(
                results,
                &no_revisions,
                &options,
                strategy,
                &ApproxTokenCounter,
            );
            PackJudgement {
                budget,
                answer_in_context: targets
                    .iter()
                    .any(|t| packed.contains(&t.path, t.start_line, t.end_line)),
                tokens: packed.used_tokens,
            }
        })
        .collect()
}

/// Packing figures over a set of queries, for one budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PackFigures {
    /// The budget; `None`: unpacked.
    pub budget: Option<usize>,
    /// Share of queries with a whole target inside the packed context.
    pub answer_in_context: f64,
    /// Mean tokens used.
    pub tokens_mean: f64,
}

impl PackFigures {
    fn of(outcomes: &[QueryOutcome]) -> Vec<Self> {
        let Some(first) = outcomes.iter().find(|o| !o.packed.is_empty()) else {
            return Vec::new();
        };
        first
            .packed
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let judged: Vec<&PackJudgement> =
                    outcomes.iter().filter_map(|o| o.packed.get(i)).collect();
                let n = judged.len();
                PackFigures {
                    budget: p.budget,
                    answer_in_context: ratio(
                        judged.iter().filter(|j| j.answer_in_context).count() as f64,
                        n,
                    ),
                    tokens_mean: ratio(judged.iter().map(|j| j.tokens as f64).sum(), n),
                }
            })
            .collect()
    }
}

/// Characters of a span's text: each chunk's content, less the leading
/// bytes that repeat its predecessor's end when that predecessor is in the
/// span too (prose overlap is returned once).
fn span_chars(span: &weft_core::retrieval::Span) -> usize {
    let mut previous: Option<u32> = None;
    let mut total = 0;
    for c in &span.chunks {
        let content = c.chunk.content.as_str();
        let follows = previous.is_some_and(|p| p + 1 == c.chunk.chunk_index);
        let text = if follows {
            content
                .get(c.chunk.overlap_bytes as usize..)
                .unwrap_or(content)
        } else {
            content
        };
        total += text.chars().count();
        previous = Some(c.chunk.chunk_index);
    }
    total
}

/// Context figures over a set of queries, for one expansion setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextStats {
    /// Queries whose rank-1 chunk is a hit (coverage is measured on these).
    pub top1_hits: usize,
    /// Mean coverage over those.
    pub coverage_mean: f64,
    /// Share of those with every target line returned.
    pub complete_share: f64,
    /// Mean returned context in tokens, over all the queries.
    pub context_tokens_mean: f64,
}

impl ContextStats {
    fn of<'a>(judgements: impl Iterator<Item = &'a Judgement>) -> Option<Self> {
        let (mut n, mut tokens, mut hits, mut coverage, mut complete) = (0, 0.0, 0, 0.0, 0);
        for j in judgements {
            n += 1;
            tokens += j.context_tokens;
            if let Some(c) = j.coverage {
                hits += 1;
                coverage += c;
                if c >= 1.0 {
                    complete += 1;
                }
            }
        }
        (n > 0).then(|| ContextStats {
            top1_hits: hits,
            coverage_mean: ratio(coverage, hits),
            complete_share: ratio(f64::from(complete), hits),
            context_tokens_mean: tokens / n as f64,
        })
    }
}

/// The figures of a set of queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// Queries run.
    pub queries: usize,
    /// Share with a hit at rank 1.
    pub recall_at_1: f64,
    /// Share with a hit in the first 5.
    pub recall_at_5: f64,
    /// Share with a hit in the first 10.
    pub recall_at_10: f64,
    /// Mean reciprocal rank, cut at 10.
    pub mrr_at_10: f64,
    /// nDCG@10 with binary relevance and one relevant group: `1 / log2(rank + 1)`.
    pub ndcg_at_10: f64,
    /// Long targets (more than 50 lines of code, or a markdown section
    /// longer than 256 tokens): how many.
    pub long_queries: usize,
    /// Their context figures with expansion off (when run).
    pub long_expansion_off: Option<ContextStats>,
    /// Their context figures with expansion on (when run).
    pub long_expansion_on: Option<ContextStats>,
    /// Mean returned context in tokens over all queries, as searched by
    /// default (expansion on unless only off was run).
    pub context_tokens_mean: f64,
    /// Packing figures per budget, then unpacked, when packing was measured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packing: Vec<PackFigures>,
}

impl Aggregate {
    /// Aggregates outcomes. Ranks come from the expansion-on run when there
    /// is one (expansion never changes which chunks match).
    pub fn of(outcomes: &[QueryOutcome]) -> Self {
        let n = outcomes.len();
        let (mut r1, mut r5, mut r10, mut mrr, mut ndcg, mut tokens) = (0, 0, 0, 0.0, 0.0, 0.0);
        for o in outcomes {
            let main = o.main();
            tokens += main.context_tokens;
            if let Some(rank) = main.rank.filter(|r| *r <= 10) {
                r1 += usize::from(rank <= 1);
                r5 += usize::from(rank <= 5);
                r10 += 1;
                mrr += 1.0 / rank as f64;
                ndcg += 1.0 / ((rank + 1) as f64).log2();
            }
        }
        let long: Vec<&QueryOutcome> = outcomes.iter().filter(|o| o.long).collect();
        Aggregate {
            queries: n,
            recall_at_1: ratio(r1 as f64, n),
            recall_at_5: ratio(r5 as f64, n),
            recall_at_10: ratio(r10 as f64, n),
            mrr_at_10: ratio(mrr, n),
            ndcg_at_10: ratio(ndcg, n),
            long_queries: long.len(),
            long_expansion_off: ContextStats::of(long.iter().filter_map(|o| o.off.as_ref())),
            long_expansion_on: ContextStats::of(long.iter().filter_map(|o| o.on.as_ref())),
            context_tokens_mean: ratio(tokens, n),
            packing: PackFigures::of(outcomes),
        }
    }
}

fn ratio(x: f64, n: usize) -> f64 {
    if n == 0 { 0.0 } else { x / n as f64 }
}

/// The figures of one corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorpusFigures {
    /// The corpus's name, as in the query file.
    pub corpus: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Aggregate,
}

/// Figures per corpus and over all queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Each corpus, in the order given.
    pub corpora: Vec<CorpusFigures>,
    /// Every query together (micro-average).
    pub overall: Aggregate,
}

impl Report {
    /// Builds the report from each corpus's outcomes.
    pub fn new(by_corpus: &[(String, Vec<QueryOutcome>)]) -> Self {
        let all: Vec<QueryOutcome> = by_corpus.iter().flat_map(|(_, o)| o.clone()).collect();
        Report {
            corpora: by_corpus
                .iter()
                .map(|(name, o)| CorpusFigures {
                    corpus: name.clone(),
                    figures: Aggregate::of(o),
                })
                .collect(),
            overall: Aggregate::of(&all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::retrieval::Span;
    use weft_core::{Chunk, ContentType, DocumentId};

    fn chunk(uri: &str, index: u32, start: u32, end: u32, chars: usize) -> Chunk {
        Chunk {
            document_id: DocumentId::new("p", uri),
            chunk_index: index,
            total_chunks: 10,
            project: "p".into(),
            uri: uri.into(),
            title: uri.into(),
            section: String::new(),
            content_type: ContentType::Code,
            language: "java".into(),
            node_type: "method".into(),
            node_name: None,
            start_line: start,
            end_line: end,
            start_byte: 0,
            end_byte: 0,
            content: "x".repeat(chars),
            content_hash: String::new(),
            is_index_doc: false,
            embedding_format: String::new(),
            overlap_bytes: 0,
            outline: None,
        }
    }

    fn rc(c: Chunk, score: f64, matched: bool) -> ResultChunk {
        ResultChunk {
            chunk: c,
            score,
            matched,
            vector: None,
            text: None,
            boost: 1.0,
        }
    }

    fn doc(uri: &str, spans: Vec<Vec<ResultChunk>>) -> DocumentResult {
        DocumentResult {
            document_id: DocumentId::new("p", uri),
            uri: uri.into(),
            title: uri.into(),
            score: 0.0,
            spans: spans
                .into_iter()
                .map(|chunks| Span {
                    start_line: chunks[0].chunk.start_line,
                    end_line: chunks[chunks.len() - 1].chunk.end_line,
                    chunks,
                    rerank_score: None,
                })
                .collect(),
        }
    }

    fn target(path: &str, start: u32, end: u32) -> Target {
        Target {
            path: path.into(),
            start_line: start,
            end_line: end,
        }
    }

    #[test]
    fn rank_counts_matched_chunks_by_score_not_context() {
        // a.java: a context chunk over the target (not a hit), then a
        // matched non-hit; b.java: the hit, scored lower than a.java's match.
        let results = vec![
            doc(
                "a.java",
                vec![vec![rc(chunk("a.java", 0, 1, 9, 40), 0.9, true)]],
            ),
            doc(
                "b.java",
                vec![vec![
                    rc(chunk("b.java", 3, 30, 39, 40), 0.1, false),
                    rc(chunk("b.java", 4, 40, 49, 40), 0.5, true),
                ]],
            ),
        ];
        let j = judge(&[target("b.java", 35, 45)], &results, 10);
        assert_eq!(j.rank, Some(2));
        assert_eq!(j.coverage, None, "rank 2 has no coverage");
        assert_eq!(j.context_tokens, 30.0);
        let j = judge(&[target("b.java", 35, 45)], &results, 1);
        assert_eq!(j.rank, None, "the hit is beyond the limit");
    }

    #[test]
    fn coverage_is_the_share_of_target_lines_in_the_hit_span() {
        let span = vec![
            rc(chunk("b.java", 3, 21, 30, 4), 0.2, false),
            rc(chunk("b.java", 4, 31, 40, 4), 0.9, true),
        ];
        let results = vec![doc("b.java", vec![span])];
        // Target 21..60: 20 of 40 lines returned.
        let j = judge(&[target("b.java", 21, 60)], &results, 10);
        assert_eq!(j.rank, Some(1));
        assert_eq!(j.coverage, Some(0.5));
        // An alt target fully inside the span.
        let j = judge(
            &[target("c.java", 1, 2), target("b.java", 25, 35)],
            &results,
            10,
        );
        assert_eq!(j.coverage, Some(1.0));
    }

    #[test]
    fn packing_judges_whole_targets_inside_the_packed_context() {
        let span = vec![
            rc(chunk("b.java", 3, 21, 30, 400), 0.2, false),
            rc(chunk("b.java", 4, 31, 40, 400), 0.9, true),
        ];
        let results = vec![doc("b.java", vec![span])];
        let targets = [target("b.java", 25, 35)];
        let j = judge_packs(
            &targets,
            &results,
            &results,
            &[60, 100_000],
            PackStrategy::HitsFirst,
        );
        assert_eq!(j.len(), 3);
        // 60 tokens: not even the first line of the hit (one long line).
        assert_eq!(j[0].budget, Some(60));
        assert!(!j[0].answer_in_context);
        assert!(j[0].tokens <= 60);
        assert!(j[1].answer_in_context && j[2].answer_in_context);
        assert_eq!(j[2].budget, None);
        assert_eq!(j[1].tokens, j[2].tokens, "everything fits");
        // The budgets pack the search told its budget; "unpacked" is the
        // other response, as returned without one.
        let j = judge_packs(&targets, &results, &[], &[100_000], PackStrategy::HitsFirst);
        assert!(j[0].answer_in_context);
        assert_eq!((j[1].answer_in_context, j[1].tokens), (false, 0));
        let outcomes: Vec<QueryOutcome> = (0..2)
            .map(|i| QueryOutcome {
                id: i.to_string(),
                long: false,
                off: None,
                on: None,
                packed: judge_packs(
                    &[target("b.java", 25, if i == 0 { 35 } else { 60 })],
                    &results,
                    &results,
                    &[60],
                    PackStrategy::HitsFirst,
                ),
            })
            .collect();
        let figures = Aggregate::of(&outcomes).packing;
        assert_eq!(figures.len(), 2);
        assert_eq!(figures[0].answer_in_context, 0.0);
        assert_eq!(
            figures[1].answer_in_context, 0.5,
            "the longer target is cut"
        );
    }

    #[test]
    fn aggregate_follows_the_definitions() {
        let o = |rank: Option<usize>, long: bool, cov_off: Option<f64>, cov_on: Option<f64>| {
            QueryOutcome {
                id: String::new(),
                long,
                off: Some(Judgement {
                    rank,
                    coverage: cov_off,
                    context_tokens: 100.0,
                    top: Vec::new(),
                }),
                on: Some(Judgement {
                    rank,
                    coverage: cov_on,
                    context_tokens: 140.0,
                    top: Vec::new(),
                }),
                packed: Vec::new(),
            }
        };
        let outcomes = vec![
            o(Some(1), true, Some(0.5), Some(1.0)),
            o(Some(3), true, None, None),
            o(None, false, None, None),
            o(Some(11), false, None, None),
        ];
        let a = Aggregate::of(&outcomes);
        assert_eq!(a.queries, 4);
        assert_eq!(a.recall_at_1, 0.25);
        assert_eq!(a.recall_at_5, 0.5);
        assert_eq!(a.recall_at_10, 0.5);
        assert!((a.mrr_at_10 - (1.0 + 1.0 / 3.0) / 4.0).abs() < 1e-12);
        assert!((a.ndcg_at_10 - (1.0 + 0.5) / 4.0).abs() < 1e-12);
        assert_eq!(a.long_queries, 2);
        let off = a.long_expansion_off.unwrap();
        let on = a.long_expansion_on.unwrap();
        assert_eq!(
            (off.top1_hits, off.coverage_mean, off.complete_share),
            (1, 0.5, 0.0)
        );
        assert_eq!((on.coverage_mean, on.complete_share), (1.0, 1.0));
        assert_eq!(
            (off.context_tokens_mean, on.context_tokens_mean),
            (100.0, 140.0)
        );
        assert_eq!(a.context_tokens_mean, 140.0);
        let report = Report::new(&[("x".into(), outcomes.clone()), ("y".into(), outcomes)]);
        assert_eq!(report.overall.queries, 8);
        assert_eq!(report.overall.ndcg_at_10, a.ndcg_at_10);
    }
}
