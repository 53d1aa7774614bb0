//! `weft eval` as a user runs it: a small corpus in both variants, a query
//! file in the shared/eval format, the real model and a real data directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{json, model_dir};

fn weft(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT__RERANK__KIND")
        .output()
        .expect("weft runs")
}

/// A Java class whose `retry` method is long (over 50 lines, several
/// chunks), a short class, and a markdown guide. Returns the line range of
/// `retry` and of `Ledger.balance`.
fn write_corpus(root: &Path, with_docs: bool) -> ((u32, u32), (u32, u32)) {
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    let mut java = String::from("package net;\n\npublic class Backoff {\n");
    java.push_str(if with_docs {
        "  /** Retries a failing network call with exponential backoff and jitter. */\n"
    } else {
        "\n"
    });
    let start = java.lines().count() as u32 + 1;
    java.push_str(
        "  public <T> T retry(java.util.concurrent.Callable<T> call) throws Exception {\n",
    );
    java.push_str("    long delayMillis = 100;\n    Exception last = null;\n");
    for attempt in 0..24 {
        write!(
            java,
            "    try {{ return call.call(); }} catch (java.io.IOException e{attempt}) {{ last = e{attempt}; }}\n    \
             Thread.sleep(delayMillis + (long) (Math.random() * delayMillis)); delayMillis = Math.min(delayMillis * 2, 30_000L);\n"
        )
        .unwrap();
    }
    java.push_str("    throw last;\n  }\n");
    let end = java.lines().count() as u32;
    java.push_str("}\n");
    std::fs::write(root.join("net/Backoff.java"), java).unwrap();

    let mut ledger =
        String::from("package net;\n\npublic class Ledger {\n  private final long[] entries;\n\n");
    ledger.push_str("  public Ledger(long[] entries) {\n    this.entries = entries;\n  }\n\n");
    ledger.push_str(if with_docs {
        "  /** Sums every entry of the ledger into the account balance. */\n"
    } else {
        "\n"
    });
    let b_start = ledger.lines().count() as u32 + 1;
    ledger.push_str(
        "  public long balance() {\n    long total = 0;\n    for (long e : entries) {\n      total += e;\n    }\n    return total;\n  }\n",
    );
    let b_end = ledger.lines().count() as u32;
    ledger.push_str("}\n");
    std::fs::write(root.join("net/Ledger.java"), ledger).unwrap();
    std::fs::write(
        root.join("docs/logging.md"),
        "# Logging\n\n## Levels\n\nSet the log level with the LOG_LEVEL environment variable: debug, info, warn or error.\n\n\
         ## Rotation\n\nLog files rotate daily and are kept for two weeks before they are compressed and removed.\n",
    )
    .unwrap();
    ((start, end), (b_start, b_end))
}

fn row(id: &str, query: &str, path: &str, lines: (u32, u32), extra: &str) -> String {
    format!(
        r#"{{"id": "{id}", "query": "{query}", "corpus": "demo", "path": "{path}", "start_line": {}, "end_line": {}, "alt_targets": [], "corpus_root": "src/demo", "hard_root": "nodoc/demo"{extra}}}"#,
        lines.0, lines.1
    )
}

/// The corpus directory (both variants) and a query file.
fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (retry, balance) = write_corpus(&dir.path().join("src/demo"), true);
    let hard = write_corpus(&dir.path().join("nodoc/demo"), false);
    assert_eq!((retry, balance), hard, "the variants keep line numbers");
    let n_lines = retry.1 - retry.0 + 1;
    assert!(n_lines > 50, "the retry method is a long target");
    let queries = [
        row(
            "demo-0",
            "Retries a failing network call with exponential backoff and jitter.",
            "net/Backoff.java",
            retry,
            &format!(r#", "n_lines": {n_lines}"#),
        ),
        row(
            "demo-1",
            "Sums every entry of the ledger into the account balance.",
            "net/Ledger.java",
            balance,
            r#", "n_lines": 7"#,
        ),
        row(
            "demo-2",
            "How long are rotated log files kept?",
            "docs/logging.md",
            (7, 9),
            r#", "long@256": false"#,
        ),
    ];
    let file = dir.path().join("queries.jsonl");
    std::fs::write(&file, queries.join("\n") + "\n").unwrap();
    (dir, file)
}

#[test]
fn eval_reports_the_shared_metrics_and_reuses_its_index() {
    let (corpus, queries) = setup();
    let data = tempfile::tempdir().unwrap();
    let args = [
        "eval",
        queries.to_str().unwrap(),
        "--corpus-dir",
        corpus.path().to_str().unwrap(),
        "--json",
    ];
    let out = json(&weft(&args, data.path()));
    assert_eq!(out["variant"], "hard");
    assert_eq!(out["mode"], "hybrid");
    let index = &out["index"][0];
    assert_eq!(index["project"], "demo-hard");
    assert!(
        index["source"].as_str().unwrap().ends_with("nodoc/demo"),
        "{index}"
    );
    assert_eq!(index["documents_indexed"], 3);
    let demo = &out["corpora"][0];
    assert_eq!(demo["corpus"], "demo");
    assert_eq!(demo["queries"], 3);
    // Three files, distinct topics: every target is found, the code ones first.
    assert_eq!(demo["recall_at_10"], 1.0, "{demo}");
    assert!(demo["recall_at_1"].as_f64().unwrap() >= 2.0 / 3.0, "{demo}");
    let (r1, mrr, ndcg) = (
        demo["recall_at_1"].as_f64().unwrap(),
        demo["mrr_at_10"].as_f64().unwrap(),
        demo["ndcg_at_10"].as_f64().unwrap(),
    );
    assert!(r1 <= mrr && mrr <= ndcg && ndcg <= 1.0, "{demo}");
    // The long target (several chunks): with expansion the whole method is
    // returned, and never less context than without.
    assert_eq!(demo["long_queries"], 1);
    let off = &demo["long_expansion_off"];
    let on = &demo["long_expansion_on"];
    assert_eq!(on["top1_hits"], 1, "{demo}");
    assert_eq!(
        off["top1_hits"], 1,
        "expansion does not change ranks: {demo}"
    );
    assert_eq!(on["coverage_mean"], 1.0, "{on}");
    assert_eq!(on["complete_share"], 1.0, "{on}");
    assert!(
        on["context_tokens_mean"].as_f64().unwrap() >= off["context_tokens_mean"].as_f64().unwrap()
    );
    assert_eq!(out["overall"]["queries"], 3);

    // Again: the index is reused, nothing embedded; the figures are the same.
    let again = json(&weft(&args, data.path()));
    assert_eq!(again["index"][0]["documents_unchanged"], 3);
    assert_eq!(again["index"][0]["chunks_written"], 0);
    assert_eq!(again["corpora"], out["corpora"]);

    // The docs variant is another project; text mode without expansion
    // needs no query embedding and reports no expansion-on figures.
    let docs = json(&weft(
        &[
            "eval",
            queries.to_str().unwrap(),
            "--corpus-dir",
            corpus.path().to_str().unwrap(),
            "--variant",
            "docs",
            "--mode",
            "text",
            "--no-expand",
            "--limit-queries",
            "2",
            "--json",
        ],
        data.path(),
    ));
    assert_eq!(docs["index"][0]["project"], "demo-docs");
    let demo = &docs["corpora"][0];
    assert_eq!(demo["queries"], 2);
    assert_eq!(
        demo["recall_at_1"], 1.0,
        "queries are verbatim doc comments: {demo}"
    );
    assert!(demo["long_expansion_on"].is_null());
    assert!(!demo["long_expansion_off"].is_null());

    // People get tables.
    let text = weft(&args[..args.len() - 1], data.path());
    assert!(text.status.success());
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("nDCG@10") && stdout.contains("demo") && stdout.contains("overall"),
        "{stdout}"
    );
}

#[test]
fn bad_query_files_and_missing_corpora_are_named() {
    let (corpus, queries) = setup();
    let data = tempfile::tempdir().unwrap();
    let dir = corpus.path().to_str().unwrap();
    let run = |args: &[&str]| {
        let o = weft(args, data.path());
        assert!(!o.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&[
        "eval",
        queries.to_str().unwrap(),
        "--corpus-dir",
        "/no/such/dir",
    ]);
    assert!(
        err.contains("corpus demo") && err.contains("/no/such/dir/nodoc/demo"),
        "{err}"
    );
    let err = run(&[
        "eval",
        queries.to_str().unwrap(),
        "--corpus-dir",
        dir,
        "--corpus",
        "zod",
    ]);
    assert!(err.contains("--corpus zod"), "{err}");
    let bad = corpus.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"query\": \"q\", \"corpus\": \"demo\"}\n").unwrap();
    let err = run(&["eval", bad.to_str().unwrap(), "--corpus-dir", dir]);
    assert!(
        err.contains("bad.jsonl:1:") && err.contains("path"),
        "{err}"
    );
    let err = run(&[
        "eval",
        queries.to_str().unwrap(),
        "--corpus-dir",
        dir,
        "--variant",
        "easy",
    ]);
    assert!(err.contains("easy"), "{err}");
}

/// `--derive` names what is wrong and never deletes what it did not write;
/// `--derive-only --json` says what it derived without indexing anything.
#[test]
fn derive_writes_its_set_and_refuses_what_it_cannot_do() {
    let (corpus, _) = setup();
    let data = tempfile::tempdir().unwrap();
    let fails = |args: &[&str]| {
        let o = weft(args, data.path());
        assert!(!o.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = fails(&["eval", "--derive", "/no/such/tree"]);
    assert!(err.contains("--derive /no/such/tree"), "{err}");
    let src = corpus.path().join("src/demo");
    let src = src.to_str().unwrap();
    let err = fails(&["eval", "--derive", src, "--name", "two words"]);
    assert!(err.contains("--name \"two words\""), "{err}");
    // A directory where the hard copy would go that --derive did not write.
    let out = corpus.path().join("set/demo.jsonl");
    std::fs::create_dir_all(corpus.path().join("set/demo.hard")).unwrap();
    std::fs::write(corpus.path().join("set/demo.hard/mine.txt"), "keep me").unwrap();
    let err = fails(&["eval", "--derive", src, out.to_str().unwrap()]);
    assert!(
        err.contains("demo.hard") && err.contains("not a hard copy"),
        "{err}"
    );
    assert!(corpus.path().join("set/demo.hard/mine.txt").is_file());
    // A tree with nothing to ask.
    let empty = corpus.path().join("nodoc/demo/docs");
    let nothing = corpus.path().join("nothing/set.jsonl");
    let err = fails(&[
        "eval",
        "--derive",
        empty.to_str().unwrap(),
        nothing.to_str().unwrap(),
        "--derive-only",
    ]);
    assert!(err.contains("no query could be derived"), "{err}");
    assert!(!nothing.exists() && !corpus.path().join("nothing/set.hard").exists());
    // --config more than once is for eval alone.
    let o = weft(
        &["status", "--config", "a.toml", "--config", "b.toml"],
        data.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only `weft eval`"));

    let out = corpus.path().join("kept/demo.jsonl");
    let o = weft(
        &[
            "eval",
            "--derive",
            src,
            out.to_str().unwrap(),
            "--derive-only",
            "--json",
        ],
        data.path(),
    );
    let said = json(&o);
    assert_eq!(said["corpus"], "demo");
    assert_eq!(said["code_queries"], 2, "{said}");
    assert_eq!(said["counts"]["drop_short_heading"], 3, "{said}");
    let rows = std::fs::read_to_string(&out).unwrap();
    assert!(rows.contains("\"symbol\":\"Ledger.balance\""), "{rows}");
    let hard =
        std::fs::read_to_string(corpus.path().join("kept/demo.hard/net/Ledger.java")).unwrap();
    assert!(!hard.contains("Sums every entry") && hard.contains("long total = 0;"));
    assert_eq!(
        std::fs::read_dir(data.path()).unwrap().count(),
        0,
        "--derive-only indexes nothing"
    );
}
