//! The side-by-side report of `weft eval` comparisons: the BM25
//! line-window baseline and each configuration, on the same queries, per
//! corpus and, where a corpus mixes them, its code and prose queries apart.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use serde_json::json;
use weft_eval::{Aggregate, EvalQuery, QueryOutcome};

use super::{ConfigRun, EvalArgs, LIMIT, config_label};

/// One row group of the report: a corpus, a part of one, or everything.
struct Section {
    name: String,
    /// Which queries: (corpus index, query index).
    members: Vec<(usize, usize)>,
}

/// The comparison: every section scored by the baseline and by each run.
pub(super) struct Comparison<'a> {
    sections: Vec<Section>,
    baseline: Option<Vec<Aggregate>>,
    runs: Vec<(&'a ConfigRun, Vec<Aggregate>)>,
}

fn aggregate(outcomes: &[(String, Vec<QueryOutcome>)], members: &[(usize, usize)]) -> Aggregate {
    let picked: Vec<QueryOutcome> = members
        .iter()
        .filter_map(|&(c, q)| outcomes.get(c).and_then(|(_, o)| o.get(q)).cloned())
        .collect();
    Aggregate::of(&picked)
}

impl<'a> Comparison<'a> {
    /// Scores each section of `corpora` (name and queries, in run order).
    pub(super) fn new(
        corpora: &[(String, Vec<EvalQuery>)],
        baseline: Option<Vec<(String, Vec<QueryOutcome>)>>,
        runs: &'a [ConfigRun],
    ) -> Self {
        let mut sections = Vec::new();
        for (c, (name, queries)) in corpora.iter().enumerate() {
            let all: Vec<(usize, usize)> = (0..queries.len()).map(|q| (c, q)).collect();
            let (prose, code): (Vec<_>, Vec<_>) =
                all.iter().partition(|&&(_, q)| queries[q].is_prose());
            sections.push(Section {
                name: name.clone(),
                members: all,
            });
            if !prose.is_empty() && !code.is_empty() {
                sections.push(Section {
                    name: format!("{name} (code)"),
                    members: code,
                });
                sections.push(Section {
                    name: format!("{name} (prose)"),
                    members: prose,
                });
            }
        }
        if corpora.len() > 1 {
            sections.push(Section {
                name: "overall".to_owned(),
                members: corpora
                    .iter()
                    .enumerate()
                    .flat_map(|(c, (_, q))| (0..q.len()).map(move |i| (c, i)))
                    .collect(),
            });
        }
        let score = |outcomes: &[(String, Vec<QueryOutcome>)]| -> Vec<Aggregate> {
            sections
                .iter()
                .map(|s| aggregate(outcomes, &s.members))
                .collect()
        };
        Comparison {
            baseline: baseline.as_deref().map(score),
            runs: runs.iter().map(|r| (r, score(&r.outcomes))).collect(),
            sections,
        }
    }

    fn sections_json(&self, figures: &[Aggregate]) -> serde_json::Value {
        json!(
            self.sections
                .iter()
                .zip(figures)
                .map(|(s, a)| json!({"section": s.name, "figures": a}))
                .collect::<Vec<_>>()
        )
    }

    /// The baseline's figures, by section.
    pub(super) fn baseline_json(&self) -> serde_json::Value {
        match &self.baseline {
            Some(b) => json!({
                "method": format!(
                    "BM25 over fixed line windows ({} lines of code, {} of prose), top {LIMIT}, ±1 window as context",
                    weft_eval::CODE_WINDOW,
                    weft_eval::PROSE_WINDOW
                ),
                "sections": self.sections_json(b),
            }),
            None => serde_json::Value::Null,
        }
    }

    /// Each configuration's figures, by section, with what it indexed.
    pub(super) fn configs_json(&self) -> serde_json::Value {
        json!(
            self.runs
                .iter()
                .map(|(run, figures)| json!({
                    "config": run.config,
                    "data_dir": run.data_dir,
                    "retrieval": run.retrieval,
                    "index": run.index,
                    "sections": self.sections_json(figures),
                }))
                .collect::<Vec<_>>()
        )
    }

    /// The tables, for people.
    pub(super) fn print(
        &self,
        queries_file: &Path,
        args: &EvalArgs,
        budgets: &[usize],
        started: Instant,
    ) -> anyhow::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "\n{} — {} variant, {:?} mode, top {LIMIT}; answer in context = the whole target inside the context packed into that many tokens",
            queries_file.display(),
            args.variant.name(),
            args.mode
        )?;
        let mut labels: Vec<String> = Vec::new();
        if self.baseline.is_some() {
            labels.push("BM25 line windows".to_owned());
        }
        for (i, (run, _)) in self.runs.iter().enumerate() {
            labels.push(if self.runs.len() > 1 {
                format!(
                    "{}: {}",
                    (b'A' + i as u8) as char,
                    config_label(run.config.as_deref())
                )
            } else {
                format!("weft: {}", config_label(run.config.as_deref()))
            });
        }
        let width = labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(10)
            .max(20)
            + 2;
        write!(
            out,
            "\n{:<width$} {:>7} {:>6} {:>6} {:>6} {:>7} {:>8}",
            "", "queries", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10"
        )?;
        for b in budgets {
            write!(out, " {:>9}", format!("ctx@{b}"))?;
        }
        writeln!(out)?;
        for (s, section) in self.sections.iter().enumerate() {
            writeln!(out, "{}", section.name)?;
            let rows = self
                .baseline
                .iter()
                .map(|b| &b[s])
                .chain(self.runs.iter().map(|(_, f)| &f[s]));
            for (label, a) in labels.iter().zip(rows) {
                write!(
                    out,
                    "  {:<w$} {:>7} {:>6.3} {:>6.3} {:>6.3} {:>7.3} {:>8.3}",
                    label,
                    a.queries,
                    a.recall_at_1,
                    a.recall_at_5,
                    a.recall_at_10,
                    a.mrr_at_10,
                    a.ndcg_at_10,
                    w = width - 2
                )?;
                for b in budgets {
                    let share = a
                        .packing
                        .iter()
                        .find(|p| p.budget == Some(*b))
                        .map_or(f64::NAN, |p| p.answer_in_context);
                    write!(out, " {share:>9.3}")?;
                }
                writeln!(out)?;
            }
        }
        writeln!(out, "\n{:.1}s.", started.elapsed().as_secs_f64())?;
        Ok(())
    }
}
