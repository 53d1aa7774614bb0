//! HTML pages: the main content is extracted and turned into markdown, which
//! the markdown chunker then splits. Chunk offsets refer to that markdown.

use scraper::{ElementRef, Html, Selector};

/// The markdown of a page's main content, and its title.
pub struct ExtractedPage {
    /// The `<title>`, else the first `<h1>`.
    pub title: Option<String>,
    /// Markdown of the main content (`<main>`, `<article>`, `[role=main]`,
    /// else `<body>`), without navigation, scripts and styles.
    pub markdown: String,
    /// Why the page was taken as plain text rather than converted.
    pub warning: Option<String>,
}

/// Pages whose elements nest deeper than this are taken as their plain
/// text: the markdown converter recurses once per level, and a hostile page
/// 10,000 levels deep would overflow a thread's stack.
pub const MAX_NESTING: usize = 256;

const MAIN_CANDIDATES: &[&str] = &[
    "main",
    "article",
    "[role=main]",
    "#content",
    ".content",
    "body",
];
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "nav", "footer", "aside", "form", "svg", "iframe", "template",
    "button",
];

/// Extracts the main content of an HTML page as markdown.
pub fn extract(html: &str) -> ExtractedPage {
    let document = Html::parse_document(html);
    let text_of = |selector: &str| {
        let selector = Selector::parse(selector).ok()?;
        let element = document.select(&selector).next()?;
        let text = element.text().collect::<Vec<_>>().join(" ");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        (!text.is_empty()).then_some(text)
    };
    let title = text_of("title").or_else(|| text_of("h1"));
    let main = MAIN_CANDIDATES
        .iter()
        .filter_map(|s| Selector::parse(s).ok())
        .find_map(|selector| document.select(&selector).next());
    let depth = nesting(main.unwrap_or_else(|| document.root_element()));
    if depth > MAX_NESTING {
        let root = main.unwrap_or_else(|| document.root_element());
        return ExtractedPage {
            title,
            markdown: root.text().collect::<Vec<_>>().join("\n"),
            warning: Some(format!(
                "elements nest {depth} deep, over {MAX_NESTING}: taken as plain text"
            )),
        };
    }
    let main_html = main
        .map(|e| e.inner_html())
        .unwrap_or_else(|| html.to_owned());
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    // htmd only fails on I/O errors of its writer, which writes to memory; the
    // plain text is the fallback all the same.
    let markdown = converter.convert(&main_html).unwrap_or_else(|_| {
        Html::parse_fragment(&main_html)
            .root_element()
            .text()
            .collect::<Vec<_>>()
            .join("\n")
    });
    ExtractedPage {
        title,
        markdown,
        warning: None,
    }
}

/// How deep elements nest under `root` (counted without recursion).
fn nesting(root: ElementRef<'_>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(*root, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        for child in node.children() {
            if child.value().is_element() {
                stack.push((child, depth + 1));
            }
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_main_content_and_headings_drops_navigation() {
        let html = r#"<html><head><title>Streams | Docs</title><script>var x=1;</script></head>
            <body><nav><a href="/">Home</a> Menu</nav>
            <main><h1>Streams</h1><p>A stream is <b>data</b>.</p><h2>Readable</h2><p>Read it.</p>
            <pre><code>stream.read()</code></pre></main><footer>(c) Corp</footer></body></html>"#;
        let page = extract(html);
        assert_eq!(page.title.as_deref(), Some("Streams | Docs"));
        assert!(page.markdown.contains("# Streams"), "{}", page.markdown);
        assert!(page.markdown.contains("## Readable"), "{}", page.markdown);
        assert!(page.markdown.contains("stream.read()"));
        assert!(!page.markdown.contains("Menu"));
        assert!(!page.markdown.contains("Corp"));
        assert!(!page.markdown.contains("var x"));
        assert_eq!(page.warning, None);
    }

    #[test]
    fn pages_nested_past_the_limit_are_taken_as_plain_text() {
        let deep = |n: usize| {
            format!(
                "<main><h2>Deep</h2>{}<p>deep text</p>{}</main>",
                "<div>".repeat(n),
                "</div>".repeat(n)
            )
        };
        let page = extract(&deep(MAX_NESTING - 3));
        assert_eq!(page.warning, None);
        assert!(page.markdown.contains("## Deep"), "{}", page.markdown);
        let page = extract(&deep(10_000));
        let warning = page.warning.unwrap();
        assert!(warning.contains("taken as plain text"), "{warning}");
        assert!(page.markdown.contains("deep text"), "{}", page.markdown);
    }
}
