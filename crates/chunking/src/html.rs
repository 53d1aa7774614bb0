//! HTML pages: the main content is extracted and turned into markdown, which
//! the markdown chunker then splits. Chunk offsets refer to that markdown.

use scraper::{Html, Selector};

/// The markdown of a page's main content, and its title.
pub struct ExtractedPage {
    /// The `<title>`, else the first `<h1>`.
    pub title: Option<String>,
    /// Markdown of the main content (`<main>`, `<article>`, `[role=main]`,
    /// else `<body>`), without navigation, scripts and styles.
    pub markdown: String,
}

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
    let main_html = MAIN_CANDIDATES
        .iter()
        .filter_map(|s| Selector::parse(s).ok())
        .find_map(|selector| document.select(&selector).next().map(|e| e.inner_html()))
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
    ExtractedPage { title, markdown }
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
    }
}
