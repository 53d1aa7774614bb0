//! One 50 MB line, as every kind of file (SECURITY.md, "Hostile input"): no
//! panic, no hang, the invariants hold, memory stays bounded. Its own test
//! binary, so that the peak memory it reads is this test's alone.

use std::time::Instant;

use weft_chunking::{Chunker, ChunkingConfig};

mod common;
use common::{NAMES, peak_rss_mib};

/// One file name per way of cutting (tree-sitter code, TypeScript, markdown,
/// reST, AsciiDoc, HTML, text, line windows); `WEFT_HUGE_LINE_ALL=1` tries
/// every name of [`NAMES`] (each costs seconds of CI on 50 MB).
const KINDS: &[&str] = &[
    "A.java", "a.ts", "a.py", "a.md", "a.rst", "a.adoc", "a.html", "a.txt", "a.weird",
];

#[test]
fn one_fifty_megabyte_line() {
    let chunker = Chunker::new(ChunkingConfig::default()).unwrap();
    // Words without a newline: a minified file, a pasted log line.
    let mut line = String::with_capacity(50 * 1024 * 1024 + 16);
    while line.len() < 50 * 1024 * 1024 {
        line.push_str("token(a, b); ");
    }
    let names = if std::env::var_os("WEFT_HUGE_LINE_ALL").is_some() {
        NAMES
    } else {
        KINDS
    };
    for name in names {
        let started = Instant::now();
        let doc = chunker
            .chunk_bytes("huge", name, line.as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        weft_core::invariants::check(doc.text(&line), &doc.chunks)
            .unwrap_or_else(|v| panic!("{name}: {v}"));
        let largest = doc
            .chunks
            .iter()
            .map(|c| c.content.len())
            .max()
            .unwrap_or(0);
        eprintln!(
            "50 MB line as {name}: {} chunks (largest {largest} bytes) in {} ms",
            doc.chunks.len(),
            started.elapsed().as_millis()
        );
    }
    if let Some(peak) = peak_rss_mib() {
        eprintln!("peak RSS {peak} MiB");
        assert!(peak < 1536, "peak RSS {peak} MiB");
    }
}
