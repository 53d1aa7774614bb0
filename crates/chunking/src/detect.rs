//! Which chunker a file gets, from its path or URL.

use globset::GlobSet;
use weft_core::ContentType;

use crate::languages::CodeLanguage;

/// How a file is chunked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Tree-sitter, by language.
    Code(CodeLanguage),
    /// Heading sections.
    Markdown,
    /// Main content to markdown, then heading sections.
    Html,
    /// Paragraphs merged to a target size, with overlap.
    Text,
    /// Windows of lines, with overlap: everything else.
    Lines,
}

/// What a file is: its chunker, language and content type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileKind {
    /// The chunker.
    pub strategy: Strategy,
    /// The `language` recorded on chunks.
    pub language: String,
    /// The `content_type` recorded on chunks.
    pub content_type: ContentType,
    /// README or index document.
    pub is_index_doc: bool,
}

/// Extensions (and file names) chunked by line windows that are code.
const CODE_EXTENSIONS: &[(&str, &str)] = &[
    ("c", "c"),
    ("h", "c"),
    ("cc", "cpp"),
    ("cpp", "cpp"),
    ("cxx", "cpp"),
    ("hpp", "cpp"),
    ("hh", "cpp"),
    ("cs", "csharp"),
    ("kt", "kotlin"),
    ("kts", "kotlin"),
    ("scala", "scala"),
    ("groovy", "groovy"),
    ("gradle", "groovy"),
    ("rb", "ruby"),
    ("php", "php"),
    ("swift", "swift"),
    ("m", "objc"),
    ("sh", "shell"),
    ("bash", "shell"),
    ("zsh", "shell"),
    ("ps1", "powershell"),
    ("sql", "sql"),
    ("lua", "lua"),
    ("pl", "perl"),
    ("r", "r"),
    ("dart", "dart"),
    ("ex", "elixir"),
    ("exs", "elixir"),
    ("erl", "erlang"),
    ("hs", "haskell"),
    ("clj", "clojure"),
    ("ml", "ocaml"),
    ("zig", "zig"),
    ("vue", "vue"),
    ("svelte", "svelte"),
    ("css", "css"),
    ("scss", "scss"),
    ("less", "less"),
    ("proto", "protobuf"),
    ("graphql", "graphql"),
    ("yaml", "yaml"),
    ("yml", "yaml"),
    ("json", "json"),
    ("toml", "toml"),
    ("xml", "xml"),
    ("ini", "ini"),
    ("cmake", "cmake"),
    ("tf", "terraform"),
    ("makefile", "make"),
    ("dockerfile", "dockerfile"),
    ("jenkinsfile", "groovy"),
];

const TEXT_NAMES: &[&str] = &[
    "license",
    "licence",
    "notice",
    "copying",
    "authors",
    "changelog",
    "contributing",
];

/// Detects the kind of the file at `uri` (a path or URL).
pub(crate) fn detect(uri: &str, api_reference: &GlobSet) -> FileKind {
    let is_url = uri.contains("://");
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let name = path
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, ext),
        _ => (name.as_str(), ""),
    };
    let is_index_doc = matches!(stem, "readme" | "index" | "_index");
    let declaration = [".d.ts", ".d.mts", ".d.cts"]
        .iter()
        .any(|s| name.ends_with(s));
    let code = |language: CodeLanguage| {
        (
            Strategy::Code(language),
            language.name().to_owned(),
            ContentType::Code,
        )
    };
    let (strategy, language, mut content_type) = match ext {
        "java" => code(CodeLanguage::Java),
        "ts" | "mts" | "cts" => code(CodeLanguage::TypeScript),
        "tsx" => code(CodeLanguage::Tsx),
        "js" | "mjs" | "cjs" | "jsx" => code(CodeLanguage::JavaScript),
        "py" | "pyi" => code(CodeLanguage::Python),
        "rs" => code(CodeLanguage::Rust),
        "go" => code(CodeLanguage::Go),
        "md" | "markdown" | "mdx" | "mdown" | "mkd" => {
            (Strategy::Markdown, "markdown".into(), ContentType::Prose)
        }
        "html" | "htm" | "xhtml" => (Strategy::Html, "html".into(), ContentType::Prose),
        "txt" | "text" | "rst" | "adoc" | "asciidoc" | "org" => {
            (Strategy::Text, "text".into(), ContentType::Prose)
        }
        "" if is_url => (Strategy::Html, "html".into(), ContentType::Prose),
        _ if TEXT_NAMES.contains(&stem) => (Strategy::Text, "text".into(), ContentType::Prose),
        _ => {
            let key = if ext.is_empty() { stem } else { ext };
            match CODE_EXTENSIONS.iter().find(|(e, _)| *e == key) {
                Some((_, language)) => (Strategy::Lines, (*language).to_owned(), ContentType::Code),
                None => (Strategy::Lines, "text".into(), ContentType::Prose),
            }
        }
    };
    if declaration || api_reference.is_match(path) {
        content_type = ContentType::ApiReference;
    }
    FileKind {
        strategy,
        language,
        content_type,
        is_index_doc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(uri: &str) -> FileKind {
        detect(uri, &GlobSet::empty())
    }

    #[test]
    fn detects_by_extension() {
        assert_eq!(
            kind("src/A.java").strategy,
            Strategy::Code(CodeLanguage::Java)
        );
        assert_eq!(kind("src/a.tsx").language, "typescript");
        assert_eq!(
            kind("lib/index.d.ts").content_type,
            ContentType::ApiReference
        );
        assert_eq!(kind("docs/README.md").strategy, Strategy::Markdown);
        assert!(kind("docs/README.md").is_index_doc);
        assert!(kind("content/_index.md").is_index_doc);
        assert_eq!(
            kind("https://docs.example.com/guide/").strategy,
            Strategy::Html
        );
        assert_eq!(kind("LICENSE").strategy, Strategy::Text);
        assert_eq!(kind("Makefile").language, "make");
        assert_eq!(kind("a.c").content_type, ContentType::Code);
        assert_eq!(kind("data.weird").strategy, Strategy::Lines);
        assert_eq!(kind(".bashrc").strategy, Strategy::Lines);
    }

    #[test]
    fn configured_paths_are_api_reference() {
        let mut b = globset::GlobSetBuilder::new();
        b.add(globset::Glob::new("doc/api/**").unwrap());
        let set = b.build().unwrap();
        assert_eq!(
            detect("doc/api/fs.md", &set).content_type,
            ContentType::ApiReference
        );
        assert_eq!(
            detect("doc/guide/fs.md", &set).content_type,
            ContentType::Prose
        );
    }
}
