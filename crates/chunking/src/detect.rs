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
    /// reStructuredText: sections by title adornments, directives whole.
    Rst,
    /// AsciiDoc: sections by `=` titles, delimited blocks whole.
    AsciiDoc,
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
    ("scala", "scala"),
    ("groovy", "groovy"),
    ("gradle", "groovy"),
    ("swift", "swift"),
    ("m", "objc"),
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
        "c" | "h" => code(CodeLanguage::C),
        "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" | "tcc" => {
            code(CodeLanguage::Cpp)
        }
        "cs" => code(CodeLanguage::CSharp),
        "rb" | "rake" | "gemspec" | "ru" => code(CodeLanguage::Ruby),
        "php" | "phtml" => code(CodeLanguage::Php),
        "sh" | "bash" => code(CodeLanguage::Bash),
        "kt" | "kts" => code(CodeLanguage::Kotlin),
        _ if matches!(stem, "rakefile" | "gemfile") && ext.is_empty() => code(CodeLanguage::Ruby),
        "rst" | "rest" => (Strategy::Rst, "rst".into(), ContentType::Prose),
        "txt" if stem.ends_with(".rst") => (Strategy::Rst, "rst".into(), ContentType::Prose),
        "adoc" | "asciidoc" | "asc" => (Strategy::AsciiDoc, "asciidoc".into(), ContentType::Prose),
        "md" | "markdown" | "mdx" | "mdown" | "mkd" => {
            (Strategy::Markdown, "markdown".into(), ContentType::Prose)
        }
        "html" | "htm" | "xhtml" => (Strategy::Html, "html".into(), ContentType::Prose),
        "txt" | "text" | "org" => (Strategy::Text, "text".into(), ContentType::Prose),
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

/// Refines a kind by the file's content: a `.txt` file that reads as reST
/// or AsciiDoc (Sphinx and git keep their sources as `.txt`) is chunked as
/// such, and a `.h` header that reads as C++ is C++. Everything else keeps
/// the kind its name gave it.
pub(crate) fn refine(kind: FileKind, uri: &str, text: &str) -> FileKind {
    let path = uri
        .split(['?', '#'])
        .next()
        .unwrap_or(uri)
        .to_ascii_lowercase();
    match kind.strategy {
        Strategy::Text if path.ends_with(".txt") || path.ends_with(".text") => {
            let (strategy, language) = if crate::asciidoc::looks_like_asciidoc(text) {
                (Strategy::AsciiDoc, "asciidoc")
            } else if crate::rst::looks_like_rst(text) {
                (Strategy::Rst, "rst")
            } else {
                return kind;
            };
            FileKind {
                strategy,
                language: language.into(),
                ..kind
            }
        }
        Strategy::Code(CodeLanguage::C) if path.ends_with(".h") && looks_like_cpp(text) => {
            FileKind {
                strategy: Strategy::Code(CodeLanguage::Cpp),
                language: CodeLanguage::Cpp.name().into(),
                ..kind
            }
        }
        // A script without an extension, by its `#!` line.
        Strategy::Lines if !path.rsplit('/').next().unwrap_or("").contains('.') => {
            match shebang_language(text) {
                Some(language) => FileKind {
                    strategy: Strategy::Code(language),
                    language: language.name().into(),
                    content_type: ContentType::Code,
                    ..kind
                },
                None => kind,
            }
        }
        _ => kind,
    }
}

/// The language of a `#!` line (`#!/bin/sh`, `#!/usr/bin/env bash`), for
/// the languages that came with their grammars later: shell, Ruby, PHP.
fn shebang_language(text: &str) -> Option<CodeLanguage> {
    let first = text.lines().next()?.strip_prefix("#!")?;
    let mut words = first.split_whitespace();
    let mut program = words.next()?.rsplit('/').next()?;
    if program == "env" {
        program = words.find(|w| !w.starts_with('-'))?;
    }
    match program {
        "sh" | "bash" | "dash" | "ksh" => Some(CodeLanguage::Bash),
        "ruby" => Some(CodeLanguage::Ruby),
        "php" => Some(CodeLanguage::Php),
        _ => None,
    }
}

/// Whether a header holds C++ that a C parser cannot read: classes,
/// namespaces, templates, access specifiers.
fn looks_like_cpp(text: &str) -> bool {
    crate::rst::head(text, 64 * 1024).lines().any(|line| {
        let t = line.trim_start();
        [
            "class ",
            "namespace ",
            "template <",
            "template<",
            "public:",
            "private:",
            "protected:",
        ]
        .iter()
        .any(|p| t.starts_with(p))
            && !t.ends_with(';')
            || t.starts_with("#include <") && !t.contains(".h>")
    })
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
        assert_eq!(kind("a.c").strategy, Strategy::Code(CodeLanguage::C));
        assert_eq!(kind("a.hpp").strategy, Strategy::Code(CodeLanguage::Cpp));
        assert_eq!(kind("A.cs").strategy, Strategy::Code(CodeLanguage::CSharp));
        assert_eq!(
            kind("Rakefile").strategy,
            Strategy::Code(CodeLanguage::Ruby)
        );
        assert_eq!(kind("a.php").strategy, Strategy::Code(CodeLanguage::Php));
        assert_eq!(kind("run.sh").language, "shell");
        assert_eq!(kind("A.kt").strategy, Strategy::Code(CodeLanguage::Kotlin));
        assert_eq!(kind("docs/index.rst").strategy, Strategy::Rst);
        assert_eq!(kind("_sources/intro.rst.txt").strategy, Strategy::Rst);
        assert_eq!(kind("guide.adoc").strategy, Strategy::AsciiDoc);
        assert_eq!(kind("notes.txt").strategy, Strategy::Text);
        assert_eq!(kind("a.swift").strategy, Strategy::Lines);
        assert_eq!(kind("data.weird").strategy, Strategy::Lines);
        assert_eq!(kind(".bashrc").strategy, Strategy::Lines);
    }

    #[test]
    fn txt_files_are_refined_by_content() {
        let rst = "Writing your first app\n======================\n\n.. highlight:: console\n\nText with :ref:`a link <intro>`.\n";
        let adoc = "git-add(1)\n==========\n\nNAME\n----\ngit-add - Add files\n\nSYNOPSIS\n--------\n[verse]\n'git add' [-n]\n\nSee linkgit:git-rm[1].\n\nGIT\n---\nPart of the linkgit:git[1] suite\n";
        let prose =
            "Meeting notes\n\nWe talked about the release: it ships Friday.\nBring snacks.\n";
        let refined = |uri: &str, text: &str| refine(kind(uri), uri, text);
        assert_eq!(
            refined("docs/intro/tutorial01.txt", rst).strategy,
            Strategy::Rst
        );
        assert_eq!(refined("docs/intro/tutorial01.txt", rst).language, "rst");
        assert_eq!(
            refined("Documentation/git-add.txt", adoc).strategy,
            Strategy::AsciiDoc
        );
        assert_eq!(refined("notes.txt", prose).strategy, Strategy::Text);
        assert_eq!(refined("notes.txt", prose).language, "text");
        // Only .txt is sniffed: a LICENSE stays text, a .md stays markdown.
        assert_eq!(refined("LICENSE", rst).strategy, Strategy::Text);
        assert_eq!(refined("a.md", rst).strategy, Strategy::Markdown);
        let cpp = "#pragma once\nnamespace acme {\nclass Widget {\npublic:\n  int n;\n};\n}\n";
        assert_eq!(
            refined("w.h", cpp).strategy,
            Strategy::Code(CodeLanguage::Cpp)
        );
        assert_eq!(
            refined("w.h", "struct p { int x; };\nint f(void);\n").strategy,
            Strategy::Code(CodeLanguage::C)
        );
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
