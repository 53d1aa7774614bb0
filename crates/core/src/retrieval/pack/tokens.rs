//! Counting the tokens a text, and a packed span, cost in an assistant's
//! context.

use super::PackedSpan;
use super::render::render_span;

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

/// What a packed span costs: its Markdown header and fenced content.
pub fn span_tokens(span: &PackedSpan, counter: &dyn TokenCounter) -> usize {
    let mut out = String::new();
    render_span(&mut out, span);
    counter.count(&out)
}
