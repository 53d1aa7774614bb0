//! The markdown chunker: heading sections with a breadcrumb, front matter on
//! its own, fenced code never split, oversize sections split at block
//! boundaries into "(Part i/n)", README/index documents whole up to a size.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::span::{Measure, Piece, skip_ws, split_section, trim_end};
use weft_config::MarkdownConfig;

/// What the markdown chunker found and made.
pub(crate) struct MarkdownOutcome {
    pub pieces: Vec<Piece>,
    /// The first level-1 heading, else the front matter's `title`.
    pub title: Option<String>,
}

pub(crate) struct Heading {
    pub start: usize,
    /// Where the heading ends (its last line, an underline for setext).
    pub end: usize,
    pub level: usize,
    pub text: String,
}

/// The parts of a markdown text that chunking needs, in source order.
pub(crate) struct Outline {
    front_matter: Option<(usize, usize)>,
    front_matter_title: Option<String>,
    pub headings: Vec<Heading>,
    /// Top-level block starts (headings included).
    blocks: Vec<usize>,
    /// Code blocks at any depth: never cut inside.
    code: Vec<(usize, usize)>,
}

pub(crate) fn chunk(
    text: &str,
    config: &MarkdownConfig,
    is_index_doc: bool,
    fallback_title: &str,
) -> MarkdownOutcome {
    let measure = Measure::new(text);
    let outline = scan(text);
    let title = outline
        .headings
        .iter()
        .find(|h| h.level == 1)
        .map(|h| h.text.clone())
        .or_else(|| outline.front_matter_title.clone());
    let doc_title = title.clone().unwrap_or_else(|| fallback_title.to_owned());
    let (start, end) = (skip_ws(text, 0, text.len()), trim_end(text, 0, text.len()));
    if start >= end {
        return MarkdownOutcome {
            pieces: Vec::new(),
            title,
        };
    }
    if is_index_doc && measure.chars(start, end) <= config.index_max_chars {
        let piece = Piece::new(start, end, doc_title, "document");
        return MarkdownOutcome {
            pieces: vec![piece],
            title,
        };
    }

    let mut pieces = Vec::new();
    let mut body_start = 0;
    if let Some((fs, fe)) = outline.front_matter {
        pieces.push(Piece::new(
            fs,
            trim_end(text, fs, fe),
            doc_title.clone(),
            "front_matter",
        ));
        body_start = fe;
    }
    // A document without a level-1 heading gets its title as the first crumb.
    let has_h1 = outline.headings.iter().any(|h| h.level == 1);
    let mut crumbs: Vec<(usize, String)> = Vec::new();
    let breadcrumb = |crumbs: &[(usize, String)]| {
        let mut parts: Vec<&str> = Vec::new();
        if !has_h1 {
            parts.push(&doc_title);
        }
        parts.extend(crumbs.iter().map(|(_, t)| t.as_str()));
        parts.join(" > ")
    };

    // Sections: the preamble, then one per heading. A heading with nothing
    // under it but another heading joins the section that follows.
    let mut section_start = body_start;
    let mut section_label = doc_title.clone();
    let mut pending_start: Option<usize> = None;
    let section_ends = outline
        .headings
        .iter()
        .map(|h| h.start)
        .chain(std::iter::once(text.len()));
    for (i, next_start) in section_ends.enumerate() {
        let end = trim_end(text, section_start, next_start);
        let begins = pending_start.take().unwrap_or(section_start);
        let content_start = skip_ws(text, section_start, end);
        if content_start < end {
            let heading_only = i > 0
                && i < outline.headings.len()
                && outline.headings[i - 1].start == content_start
                && text[content_start..end]
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .count()
                    <= 1;
            if heading_only {
                pending_start = Some(begins);
            } else {
                let range = (skip_ws(text, begins, end), end);
                section(
                    text,
                    measure,
                    config,
                    &outline,
                    range,
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
        }
    }
    MarkdownOutcome { pieces, title }
}

/// One section: whole if it fits, else parts at block boundaries.
fn section(
    text: &str,
    measure: Measure<'_>,
    config: &MarkdownConfig,
    outline: &Outline,
    range: (usize, usize),
    label: &str,
    out: &mut Vec<Piece>,
) {
    split_section(
        text,
        measure,
        range,
        &outline.blocks,
        &outline.code,
        config.max_chars,
        label,
        out,
    );
}

/// Finds front matter, headings, top-level blocks and code blocks.
pub(crate) fn scan(text: &str) -> Outline {
    let front_matter = front_matter(text);
    let front_matter_title = front_matter.and_then(|(s, e)| front_matter_title(&text[s..e]));
    let body_start = front_matter.map_or(0, |(_, e)| e);
    let body = &text[body_start..];
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES;
    let mut outline = Outline {
        front_matter,
        front_matter_title,
        headings: Vec::new(),
        blocks: Vec::new(),
        code: Vec::new(),
    };
    let mut depth = 0usize;
    let mut heading: Option<Heading> = None;
    for (event, range) in Parser::new_ext(body, options).into_offset_iter() {
        let (start, end) = (range.start + body_start, range.end + body_start);
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    outline.blocks.push(start);
                }
                match tag {
                    Tag::Heading { level, .. } if depth == 0 => {
                        heading = Some(Heading {
                            start,
                            end,
                            level: heading_level(level),
                            text: String::new(),
                        });
                    }
                    Tag::CodeBlock(_) => outline.code.push((start, end)),
                    _ => {}
                }
                depth += 1;
            }
            Event::End(tag) => {
                depth = depth.saturating_sub(1);
                if let (TagEnd::Heading(_), Some(h)) = (tag, heading.take_if(|_| depth == 0)) {
                    let mut h = h;
                    h.text = h.text.split_whitespace().collect::<Vec<_>>().join(" ");
                    outline.headings.push(h);
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.text.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = heading.as_mut() {
                    h.text.push(' ');
                }
            }
            Event::Rule | Event::Html(_) | Event::DisplayMath(_) if depth == 0 => {
                outline.blocks.push(start)
            }
            _ => {}
        }
    }
    outline
}

fn heading_level(level: HeadingLevel) -> usize {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// The byte range of YAML (`---`) or TOML (`+++`) front matter at the very
/// start, through the end of its closing line.
fn front_matter(text: &str) -> Option<(usize, usize)> {
    let fence = if text.starts_with("---") {
        "---"
    } else if text.starts_with("+++") {
        "+++"
    } else {
        return None;
    };
    let first_line_end = text.find('\n')?;
    if text[..first_line_end].trim_end() != fence {
        return None;
    }
    let mut pos = first_line_end + 1;
    while pos < text.len() {
        let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1);
        let line = text[pos..line_end].trim_end();
        if line == fence || (fence == "---" && line == "...") {
            return Some((0, line_end));
        }
        pos = line_end;
    }
    None
}

fn front_matter_title(front_matter: &str) -> Option<String> {
    front_matter.lines().find_map(|line| {
        let rest = line.strip_prefix("title")?.trim_start();
        let value = rest
            .strip_prefix(':')
            .or_else(|| rest.strip_prefix('='))?
            .trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'').trim();
        (!value.is_empty()).then(|| value.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str, max: usize) -> Vec<(String, String)> {
        let config = MarkdownConfig {
            max_chars: max,
            index_max_chars: 2000,
        };
        chunk(text, &config, false, "file.md")
            .pieces
            .into_iter()
            .map(|p| (p.section, text[p.start..p.end].to_owned()))
            .collect()
    }

    #[test]
    fn sections_carry_a_breadcrumb() {
        let text =
            "# Guide\n\nIntro.\n\n## Install\n\n### Linux\n\napt install\n\n## Use\n\nRun it.\n";
        let got = sections(text, 1000);
        let labels: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        // "## Install" has only a heading under it, so it joins "### Linux".
        assert_eq!(
            labels,
            vec!["Guide", "Guide > Install > Linux", "Guide > Use"]
        );
        assert_eq!(got[1].1, "## Install\n\n### Linux\n\napt install");
    }

    #[test]
    fn front_matter_is_its_own_chunk_and_gives_the_title() {
        let text =
            "---\ntitle: \"Hugo Pipes\"\nweight: 3\n---\n\nSome text.\n\n## Usage\n\nMore.\n";
        let config = MarkdownConfig {
            max_chars: 1000,
            index_max_chars: 2000,
        };
        let out = chunk(text, &config, false, "pipes.md");
        assert_eq!(out.title.as_deref(), Some("Hugo Pipes"));
        assert_eq!(out.pieces[0].node_type, "front_matter");
        assert_eq!(out.pieces[1].section, "Hugo Pipes");
        assert_eq!(out.pieces[2].section, "Hugo Pipes > Usage");
    }

    #[test]
    fn fenced_code_is_never_split() {
        let code: String = (0..40).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("# T\n\npara one\n\n```rust\n{code}```\n\npara two\n");
        let got = sections(&text, 200);
        assert!(got.len() > 1);
        assert!(
            got.iter()
                .any(|(_, c)| c.contains(&format!("```rust\n{code}```"))),
            "{got:#?}"
        );
        assert!(
            got.iter().all(|(s, _)| s.starts_with("T (Part ")),
            "{got:#?}"
        );
    }

    #[test]
    fn index_documents_stay_whole_up_to_the_limit() {
        let text = "# Readme\n\n## A\n\nx\n\n## B\n\ny\n";
        let config = MarkdownConfig {
            max_chars: 1000,
            index_max_chars: 2000,
        };
        assert_eq!(chunk(text, &config, true, "README.md").pieces.len(), 1);
        // "# Readme" holds only a heading, so it joins "## A".
        assert_eq!(chunk(text, &config, false, "doc.md").pieces.len(), 2);
    }
}
