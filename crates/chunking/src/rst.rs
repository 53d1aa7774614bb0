//! The reStructuredText chunker (Sphinx and docutils sources).
//!
//! A line scanner, not a full parser: it finds section titles (underlined,
//! or over- and underlined; levels in the order the document first uses
//! each style, as docutils does), explicit markup (directives, comments,
//! targets), literal blocks after `::`, tables, and field and option lists.
//! Sections then go through [`crate::sections`]: breadcrumbs, "(Part i/n)".
//!
//! Never cut: code and table directives (`code-block`, `literalinclude`,
//! `list-table`…), admonitions, literal blocks with the paragraph that
//! introduces them, doctest blocks and tables. Other directives (`.. class::`,
//! `.. toctree::`) and field/option lists stay whole while they fit in
//! `max_chars`; larger ones are cut between their own blocks or items.

use crate::sections::{self, Heading, Outline, Sectioned, clean_title, indent, lines};
use weft_config::MarkdownConfig;

/// Directives whose content is code, a table or a short aside: never cut.
const WHOLE_DIRECTIVES: &[&str] = &[
    "code-block",
    "code",
    "sourcecode",
    "literalinclude",
    "highlight",
    "parsed-literal",
    "doctest",
    "testcode",
    "testoutput",
    "testsetup",
    "testcleanup",
    "ipython",
    "jupyter-execute",
    "plot",
    "math",
    "productionlist",
    "graphviz",
    "digraph",
    "mermaid",
    "csv-table",
    "list-table",
    "table",
    "tabularcolumns",
    "note",
    "warning",
    "tip",
    "hint",
    "important",
    "caution",
    "danger",
    "attention",
    "error",
    "admonition",
    "seealso",
    "versionadded",
    "versionchanged",
    "deprecated",
    "versionremoved",
    "console",
    "prompt",
];

/// Chunks a reST document.
pub(crate) fn chunk(
    text: &str,
    config: &MarkdownConfig,
    is_index_doc: bool,
    fallback_title: &str,
) -> Sectioned {
    let mut outline = scan(text, config.max_chars);
    sections::chunk(text, &mut outline, config, is_index_doc, fallback_title)
}

/// A title adornment: one punctuation character repeated, nothing else.
fn adornment(line: &str) -> Option<(char, usize)> {
    let line = line.trim_end();
    let c = line.chars().next()?;
    if !c.is_ascii_punctuation() || !line.chars().all(|x| x == c) {
        return None;
    }
    let n = line.len();
    (n >= 2).then_some((c, n))
}

/// A title found by [`titles`]: its first line, its last, its style, text.
struct Title {
    first: usize,
    last: usize,
    style: (char, bool),
    text: String,
}

/// Section titles, in order. `blank(i)` is whether line `i` is blank.
fn titles(text: &str, lines: &[(usize, usize)]) -> Vec<Title> {
    let line = |i: usize| &text[lines[i].0..lines[i].1];
    let blank = |i: usize| line(i).trim().is_empty();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let after_blank = i == 0 || blank(i - 1);
        if !after_blank || blank(i) {
            i += 1;
            continue;
        }
        // Over- and underlined: adornment, text, the same adornment.
        if let Some((c, n)) = adornment(line(i))
            && i + 2 < lines.len()
            && !blank(i + 1)
            && adornment(line(i + 1)).is_none()
            && adornment(line(i + 2)).is_some_and(|(c2, _)| c2 == c)
            && line(i + 1).trim().chars().count() <= n
        {
            out.push(Title {
                first: i,
                last: i + 2,
                style: (c, true),
                text: clean_title(line(i + 1)),
            });
            i += 3;
            continue;
        }
        // Underlined: unindented text, then an adornment at least as long
        // (or of four characters and more, as docutils accepts with a warning).
        let title = line(i);
        if indent(title) == 0
            && adornment(title).is_none()
            && let Some((c, n)) = adornment(line(i + 1))
            && !title.trim_start().starts_with(c)
            && !title.starts_with("..")
        {
            let chars = title.trim_end().chars().count();
            if n >= chars || n >= 4 {
                out.push(Title {
                    first: i,
                    last: i + 1,
                    style: (c, false),
                    text: clean_title(title),
                });
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Whether a line begins explicit markup: `.. something` or a bare `..`.
fn explicit(line: &str) -> bool {
    let t = line.trim_start();
    t == ".." || t.starts_with(".. ")
}

/// The directive name of an explicit markup line (`.. code-block:: py`).
fn directive_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix(".. ")?;
    let (name, _) = rest.split_once("::")?;
    // `.. |sub| image:: x` is a substitution of an image directive.
    let name = name.rsplit(' ').next().unwrap_or(name).trim();
    (!name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "-_:".contains(c)))
    .then_some(name)
}

/// A field list item (`:param x: text`), not an interpreted-text role.
fn field_marker(line: &str) -> bool {
    let t = line.trim_start();
    let Some(rest) = t.strip_prefix(':') else {
        return false;
    };
    match rest.find(':') {
        Some(end) if end > 0 => {
            let after = &rest[end + 1..];
            !rest[..end].starts_with(' ') && (after.is_empty() || after.starts_with(' '))
        }
        _ => false,
    }
}

/// An option list item (`-a, --all  Text`).
fn option_marker(line: &str) -> bool {
    let t = line.trim_start();
    let body = t
        .strip_prefix("--")
        .or_else(|| t.strip_prefix('-'))
        .or_else(|| t.strip_prefix('/'));
    body.is_some_and(|b| b.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()))
        && (t.contains("  ") || !t.contains(' '))
}

/// A table line: a grid table border or row, or a simple table border.
fn grid_line(line: &str) -> bool {
    let t = line.trim();
    (t.starts_with("+-") || t.starts_with("+=")) && t.ends_with('+')
}

fn simple_border(line: &str) -> bool {
    let t = line.trim_end();
    !t.is_empty()
        && t.starts_with('=')
        && t.chars().all(|c| c == '=' || c == ' ')
        && t.contains(' ')
}

struct Scanner<'a> {
    text: &'a str,
    lines: &'a [(usize, usize)],
    max_chars: usize,
    outline: Outline,
}

impl<'a> Scanner<'a> {
    fn line(&self, i: usize) -> &'a str {
        &self.text[self.lines[i].0..self.lines[i].1]
    }

    fn blank(&self, i: usize) -> bool {
        self.line(i).trim().is_empty()
    }

    /// The end of the block that line `i` (at indent `ind`) opens: the
    /// first later non-blank line indented no deeper than `ind`.
    fn extent(&self, i: usize, to: usize, ind: usize) -> usize {
        let mut j = i + 1;
        while j < to && (self.blank(j) || indent(self.line(j)) > ind) {
            j += 1;
        }
        j
    }

    /// The end of the last non-blank line in `from..to`.
    fn last_end(&self, from: usize, to: usize) -> usize {
        (from..to)
            .rev()
            .find(|&k| !self.blank(k))
            .map_or(self.lines[from].1, |k| self.lines[k].1)
    }

    fn chars(&self, from: usize, to: usize) -> usize {
        self.text[self.lines[from].0..self.last_end(from, to)]
            .chars()
            .count()
    }

    fn keep(&self, from: usize, to: usize) -> (usize, usize) {
        (self.lines[from].0, self.last_end(from, to))
    }

    /// Blocks and kept ranges of lines `from..to`, whose blocks are at `base`.
    fn scan(&mut self, from: usize, to: usize, base: usize, depth: usize) {
        let mut i = from;
        let mut prev_blank = true;
        while i < to {
            if self.blank(i) {
                prev_blank = true;
                i += 1;
                continue;
            }
            let line = self.line(i);
            let ind = indent(line);
            if prev_blank && ind <= base {
                self.outline.blocks.push(self.lines[i].0);
            }
            prev_blank = false;
            if explicit(line) {
                let j = self.extent(i, to, ind);
                let whole = directive_name(line).is_none_or(|n| WHOLE_DIRECTIVES.contains(&n));
                if whole || depth > 8 || self.chars(i, j) <= self.max_chars {
                    let range = self.keep(i, j);
                    self.outline.keep.push(range);
                } else if let Some(first) = (i + 1..j).find(|&k| !self.blank(k)) {
                    let inner = indent(self.line(first));
                    self.scan(first, j, inner, depth + 1);
                }
                prev_blank = false;
                i = j;
                continue;
            }
            if grid_line(line) {
                let mut j = i + 1;
                while j < to && !self.blank(j) {
                    j += 1;
                }
                let range = self.keep(i, j);
                self.outline.keep.push(range);
                i = j;
                continue;
            }
            if simple_border(line) {
                // Up to the border that is followed by a blank line, after
                // at least one row.
                let mut j = i + 1;
                let mut end = None;
                while j < to {
                    if simple_border(self.line(j)) && (j + 1 >= to || self.blank(j + 1)) {
                        end = Some(j + 1);
                        break;
                    }
                    j += 1;
                }
                if let Some(end) = end {
                    let range = self.keep(i, end);
                    self.outline.keep.push(range);
                    i = end;
                    continue;
                }
            }
            if field_marker(line) || option_marker(line) {
                let is_item = |s: &Self, k: usize| {
                    let l = s.line(k);
                    indent(l) == ind && (field_marker(l) || option_marker(l))
                };
                let mut items = vec![i];
                let mut j = i + 1;
                while j < to && (self.blank(j) || indent(self.line(j)) > ind || is_item(self, j)) {
                    if is_item(self, j) {
                        items.push(j);
                    }
                    j += 1;
                }
                if self.chars(i, j) <= self.max_chars {
                    let range = self.keep(i, j);
                    self.outline.keep.push(range);
                } else {
                    self.outline
                        .blocks
                        .extend(items.iter().map(|&k| self.lines[k].0));
                }
                i = j;
                continue;
            }
            // A paragraph: to the next blank line.
            let mut j = i + 1;
            while j < to && !self.blank(j) {
                j += 1;
            }
            let para_end = j;
            let last = self.line(para_end - 1).trim_end();
            let doctest = line.trim_start().starts_with(">>>");
            if last.ends_with("::") && !explicit(last) {
                // The paragraph and its literal block (the indented lines
                // after it) stay together.
                let k = self.extent(para_end - 1, to, ind);
                let range = self.keep(i, k);
                self.outline.keep.push(range);
                i = k;
                continue;
            }
            if doctest {
                let range = self.keep(i, para_end);
                self.outline.keep.push(range);
            }
            i = para_end;
        }
    }
}

/// Headings, block starts and kept ranges of a reST document.
pub(crate) fn scan(text: &str, max_chars: usize) -> Outline {
    let lines = lines(text);
    let found = titles(text, &lines);
    let mut scanner = Scanner {
        text,
        lines: &lines,
        max_chars,
        outline: Outline::default(),
    };
    // Blocks between titles; titles themselves are block starts.
    let mut from = 0;
    for t in &found {
        scanner.scan(from, t.first, 0, 0);
        scanner.outline.blocks.push(lines[t.first].0);
        from = t.last + 1;
    }
    scanner.scan(from, lines.len(), 0, 0);
    let mut outline = scanner.outline;

    // Levels in the order the styles first appear.
    let mut styles: Vec<(char, bool)> = Vec::new();
    for (n, t) in found.iter().enumerate() {
        let level = match styles.iter().position(|s| *s == t.style) {
            Some(p) => p + 1,
            None => {
                styles.push(t.style);
                styles.len()
            }
        };
        // Targets (`.. _install:`) and index entries right before a title
        // belong to its section; before the first title, a preamble of
        // nothing but explicit markup and fields (`:orphan:`) joins it too.
        let floor = if n == 0 { 0 } else { found[n - 1].last + 1 };
        let line = |k: usize| &text[lines[k].0..lines[k].1];
        let attaches = |l: &str| {
            let t = l.trim_start();
            indent(l) == 0 && (t.starts_with(".. _") || t.starts_with(".. index::"))
        };
        let mut start = t.first;
        let preamble_is_metadata = n == 0
            && (0..t.first).all(|k| {
                let l = line(k);
                l.trim().is_empty() || explicit(l) || field_marker(l) || indent(l) > 0
            });
        if preamble_is_metadata {
            start = (0..t.first)
                .find(|&k| !line(k).trim().is_empty())
                .unwrap_or(t.first);
        } else {
            let mut k = t.first;
            while k > floor {
                let l = line(k - 1);
                if l.trim().is_empty() || indent(l) > 0 {
                    k -= 1;
                } else if attaches(l) {
                    k -= 1;
                    start = k;
                } else {
                    break;
                }
            }
        }
        let start_byte = lines[start].0;
        outline.headings.push(Heading {
            start: start_byte,
            end: lines[t.last].1,
            title: (lines[t.first].0, lines[t.last].1),
            level,
            text: t.text.clone(),
        });
        if start_byte < lines[t.first].0 {
            outline
                .blocks
                .retain(|&b| b <= start_byte || b >= lines[t.first].0);
            outline.blocks.push(start_byte);
        }
    }
    outline
}

/// Whether `text` reads as reStructuredText: section titles with directives,
/// roles or targets, or several titles. Ordinary prose, and text with only
/// AsciiDoc markers, is not.
pub(crate) fn looks_like_rst(text: &str) -> bool {
    let sample = head(text, 64 * 1024);
    let lines = lines(sample);
    let n_titles = titles(sample, &lines)
        .iter()
        .filter(|t| t.text.chars().any(char::is_alphanumeric))
        .count();
    let mut marks = 0usize;
    for (k, &(s, e)) in lines.iter().enumerate() {
        let l = &sample[s..e];
        // A literal block's `::` is followed by a blank line; AsciiDoc's
        // labeled list `term::` by its definition.
        let next_blank = lines
            .get(k + 1)
            .is_none_or(|&(s, e)| sample[s..e].trim().is_empty());
        let directive = directive_name(l).is_some() || l.trim_start().starts_with(".. _");
        let role = l.contains(":`") && has_role(l);
        let literal =
            l.trim_end().ends_with("::") && !l.trim_start().starts_with("..") && next_blank;
        marks += usize::from(directive || role || literal);
    }
    (n_titles >= 1 && marks >= 1) || n_titles >= 2 || marks >= 3
}

/// `:role:`text`` somewhere in the line.
fn has_role(line: &str) -> bool {
    line.match_indices(":`").any(|(i, _)| {
        let before = &line[..i];
        match before.rfind(':') {
            Some(j) => {
                let name = &before[j + 1..];
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_:".contains(c))
            }
            None => false,
        }
    })
}

/// At most about `max` bytes of `text`, cut at a character boundary.
pub(crate) fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str, max: usize) -> Vec<(String, String)> {
        let config = MarkdownConfig {
            max_chars: max,
            index_max_chars: 2000,
        };
        chunk(text, &config, false, "file.rst")
            .pieces
            .into_iter()
            .map(|p| (p.section, text[p.start..p.end].to_owned()))
            .collect()
    }

    #[test]
    fn levels_follow_the_order_styles_first_appear() {
        let text = "=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\nLinux\n~~~~~\n\napt install\n\nUse\n---\n\nRun it.\n";
        let got = sections(text, 1000);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            labels,
            vec!["Guide", "Guide > Install > Linux", "Guide > Use"]
        );
        assert_eq!(got[1].1, "Install\n-------\n\nLinux\n~~~~~\n\napt install");
    }

    #[test]
    fn labels_before_a_title_belong_to_its_section() {
        let text = ":orphan:\n\n.. _guide:\n\nGuide\n=====\n\nText.\n\n.. _install:\n\nInstall\n-------\n\nMore.\n";
        let got = sections(text, 1000);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert!(got[0].1.starts_with(":orphan:"), "{got:#?}");
        assert!(got[1].1.starts_with(".. _install:"), "{got:#?}");
        assert_eq!(got[1].0, "Guide > Install");
    }

    #[test]
    fn directives_and_literal_blocks_are_never_split() {
        let code: String = (0..40).map(|i| format!("    x{i} = {i}\n")).collect();
        let text = format!(
            "Title\n=====\n\npara one\n\n.. code-block:: python\n\n{code}\npara two\n\nExample::\n\n{code}\nend\n"
        );
        let got = sections(&text, 200);
        assert!(got.len() > 2, "{got:#?}");
        assert!(
            got.iter().all(|(s, _)| s.starts_with("Title (Part ")),
            "{got:#?}"
        );
        assert!(
            got.iter()
                .any(|(_, c)| c.contains(&format!(".. code-block:: python\n\n{}", code.trim_end()))),
            "{got:#?}"
        );
        assert!(
            got.iter()
                .any(|(_, c)| c.contains(&format!("Example::\n\n{}", code.trim_end()))),
            "{got:#?}"
        );
    }

    #[test]
    fn tables_are_never_split() {
        let rows: String = (0..30).map(|i| format!("row{i:<3}  value {i}\n")).collect();
        let simple =
            format!("======  ========\nname    value\n======  ========\n{rows}======  ========\n");
        let text = format!("Title\n=====\n\nBefore.\n\n{simple}\nAfter.\n");
        let got = sections(&text, 150);
        assert!(
            got.iter().any(|(_, c)| c.contains(simple.trim_end())),
            "{got:#?}"
        );
    }

    #[test]
    fn detects_rst_but_not_prose() {
        assert!(looks_like_rst(
            "Writing your first app\n======================\n\n.. highlight:: console\n\nText.\n"
        ));
        assert!(looks_like_rst(
            "Intro\n=====\n\nText.\n\nMore\n----\n\nText.\n"
        ));
        assert!(looks_like_rst(
            "See :ref:`intro` and :class:`Foo`.\n\n.. note::\n\n   Careful.\n\nExample::\n\n   x = 1\n"
        ));
        assert!(!looks_like_rst(
            "Dear reader,\n\nthis is plain prose. It has paragraphs: two of them.\n\n-- \nA signature\n"
        ));
        assert!(!looks_like_rst(
            "Release notes\n\n1.0 - first release\n2.0 - second release\n\n----------\n\nThanks.\n"
        ));
        assert!(!looks_like_rst(
            "# Build settings\n##################\nset(A 1)\n# More\n##################\n"
        ));
    }
}
