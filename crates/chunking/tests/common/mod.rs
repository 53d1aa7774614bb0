//! What the chunker test binaries share: the fixtures, the file names that
//! select each chunker, hostile text pieces and the chunker configurations.

#![allow(dead_code)] // each test binary uses part of it

use weft_chunking::{Chunker, ChunkingConfig};

/// Every fixture file, one per chunker and grammar (tests/fixtures).
pub const FIXTURES: &[&str] = &[
    "RateLimiter.java",
    "store.ts",
    "overloads.ts",
    "Button.tsx",
    "queue.js",
    "graph.py",
    "ring.rs",
    "server.go",
    "guide.md",
    "page.html",
    "notes.txt",
    "geometry.c",
    "widget.hpp",
    "Inventory.cs",
    "cache.rb",
    "Repository.php",
    "deploy.sh",
    "Scheduler.kt",
    "install.rst",
    "tutorial.txt",
    "guide.adoc",
    "git-stash.txt",
];

/// The text of a fixture.
pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One file name per chunker (and per tree-sitter grammar).
pub const NAMES: &[&str] = &[
    "A.java",
    "a.ts",
    "a.tsx",
    "a.js",
    "a.py",
    "a.rs",
    "a.go",
    "a.md",
    "a.html",
    "a.txt",
    "a.weird",
    "README.md",
    "a.d.ts",
    "a.c",
    "a.hpp",
    "A.cs",
    "a.rb",
    "a.php",
    "a.sh",
    "A.kt",
    "a.rst",
    "a.adoc",
    "README.rst",
    "a.rst.txt",
];

/// The pieces of text that matter to parsers and splitters: brackets,
/// comment and string delimiters, keywords, markup of every format,
/// line endings, and characters grammars treat specially.
pub const HOSTILE_PIECES: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ";",
    ",",
    ".",
    "=",
    "=>",
    "<",
    ">",
    "/",
    "*",
    "/**",
    "*/",
    "//",
    "#",
    "##",
    "# ",
    "---\n",
    "+++\n",
    "```",
    "```\n",
    "\"",
    "'",
    "`",
    "\\",
    "@",
    "class ",
    "def ",
    "fn ",
    "func ",
    "function ",
    "import ",
    "package ",
    "export ",
    "interface ",
    "impl ",
    "return ",
    "if ",
    "<div>",
    "</div>",
    "<h2>",
    "</h2>",
    "<main>",
    "<p>",
    "====\n",
    "----\n",
    "~~~~\n",
    "Title\n",
    ".. ",
    ".. note::\n",
    ".. code-block:: c\n",
    "::\n",
    ":field: ",
    "-a, --all  ",
    "+---+\n",
    "| x |\n",
    "|===\n",
    "[source,java]\n",
    ".Title\n",
    "= ",
    "== ",
    "+\n",
    "....\n",
    "--\n",
    "#include ",
    "namespace ",
    "template <",
    "public:",
    "<?php",
    "end\n",
    "\n",
    "\n\n",
    "\r\n",
    "\t",
    "  ",
    "    ",
    "x",
    "foo",
    "Bar",
    "é",
    "漢字",
    "😀",
    "\u{feff}",
    "\u{2028}",
    "\u{a0}",
    "\u{0}",
];

/// The default chunker, and one with tiny sizes that makes every
/// splitting path run on small inputs.
pub fn chunkers() -> Vec<Chunker> {
    let mut tiny = ChunkingConfig::default();
    tiny.code.max_chars = 40;
    tiny.code.min_chars = 10;
    tiny.markdown.max_chars = 30;
    tiny.markdown.index_max_chars = 50;
    tiny.text.target_chars = 30;
    tiny.text.overlap_chars = 10;
    tiny.lines.window_lines = 3;
    tiny.lines.overlap_lines = 1;
    tiny.lines.max_chars = 25;
    vec![
        Chunker::new(ChunkingConfig::default()).unwrap(),
        Chunker::new(tiny).unwrap(),
    ]
}

/// Peak resident memory of this process, in MiB (Linux): the huge-input
/// tests run in their own binaries so that it is theirs alone.
pub fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}
