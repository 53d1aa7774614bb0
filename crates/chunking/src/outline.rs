//! The section titles of a markup document, as its chunker finds them.
//!
//! For work that is about sections rather than chunks: `weft eval --derive`
//! asks each heading of its section, and masks the heading in the copy it
//! indexes. The titles are those the markdown, reStructuredText and
//! AsciiDoc chunkers cut at, so a derived target is a section weft itself
//! knows.

use crate::detect::Strategy;
use crate::{Chunker, asciidoc, markdown, rst};

/// One section title of a markup document, with its lines (1-based,
/// inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionTitle {
    /// 1 for the top level.
    pub level: usize,
    /// The title text, whitespace collapsed.
    pub text: String,
    /// The title's own lines: the heading line, a setext or reST title with
    /// its underline (and overline), an AsciiDoc title with its underline.
    pub title_lines: (u32, u32),
    /// The section's own text: from its first line (labels and anchors
    /// that belong to the title included) to the last non-blank line before
    /// the next title of any level.
    pub lines: (u32, u32),
}

/// A title's bytes: where its section starts, and its own lines.
struct Found {
    start: usize,
    title: (usize, usize),
    level: usize,
    text: String,
}

impl Chunker {
    /// The section titles of `text`, the file at `uri`, in order, when it
    /// is markdown, reStructuredText or AsciiDoc (as [`Chunker::detect_text`]
    /// takes it); empty for any other file.
    pub fn section_titles(&self, uri: &str, text: &str) -> Vec<SectionTitle> {
        let found: Vec<Found> = match self.detect_text(uri, text).strategy {
            Strategy::Markdown => markdown::scan(text)
                .headings
                .into_iter()
                .map(|h| Found {
                    start: h.start,
                    title: (h.start, h.end),
                    level: h.level,
                    text: h.text,
                })
                .collect(),
            Strategy::Rst => from_sections(rst::scan(text, self.config.markdown.max_chars)),
            Strategy::AsciiDoc => from_sections(asciidoc::scan(text)),
            _ => Vec::new(),
        };
        let starts = line_starts(text);
        let line_of = |byte: usize| line_of(&starts, byte);
        let blank = |line: u32| line_text(text, &starts, line).trim().is_empty();
        let last_line = line_of(text.len().saturating_sub(1));
        let mut out = Vec::with_capacity(found.len());
        for (i, f) in found.iter().enumerate() {
            let first = line_of(f.start);
            let title_first = line_of(f.title.0);
            // The title's end byte is past its last character (a markdown
            // heading's range takes the line break too).
            let title_last = line_of(f.title.1.saturating_sub(1).max(f.title.0)).max(title_first);
            let mut last = match found.get(i + 1) {
                Some(next) => line_of(next.start).saturating_sub(1).max(title_last),
                None => last_line.max(title_last),
            };
            while last > title_last && blank(last) {
                last -= 1;
            }
            out.push(SectionTitle {
                level: f.level,
                text: f.text.clone(),
                title_lines: (title_first, title_last),
                lines: (first, last),
            });
        }
        out
    }
}

fn from_sections(outline: crate::sections::Outline) -> Vec<Found> {
    outline
        .headings
        .into_iter()
        .map(|h| Found {
            start: h.start,
            title: h.title,
            level: h.level,
            text: h.text,
        })
        .collect()
}

/// The byte where each line starts.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&s| s < text.len() || s == 0)
        .collect()
}

/// The 1-based line holding `byte`.
fn line_of(starts: &[usize], byte: usize) -> u32 {
    let i = starts.partition_point(|&s| s <= byte);
    u32::try_from(i.max(1)).unwrap_or(u32::MAX)
}

/// Line `line` (1-based) without its break.
fn line_text<'a>(text: &'a str, starts: &[usize], line: u32) -> &'a str {
    let i = line as usize - 1;
    let from = starts.get(i).copied().unwrap_or(text.len());
    let to = starts.get(i + 1).copied().unwrap_or(text.len());
    text.get(from..to)
        .unwrap_or("")
        .trim_end_matches(['\n', '\r'])
}

#[cfg(test)]
mod tests {
    use crate::{Chunker, ChunkingConfig};

    /// Level, text, title lines, section lines.
    type Title = (usize, String, (u32, u32), (u32, u32));

    fn titles(uri: &str, text: &str) -> Vec<Title> {
        Chunker::new(ChunkingConfig::default())
            .unwrap()
            .section_titles(uri, text)
            .into_iter()
            .map(|t| (t.level, t.text, t.title_lines, t.lines))
            .collect()
    }

    #[test]
    fn markdown_sections_end_before_the_next_heading_of_any_level() {
        let text = "# Guide\n\nIntro.\n\n## Install it\n\nRun it.\n\n\nSetext title\n------------\n\nBody.\n";
        assert_eq!(
            titles("docs/guide.md", text),
            [
                (1, "Guide".into(), (1, 1), (1, 3)),
                (2, "Install it".into(), (5, 5), (5, 7)),
                (2, "Setext title".into(), (10, 11), (10, 13)),
            ]
        );
    }

    #[test]
    fn rst_titles_keep_their_labels_and_adornments() {
        let text =
            "=====\nTitle\n=====\n\nIntro.\n\n.. _install:\n\nInstalling\n----------\n\nSteps.\n";
        assert_eq!(
            titles("docs/index.rst", text),
            [
                (1, "Title".into(), (1, 3), (1, 5)),
                (2, "Installing".into(), (9, 10), (7, 12)),
            ]
        );
    }

    #[test]
    fn asciidoc_titles_and_other_files() {
        let text = "= Book\n\n== First part\n\nText.\n";
        assert_eq!(
            titles("a.adoc", text),
            [
                (1, "Book".into(), (1, 1), (1, 1)),
                (2, "First part".into(), (3, 3), (3, 5)),
            ]
        );
        assert!(titles("a.rs", "// # not a title\nfn a() {}\n").is_empty());
    }
}
