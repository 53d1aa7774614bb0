//! Retrieval evaluation for weft.
//!
//! The query files are those of `shared/eval/queries/*.jsonl` (one JSON
//! object per line: `query`, `corpus`, `path`, `start_line`, `end_line`,
//! `alt_targets`, `corpus_root`, `hard_root`, and `n_lines` or `long@256`);
//! the metrics are the ones defined in `shared/eval/README.md`:
//!
//! - a returned **matched** chunk is a *hit* when its file equals a target's
//!   and its line range overlaps the target's;
//! - the rank of a query is the position of its first hit among the matched
//!   chunks, best first (context chunks added by expansion never count);
//! - Recall@1/5/10, MRR@10 and nDCG@10 (binary relevance) follow from ranks;
//! - on long targets, **context coverage** is the share of the target's lines
//!   inside the span that holds the rank-1 hit, with expansion off and on,
//!   next to the mean returned context in tokens (characters / 4).
//!
//! [`load_queries`] reads a file, [`judge`] scores one response, and
//! [`Report`] aggregates per corpus and overall. [`run_queries`] drives a
//! [`weft_core::query::QueryEngine`] over a set of queries; [`run_baseline`]
//! runs them against [`LineWindows`], BM25 over fixed line windows (the
//! reference point of `shared/eval`), judged by the same metrics.
//! [`derive`] builds a query set from a project's own code and docs.

mod baseline;
pub mod derive;
mod metrics;
mod queries;
mod runner;

pub use baseline::{CODE_WINDOW, LineWindows, PROSE_WINDOW, run_baseline};
pub use metrics::{
    Aggregate, ContextStats, CorpusFigures, Judgement, PackFigures, PackJudgement, Report, judge,
    judge_packs,
};
pub use queries::{EvalQuery, QueryFileError, Target, Variant, load_queries, select_queries};
pub use runner::{CachingEmbedder, QueryOutcome, RunOptions, run_queries};
