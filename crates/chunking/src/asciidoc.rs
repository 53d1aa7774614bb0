//! The AsciiDoc chunker.
//!
//! A line scanner: section titles (`= Title` … `====== Title`, and the
//! older two-line titles underlined with `=`, `-`, `~`, `^`, `+`),
//! delimited blocks (`----` listing, `....` literal, `====` example,
//! `****` sidebar, `____` quote, `++++` passthrough, `////` comment, `--`
//! open, `|===` tables, ```` ``` ```` fences), which are never cut, with
//! the attribute and title lines (`[source,java]`, `.Title`) above them.
//! Attribute entries (`:toc:`) and the author and revision lines after a
//! title stay with it. Sections then go through [`crate::sections`].

use crate::sections::{self, Entry, Heading, Outline, Sectioned, clean_title, indent, lines};
use weft_config::MarkdownConfig;

/// Chunks an AsciiDoc document.
pub(crate) fn chunk(
    text: &str,
    config: &MarkdownConfig,
    is_index_doc: bool,
    fallback_title: &str,
) -> Sectioned {
    let mut outline = scan(text);
    sections::chunk(text, &mut outline, config, is_index_doc, fallback_title)
}

/// A one-line title: `== Title` (level = number of `=`).
fn title_line(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '=').count();
    let rest = &line[level..];
    if !(1..=6).contains(&level) || !rest.starts_with([' ', '\t']) || rest.trim().is_empty() {
        return None;
    }
    Some((level, rest.trim()))
}

/// The term of a top-level definition-list line, `term::` or
/// `term:: text` (not `term:::`, `term;;` nested ones, nor `name::target[]`
/// macros); anchors written on it (`[[id]]`) left out.
fn list_term(line: &str) -> Option<String> {
    if indent(line) > 0
        || line.starts_with(['/', ':', '.', '*'])
        || line.starts_with('[') && !line.starts_with("[[")
    {
        return None;
    }
    let t = line.trim_end();
    let at = t.find("::")?;
    let (term, rest) = (&t[..at], &t[at + 2..]);
    if term.is_empty() || term.ends_with(':') || !(rest.is_empty() || rest.starts_with([' ', '\t']))
    {
        return None;
    }
    let term = strip_anchors(term);
    (!term.is_empty()).then(|| clean_title(&term))
}

/// `text` without inline anchors (`[[id]]`, `[[id,label]]`).
fn strip_anchors(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("[[") {
        match rest[open..].find("]]") {
            Some(close) => {
                out.push_str(&rest[..open]);
                rest = &rest[open + close + 2..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

/// A delimiter line: the opening (and closing) line of a delimited block.
fn delimiter(line: &str) -> Option<&str> {
    let t = line.trim_end();
    if t == "--" || t == "```" || t.starts_with("```") && !t[3..].contains('`') {
        return Some(if t.starts_with("```") { "```" } else { t });
    }
    if t.len() >= 4
        && [",===", ":===", "!===", "|==="]
            .iter()
            .any(|p| t.starts_with(p))
    {
        return t[1..].chars().all(|c| c == '=').then_some(t);
    }
    let c = t.chars().next()?;
    ("-.=*_+/".contains(c) && t.len() >= 4 && t.chars().all(|x| x == c)).then_some(t)
}

/// The level of a two-line title's underline character.
fn underline_level(c: char) -> Option<usize> {
    match c {
        '=' => Some(1),
        '-' => Some(2),
        '~' => Some(3),
        '^' => Some(4),
        '+' => Some(5),
        _ => None,
    }
}

/// A line that may be the text of a two-line title.
fn titleable(line: &str) -> bool {
    let t = line.trim_end();
    !t.is_empty()
        && indent(line) == 0
        && !t.starts_with(['[', '.', '/', ':', '*', '-', '=', '+', '|', '<'])
        && t.chars().any(char::is_alphanumeric)
        && delimiter(t).is_none()
}

/// Block attribute, anchor or title lines that belong to the block below.
fn block_meta(line: &str) -> bool {
    let t = line.trim_end();
    (t.starts_with('[') && t.ends_with(']'))
        || (t.starts_with('.') && t.len() > 1 && !t.starts_with("..") && !t[1..].starts_with(' '))
}

/// An attribute entry: `:name: value`, `:name!:`.
fn attribute_entry(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(':') else {
        return false;
    };
    match rest.find(':') {
        Some(end) if end > 0 => {
            let name = rest[..end].trim_end_matches('!').trim_start_matches('!');
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
                && rest[end + 1..].chars().next().is_none_or(|c| c == ' ')
        }
        _ => false,
    }
}

/// Headings, block starts and kept ranges of an AsciiDoc document.
pub(crate) fn scan(text: &str) -> Outline {
    let lines = lines(text);
    let line = |i: usize| &text[lines[i].0..lines[i].1];
    let blank = |i: usize| line(i).trim().is_empty();
    let mut outline = Outline::default();
    let mut i = 0;
    let mut prev_blank = true;
    // The first line of a run of attribute/anchor lines above a block.
    let mut meta_start: Option<usize> = None;
    // The line right after the last title or delimited block.
    let mut after_block: Option<usize> = None;
    // The last line that was a definition-list term.
    let mut last_term: Option<usize> = None;
    while i < lines.len() {
        if blank(i) {
            prev_blank = true;
            meta_start = None;
            i += 1;
            continue;
        }
        let l = line(i);
        let block_start = meta_start.unwrap_or(i);
        if prev_blank {
            outline.blocks.push(lines[i].0);
        }
        prev_blank = false;
        // A delimited block: to the same delimiter, kept whole.
        if let Some(delim) = delimiter(l) {
            let close = (i + 1..lines.len()).find(|&k| {
                let t = line(k).trim_end();
                if delim == "```" {
                    t == "```"
                } else {
                    t == delim
                }
            });
            // `----` right under a title's text is its underline, not a block.
            let underline = i > 0
                && !blank(i - 1)
                && titleable(line(i - 1))
                && meta_start.is_none()
                && l.chars().next().and_then(underline_level).is_some()
                && line(i - 1)
                    .trim_end()
                    .chars()
                    .count()
                    .abs_diff(l.trim_end().len())
                    <= 2;
            if let (Some(close), false) = (close, underline) {
                outline.keep.push((lines[block_start].0, lines[close].1));
                meta_start = None;
                i = close + 1;
                after_block = Some(i);
                continue;
            }
        }
        // A title, with the attribute entries and header lines under it.
        // A one-line title starts a block: `= true).` wrapped from the
        // paragraph above is text.
        let starts_block = i == 0
            || blank(i - 1)
            || meta_start.is_some()
            || line(i - 1).starts_with("//")
            || after_block == Some(i);
        let heading = if let Some((level, title)) = title_line(l).filter(|_| starts_block) {
            Some((i, i, level, clean_title(&strip_anchors(title))))
        } else if i + 1 < lines.len()
            && titleable(l)
            && (i == 0 || blank(i - 1) || block_meta(line(i - 1)))
            && let Some(level) = line(i + 1).chars().next().and_then(underline_level)
            && line(i + 1).trim_end().len() >= 2
            && line(i + 1)
                .trim_end()
                .chars()
                .all(|c| line(i + 1).starts_with(c))
            && l.trim_end()
                .chars()
                .count()
                .abs_diff(line(i + 1).trim_end().len())
                <= 2
        {
            Some((i, i + 1, level, clean_title(&strip_anchors(l))))
        } else {
            None
        };
        if let Some((first, last, level, title)) = heading {
            let mut end_line = last;
            // Attribute entries right under a title; under the document
            // title also the author and revision lines.
            let mut k = last + 1;
            while k < lines.len() && !blank(k) {
                let next = line(k);
                let header_line = level == 1 && k <= last + 2 && !next.starts_with("//");
                if attribute_entry(next) || next.starts_with("//") || header_line {
                    end_line = k;
                    k += 1;
                } else {
                    break;
                }
            }
            let start = meta_start.unwrap_or(first);
            outline.headings.push(Heading {
                start: lines[start].0,
                end: lines[end_line].1,
                title: (lines[first].0, lines[last].1),
                level,
                text: title,
            });
            outline.blocks.push(lines[start].0);
            meta_start = None;
            i = end_line + 1;
            after_block = Some(i);
            continue;
        }
        // A definition-list entry: its first term line after a blank (or
        // anchor) line starts it; the term lines right under it join it.
        if let Some(term) = list_term(l) {
            match outline.entries.last_mut() {
                Some(entry) if last_term == Some(i.wrapping_sub(1)) => {
                    entry.term.push_str(", ");
                    entry.term.push_str(&term);
                    last_term = Some(i);
                }
                _ if starts_block => {
                    outline.entries.push(Entry {
                        start: lines[block_start].0,
                        term,
                    });
                    last_term = Some(i);
                }
                _ => {}
            }
        }
        if block_meta(l) || (l.starts_with("[[") && l.trim_end().ends_with("]]")) {
            meta_start.get_or_insert(i);
        } else {
            meta_start = None;
        }
        i += 1;
    }
    // A preamble of nothing but attribute entries, comments and anchors
    // joins the first title.
    if let Some(first) = outline.headings.first_mut() {
        let before = &text[..first.start];
        let metadata = before.lines().all(|l| {
            l.trim().is_empty() || attribute_entry(l) || l.starts_with("//") || block_meta(l)
        });
        if metadata && !before.trim().is_empty() {
            let start = before.len() - before.trim_start().len();
            outline.blocks.retain(|&b| b < start || b >= first.start);
            first.start = start;
        }
    }
    // Without a document title, `== Section` stays level 2 and the file's
    // title leads the breadcrumb.
    outline
}

/// Whether `text` reads as AsciiDoc: markers no other markup has (block
/// attribute lines, `include::`-style macros, `linkgit:`-style links,
/// anchors, `== ` titles, paired delimited blocks) and no reST directive.
pub(crate) fn looks_like_asciidoc(text: &str) -> bool {
    let sample = crate::rst::head(text, 64 * 1024);
    let mut marks = 0usize;
    let mut rst = 0usize;
    let mut open: Option<&str> = None;
    let mut prev = "";
    let all: Vec<&str> = sample.lines().collect();
    for (k, l) in all.iter().copied().enumerate() {
        let t = l.trim_end();
        // A labeled list item (`--all::`, `core.bare::`) with its
        // definition or the next term right under it (reST's `::` is
        // followed by a blank line).
        if open.is_none()
            && t.ends_with("::")
            && indent(l) == 0
            && !t.starts_with("..")
            && all.get(k + 1).is_some_and(|n| !n.trim().is_empty())
        {
            marks += 1;
        }
        let underline = titleable(prev)
            && t.chars().next().and_then(underline_level).is_some()
            && prev.trim_end().chars().count().abs_diff(t.len()) <= 2;
        prev = l;
        if let Some(d) = open {
            if t == d {
                open = None;
                marks += 1;
            }
            continue;
        }
        let t0 = t.trim_start();
        if t0.starts_with(".. ") && t0.contains("::") || t0.starts_with(".. _") {
            rst += 1;
        }
        if title_line(t).is_some_and(|(level, _)| level >= 2) {
            marks += 1;
        } else if t.starts_with('[') && t.ends_with(']') && t.len() > 2 {
            let inner = &t[1..t.len() - 1];
            let word = inner.split([',', '#', '.', '=']).next().unwrap_or("");
            if t.starts_with("[[")
                || [
                    "source",
                    "verse",
                    "listing",
                    "literal",
                    "quote",
                    "example",
                    "sidebar",
                    "NOTE",
                    "TIP",
                    "IMPORTANT",
                    "WARNING",
                    "CAUTION",
                    "horizontal",
                    "cols",
                    "options",
                    "subs",
                    "appendix",
                    "glossary",
                    "bibliography",
                    "partintro",
                    "abstract",
                    "discrete",
                    "float",
                    "caption",
                    "role",
                    "id",
                ]
                .contains(&word)
            {
                marks += 1;
            }
        } else if [
            "include::",
            "image::",
            "ifdef::",
            "ifndef::",
            "endif::",
            "ifeval::",
            "toc::",
        ]
        .iter()
        .any(|m| t.starts_with(m))
            && t.ends_with(']')
        {
            marks += 1;
        } else if let Some(d) = delimiter(t).filter(|d| *d != "--" && !underline) {
            open = Some(d);
        }
        if ["linkgit:", "link:", "xref:"].iter().any(|m| t.contains(m)) && t.contains(']')
            || t.contains(">>") && t.contains("<<")
        {
            marks += 1;
        }
    }
    marks >= 3 && marks > rst * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str, max: usize) -> Vec<(String, String)> {
        let config = MarkdownConfig {
            max_chars: max,
            index_max_chars: 2000,
        };
        chunk(text, &config, false, "file.adoc")
            .pieces
            .into_iter()
            .map(|p| (p.section, text[p.start..p.end].to_owned()))
            .collect()
    }

    #[test]
    fn a_wrapped_line_starting_with_equals_is_text_not_a_title() {
        // git's config/core.txt: "(bare\n= true)." is a paragraph.
        let text = "== Bare\n\nall other repositories are bare (bare\n= true).\n\ncore.worktree::\n\tThe path.\n";
        let got = sections(text, 1000);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(labels, vec!["file.adoc > Bare"], "{got:#?}");
        // Titles after an anchor, a comment, another title or a delimited
        // block still count.
        let text = "== A\n\nText.\n\n[[b]]\n== B\n\nMore.\n\n// note\n== C\n\n----\ncode\n----\n== D\n\nEnd.\n";
        let got = sections(text, 1000);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            labels,
            vec![
                "file.adoc > A",
                "file.adoc > B",
                "file.adoc > C",
                "file.adoc > D"
            ],
            "{got:#?}"
        );
    }

    #[test]
    fn a_long_option_list_is_cut_between_entries_named_by_their_terms() {
        let body = "Some words about this option, long enough to matter.\n";
        let text = format!(
            "== OPTIONS\n\n-v::\n--verbose::\n\t{b}{b}\n[[all]]--all[[opt-all]]::\n\t{b}{b}\n--tags::\n\t{b}\n+\nname::target[] is text.\n\n--huge::\n\t{b}{b}\n\n\t{b}{b}\n\n\t{b}{b}\n\n== EXAMPLES\n\nnone\n",
            b = body
        );
        let got = sections(&text, 240);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            labels,
            vec![
                "file.adoc > OPTIONS > -v, --verbose",
                "file.adoc > OPTIONS > --all; --tags",
                "file.adoc > OPTIONS > --huge (Part 1/2)",
                "file.adoc > OPTIONS > --huge (Part 2/2)",
                "file.adoc > EXAMPLES",
            ],
            "{got:#?}"
        );
        assert!(got[0].1.starts_with("== OPTIONS\n\n-v::"), "{got:#?}");
        assert!(got[1].1.starts_with("[[all]]--all"), "{got:#?}");
        // A section that fits stays one chunk, entries or not.
        let got = sections(&text, 10_000);
        assert_eq!(got[0].0, "file.adoc > OPTIONS");
        // Terms inside a paragraph, macros and nested lists are not entries.
        for line in [
            "include::x.txt[]",
            "term:::",
            "term;;",
            "  indented::",
            ":attr::",
        ] {
            assert_eq!(list_term(line), None, "{line}");
        }
        assert_eq!(list_term("core.bare:: text").as_deref(), Some("core.bare"));
    }

    #[test]
    fn a_title_anchor_is_not_part_of_the_title() {
        let got = sections("== OPTIONS[[OPTIONS]]\n\ntext\n", 1000);
        assert_eq!(got[0].0, "file.adoc > OPTIONS");
        let got = sections("OPTIONS[[OPTIONS]]\n------------------\n\ntext\n", 1000);
        assert_eq!(got[0].0, "file.adoc > OPTIONS");
    }

    #[test]
    fn titles_by_level_with_attributes_kept() {
        let text = "= Guide\n:toc:\n:icons: font\n\n== Install\n\n=== Linux\n\napt install\n\n== Use\n\nRun it.\n";
        let got = sections(text, 1000);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        // The title holds only attributes: it joins the section after it.
        assert_eq!(
            labels,
            vec!["Guide > Install > Linux", "Guide > Use"],
            "{got:#?}"
        );
        assert!(
            got[0]
                .1
                .starts_with("= Guide\n:toc:\n:icons: font\n\n== Install")
        );
    }

    #[test]
    fn two_line_titles_and_listing_blocks() {
        let text = "git-add(1)\n==========\n\nNAME\n----\ngit-add - Add file contents\n\nEXAMPLES\n--------\n\n* Adds content:\n+\n------------\n$ git add Documentation/\\*.txt\n------------\n";
        let got = sections(text, 1000);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            labels,
            vec!["git-add(1) > NAME", "git-add(1) > EXAMPLES"],
            "{got:#?}"
        );
        assert!(
            got[1]
                .1
                .ends_with("------------\n$ git add Documentation/\\*.txt\n------------")
        );
    }

    #[test]
    fn delimited_blocks_are_never_split() {
        let code: String = (0..40).map(|i| format!("int x{i} = {i};\n")).collect();
        let table: String = (0..20).map(|i| format!("| a{i} | b{i}\n")).collect();
        let text = format!(
            "= T\n\npara one\n\n[source,java]\n----\n{code}----\n\npara two\n\n|===\n{table}|===\n\npara three\n"
        );
        let got = sections(&text, 200);
        assert!(got.len() > 2);
        assert!(
            got.iter()
                .any(|(_, c)| c.contains(&format!("[source,java]\n----\n{code}----"))),
            "{got:#?}"
        );
        assert!(
            got.iter()
                .any(|(_, c)| c.contains(&format!("|===\n{table}|==="))),
            "{got:#?}"
        );
        assert!(
            got.iter().all(|(s, _)| s.starts_with("T (Part ")),
            "{got:#?}"
        );
    }

    #[test]
    fn detects_asciidoc_but_not_prose_or_rst() {
        let git = "git-add(1)\n==========\n\nNAME\n----\ngit-add - Add files\n\nSYNOPSIS\n--------\n[verse]\n'git add' [--verbose]\n\nSee linkgit:git-rm[1].\n\ninclude::ignore.txt[]\n";
        assert!(looks_like_asciidoc(git));
        assert!(looks_like_asciidoc(
            "= Title\n\n== One\n\n[source,ruby]\n----\nputs 1\n----\n\n== Two\n\nText.\n"
        ));
        assert!(!looks_like_asciidoc(
            "Plain notes.\n\nNothing [special] here, just text.\n\nBye.\n"
        ));
        assert!(!looks_like_asciidoc(
            "Title\n=====\n\n.. note::\n\n   Hi.\n\n.. code-block:: python\n\n   x = 1\n"
        ));
    }
}
