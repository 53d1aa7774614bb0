//! What each chunker makes of realistic files (tests/fixtures), at a small
//! size limit so that splitting shows, and at the defaults.

use weft_chunking::{ChunkError, ChunkedDocument, Chunker, ChunkingConfig, Strategy};
use weft_core::{Chunk, ContentType};

mod common;
use common::{FIXTURES, fixture};

fn small() -> Chunker {
    let mut config = ChunkingConfig::default();
    config.code.max_chars = 600;
    config.code.min_chars = 120;
    config.markdown.max_chars = 200;
    config.text.target_chars = 250;
    config.text.overlap_chars = 60;
    Chunker::new(config).unwrap()
}

/// Chunks a fixture and checks the invariants before anything else.
fn chunk(chunker: &Chunker, name: &str) -> (String, ChunkedDocument) {
    let source = fixture(name);
    let doc = chunker
        .chunk_bytes("fixtures", name, source.as_bytes())
        .unwrap();
    weft_core::invariants::check(doc.text(&source), &doc.chunks)
        .unwrap_or_else(|v| panic!("{name}: {v}"));
    (source, doc)
}

fn by_section<'a>(doc: &'a ChunkedDocument, section: &str) -> &'a Chunk {
    doc.chunks
        .iter()
        .find(|c| c.section == section)
        .unwrap_or_else(|| {
            let sections: Vec<&str> = doc.chunks.iter().map(|c| c.section.as_str()).collect();
            panic!("no chunk with section {section:?}; sections: {sections:?}")
        })
}

#[test]
fn every_fixture_keeps_the_invariants_at_both_sizes() {
    for chunker in [small(), Chunker::new(ChunkingConfig::default()).unwrap()] {
        for name in FIXTURES {
            let (_, doc) = chunk(&chunker, name);
            assert!(!doc.chunks.is_empty(), "{name}");
            assert!(doc.warnings.is_empty(), "{name}: {:?}", doc.warnings);
        }
    }
}

#[test]
fn java_class_splits_into_header_and_members() {
    let (_, doc) = chunk(&small(), "RateLimiter.java");
    assert!(
        doc.chunks
            .iter()
            .all(|c| c.language == "java" && c.content_type == ContentType::Code)
    );

    let header = by_section(&doc, "RateLimiter");
    assert_eq!(header.node_type, "class_declaration");
    assert_eq!(header.node_name.as_deref(), Some("RateLimiter"));
    // Package and imports join the next chunk; the doc comment and the
    // annotation belong to the class; the fields join its header.
    assert!(
        header.content.starts_with("package org.example.limits;"),
        "{}",
        header.content
    );
    assert!(header.content.contains("import java.util.Deque;"));
    assert!(
        header
            .content
            .contains("/**\n * A token-bucket rate limiter")
    );
    assert!(
        header
            .content
            .contains("@SuppressWarnings(\"unused\")\npublic final class RateLimiter {")
    );
    assert!(header.content.contains("private long lastRefillNanos;"));
    assert!(!header.content.contains("tryAcquire"));
    // The outline enriches the embedded text, never the content.
    let outline = header.outline.as_deref().unwrap_or_default();
    assert!(
        outline.contains("tryAcquire") && outline.contains("Snapshot"),
        "{outline}"
    );
    assert!(!header.content.contains("Members of"));
    assert!(
        header
            .embedding_text()
            .contains(&weft_core::split_camel_case(outline))
    );

    let to_string = by_section(&doc, "RateLimiter.toString");
    assert!(
        to_string.content.starts_with("/** How long"),
        "{}",
        to_string.content
    );
    assert!(
        to_string
            .content
            .contains("@Override\n  public synchronized String toString()")
    );
    assert_eq!(to_string.node_type, "method_declaration");

    let ctor = by_section(&doc, "RateLimiter.RateLimiter");
    assert_eq!(ctor.node_type, "constructor_declaration");

    // A long method splits at statement boundaries into parts.
    let parts: Vec<&Chunk> = doc
        .chunks
        .iter()
        .filter(|c| c.section.starts_with("RateLimiter.acquire (Part "))
        .collect();
    assert!(parts.len() >= 2, "{parts:#?}");
    let n = parts.len();
    for (i, part) in parts.iter().enumerate() {
        assert_eq!(
            part.section,
            format!("RateLimiter.acquire (Part {}/{n})", i + 1)
        );
        assert_eq!(part.node_name.as_deref(), Some("acquire"));
    }
    assert!(
        parts[0]
            .content
            .contains("public synchronized Duration acquire(int permits)")
    );
    assert!(parts[n - 1].content.trim_end().ends_with('}'));

    // Nested types get the outer path.
    assert_eq!(
        by_section(&doc, "RateLimiter.Snapshot").node_type,
        "class_declaration"
    );
    assert_eq!(
        by_section(&doc, "RateLimiter.Policy").node_type,
        "enum_declaration"
    );
}

#[test]
fn a_one_class_file_is_not_one_chunk_at_default_sizes() {
    let (source, doc) = chunk(
        &Chunker::new(ChunkingConfig::default()).unwrap(),
        "RateLimiter.java",
    );
    assert!(source.len() > 3000);
    assert!(doc.chunks.len() >= 3, "{} chunks", doc.chunks.len());
    assert!(doc.chunks.iter().all(|c| c.content.chars().count() <= 1200));
}

#[test]
fn typescript_keeps_decorators_and_names_arrow_functions() {
    let (_, doc) = chunk(&small(), "store.ts");
    let get = by_section(&doc, "TtlCache.get");
    assert!(
        get.content.starts_with("/** Returns the live value"),
        "{}",
        get.content
    );
    assert!(get.content.contains("@traced\n  get(key: string)"));
    assert_eq!(get.node_type, "method_definition");
    let first = &doc.chunks[0];
    assert!(
        first.content.starts_with("import { EventEmitter }"),
        "imports join the first definition"
    );
    let total = doc
        .chunks
        .iter()
        .find(|c| c.node_name.as_deref() == Some("totalSize"))
        .expect("totalSize");
    assert_eq!(total.node_type, "lexical_declaration");
    assert!(total.content.contains("Sums the sizes of all values"));
}

#[test]
fn typescript_type_parameter_modifiers_and_overload_signatures_parse() {
    // tree-sitter-typescript 0.23 cannot read `<out A>`, `<const K>` or
    // call signatures one per line without `;`; without the rewritten parse
    // input this file was one syntax error, chunked as line windows.
    let (_, doc) = chunk(&small(), "overloads.ts");
    assert!(doc.warnings.is_empty(), "{:?}", doc.warnings);
    for name in ["Option", "map", "catchTag", "some", "none"] {
        assert!(
            doc.chunks
                .iter()
                .any(|c| c.node_name.as_deref() == Some(name)),
            "{name}: {:?}",
            doc.chunks.iter().map(|c| &c.section).collect::<Vec<_>>()
        );
    }
    // What was parsed is not what is shown: the chunks hold the source.
    let map = by_section(&doc, "map");
    assert!(
        map.content
            .contains("  <A, B>(self: Option<A>, f: (a: A) => B): Option<B>\n")
    );
    let option = by_section(&doc, "Option");
    assert!(option.content.contains("export interface Option<out A> {"));
    assert!(doc.chunks.iter().any(|c| {
        c.content
            .contains("export interface Refinement<in A, out B extends A> {")
    }));
}

#[test]
fn tsx_and_javascript_chunk_by_definition() {
    let (_, doc) = chunk(&small(), "Button.tsx");
    assert_eq!(
        doc.kind.strategy,
        Strategy::Code(weft_chunking::CodeLanguage::Tsx)
    );
    assert_eq!(by_section(&doc, "Button").node_type, "function_declaration");

    let (_, doc) = chunk(&small(), "queue.js");
    assert_eq!(doc.chunks[0].language, "javascript");
    assert_eq!(
        by_section(&doc, "WorkQueue.push").node_type,
        "method_definition"
    );
    assert!(by_section(&doc, "retry").content.starts_with("/** Retries"));
}

#[test]
fn python_keeps_decorators_and_docstrings() {
    let (_, doc) = chunk(&small(), "graph.py");
    assert!(doc.chunks[0].content.starts_with("\"\"\"Graph algorithms"));
    let fib = by_section(&doc, "fib");
    assert!(
        fib.content.starts_with("@lru_cache(maxsize=None)\ndef fib"),
        "{}",
        fib.content
    );
    assert_eq!(fib.node_type, "function_definition");
    assert!(
        by_section(&doc, "Graph.from_pairs")
            .content
            .contains("@staticmethod")
    );
    assert!(
        by_section(&doc, "Graph.shortest_paths")
            .content
            .contains("Dijkstra")
    );
}

#[test]
fn rust_keeps_attributes_and_doc_comments_and_names_impl_methods() {
    let (_, doc) = chunk(&small(), "ring.rs");
    let push = by_section(&doc, "Ring.push");
    assert!(
        push.content.starts_with("/// Adds an item"),
        "{}",
        push.content
    );
    assert!(push.content.contains("#[must_use]\n    pub fn push"));
    let ring = by_section(&doc, "Ring");
    assert!(
        ring.content
            .contains("#[derive(Debug, Clone)]\npub struct Ring<T>")
    );
}

#[test]
fn go_methods_are_named_by_receiver() {
    let (_, doc) = chunk(&small(), "server.go");
    let serve = by_section(&doc, "Server.ServeHTTP");
    assert_eq!(serve.node_type, "method_declaration");
    assert_eq!(serve.node_name.as_deref(), Some("ServeHTTP"));
    assert!(serve.content.starts_with("// ServeHTTP answers 200"));
    assert!(doc.chunks[0].content.starts_with("// Package health"));
}

#[test]
fn markdown_sections_have_breadcrumbs_and_front_matter_stands_alone() {
    let (_, doc) = chunk(&small(), "guide.md");
    assert_eq!(doc.title, "Deploying weft");
    assert_eq!(doc.chunks[0].node_type, "front_matter");
    assert!(doc.chunks[0].content.starts_with("---\ntitle:"));
    let linux = by_section(&doc, "Deploying weft > Install > Linux");
    // The heading-only "## Install" joins its first subsection; the fence is whole.
    assert!(linux.content.starts_with("## Install\n\n### Linux"));
    assert!(linux.content.contains(
        "```sh\ncurl -L https://example.com/weft.tar.gz | tar xz\nsudo mv weft /usr/local/bin/\n```"
    ));
    by_section(&doc, "Deploying weft > Configure");
    assert!(
        doc.chunks
            .iter()
            .all(|c| c.content_type == ContentType::Prose && c.language == "markdown")
    );
}

/// The first chunk of the unit `section`: the section itself, or its
/// "(Part 1/n)" when it was split.
fn by_unit<'a>(doc: &'a ChunkedDocument, section: &str) -> &'a Chunk {
    doc.chunks
        .iter()
        .find(|c| weft_core::retrieval::unit_of(&c.section).0 == section)
        .unwrap_or_else(|| {
            let sections: Vec<&str> = doc.chunks.iter().map(|c| c.section.as_str()).collect();
            panic!("no chunk of unit {section:?}; sections: {sections:?}")
        })
}

/// The language, content type and kind of every chunk of a fixture.
fn assert_code(doc: &ChunkedDocument, language: &str) {
    assert!(
        doc.chunks
            .iter()
            .all(|c| c.language == language && c.content_type == ContentType::Code),
        "{language}"
    );
    assert!(matches!(doc.kind.strategy, Strategy::Code(_)));
    assert!(doc.chunks.iter().all(|c| c.node_type != "lines"));
}

#[test]
fn c_functions_are_named_through_their_declarators() {
    let (_, doc) = chunk(&small(), "geometry.c");
    assert_code(&doc, "c");
    // `static double distance(...)`: the name is under a function declarator.
    let push = by_section(&doc, "polygon_push");
    assert_eq!(push.node_type, "function_definition");
    assert_eq!(push.node_name.as_deref(), Some("polygon_push"));
    assert!(
        push.content.starts_with("/**\n * Appends a point"),
        "{}",
        push.content
    );
    by_section(&doc, "polygon_signed_area");
    assert!(doc.chunks[0].content.starts_with("/*\n * geometry.c"));
}

#[test]
fn cpp_namespaces_are_transparent_and_members_have_symbol_paths() {
    let (_, doc) = chunk(&small(), "widget.hpp");
    assert_code(&doc, "cpp");
    // A template class inside `namespace ui {`: header, then members.
    let header = by_section(&doc, "Widget");
    assert_eq!(header.node_type, "class_specifier");
    assert!(
        header
            .content
            .contains("template <typename Cell>\nclass Widget : public Base {")
    );
    let resize = by_unit(&doc, "Widget.resize");
    assert!(
        resize.content.starts_with("/// Resizes the buffer"),
        "{}",
        resize.content
    );
    // `void ui::Renderer::draw(…)` outside the class.
    let draw = by_unit(&doc, "ui.Renderer.draw");
    assert_eq!(draw.node_name.as_deref(), Some("draw"));
    by_section(&doc, "Widget.at");
}

#[test]
fn csharp_classes_split_into_members_inside_their_namespace() {
    let (_, doc) = chunk(&small(), "Inventory.cs");
    assert_code(&doc, "csharp");
    let header = by_section(&doc, "Inventory");
    assert!(header.content.starts_with("using System;"));
    assert!(header.content.contains("namespace Acme.Warehouse\n{"));
    assert!(
        header
            .content
            .contains("[Serializable]\n    public sealed class Inventory")
    );
    let ship = by_unit(&doc, "Inventory.Ship");
    assert_eq!(ship.node_type, "method_declaration");
    assert!(
        ship.content
            .starts_with("/// <summary>\n        /// Removes units")
    );
}

#[test]
fn ruby_modules_classes_and_methods_nest() {
    let (_, doc) = chunk(&small(), "cache.rb");
    assert_code(&doc, "ruby");
    let fetch = by_section(&doc, "Acme.LruCache.fetch");
    assert_eq!(fetch.node_type, "method");
    assert!(fetch.content.starts_with("# Returns the cached value"));
    let sections: Vec<&str> = doc.chunks.iter().map(|c| c.section.as_str()).collect();
    assert!(
        sections.iter().any(|s| s.starts_with("Acme.LruCache")),
        "{sections:?}"
    );
}

#[test]
fn php_classes_keep_their_preamble_and_doc_comments() {
    let (_, doc) = chunk(&small(), "Repository.php");
    assert_code(&doc, "php");
    let header = by_section(&doc, "UserRepository");
    assert!(
        header
            .content
            .starts_with("<?php\n\ndeclare(strict_types=1);")
    );
    assert!(
        header
            .content
            .contains("#[Repository(table: 'users')]\nfinal class")
    );
    let find = by_unit(&doc, "UserRepository.find");
    assert!(find.content.starts_with("/**\n     * Finds a user by id"));
    by_section(&doc, "UserRepository.save");
}

#[test]
fn shell_functions_are_definitions_and_commands_are_not_names() {
    let (_, doc) = chunk(&small(), "deploy.sh");
    assert_code(&doc, "shell");
    let build = by_section(&doc, "build");
    assert_eq!(build.node_type, "function_definition");
    assert!(build.content.starts_with("# Builds the site"));
    by_section(&doc, "upload");
    assert!(
        doc.chunks
            .iter()
            .all(|c| c.section != "set" && c.section != "rsync")
    );
}

#[test]
fn kotlin_classes_split_into_members_with_their_package_and_annotations() {
    let (_, doc) = chunk(&small(), "Scheduler.kt");
    assert_code(&doc, "kotlin");
    let header = by_section(&doc, "Scheduler");
    assert!(header.content.starts_with("package com.acme.jobs"));
    assert!(
        header
            .content
            .contains("@Suppress(\"MemberVisibilityCanBePrivate\")\nclass Scheduler")
    );
    let tick = by_unit(&doc, "Scheduler.tick");
    assert_eq!(tick.node_type, "function_declaration");
    assert!(tick.content.starts_with("/**\n     * Runs every job"));
}

/// A class `Box` of six 14-line methods `get_0` … `get_5`, in the idiom of
/// the language of `file` (its indentation, braces and statement ends):
/// the same shape, at different sizes.
fn class_of_six_methods(file: &str) -> String {
    // The class's opening, a method's opening (`N` its number), one
    // statement (`J`), a method's closing, the class's closing.
    let (open, method, statement, method_end, close) = match file.rsplit('.').next() {
        Some("java") => (
            "class Box {",
            "    int get_N(int x) {",
            "        y += J;",
            "    }",
            "}",
        ),
        Some("cs") => (
            "class Box\n{",
            "    int get_N(int x)\n    {",
            "        y += J;",
            "    }",
            "}",
        ),
        Some("cpp") => (
            "class Box {\n  public:",
            "    int get_N(int x) {",
            "        y += J;",
            "    }",
            "};",
        ),
        Some("php") => (
            "<?php\n\nclass Box\n{",
            "    public function get_N($x)\n    {",
            "        $y += J;",
            "    }",
            "}",
        ),
        Some("kt") => (
            "class Box {",
            "    fun get_N(x: Int): Int {",
            "        y += J",
            "    }",
            "}",
        ),
        Some("ts" | "tsx") => (
            "export class Box {",
            "    get_N(x: number): number {",
            "        y += J;",
            "    }",
            "}",
        ),
        Some("js") => (
            "class Box {",
            "    get_N(x) {",
            "        y += J;",
            "    }",
            "}",
        ),
        Some("rs") => (
            "impl Box {",
            "    fn get_N(&mut self, x: i64) -> i64 {",
            "        y += J;",
            "    }",
            "}",
        ),
        Some("rb") => ("class Box", "  def get_N(x)", "    y += J", "  end", "end"),
        Some("py") => (
            "class Box:",
            "    def get_N(self, x):",
            "        y += J",
            "",
            "",
        ),
        // Go has no class body: the methods follow their type.
        Some("go") => (
            "package box\n\ntype Box struct{ n int }\n",
            "func (b *Box) get_N(x int) int {",
            "\ty += J",
            "}",
            "",
        ),
        _ => panic!("no class shape for {file}"),
    };
    let mut source = format!("{open}\n");
    for n in 0..6 {
        if n > 0 {
            source.push('\n');
        }
        let mut lines = vec![method.replace('N', &n.to_string())];
        let statements = 14 - method.lines().count() - method_end.lines().count();
        lines.extend((1..=statements).map(|j| statement.replace('J', &j.to_string())));
        lines.extend(method_end.lines().map(str::to_owned));
        assert_eq!(lines.iter().map(|l| l.lines().count()).sum::<usize>(), 14);
        for line in lines {
            source.push_str(&line);
            source.push('\n');
        }
    }
    if !close.is_empty() {
        source.push_str(close);
        source.push('\n');
    }
    source
}

/// Issue 31, item 7: one sibling-grouping rule for every language. A class
/// of six 14-line methods is too large for one chunk, so it is a header plus
/// one chunk per method; the header is tiny and joins the first method. In
/// Ruby's idiom (two-space indentation, no braces or semicolons) and Go's
/// (tabs), such a method is under `code.min_chars`, in the others over it:
/// under the old rule tiny neighbours merged until `code.max_chars`, so the
/// Ruby class came out as five methods named after the first, plus one.
/// Now a definition of ten lines or more stands alone in every language.
#[test]
fn a_class_of_six_methods_is_one_chunk_per_method_in_every_language() {
    let mut config = ChunkingConfig::default();
    config.code.max_chars = 800;
    config.code.min_chars = 200;
    let chunker = Chunker::new(config.clone()).unwrap();
    let expected: Vec<String> = (0..6).map(|n| format!("Box.get_{n}")).collect();
    let files = [
        "Box.java", "Box.cs", "box.cpp", "Box.php", "Box.kt", "box.ts", "box.tsx", "box.js",
        "box.rs", "box.rb", "box.py", "box.go",
    ];
    let mut under_min = Vec::new();
    for file in files {
        let source = class_of_six_methods(file);
        assert!(source.len() > config.code.max_chars, "{file}: {source}");
        let doc = chunker.chunk_text("shapes", file, &source);
        assert!(
            matches!(doc.kind.strategy, Strategy::Code(_)),
            "{file}: {:?}",
            doc.kind
        );
        assert!(doc.warnings.is_empty(), "{file}: {:?}", doc.warnings);
        weft_core::invariants::check(&source, &doc.chunks)
            .unwrap_or_else(|v| panic!("{file}: {v}"));
        // Go's type is a definition of its own, before the methods: one
        // line, it joins no method that stands alone.
        let methods = if file.ends_with(".go") {
            assert_eq!(doc.chunks[0].section, "Box", "{file}");
            assert!(doc.chunks[0].content.ends_with("type Box struct{ n int }"));
            &doc.chunks[1..]
        } else {
            &doc.chunks[..]
        };
        let sections: Vec<&str> = methods.iter().map(|c| c.section.as_str()).collect();
        assert_eq!(sections, expected, "{file}");
        for (n, chunk) in methods.iter().enumerate() {
            assert_eq!(
                chunk.node_name.as_deref(),
                Some(format!("get_{n}").as_str())
            );
            let methods: Vec<usize> = (0..6)
                .filter(|m| chunk.content.contains(&format!("get_{m}(")))
                .collect();
            assert_eq!(methods, [n], "{file}: {}", chunk.content);
            let method_chars = chunk.content[chunk.content.find("get_").unwrap()..].len();
            if method_chars < config.code.min_chars {
                under_min.push(file);
            }
        }
        assert!(
            doc.chunks[0]
                .content
                .starts_with(source.lines().next().unwrap())
        );
    }
    // The shape straddles `code.min_chars`, as in the issue: the rule, not
    // the sizes, makes the chunks the same.
    assert!(under_min.contains(&"box.rb"), "{under_min:?}");
    assert!(!under_min.contains(&"Box.java"), "{under_min:?}");
}

/// The rest of the rule: a definition of ten lines or more stands alone —
/// no other definition joins it, however small the two — while what is
/// smaller merges as before. Fields, a section keyword and a trailing
/// comment join the definition beside them; one-line methods share a chunk
/// with the class header, and nine-line methods with each other (up to
/// `code.max_chars`); a one-line method between two that stand alone is a
/// chunk of its own.
#[test]
fn tiny_neighbours_merge_but_no_definition_joins_one_of_ten_lines() {
    let method = |name: &str, lines: usize| {
        let body: String = (1..=lines - 2)
            .map(|j| format!("    y += x * {j}\n"))
            .collect();
        format!("  def {name}(x)\n{body}  end\n")
    };
    let source = format!(
        "class Box\n  attr_reader :size\n\n  def a; @a; end\n  def b; @b; end\n  def c; @c; end\n\n\
         {}\n  private\n\n  def d; @d; end\n\n{}\n{}\n{}  # The end of Box.\nend\n",
        method("big_0", 10),
        method("big_1", 10),
        method("mid_0", 9),
        method("mid_1", 9),
    );
    let mut config = ChunkingConfig::default();
    config.code.max_chars = 400;
    config.code.min_chars = 200;
    let doc = Chunker::new(config)
        .unwrap()
        .chunk_text("p", "box.rb", &source);
    weft_core::invariants::check(&source, &doc.chunks).unwrap();
    let sections: Vec<&str> = doc.chunks.iter().map(|c| c.section.as_str()).collect();
    assert_eq!(
        sections,
        ["Box", "Box.big_0", "Box.d", "Box.big_1", "Box.mid_0"],
        "{:#?}",
        doc.chunks
    );
    let [header, big_0, d, big_1, mids] = &doc.chunks[..] else {
        unreachable!()
    };
    // Every piece here is under `code.min_chars`: under that rule alone
    // the whole class would be two chunks.
    assert!(big_0.content.len() < 200 && big_1.content.len() < 200);
    assert!(header.content.contains("attr_reader :size"));
    assert!(
        header.content.ends_with("def c; @c; end"),
        "{}",
        header.content
    );
    assert!(big_0.content.starts_with("def big_0(x)"));
    assert!(big_0.content.ends_with("private"), "{}", big_0.content);
    assert_eq!(d.content, "def d; @d; end");
    assert!(big_1.content.starts_with("def big_1(x)"));
    assert!(big_1.content.ends_with("  end"), "{}", big_1.content);
    assert!(mids.content.starts_with("def mid_0(x)"));
    assert!(mids.content.contains("  def mid_1(x)\n"));
    assert!(
        mids.content.ends_with("  # The end of Box.\nend"),
        "{}",
        mids.content
    );
}

/// Data is not a definition: a Go `var` or a shell variable assignment
/// between two functions that stand alone joins one of them, as a field or
/// a comment would, instead of standing alone as a chunk of one line.
#[test]
fn data_joins_a_definition_that_stands_alone() {
    let function = |open: &str, statement: &str, close: &str| {
        let body: String = (1..=8).map(|j| format!("{statement}{j}\n")).collect();
        format!("{open}\n{body}{close}\n")
    };
    let cases = [
        (
            "x.go",
            format!(
                "package x\n\n{}\nvar limit = 3\n\n{}",
                function("func f() {", "\ty += ", "}"),
                function("func g() {", "\ty -= ", "}"),
            ),
        ),
        (
            "x.sh",
            format!(
                "{}\nLIMIT=3\n\n{}",
                function("f() {", "  echo ", "}"),
                function("g() {", "  echo ", "}"),
            ),
        ),
    ];
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    for (file, source) in cases {
        let doc = chunker.chunk_text("p", file, &source);
        weft_core::invariants::check(&source, &doc.chunks).unwrap();
        let sections: Vec<&str> = doc.chunks.iter().map(|c| c.section.as_str()).collect();
        assert_eq!(sections, ["f", "g"], "{file}: {:#?}", doc.chunks);
        assert!(
            doc.chunks[0].content.ends_with("limit = 3")
                || doc.chunks[0].content.ends_with("LIMIT=3"),
            "{file}: {}",
            doc.chunks[0].content
        );
    }
}

#[test]
fn rst_sections_follow_the_adornment_hierarchy() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    let (_, doc) = chunk(&chunker, "install.rst");
    assert_eq!(doc.kind.strategy, Strategy::Rst);
    assert_eq!(doc.title, "Installation");
    assert!(
        doc.chunks
            .iter()
            .all(|c| c.language == "rst" && c.content_type == ContentType::Prose)
    );
    let sections: Vec<&str> = doc.chunks.iter().map(|c| c.section.as_str()).collect();
    assert_eq!(
        sections,
        vec![
            "Installation",
            "Installation > Requirements",
            "Installation > Requirements > On Linux",
            "Installation > Requirements > On Linux > Options",
            "Installation > Requirements > On a cluster",
            "Installation > Upgrading",
        ]
    );
    // The label before the document title and the field list under it stay
    // with the title; the label before "On Linux" starts its section.
    assert!(
        doc.chunks[0]
            .content
            .starts_with(".. _installation:\n\n============\nInstallation")
    );
    assert!(
        doc.chunks[0]
            .content
            .contains(":Audience: operators\n:Version: 2.1")
    );
    let linux = by_section(&doc, "Installation > Requirements > On Linux");
    assert!(
        linux
            .content
            .starts_with(".. _install-linux:\n\nOn Linux\n--------")
    );
    let options = by_section(&doc, "Installation > Requirements > On Linux > Options");
    assert!(options.content.contains("-q, --quiet     Log only errors."));
}

#[test]
fn rst_long_sections_split_into_parts_without_cutting_blocks() {
    let (source, doc) = chunk(&small(), "install.rst");
    let parts: Vec<&Chunk> = doc
        .chunks
        .iter()
        .filter(|c| {
            c.section
                .starts_with("Installation > Requirements > On Linux (Part ")
        })
        .collect();
    assert!(
        parts.len() >= 2,
        "{:?}",
        doc.chunks.iter().map(|c| &c.section).collect::<Vec<_>>()
    );
    // Every part names the same unit, so a hit on one brings back the rest.
    for part in &parts {
        let (unit, part) = weft_core::retrieval::unit_of(&part.section);
        assert_eq!(unit, "Installation > Requirements > On Linux");
        assert!(part.is_some());
    }
    let whole = |block: &str| {
        assert!(source.contains(block), "{block}");
        assert!(
            doc.chunks.iter().any(|c| c.content.contains(block)),
            "split: {block}"
        );
    };
    whole(
        ".. code-block:: console\n\n   $ sudo apt-get install example-server\n   $ sudo systemctl enable --now example-server\n   $ sudo systemctl status example-server",
    );
    whole("A minimal\none looks like this::\n\n   [server]");
    whole(
        "+------------+---------+----------------------------+\n| Database   | Version | Notes                      |",
    );
    whole(
        "| MySQL      | 8.0+    | with ``utf8mb4`` only      |\n+------------+---------+----------------------------+",
    );
}

#[test]
fn rst_in_txt_files_is_known_by_its_content() {
    let (_, doc) = chunk(&small(), "tutorial.txt");
    assert_eq!(doc.kind.strategy, Strategy::Rst);
    assert_eq!(doc.kind.language, "rst");
    assert_eq!(doc.title, "Writing your first app, part 1");
    by_unit(&doc, "Writing your first app, part 1 > Creating a project");
    // Ordinary prose in a .txt file is still plain text.
    let (_, notes) = chunk(&small(), "notes.txt");
    assert_eq!(notes.kind.strategy, Strategy::Text);
}

#[test]
fn asciidoc_sections_keep_attributes_and_delimited_blocks() {
    let (_, doc) = chunk(&small(), "guide.adoc");
    assert_eq!(doc.kind.strategy, Strategy::AsciiDoc);
    assert_eq!(doc.title, "Operator Guide");
    assert!(doc.chunks.iter().all(|c| c.language == "asciidoc"));
    assert!(
        doc.chunks[0]
            .content
            .starts_with("= Operator Guide\n:toc: left\n:icons: font")
    );
    let linux: Vec<&Chunk> = doc
        .chunks
        .iter()
        .filter(|c| {
            c.section
                .starts_with("Operator Guide > Installation > On Linux")
        })
        .collect();
    assert!(linux.iter().any(|c| c.content.contains(
        "[source,console]\n----\n$ sudo apt-get install example-server\n$ sudo systemctl enable --now example-server\n$ sudo systemctl status example-server\n----"
    )));
    let databases = by_section(&doc, "Operator Guide > Installation > Supported databases");
    assert!(
        databases
            .content
            .contains("|===\n| Database | Version | Notes")
    );
    assert!(databases.content.ends_with("|==="));
    let config: Vec<&Chunk> = doc
        .chunks
        .iter()
        .filter(|c| c.section.starts_with("Operator Guide > Configuration"))
        .collect();
    assert!(config.iter().any(|c| c.content.contains(
        ".Minimal configuration\n[source,toml]\n----\n[server]\nlisten = \"0.0.0.0:8080\"\ndata_dir = \"/var/lib/example\"\n----"
    )));
}

#[test]
fn asciidoc_in_txt_files_is_known_by_its_content() {
    let (_, doc) = chunk(&small(), "git-stash.txt");
    assert_eq!(doc.kind.strategy, Strategy::AsciiDoc);
    assert_eq!(doc.title, "git-stash(1)");
    let examples: Vec<&Chunk> = doc
        .chunks
        .iter()
        .filter(|c| c.section.starts_with("git-stash(1) > EXAMPLES"))
        .collect();
    assert!(examples.iter().any(|c| c.content.contains(
        "----------------------------------------------------------------\n$ git pull\n ..."
    )));
    assert!(examples.iter().any(|c| c.content.ends_with(
        "$ git stash pop\n----------------------------------------------------------------"
    )));
    by_section(&doc, "git-stash(1) > SEE ALSO");
}

#[test]
fn html_is_extracted_then_chunked_as_markdown() {
    let (_, doc) = chunk(&small(), "page.html");
    assert_eq!(doc.title, "Streams — Example Docs");
    let text = doc
        .extracted_text
        .as_deref()
        .expect("HTML chunks refer to extracted text");
    assert!(!text.contains("Home") && !text.contains("Copyright"));
    let readable = by_section(&doc, "Streams > Readable streams");
    assert!(readable.content.contains("fs.createReadStream"));
    by_section(&doc, "Streams > Writable streams");
}

#[test]
fn plain_text_records_its_overlap() {
    let (_, doc) = chunk(&small(), "notes.txt");
    assert!(doc.chunks.len() >= 2);
    assert!(doc.chunks[1..].iter().all(|c| c.overlap_bytes > 0));
    assert!(doc.chunks.iter().all(|c| c.node_type == "paragraphs"));
}

#[test]
fn index_documents_are_flagged_and_stay_whole() {
    let text = "# weft\n\nIntro.\n\n## Install\n\nRun it.\n\n## Use\n\nSearch.\n";
    let doc = small().chunk_text("p", "docs/README.md", text);
    assert!(doc.kind.is_index_doc);
    assert_eq!(doc.chunks.len(), 1);
    assert!(doc.chunks[0].is_index_doc);
    let doc = small().chunk_text("p", "docs/guide.md", text);
    assert!(!doc.kind.is_index_doc);
    assert!(doc.chunks.len() > 1);
}

#[test]
fn declaration_files_are_api_reference() {
    let text = "export declare function parse(input: string): Node;\nexport interface Node { kind: string }\n";
    let doc = small().chunk_text("p", "types/index.d.ts", text);
    assert!(
        doc.chunks
            .iter()
            .all(|c| c.content_type == ContentType::ApiReference)
    );
}

#[test]
fn unparsable_code_falls_back_to_lines_with_a_warning() {
    let garbage = "}}}} class ((( public static void ]]] {{{ ;;; \n".repeat(40);
    let doc = small().chunk_text("p", "Broken.java", &garbage);
    weft_core::invariants::check(&garbage, &doc.chunks).unwrap();
    assert!(doc.chunks.iter().all(|c| c.node_type == "lines"));
    assert!(
        doc.warnings
            .iter()
            .any(|w| w.contains("syntax errors") && w.contains("line windows")),
        "{:?}",
        doc.warnings
    );
}

#[test]
fn minor_syntax_errors_are_chunked_around_with_a_warning() {
    let source = fixture("RateLimiter.java").replace("stored -= 1;", "stored -= ;");
    let doc = small().chunk_text("p", "RateLimiter.java", &source);
    weft_core::invariants::check(&source, &doc.chunks).unwrap();
    assert!(
        doc.warnings
            .iter()
            .any(|w| w.contains("chunked around them")),
        "{:?}",
        doc.warnings
    );
    assert!(
        doc.chunks
            .iter()
            .any(|c| c.section == "RateLimiter.toString")
    );
}

#[test]
fn binary_non_utf8_and_oversize_files_are_refused_with_a_reason() {
    let chunker = small();
    let err = chunker
        .chunk_bytes("p", "img.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
        .unwrap_err();
    assert!(matches!(err, ChunkError::Binary { offset: 8, .. }), "{err}");
    assert!(err.to_string().starts_with("img.png: binary file"));

    let err = chunker
        .chunk_bytes("p", "latin1.txt", b"caf\xe9 au lait")
        .unwrap_err();
    assert!(
        matches!(err, ChunkError::NotUtf8 { offset: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("latin1.txt: not valid UTF-8"));

    let config = ChunkingConfig {
        max_file_bytes: 10,
        ..ChunkingConfig::default()
    };
    let err = Chunker::new(config)
        .unwrap()
        .chunk_bytes("p", "big.md", b"# far too long\n")
        .unwrap_err();
    assert!(err.to_string().contains("chunking.max_file_bytes"), "{err}");
}

#[test]
fn empty_and_blank_files_have_no_chunks() {
    for name in ["a.java", "a.md", "a.txt", "a.html", "a.weird", "a.py"] {
        for text in ["", "\n\n   \n\t"] {
            let doc = small().chunk_text("p", name, text);
            assert!(doc.chunks.is_empty(), "{name} {text:?}: {:?}", doc.chunks);
        }
    }
}

#[test]
fn code_over_the_parse_limit_uses_line_windows() {
    let mut config = ChunkingConfig::default();
    config.code.max_parse_bytes = 1000;
    let source = fixture("RateLimiter.java");
    let doc = Chunker::new(config)
        .unwrap()
        .chunk_text("p", "RateLimiter.java", &source);
    weft_core::invariants::check(&source, &doc.chunks).unwrap();
    assert!(doc.warnings[0].contains("chunking.code.max_parse_bytes"));
    assert!(doc.chunks.iter().all(|c| c.node_type == "lines"));
}

#[test]
fn ids_are_stable_and_computable() {
    let (_, a) = chunk(&small(), "ring.rs");
    let (_, b) = chunk(&small(), "ring.rs");
    assert_eq!(
        a.document_id,
        weft_core::DocumentId::new("fixtures", "ring.rs")
    );
    let ids: Vec<_> = a.chunks.iter().map(Chunk::id).collect();
    assert_eq!(ids, b.chunks.iter().map(Chunk::id).collect::<Vec<_>>());
    assert_eq!(ids[1], weft_core::ChunkId::new(&a.document_id, 1));
}

#[test]
fn the_fingerprint_names_the_settings_and_the_chunker_version() {
    let default = Chunker::new(ChunkingConfig::default()).unwrap();
    let again = Chunker::new(ChunkingConfig::default()).unwrap();
    assert_eq!(default.fingerprint(), again.fingerprint());
    assert!(
        default
            .fingerprint()
            .starts_with(&format!("chunker-{}-", weft_chunking::CHUNKER_VERSION)),
        "{}",
        default.fingerprint()
    );
    let mut config = ChunkingConfig::default();
    config.markdown.max_chars += 1;
    let other = Chunker::new(config).unwrap();
    assert_ne!(default.fingerprint(), other.fingerprint());
}
