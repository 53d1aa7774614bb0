//! Heading sections with a breadcrumb, for markup whose structure a line
//! scanner finds (reStructuredText, AsciiDoc): the same sections, labels,
//! index-document rule and "(Part i/n)" splits as the markdown chunker.

use crate::span::{Measure, Piece, skip_ws, split_section, trim_end};
use weft_config::MarkdownConfig;

/// A section title.
#[derive(Debug, Clone)]
pub(crate) struct Heading {
    /// Where its section starts: the title, with the labels, anchors and
    /// metadata lines that belong to it.
    pub start: usize,
    /// Where the title block ends (after its underline, and after the
    /// attribute lines that follow an AsciiDoc title).
    pub end: usize,
    /// The title's own lines, from the first byte of its first line (an
    /// overline, or the title text) to the end of its last (an underline,
    /// or the title text): labels above and attribute lines under it left
    /// out.
    pub title: (usize, usize),
    /// 1 for the top level.
    pub level: usize,
    /// The title text, whitespace collapsed.
    pub text: String,
}

/// What a scanner found in a document, in source order.
#[derive(Debug, Default)]
pub(crate) struct Outline {
    pub headings: Vec<Heading>,
    /// Positions where a long section may be cut (block starts).
    pub blocks: Vec<usize>,
    /// Ranges never cut: code, directives, tables, delimited blocks.
    pub keep: Vec<(usize, usize)>,
    /// Entries of definition lists at a section's top level (AsciiDoc
    /// `term::`): a section too long for one chunk is cut between them
    /// first, and each part is named by its terms, as a heading names a
    /// section — the options of a man page, the terms of a glossary.
    pub entries: Vec<Entry>,
}

/// One definition-list entry: where it starts and its term(s).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Its first line (with the anchors above it).
    pub start: usize,
    /// The terms, as written (`--all`, `-v, --verbose`).
    pub term: String,
}

/// What the chunker made, and the document's title (the first top-level
/// heading).
pub(crate) struct Sectioned {
    pub pieces: Vec<Piece>,
    pub title: Option<String>,
}

/// Sections of `text` from `outline`: the preamble, then one per heading
/// (a heading with nothing under it joins the next), labelled with the
/// breadcrumb of headings above it; a section over `max_chars` is split at
/// block starts into "(Part i/n)"; an index document up to
/// `index_max_chars` stays one chunk.
pub(crate) fn chunk(
    text: &str,
    outline: &mut Outline,
    config: &MarkdownConfig,
    is_index_doc: bool,
    fallback_title: &str,
) -> Sectioned {
    outline.keep.sort_unstable();
    outline.blocks.sort_unstable();
    outline.blocks.dedup();
    outline.entries.sort_unstable_by_key(|e| e.start);
    let measure = Measure::new(text);
    let title = outline
        .headings
        .iter()
        .find(|h| h.level == 1)
        .map(|h| h.text.clone());
    let doc_title = title.clone().unwrap_or_else(|| fallback_title.to_owned());
    let (start, end) = (skip_ws(text, 0, text.len()), trim_end(text, 0, text.len()));
    if start >= end {
        return Sectioned {
            pieces: Vec::new(),
            title,
        };
    }
    if is_index_doc && measure.chars(start, end) <= config.index_max_chars {
        return Sectioned {
            pieces: vec![Piece::new(start, end, doc_title, "document")],
            title,
        };
    }
    // A document without a top-level title gets its title as the first crumb.
    let has_top = title.is_some();
    let breadcrumb = |crumbs: &[(usize, String)]| {
        let mut parts: Vec<&str> = Vec::new();
        if !has_top {
            parts.push(&doc_title);
        }
        parts.extend(crumbs.iter().map(|(_, t)| t.as_str()));
        parts.join(" > ")
    };
    let mut pieces = Vec::new();
    let mut crumbs: Vec<(usize, String)> = Vec::new();
    let mut section_start = 0;
    let mut section_label = doc_title.clone();
    let mut heading_end: Option<usize> = None;
    let mut pending_start: Option<usize> = None;
    let section_ends = outline
        .headings
        .iter()
        .map(|h| h.start)
        .chain(std::iter::once(text.len()));
    for (i, next_start) in section_ends.enumerate() {
        let end = trim_end(text, section_start, next_start);
        let begins = pending_start.take().unwrap_or(section_start);
        if skip_ws(text, section_start, end) < end {
            // Only the title (and its metadata) and the next heading follows.
            let heading_only = i < outline.headings.len()
                && heading_end.is_some_and(|e| skip_ws(text, e.min(end), end) >= end);
            if heading_only {
                pending_start = Some(begins);
            } else {
                let range = (skip_ws(text, begins, end), end);
                split_listed_section(
                    text,
                    measure,
                    range,
                    outline,
                    config.max_chars,
                    &section_label,
                    &mut pieces,
                );
            }
        }
        if let Some(heading) = outline.headings.get(i) {
            while crumbs
                .last()
                .is_some_and(|(level, _)| *level >= heading.level)
            {
                crumbs.pop();
            }
            crumbs.push((heading.level, heading.text.clone()));
            section_label = breadcrumb(&crumbs);
            section_start = heading.start;
            heading_end = Some(heading.end);
        }
    }
    Sectioned { pieces, title }
}

/// A section labelled `label`: whole if it fits; else, when it holds two or
/// more definition-list entries, cut between entries — runs of whole entries
/// that fit together, each labelled `label > term, term…`, an entry larger
/// than `max_chars` split into its own "(Part i/n)" — and otherwise cut at
/// block starts as [`split_section`] does.
fn split_listed_section(
    text: &str,
    measure: Measure<'_>,
    range: (usize, usize),
    outline: &Outline,
    max_chars: usize,
    label: &str,
    out: &mut Vec<Piece>,
) {
    let first = outline.entries.partition_point(|e| e.start < range.0);
    let last = outline.entries.partition_point(|e| e.start < range.1);
    let entries = &outline.entries[first..last];
    if entries.len() < 2 || measure.chars(range.0, range.1) <= max_chars {
        split_section(
            text,
            measure,
            range,
            &outline.blocks,
            &outline.keep,
            max_chars,
            label,
            out,
        );
        return;
    }
    // Segments: the text before the first entry (named by the section),
    // then one per entry.
    let mut segments: Vec<(usize, usize, Option<&str>)> = Vec::new();
    if skip_ws(text, range.0, entries[0].start) < entries[0].start {
        segments.push((range.0, entries[0].start, None));
    }
    for (i, entry) in entries.iter().enumerate() {
        let next = entries.get(i + 1).map_or(range.1, |e| e.start);
        segments.push((entry.start, next, Some(entry.term.as_str())));
    }
    let name = |terms: &[&str]| match terms {
        [] => label.to_owned(),
        [one] => format!("{label} > {one}"),
        [a, b] => format!("{label} > {a}; {b}"),
        [a, .., z] => format!("{label} > {a} … {z}"),
    };
    let mut i = 0;
    while i < segments.len() {
        let start = segments[i].0;
        // The longest run of whole segments from `i` that fits.
        let mut j = i + 1;
        while j < segments.len()
            && measure.chars(start, trim_end(text, start, segments[j].1)) <= max_chars
        {
            j += 1;
        }
        let end = trim_end(text, start, segments[j - 1].1);
        let terms: Vec<&str> = segments[i..j].iter().filter_map(|s| s.2).collect();
        let section = name(&terms);
        if start < end {
            if j == i + 1 {
                // One segment, maybe larger than a chunk: its own parts.
                split_section(
                    text,
                    measure,
                    (start, end),
                    &outline.blocks,
                    &outline.keep,
                    max_chars,
                    &section,
                    out,
                );
            } else {
                out.push(Piece::new(start, end, &section, "section"));
            }
        }
        i = j;
    }
}

/// The lines of `text`: (start, end without the line break).
pub(crate) fn lines(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        out.push((pos, pos + content.len()));
        pos += line.len();
    }
    out
}

/// Leading spaces and tabs (a tab counts as one; only comparisons matter).
pub(crate) fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// Collapses whitespace in a title.
pub(crate) fn clean_title(raw: &str) -> String {
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}
