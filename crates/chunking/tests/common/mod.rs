//! What the chunker test binaries share: the fixtures.

#![allow(dead_code)] // each test binary uses part of it

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
