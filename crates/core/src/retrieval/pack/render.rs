//! The Markdown of a pack, ready to paste into a prompt: each span under
//! its citation, fenced, then the references.

use std::fmt::Write as _;

use super::{ContextPack, PackedSpan};

/// A code fence longer than any run of backticks that starts a line of
/// `content`.
fn fence_for(content: &str) -> String {
    let longest = content
        .lines()
        .map(|l| l.trim_start().chars().take_while(|&c| c == '`').count())
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Appends `span` as Markdown: a header with its citation, project,
/// commit and section, then its content, fenced.
pub(super) fn render_span(out: &mut String, span: &PackedSpan) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_longer_than_any_in_the_content() {
        let md_fence = fence_for("```js\nx\n```");
        assert_eq!(md_fence, "````");
    }
}
