//! Text rules of query derivation: a doc comment to its first sentence,
//! the filters on queries, and headings' cleaning. They follow
//! `shared/eval/tools/derive_*_queries.py`.

/// Words that carry no content when judging a query against a name.
const STOP: &[&str] = &[
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "of",
    "to",
    "in",
    "on",
    "for",
    "from",
    "by",
    "with",
    "and",
    "or",
    "as",
    "at",
    "is",
    "are",
    "be",
    "been",
    "being",
    "it",
    "its",
    "it's",
    "into",
    "onto",
    "if",
    "then",
    "else",
    "when",
    "whether",
    "any",
    "all",
    "each",
    "every",
    "some",
    "given",
    "specified",
    "provided",
    "returns",
    "return",
    "returned",
    "gets",
    "get",
    "sets",
    "set",
    "value",
    "values",
    "new",
    "instance",
    "current",
    "object",
    "method",
    "function",
    "called",
    "calls",
    "call",
    "helper",
    "utility",
    "util",
    "also",
    "just",
    "simply",
    "which",
    "will",
    "can",
    "may",
    "should",
    "must",
    "does",
    "do",
];

/// Headings that name no particular section.
const GENERIC: &[&str] = &[
    "example",
    "examples",
    "usage",
    "overview",
    "introduction",
    "intro",
    "syntax",
    "notes",
    "note",
    "see",
    "also",
    "summary",
    "description",
    "parameters",
    "params",
    "returns",
    "return",
    "options",
    "option",
    "installation",
    "install",
    "conclusion",
    "next",
    "steps",
    "prerequisites",
    "faq",
    "configuration",
    "config",
    "requirements",
    "background",
    "motivation",
    "contents",
    "table",
    "of",
    "details",
    "reference",
    "references",
    "getting",
    "started",
    "quick",
    "start",
    "quickstart",
    "api",
    "changelog",
    "changes",
    "history",
    "license",
    "licence",
    "credits",
    "acknowledgements",
    "limitations",
    "caveats",
    "warning",
    "warnings",
    "todo",
    "misc",
    "miscellaneous",
    "other",
    "related",
    "links",
    "further",
    "reading",
    "resources",
    "troubleshooting",
    "tips",
    "events",
    "methods",
    "properties",
    "class",
    "constructor",
    "stability",
    "deprecated",
    "deprecation",
    "setup",
    "building",
    "build",
    "testing",
    "tests",
    "test",
    "features",
    "feature",
    "flags",
    "environment",
    "variables",
    "arguments",
    "output",
    "synopsis",
    "name",
    "exit",
    "status",
    "files",
    "bugs",
    "author",
    "authors",
];

/// Abbreviations whose period ends no sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g.", "i.e.", "etc.", "vs.", "approx.", "resp.", "cf.", "Inc.", "No.",
];

/// Which comment syntax a doc comment was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocStyle {
    /// `/** … */`
    Block,
    /// `///`, `//` or `#` lines.
    Lines,
    /// A Python docstring.
    Docstring,
}

/// The description of a doc comment: markers stripped, up to its first
/// block tag (`@param`, `:param`, `Args:`, a `# Examples` heading).
pub(crate) fn doc_description(raw: &str, style: DocStyle) -> String {
    let body: Vec<String> = match style {
        DocStyle::Block => {
            let inner = raw.trim();
            let inner = inner.strip_prefix("/**").unwrap_or(inner);
            let inner = inner.strip_suffix("*/").unwrap_or(inner);
            inner
                .lines()
                .map(|l| {
                    let l = l.trim_start();
                    let l = l.trim_start_matches('*');
                    l.strip_prefix(' ').unwrap_or(l).to_owned()
                })
                .collect()
        }
        DocStyle::Lines => raw
            .lines()
            .map(|l| {
                let l = l.trim_start();
                let l = l
                    .strip_prefix("///")
                    .or_else(|| l.strip_prefix("//"))
                    .or_else(|| l.strip_prefix('#'))
                    .unwrap_or(l);
                l.strip_prefix(' ').unwrap_or(l).to_owned()
            })
            .collect(),
        DocStyle::Docstring => {
            let s = raw.trim();
            let s = s.trim_start_matches(['r', 'R', 'u', 'U', 'b', 'B', 'f', 'F']);
            let s = s
                .strip_prefix("\"\"\"")
                .and_then(|s| s.strip_suffix("\"\"\""))
                .or_else(|| s.strip_prefix("'''").and_then(|s| s.strip_suffix("'''")))
                .or_else(|| s.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
                .unwrap_or(s);
            s.lines().map(|l| l.trim().to_owned()).collect()
        }
    };
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in body {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            out.push(String::new());
            continue;
        }
        if in_fence {
            continue;
        }
        let tag = t.starts_with('@') && t[1..].starts_with(|c: char| c.is_ascii_alphabetic())
            || t.starts_with(":param")
            || t.starts_with(":return")
            || t.starts_with(":raise")
            || t.starts_with(":type")
            || t.starts_with(":rtype")
            || matches!(
                t,
                "Args:" | "Arguments:" | "Returns:" | "Raises:" | "Parameters" | "Returns"
            )
            || (t.starts_with("# ") && style != DocStyle::Docstring);
        if tag {
            break;
        }
        out.push(line);
    }
    out.join("\n")
}

/// The first sentence of a description's first paragraph, inline markup
/// made plain. `None` when the paragraph is a heading, table or list.
pub(crate) fn first_sentence(description: &str) -> Option<String> {
    let paragraph = description
        .split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty())?;
    let starts_block = ["# ", "| ", "- ", "* "]
        .iter()
        .any(|m| paragraph.starts_with(m))
        || paragraph
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    if starts_block {
        return None;
    }
    let plain = collapse(&inline_to_text(paragraph));
    let mut end = plain.len();
    let bytes = plain.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b'.' | b'!' | b'?')
            && (i + 1 == bytes.len() || bytes[i + 1] == b' ')
            && !ABBREVIATIONS
                .iter()
                .any(|a| plain[..=i].ends_with(a) && word_start(&plain, i + 1 - a.len()))
        {
            end = i + 1;
            break;
        }
        i += 1;
    }
    Some(plain[..end].trim().to_owned())
}

/// Whether byte `at` of `s` begins a word.
fn word_start(s: &str, at: usize) -> bool {
    at == 0 || s.as_bytes().get(at - 1) == Some(&b' ')
}

/// Whitespace collapsed to single spaces.
pub(crate) fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Javadoc/JSDoc inline tags, HTML, markdown links and emphasis, reST roles
/// and rustdoc links made plain text.
pub(crate) fn inline_to_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        // {@link A#b label} -> label, else b's path; {@code x} -> x.
        if let Some(inner) = rest.strip_prefix("{@")
            && let Some(close) = inner.find('}')
        {
            let body = &inner[..close];
            let (tag, arg) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
            let arg = arg.trim();
            if tag.starts_with("link") {
                // The target runs over its parameters: `#add(int, Object)`.
                let target_end = match (arg.find('('), arg.find(char::is_whitespace)) {
                    (Some(open), Some(space)) if open < space => {
                        arg.find(')').map_or(arg.len(), |close| close + 1)
                    }
                    (_, Some(space)) => space,
                    _ => arg.len(),
                };
                let (target, label) = arg.split_at(target_end);
                if label.trim().is_empty() {
                    let target = target.split('(').next().unwrap_or(target);
                    out.push_str(target.replace('#', ".").trim_matches('.'));
                } else {
                    out.push_str(label.trim());
                }
            } else {
                out.push_str(arg);
            }
            rest = &inner[close + 1..];
            continue;
        }
        // <tag …> -> a space.
        if c == '<'
            && let Some(close) = rest.find('>')
            && rest[1..close]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!')
        {
            out.push(' ');
            rest = &rest[close + 1..];
            continue;
        }
        // ![alt](url) -> nothing; [text](url) -> text; [`x`] -> x.
        if c == '!'
            && rest[1..].starts_with('[')
            && let Some((_, after)) = link_parts(&rest[1..])
        {
            rest = after;
            continue;
        }
        if c == '['
            && let Some((text, after)) = link_parts(rest)
        {
            out.push_str(&inline_to_text(text));
            rest = after;
            continue;
        }
        // :role:`x` -> x (reST).
        if c == ':'
            && let Some(end) = rest[1..].find(":`")
            && rest[1..1 + end]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '_' || c == '-')
            && end > 0
        {
            rest = &rest[end + 2..];
            continue;
        }
        match c {
            '`' | '*' => {}
            _ => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

/// `[text](url)`, `[text][ref]` or `[text]`: the text and what follows.
fn link_parts(s: &str) -> Option<(&str, &str)> {
    let inner = s.strip_prefix('[')?;
    let close = inner.find(']')?;
    let text = &inner[..close];
    if text.contains('[') {
        return None;
    }
    let after = &inner[close + 1..];
    if let Some(url) = after.strip_prefix('(') {
        let end = url.find(')')?;
        return Some((text, &url[end + 1..]));
    }
    if let Some(reference) = after.strip_prefix('[') {
        let end = reference.find(']')?;
        return Some((text, &reference[end + 1..]));
    }
    // Bare brackets are a link only around code (rustdoc's [`Chunk`]);
    // `[value]` in prose stays as written.
    (text.len() > 1 && text.starts_with('`') && text.ends_with('`')).then_some((text, after))
}

/// Why a query is not kept, if it is not.
pub(crate) fn bad_query(q: &str) -> Option<&'static str> {
    let words = q.split_whitespace().count();
    if words < 3 {
        return Some("short");
    }
    if words > 40 {
        return Some("long");
    }
    let low = q.to_lowercase();
    if low.contains("inheritdoc")
        || [
            "todo",
            "fixme",
            "xxx",
            "deprecated",
            "@",
            "internal use",
            "see ",
            "note:",
            "copyright",
            "licensed",
            "hack",
            "safety:",
        ]
        .iter()
        .any(|p| low.starts_with(p))
    {
        return Some("boilerplate");
    }
    let has_word = q
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| w.len() >= 3);
    if !has_word {
        return Some("noalpha");
    }
    None
}

/// The lowercase parts of an identifier: `getHTTPServer_name` ->
/// get, http, server, name.
pub(crate) fn split_ident(name: &str) -> Vec<String> {
    weft_core::split_camel_case(name)
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn stem(w: &str) -> &str {
    for suffix in ["ing", "es", "s", "ed"] {
        if let Some(s) = w.strip_suffix(suffix)
            && s.len() >= 3
        {
            return s;
        }
    }
    w
}

/// Whether every content word of `q` is in the name or its owner's: the
/// query only echoes the symbol ("Returns the name." for `getName`).
pub(crate) fn name_echo(q: &str, name: &str, owner: &str) -> bool {
    let content: Vec<String> = q
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| t.starts_with(|c: char| c.is_ascii_alphabetic()))
        .flat_map(split_ident)
        .filter(|w| w.len() > 1 && !STOP.contains(&w.as_str()))
        .map(|w| stem(&w).to_owned())
        .collect();
    let named: Vec<String> = split_ident(name)
        .into_iter()
        .chain(split_ident(owner))
        .map(|w| stem(&w).to_owned())
        .collect();
    content.iter().all(|w| named.contains(w))
}

/// A query normalised for grouping: lowercase alphanumeric words.
pub(crate) fn normalise(q: &str) -> String {
    q.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A heading made plain for a query: markup stripped, `{#anchor}` dropped.
pub(crate) fn clean_heading(raw: &str) -> String {
    let raw = match raw.rfind("{#") {
        Some(i) if raw.trim_end().ends_with('}') => &raw[..i],
        _ => raw,
    };
    collapse(&inline_to_text(raw))
}

/// Words as the heading filters count them (`[A-Za-z0-9_]+`).
pub(crate) fn words(s: &str) -> usize {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .count()
}

/// Whether a heading names no particular section ("Examples", "Usage").
pub(crate) fn generic_heading(q: &str) -> bool {
    let ws: Vec<String> = q
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    ws.iter().all(|w| GENERIC.contains(&w.as_str()))
}

/// Whether a short heading is an API name (`fs.readFile(path)`,
/// `Vec::push`), which makes a good query however short.
pub(crate) fn api_like(q: &str) -> bool {
    if q.len() < 8 {
        return false;
    }
    let b = q.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    (1..b.len()).any(|i| {
        (b[i] == b'(' && word(b[i - 1]))
            || (b[i] == b'.' && word(b[i - 1]) && b.get(i + 1).is_some_and(|&c| word(c)))
            || (b[i] == b':'
                && b.get(i + 1) == Some(&b':')
                && word(b[i - 1])
                && b.get(i + 2).is_some_and(|&c| word(c)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javadoc_to_its_first_sentence() {
        let doc = "/**\n * Returns the {@code int} sum of {@link Math#abs values}, i.e. the total.\n * More text.\n *\n * @param a first\n */";
        let d = doc_description(doc, DocStyle::Block);
        assert_eq!(
            first_sentence(&d).as_deref(),
            Some("Returns the int sum of values, i.e. the total.")
        );
        let doc =
            "/// Splits [`Chunk`]s at <b>blank</b> lines.\n/// # Examples\n/// ```\n/// x\n/// ```";
        let d = doc_description(doc, DocStyle::Lines);
        assert_eq!(
            first_sentence(&d).as_deref(),
            Some("Splits Chunks at blank lines.")
        );
        let doc =
            "r\"\"\"Open the :class:`Session` for a\n    request.\n\n    :param url: x\n    \"\"\"";
        let d = doc_description(doc, DocStyle::Docstring);
        assert_eq!(
            first_sentence(&d).as_deref(),
            Some("Open the Session for a request.")
        );
        assert_eq!(first_sentence("- a list\n- of things"), None);
        assert_eq!(
            inline_to_text("In terms of {@link #add(int, Object)}, returns [value] or []."),
            "In terms of add, returns [value] or []."
        );
    }

    #[test]
    fn filters_follow_the_shared_derivation() {
        assert_eq!(bad_query("Too short."), Some("short"));
        assert_eq!(
            bad_query("TODO: make this faster later"),
            Some("boilerplate")
        );
        assert_eq!(bad_query("Computes the running median."), None);
        assert!(name_echo("Returns the name.", "getName", "Person"));
        assert!(name_echo("Gets the person names.", "getNames", "Person"));
        assert!(!name_echo(
            "Returns the full display name.",
            "getName",
            "Person"
        ));
        assert_eq!(
            split_ident("getHTTPServer_name2"),
            ["get", "http", "server", "name2"]
        );
        assert!(generic_heading("Getting started"));
        assert!(!generic_heading("Getting started with sockets"));
        assert!(api_like("fs.readFile(path)") && api_like("Vec::push") && !api_like("Install"));
        assert_eq!(
            clean_heading("The `weft` [index](x.md) {#idx}"),
            "The weft index"
        );
    }
}
