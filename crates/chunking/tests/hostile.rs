//! Pathological inputs for every chunker (SECURITY.md, "Hostile input"):
//! 10,000-deep nesting of brackets, blocks, lists, quotes and elements in
//! every language and markup; NUL bytes; mixed line endings; byte-order
//! marks; invalid UTF-8 in the middle of a file. Each input is chunked as
//! every kind of file (a language's or a markup's nesting as every language
//! or every markup), on a thread with the default 2 MiB stack (what a
//! worker thread has) and a deadline: no panic, no stack overflow, no hang,
//! the invariants hold; what is refused is refused with an error naming the
//! file and the offset. (One 50 MB line: `huge_line.rs`.)

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use weft_chunking::{ChunkError, Chunker, ChunkingConfig};

mod common;
use common::{NAMES, chunkers};

/// Generous for a debug build on a shared machine; a hang is forever.
const DEADLINE: Duration = Duration::from_secs(120);

const DEPTH: usize = 10_000;

/// Chunks `text` as every kind of file with both test chunkers, each on a
/// fresh thread of the default stack, and checks the invariants.
fn survives(label: &str, text: &str) {
    survives_with(chunkers(), NAMES, label, text);
}

/// As [`survives`], with the default chunker only (the deep shapes: the
/// tiny one adds nothing to nesting, and they are slow in a debug build).
fn survives_deep(label: &str, text: &str) {
    survives_deep_as(NAMES, label, text);
}

/// As [`survives_deep`], as the files `names` only.
fn survives_deep_as(names: &[&'static str], label: &str, text: &str) {
    survives_with(
        vec![Chunker::new(ChunkingConfig::default()).unwrap()],
        names,
        label,
        text,
    );
}

/// The code languages, one file name each.
const CODE: &[&str] = &[
    "A.java", "a.ts", "a.tsx", "a.js", "a.py", "a.rs", "a.go", "a.d.ts", "a.c", "a.hpp", "A.cs",
    "a.rb", "a.php", "a.sh", "A.kt",
];

/// The markup and prose kinds, one file name each.
const MARKUP: &[&str] = &[
    "a.md",
    "README.md",
    "a.html",
    "a.rst",
    "README.rst",
    "a.rst.txt",
    "a.adoc",
    "a.txt",
    "a.weird",
];

fn survives_with(chunkers: Vec<Chunker>, names: &[&'static str], label: &str, text: &str) {
    let text: Arc<str> = Arc::from(text);
    let started = Instant::now();
    let configs = chunkers.len();
    for (c, chunker) in chunkers.into_iter().enumerate() {
        let chunker = Arc::new(chunker);
        for &name in names {
            let one = Instant::now();
            let (tx, rx) = mpsc::channel();
            let (chunker, t) = (chunker.clone(), text.clone());
            std::thread::Builder::new()
                .name(format!("{label} as {name}"))
                .spawn(move || {
                    let doc = chunker.chunk_text("hostile", name, &t);
                    let checked = weft_core::invariants::check(doc.text(&t), &doc.chunks)
                        .map(|()| doc.chunks.len())
                        .map_err(|v| v.to_string());
                    let _ = tx.send(checked);
                })
                .unwrap();
            match rx.recv_timeout(DEADLINE) {
                Ok(Ok(_)) => {
                    if one.elapsed() > Duration::from_secs(1) {
                        eprintln!(
                            "  {label} as {name} (chunker {c}): {} ms",
                            one.elapsed().as_millis()
                        );
                    }
                }
                Ok(Err(v)) => panic!("{label} as {name} (chunker {c}): invariants: {v}"),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{label} as {name} (chunker {c}): no answer in {DEADLINE:?}")
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("{label} as {name} (chunker {c}): the thread panicked")
                }
            }
        }
    }
    eprintln!(
        "{label}: {} bytes as {} kinds x {configs} chunkers in {} ms",
        text.len(),
        names.len(),
        started.elapsed().as_millis()
    );
}

fn nested(open: &str, middle: &str, close: &str) -> String {
    format!("{}{middle}{}", open.repeat(DEPTH), close.repeat(DEPTH))
}

#[test]
fn ten_thousand_deep_brackets() {
    survives_deep("( x10000", &nested("(", "x", ")"));
    survives_deep("[ x10000, unclosed", &"[".repeat(DEPTH));
    survives_deep("{ x10000, unclosed", &"{".repeat(DEPTH));
    survives_deep(
        "nested calls x10000",
        &format!("x = {};\n", nested("f(", "1", ")")),
    );
    survives_deep(
        "nested arrays x10000",
        &format!("const a = {};\n", nested("[", "0", "]")),
    );
    survives_deep(
        "nested generics x10000",
        &format!("let a: {} = 1;\n", nested("Vec<", "u8", ">")),
    );
}

/// Nesting in the syntax of each language: blocks, classes, functions.
#[test]
fn ten_thousand_deep_code_in_each_language() {
    let shapes = [
        // Java, C#, Kotlin, C, C++, Go, Rust, JavaScript, TypeScript, PHP.
        (
            "nested blocks",
            format!("void f() {}\n", nested("{ if (x) ", "return;", "}")),
        ),
        (
            "nested classes",
            format!("{}\n", nested("class A { ", "int x;", "}")),
        ),
        (
            "nested functions",
            nested("function f() { ", "return 1;", "}"),
        ),
        ("rust modules", nested("mod m { ", "fn f() {}", "}")),
        ("go closures", nested("func() { ", "x := 1", "}()")),
        ("c++ namespaces", nested("namespace n { ", "int x;", "}")),
        (
            "kotlin lambdas",
            format!("val f = {}\n", nested("{ ", "1", "}")),
        ),
        (
            "php arrays",
            format!("<?php $a = {};\n", nested("array(", "1", ")")),
        ),
        // Python: brackets (indentation 10,000 deep would be 50 MB).
        (
            "python lists",
            format!("def f():\n    return {}\n", nested("[", "1", "]")),
        ),
        (
            "python lambdas",
            format!("f = {}\n", nested("lambda: (", "1", ")")),
        ),
        // Ruby and shell: keyword blocks.
        ("ruby begin/end", nested("begin\n", "x\n", "end\n")),
        ("ruby blocks", nested("f do\n", "x\n", "end\n")),
        ("shell subshells", nested("$(", "echo", ")")),
        ("shell if/fi", nested("if true; then\n", "echo\n", "fi\n")),
        ("shell groups", nested("{ ", "echo;", " }")),
        (
            "unterminated strings and comments",
            "\"/*'`".repeat(DEPTH / 2),
        ),
    ];
    for (label, text) in shapes {
        survives_deep_as(CODE, label, &text);
    }
}

#[test]
fn ten_thousand_deep_markdown() {
    survives_deep_as(MARKUP, "- x10000", &format!("{}item\n", "- ".repeat(DEPTH)));
    survives_deep_as(
        MARKUP,
        "> x10000",
        &format!("{}quote\n", "> ".repeat(DEPTH)),
    );
    survives_deep_as(
        MARKUP,
        "1. x10000",
        &format!("{}item\n", "1. ".repeat(DEPTH)),
    );
    survives_deep_as(MARKUP, "links x10000", &nested("[", "x", "](u)"));
    survives_deep_as(MARKUP, "images x10000", &nested("![", "x", "](u)"));
    survives_deep_as(MARKUP, "emphasis x10000", &nested("*", "x", "*"));
    survives_deep_as(
        MARKUP,
        "inline html x10000",
        &nested("<span>", "x", "</span>"),
    );
    // A list nested by indentation: 10,000 levels would be 100 MB of
    // indentation; 1,000 here.
    let indented: String = (0..1000)
        .map(|level| format!("{}- item\n", "  ".repeat(level)))
        .collect();
    survives_deep_as(MARKUP, "indented list x1000", &indented);
    let fences: String = (0..DEPTH)
        .map(|i| format!("{}\n", "`".repeat(3 + i % 7)))
        .collect();
    survives_deep_as(MARKUP, "fences x10000", &fences);
}

#[test]
fn ten_thousand_deep_rst_and_asciidoc() {
    // reST: nested bullet lists, block quotes by indentation (1,000 levels:
    // 10,000 would be 50 MB), directives inside directives.
    survives_deep_as(
        MARKUP,
        "rst - x10000",
        &format!("Title\n=====\n\n{}item\n", "- ".repeat(DEPTH)),
    );
    let quotes: String = (0..1000)
        .map(|level| format!("{}quote\n\n", " ".repeat(level * 2)))
        .collect();
    survives_deep_as(
        MARKUP,
        "rst block quotes x1000",
        &format!("Title\n=====\n\n{quotes}"),
    );
    let directives: String = (0..1000)
        .map(|level| format!("{}.. note::\n\n", "   ".repeat(level)))
        .collect();
    survives_deep_as(MARKUP, "rst directives x1000", &directives);
    survives_deep_as(
        MARKUP,
        "rst titles x10000",
        &(0..DEPTH)
            .map(|i| {
                format!(
                    "T{i}\n{}\n",
                    ["=", "-", "~", "^", "\"", "'", "*", "+"][i % 8].repeat(4)
                )
            })
            .collect::<String>(),
    );
    // AsciiDoc: nested list markers, delimited blocks and section levels.
    survives_deep_as(
        MARKUP,
        "adoc * x10000",
        &format!("= T\n\n{} item\n", "*".repeat(DEPTH)),
    );
    let blocks: String = (0..DEPTH)
        .map(|i| {
            format!(
                "{}\n",
                ["====", "----", "****", "____", "--", "|==="][i % 6]
            )
        })
        .collect();
    survives_deep_as(MARKUP, "adoc delimited blocks x10000", &blocks);
    survives_deep_as(
        MARKUP,
        "adoc = x10000",
        &format!("{} Deep\n\ntext\n", "=".repeat(DEPTH)),
    );
}

#[test]
fn ten_thousand_deep_html() {
    survives_deep_as(
        MARKUP,
        "<div> x10000",
        &format!("<main>{}</main>", nested("<div>", "deep", "</div>")),
    );
    survives_deep_as(
        MARKUP,
        "<ul><li> x10000, unclosed",
        &format!("<main>{}deep</main>", "<ul><li>".repeat(DEPTH)),
    );
    survives_deep_as(
        MARKUP,
        "<blockquote> x10000",
        &format!("<article>{}q</article>", "<blockquote>".repeat(DEPTH)),
    );
    survives_deep_as(
        MARKUP,
        "<b><i> x10000",
        &format!("<main><p>{}x</p></main>", "<b><i>".repeat(DEPTH)),
    );
    survives_deep_as(
        MARKUP,
        "<table> x10000",
        &format!("<main>{}x</main>", "<table><tr><td>".repeat(DEPTH)),
    );
    survives_deep_as(
        MARKUP,
        "<pre><code> x10000",
        &format!("<main>{}x</main>", "<pre><code>".repeat(DEPTH)),
    );
}

#[test]
fn nul_bytes_are_refused_as_binary_with_the_offset() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    let text = "class A {\n  int x;\0\n}\n\0\0# heading\0\n";
    for name in NAMES {
        let err = chunker
            .chunk_bytes("hostile", name, text.as_bytes())
            .unwrap_err();
        assert_eq!(
            err,
            ChunkError::Binary {
                uri: name.to_string(),
                offset: 18
            }
        );
        assert!(
            err.to_string().contains(name) && err.to_string().contains("offset 18"),
            "{err}"
        );
    }
    // Text that reaches the chunkers another way (a page) keeps them.
    survives("NUL bytes", text);
    survives("NULs only", &"\0".repeat(DEPTH));
}

#[test]
fn mixed_line_endings() {
    survives(
        "\\n \\r\\n \\r mixed",
        "package a;\r\nclass A {\r  void f() {}\n\r\n  void g() {}\r}\n# Title\r\n\rtext\r\rmore\n",
    );
    survives(
        "mixed in markup",
        "Title\r\n=====\r\r.. note::\r\n\r   x\n= Doc\r\n\r\n== S\r----\rcode\r\n----\n",
    );
    survives("only \\r", &"line\r".repeat(2000));
    survives(
        "\\r\\n\\r\\n paragraphs",
        &"para graph\r\n\r\n".repeat(2000),
    );
    survives("\\n\\r pairs", &"x\n\r".repeat(2000));
    survives("lone \\r at the end", "a\r");
}

#[test]
fn byte_order_marks() {
    survives("BOM first", "\u{feff}package a;\n\nclass A {}\n");
    survives(
        "BOM in the middle",
        "# Title\n\u{feff}\n## Section\n\u{feff}text\u{feff}\n",
    );
    survives("BOMs only", &"\u{feff}".repeat(5000));
    // UTF-16 is not UTF-8: refused with the offset.
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    for bom in [[0xff, 0xfe], [0xfe, 0xff]] {
        let utf16: Vec<u8> = bom
            .into_iter()
            .chain("class A {}".encode_utf16().flat_map(|u| u.to_le_bytes()))
            .collect();
        let err = chunker
            .chunk_bytes("hostile", "A.java", &utf16)
            .unwrap_err();
        assert!(
            matches!(
                err,
                ChunkError::Binary { .. } | ChunkError::NotUtf8 { offset: 0, .. }
            ),
            "{err}"
        );
    }
}

#[test]
fn invalid_utf8_in_the_middle_is_refused_with_its_offset() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    let mut bytes = b"package a;\n\nclass A {\n  // caf".to_vec();
    let offset = bytes.len();
    bytes.extend_from_slice(b"\xe9 au lait\n}\n");
    for name in NAMES {
        let err = chunker.chunk_bytes("hostile", name, &bytes).unwrap_err();
        assert_eq!(
            err,
            ChunkError::NotUtf8 {
                uri: name.to_string(),
                offset
            }
        );
        let text = err.to_string();
        assert!(
            text.contains(name) && text.contains(&format!("offset {offset}")),
            "{text}"
        );
    }
    // Truncated sequences, overlong forms, surrogates, bytes never valid.
    for (bad, at) in [
        (&b"a\xe2\x82"[..], 1),
        (b"a\xc0\xaf", 1),
        (b"ab\xed\xa0\x80b", 2),
        (b"\xf8\x88\x80\x80\x80", 0),
        (b"# T\n\ntext \xff\xfe more", 10),
    ] {
        assert_eq!(
            chunker.chunk_bytes("hostile", "a.md", bad).unwrap_err(),
            ChunkError::NotUtf8 {
                uri: "a.md".into(),
                offset: at
            },
            "{bad:?}"
        );
    }
}

/// tree-sitter-ruby 0.23 keeps a heredoc's word length in one byte of its
/// saved state and asserts when reading it back: a word of 256 bytes or
/// more aborted the whole process (found by the fuzz test). Such a file is
/// cut into line windows, with a warning saying why; every other Ruby file
/// is parsed as before.
#[test]
fn a_ruby_heredoc_with_a_word_too_long_for_its_grammar() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    for (opener, word) in [
        ("<<~", "W".repeat(300)),
        ("<<-", "END_".repeat(80)),
        ("<<", "x".repeat(256)),
        ("<<~\"", format!("{} words\"", "long ".repeat(60))),
    ] {
        let closing = word.trim_end_matches('"');
        let text = format!(
            "class Report\n  def body\n    text = {opener}{word}\n      line one\n      line two\n    {closing}\n    text\n  end\nend\n\ndef after\n  42\nend\n"
        );
        let doc = chunker.chunk_text("demo", "lib/report.rb", &text);
        weft_core::invariants::check(doc.text(&text), &doc.chunks)
            .unwrap_or_else(|e| panic!("{opener}: {e}"));
        assert!(
            doc.warnings
                .iter()
                .any(|w| w.contains("heredoc") && w.contains("ruby")),
            "{opener}: {:?}",
            doc.warnings
        );
    }
    // A heredoc word of ordinary length is parsed: definitions, no warning.
    let text = "class Report\n  def body\n    <<~SQL\n      select 1\n    SQL\n  end\nend\n";
    let doc = chunker.chunk_text("demo", "lib/report.rb", text);
    assert!(doc.warnings.is_empty(), "{:?}", doc.warnings);
}

/// tree-sitter-bash 0.25 reads a brace range with C's `isdigit`, which is
/// undefined (and crashed the process) for a character over U+00FF right
/// after `{` (found by the property tests: `{` and U+DFCCC). Such a file is
/// cut into line windows with a warning; Latin-1 and ordinary braces parse.
#[test]
fn a_shell_brace_before_a_wide_character() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    for text in [
        "{\u{DFCCC}",
        "echo start\nfor i in {1..3}; do echo $i; done\necho {12\u{E0067}x}\n",
        "echo {1..\u{F0000}}\n",
    ] {
        let doc = chunker.chunk_text("demo", "bin/run.sh", text);
        weft_core::invariants::check(doc.text(text), &doc.chunks)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(
            doc.warnings.iter().any(|w| w.contains("shell grammar")),
            "{text:?}: {:?}",
            doc.warnings
        );
    }
    for text in [
        "echo {a,b}\nfor i in {1..3}; do echo $i; done\n",
        "echo {é}\n",
    ] {
        let doc = chunker.chunk_text("demo", "bin/run.sh", text);
        assert!(
            !doc.warnings.iter().any(|w| w.contains("shell grammar")),
            "{text:?}: {:?}",
            doc.warnings
        );
    }
}
