//! Fuzzing every chunker (SECURITY.md, "Hostile input"). For each format and
//! language weft chunks, a proptest of `WEFT_FUZZ_CASES` cases (10,000 by
//! default, which CI runs) mixing arbitrary bytes, parser-hostile token soup
//! and mutated real files: the fixtures of its kind and, when
//! `WEFT_REAL_CORPUS_DIRS` is set (as `tools/test.sh` sets it from
//! `tools/fetch-real-corpora.sh`), real files with its extensions. Every
//! input goes through `chunk_bytes` as the pipeline reads a file; what that
//! refuses (binary, not UTF-8) must be refused with a named error, and is
//! then chunked anyway as lossily decoded text. Chunking runs on a worker
//! thread of the default 2 MiB stack, with a deadline per input: no panic,
//! no hang, no stack overflow, and `weft_core::invariants::check` holds.
//! Cases alternate between the default chunker and the tiny-sized one of
//! the property tests, so that every splitting path runs.
//!
//! Each chunker prints one summary line (`fuzz <chunker>: …`). The long run
//! (SECURITY.md):
//! `WEFT_FUZZ_CASES=200000 cargo test --release -p weft-chunking --test fuzz -- --nocapture`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use weft_chunking::{ChunkError, Chunker};

mod common;
use common::{HOSTILE_PIECES, chunkers, fixture};

/// How long one input may take before the test calls it a hang. Generous,
/// for a debug build on a shared machine; a hang is forever.
const DEADLINE: Duration = Duration::from_secs(20);

/// The most real files one chunker mutates, and the largest.
const MAX_REAL_SEEDS: usize = 32;
const MAX_SEED_BYTES: u64 = 256 * 1024;

/// The most bytes of a seed one case starts from: a window of the file.
const WINDOW_BYTES: usize = 3000;

fn cases() -> u32 {
    std::env::var("WEFT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// Every file of `WEFT_REAL_CORPUS_DIRS` small enough to seed, by path.
fn real_files() -> &'static Vec<PathBuf> {
    static FILES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut out = Vec::new();
        if let Ok(dirs) = std::env::var("WEFT_REAL_CORPUS_DIRS") {
            for dir in dirs.split(':').filter(|d| !d.is_empty()) {
                walk(Path::new(dir), &mut out);
            }
        }
        out.sort();
        out
    })
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, out),
            Ok(t) if t.is_file() && entry.metadata().is_ok_and(|m| m.len() <= MAX_SEED_BYTES) => {
                out.push(path)
            }
            _ => {}
        }
    }
}

/// The seeds of one chunker: its fixtures, then up to [`MAX_REAL_SEEDS`]
/// real files ending in one of `extensions`, spread over the corpora.
fn seeds(fixtures: &[&str], extensions: &[&str]) -> (Vec<Vec<u8>>, usize) {
    let mut out: Vec<Vec<u8>> = fixtures.iter().map(|f| fixture(f).into_bytes()).collect();
    let matching: Vec<&PathBuf> = real_files()
        .iter()
        .filter(|p| {
            let name = p.to_string_lossy();
            extensions.iter().any(|e| name.ends_with(e))
        })
        .collect();
    let step = matching.len().div_ceil(MAX_REAL_SEEDS).max(1);
    let mut real = 0;
    for path in matching.into_iter().step_by(step) {
        if let Ok(bytes) = std::fs::read(path) {
            out.push(bytes);
            real += 1;
        }
    }
    (out, real)
}

/// One hostile piece: a piece of text that matters to a parser, or raw
/// bytes that matter to decoding (BOMs, truncated sequences, NUL, CR).
fn hostile_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        12 => prop::sample::select(HOSTILE_PIECES.to_vec()).prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::sample::select(vec![
            &b"\xef\xbb\xbf"[..],
            b"\xff\xfe",
            b"\xfe\xff",
            b"\xc3",
            b"\xe2\x80",
            b"\xf0\x9f\x98",
            b"\xed\xa0\x80",
            b"\xc0\xaf",
            b"\x80",
            b"\r",
            b"\0",
            b"\x1b[2J",
            b"\x0c",
        ])
        .prop_map(<[u8]>::to_vec),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ]
}

/// One edit of a seed.
#[derive(Debug, Clone)]
enum Edit {
    Insert(Vec<u8>),
    Delete,
    Duplicate,
    Truncate,
    /// A piece of another seed spliced in.
    Splice(usize),
    FlipBit(u8),
}

fn edit(seeds: usize) -> impl Strategy<Value = (Edit, prop::sample::Index, prop::sample::Index)> {
    let edit = prop_oneof![
        4 => prop::collection::vec(hostile_piece(), 1..6).prop_map(|v| Edit::Insert(v.concat())),
        2 => Just(Edit::Delete),
        2 => Just(Edit::Duplicate),
        1 => Just(Edit::Truncate),
        2 => (0..seeds).prop_map(Edit::Splice),
        2 => (0u8..8).prop_map(Edit::FlipBit),
    ];
    (
        edit,
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    )
}

/// A window of a seed (from a line start, at most [`WINDOW_BYTES`]) with
/// random edits.
fn mutated(seeds: Arc<Vec<Vec<u8>>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    (
        0..n,
        any::<prop::sample::Index>(),
        prop::collection::vec(edit(n), 1..10),
    )
        .prop_map(move |(seed, at, edits)| {
            let seed_bytes = &seeds[seed];
            let mut start = at.index(seed_bytes.len().max(1)).min(seed_bytes.len());
            // Windows of small files start at the top; else at a line start.
            if seed_bytes.len() <= WINDOW_BYTES {
                start = 0;
            } else if let Some(nl) = seed_bytes[..start].iter().rposition(|&b| b == b'\n') {
                start = nl + 1;
            }
            let end = (start + WINDOW_BYTES).min(seed_bytes.len());
            let mut bytes = seed_bytes[start..end].to_vec();
            for (edit, a, b) in edits {
                let i = a.index(bytes.len() + 1);
                let j = (i + b.index(512)).min(bytes.len());
                match edit {
                    Edit::Insert(piece) => {
                        bytes.splice(i..i, piece);
                    }
                    Edit::Delete => {
                        bytes.drain(i..j);
                    }
                    Edit::Duplicate => {
                        let copy = bytes[i..j].to_vec();
                        bytes.splice(j..j, copy);
                    }
                    Edit::Truncate => bytes.truncate(i),
                    Edit::Splice(other) => {
                        let from = &seeds[other];
                        let k = b.index(from.len() + 1);
                        let l = (k + a.index(400)).min(from.len());
                        bytes.splice(i..i, from[k..l].iter().copied());
                    }
                    Edit::FlipBit(bit) => {
                        if let Some(byte) = bytes.get_mut(i) {
                            *byte ^= 1 << bit;
                        }
                    }
                }
            }
            bytes
        })
}

/// One input: arbitrary bytes, hostile token soup, or a mutated seed.
fn input(seeds: Arc<Vec<Vec<u8>>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..1500),
        1 => prop::collection::vec(hostile_piece(), 0..300).prop_map(|v| v.concat()),
        3 => mutated(seeds),
    ]
}

/// What one input came to.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Chunked as the bytes of a file.
    Chunked,
    /// Refused as binary (a NUL byte), then chunked as lossy text.
    Binary,
    /// Refused as not UTF-8, then chunked as lossy text.
    NotUtf8,
}

/// Chunks `bytes` as the file `name` and checks the invariants.
fn check(chunker: &Chunker, name: &str, bytes: &[u8]) -> Result<Outcome, String> {
    let outcome = match chunker.chunk_bytes("fuzz", name, bytes) {
        Ok(doc) => {
            let source = std::str::from_utf8(bytes)
                .map_err(|e| format!("chunk_bytes accepted bytes that are not UTF-8: {e}"))?;
            weft_core::invariants::check(doc.text(source), &doc.chunks)
                .map_err(|v| format!("chunk_bytes: {v}"))?;
            return Ok(Outcome::Chunked);
        }
        Err(e @ ChunkError::Binary { offset, .. }) => {
            if bytes.get(offset) != Some(&0) || !e.to_string().contains(name) {
                return Err(format!("a wrong refusal: {e}"));
            }
            Outcome::Binary
        }
        Err(e @ ChunkError::NotUtf8 { offset, .. }) => {
            if std::str::from_utf8(&bytes[..offset]).is_err()
                || std::str::from_utf8(bytes).is_ok()
                || !e.to_string().contains(name)
            {
                return Err(format!("a wrong refusal: {e}"));
            }
            Outcome::NotUtf8
        }
        Err(e) => return Err(format!("an unexpected refusal: {e}")),
    };
    // What another path (a page, a lossy reader) would hand the chunker.
    let text = String::from_utf8_lossy(bytes);
    let doc = chunker.chunk_text("fuzz", name, &text);
    weft_core::invariants::check(doc.text(&text), &doc.chunks)
        .map_err(|v| format!("chunk_text of the lossy text: {v}"))?;
    Ok(outcome)
}

/// A job for the worker: which chunker, the input, where to answer.
type Job = (usize, Vec<u8>, mpsc::Sender<Result<Outcome, String>>);

/// A thread with the default stack that chunks what it is sent (keeping
/// its tree-sitter parsers between inputs) and catches panics.
fn worker(name: &'static str) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name(format!("fuzz {name}"))
        .spawn(move || {
            let chunkers = chunkers();
            for (which, bytes, answer) in rx {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    check(&chunkers[which], name, &bytes)
                }))
                .unwrap_or_else(|panic| {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(format!("panicked: {message}"))
                });
                let _ = answer.send(result);
            }
        })
        .expect("a worker thread");
    tx
}

#[derive(Default)]
struct Tally {
    executions: usize,
    by_outcome: BTreeMap<&'static str, usize>,
    slowest: Duration,
}

/// Fuzzes the chunker that `name` selects, seeded by `fixtures` and the
/// real files ending in `extensions`.
fn fuzz(label: &str, name: &'static str, fixtures: &[&str], extensions: &[&str]) {
    let (seeds, real) = seeds(fixtures, extensions);
    let seeds = Arc::new(seeds);
    let cases = cases();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        // Shrinking runs the chunker many more times (a hang, each time
        // for the whole deadline): bounded; the failing input is shown.
        max_shrink_iters: 256,
        max_shrink_time: 120_000,
        ..Config::default()
    });
    let worker = std::cell::RefCell::new(worker(name));
    let tally = std::cell::RefCell::new(Tally::default());
    let started = Instant::now();
    let result = runner.run(&input(seeds.clone()), |bytes| {
        let which = tally.borrow().executions % 2;
        let (answer, answered) = mpsc::channel();
        let t = Instant::now();
        let sent = worker.borrow().send((which, bytes.clone(), answer));
        let outcome = match sent {
            Ok(()) => match answered.recv_timeout(DEADLINE) {
                Ok(outcome) => outcome,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // Leave the stuck worker behind; a new one goes on.
                    *worker.borrow_mut() = self::worker(name);
                    Err(format!("no answer within {DEADLINE:?}: a hang"))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => Err("the worker died".into()),
            },
            Err(_) => Err("the worker died".into()),
        };
        let mut tally = tally.borrow_mut();
        tally.executions += 1;
        tally.slowest = tally.slowest.max(t.elapsed());
        let key = match outcome {
            Ok(Outcome::Chunked) => "chunked",
            Ok(Outcome::Binary) => "refused as binary",
            Ok(Outcome::NotUtf8) => "refused as not UTF-8",
            Err(e) => {
                let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(3000)]).into_owned();
                return Err(TestCaseError::fail(format!(
                    "{label} ({name}, {} chunker): {e}\ninput: {shown:?}",
                    ["default", "tiny"][which]
                )));
            }
        };
        *tally.by_outcome.entry(key).or_default() += 1;
        Ok(())
    });
    let tally = tally.into_inner();
    let outcomes: Vec<String> = tally
        .by_outcome
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    eprintln!(
        "fuzz {label}: {} executions ({cases} cases), {}; seeds {} ({real} real files); \
         slowest input {} ms; {:.1} s: {}",
        tally.executions,
        outcomes.join(", "),
        seeds.len(),
        tally.slowest.as_millis(),
        started.elapsed().as_secs_f64(),
        if result.is_ok() { "ok" } else { "FAILED" }
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

// Every chunker: a label, the file name that selects it, its fixtures, the
// extensions of its real seeds.

#[test]
fn fuzz_java() {
    fuzz("java", "A.java", &["RateLimiter.java"], &[".java"]);
}

#[test]
fn fuzz_typescript() {
    fuzz(
        "typescript",
        "a.ts",
        &["store.ts", "overloads.ts"],
        &[".ts"],
    );
}

#[test]
fn fuzz_typescript_declarations() {
    fuzz("typescript .d.ts", "a.d.ts", &["overloads.ts"], &[".d.ts"]);
}

#[test]
fn fuzz_tsx() {
    fuzz("tsx", "a.tsx", &["Button.tsx"], &[".tsx"]);
}

#[test]
fn fuzz_javascript() {
    fuzz("javascript", "a.js", &["queue.js"], &[".js", ".cjs"]);
}

#[test]
fn fuzz_python() {
    fuzz("python", "a.py", &["graph.py"], &[".py"]);
}

#[test]
fn fuzz_rust() {
    fuzz("rust", "a.rs", &["ring.rs"], &[".rs"]);
}

#[test]
fn fuzz_go() {
    fuzz("go", "a.go", &["server.go"], &[".go"]);
}

#[test]
fn fuzz_c() {
    fuzz("c", "a.c", &["geometry.c"], &[".c", ".h"]);
}

#[test]
fn fuzz_cpp() {
    fuzz("c++", "a.hpp", &["widget.hpp"], &[".cpp", ".cc", ".hpp"]);
}

#[test]
fn fuzz_csharp() {
    fuzz("c#", "A.cs", &["Inventory.cs"], &[".cs"]);
}

#[test]
fn fuzz_ruby() {
    fuzz("ruby", "a.rb", &["cache.rb"], &[".rb"]);
}

#[test]
fn fuzz_php() {
    fuzz("php", "a.php", &["Repository.php"], &[".php"]);
}

#[test]
fn fuzz_shell() {
    fuzz("shell", "a.sh", &["deploy.sh"], &[".sh"]);
}

#[test]
fn fuzz_kotlin() {
    fuzz("kotlin", "A.kt", &["Scheduler.kt"], &[".kt"]);
}

#[test]
fn fuzz_markdown() {
    fuzz("markdown", "a.md", &["guide.md"], &[".md"]);
}

#[test]
fn fuzz_readme() {
    fuzz("readme (index)", "README.md", &["guide.md"], &["README.md"]);
}

#[test]
fn fuzz_rst() {
    fuzz(
        "restructuredtext",
        "a.rst",
        &["install.rst", "tutorial.txt"],
        &[".rst"],
    );
}

#[test]
fn fuzz_asciidoc() {
    fuzz(
        "asciidoc",
        "a.adoc",
        &["guide.adoc", "git-stash.txt"],
        &[".adoc"],
    );
}

#[test]
fn fuzz_html() {
    fuzz("html", "a.html", &["page.html"], &[".html"]);
}

#[test]
fn fuzz_text() {
    // `.txt` is sniffed: reST and AsciiDoc seeds reach those chunkers too.
    fuzz(
        "text",
        "a.txt",
        &["notes.txt", "tutorial.txt", "git-stash.txt"],
        &[".txt"],
    );
}

#[test]
fn fuzz_line_windows() {
    fuzz(
        "line windows",
        "a.weird",
        &["notes.txt"],
        &[".json", ".yaml", ".xml"],
    );
}
