//! README's quick start, run as written: every `cargo run --release --bin
//! weft -- …` line of its first `sh` block, in order, with the arguments
//! the README gives (this test's build of `weft` stands in for `cargo run
//! --release --bin weft --`).
//!
//! The commands run in a copy of weft's core crate sources, not in the
//! whole checkout: indexing all of weft with the real model takes minutes
//! on a small machine, and the quick start's question (how chunk ids are
//! computed) is answered by the core crate.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::model_dir;

const PREFIX: &str = "cargo run --release --bin weft -- ";

/// The repository's README.
fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `weft` commands of the README's first `sh` block, as argument lists.
fn quick_start(readme: &str) -> Vec<Vec<String>> {
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README has a ```sh block");
    block
        .lines()
        .filter_map(|line| line.trim().strip_prefix(PREFIX))
        .map(shell_words)
        .collect()
}

/// `line` split as a POSIX shell splits words: double- and single-quoted
/// strings are one word, an unquoted `#` starts a comment.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '#') if word.is_none() => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(quote.is_none(), "unclosed quote in README line: {line}");
    words.extend(word);
    words
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn run(args: &[String], cwd: &Path, data: &Path) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(cwd)
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT_CONFIG")
        .env_remove("WEFT__RERANK__KIND")
        .output()
        .expect("weft runs");
    assert!(
        output.status.success(),
        "weft {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn shell_words_split_as_the_shell_does() {
    assert_eq!(
        shell_words(r#"search "how are chunk ids computed"   # a comment"#),
        ["search", "how are chunk ids computed"]
    );
    assert_eq!(shell_words("status   # the projects"), ["status"]);
    assert_eq!(shell_words("index 'a b'#c"), ["index", "a b#c"]);
    assert_eq!(shell_words(r#"search """#), ["search", ""]);
}

#[test]
fn the_quick_start_runs_as_written() {
    let commands = quick_start(&readme());
    let names: Vec<&str> = commands.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        names,
        ["index", "search", "status"],
        "README's quick start changed: {commands:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let repo: PathBuf = tmp.path().join("weft-core");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/core/src"),
        &repo,
    );
    let data = tmp.path().join("data");

    let index = run(&commands[0], &repo, &data);
    let said = String::from_utf8_lossy(&index.stdout).into_owned()
        + &String::from_utf8_lossy(&index.stderr);
    assert!(said.contains("0 errors"), "index summary: {said}");

    let search = run(&commands[1], &repo, &data);
    let answer = String::from_utf8_lossy(&search.stdout);
    let first = answer.lines().next().unwrap_or_default();
    // Chunk ids are computed in ids.rs (and asked for in chunk.rs).
    assert!(
        first.contains("ids.rs") || first.contains("chunk.rs"),
        "the best hit for {:?} is not where chunk ids are computed:\n{answer}",
        commands[1][1]
    );

    let status = run(&commands[2], &repo, &data);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("projects        1") && status.contains("weft-core"),
        "status does not list the project: {status}"
    );
    assert!(
        status.contains("space on disk"),
        "status does not say the space taken: {status}"
    );
}

/// The `weft` commands of the README's `sh` block under `heading`.
fn block_under(readme: &str, heading: &str) -> Vec<Vec<String>> {
    let section = readme
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("README has no {heading:?}"));
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```sh block under the heading");
    block
        .lines()
        .filter_map(|line| line.trim().strip_prefix("weft "))
        .map(shell_words)
        .collect()
}

/// README's `--dry-run` examples, as written, in a copy of weft's config
/// crate sources: the dry run writes nothing, its JSON counts what the run
/// under a budget then embeds, and a run over its budget is refused.
#[test]
fn the_dry_run_examples_run_as_written() {
    let commands = block_under(&readme(), "### Before paying for it: `--dry-run`");
    assert_eq!(
        commands.len(),
        3,
        "README's dry-run examples changed: {commands:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let repo: PathBuf = tmp.path().join("weft-config");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/config/src"),
        &repo,
    );
    let data = tmp.path().join("data");

    let text = run(&commands[0], &repo, &data);
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(
        said.starts_with("dry run: nothing was indexed and the model was not loaded"),
        "{said}"
    );
    assert!(
        said.contains("weft-config (") && said.contains(" new, "),
        "{said}"
    );
    assert!(!data.exists(), "a dry run created the data directory");

    assert!(commands[1].contains(&"--json".to_owned()));
    let json = common::json(&run(&commands[1], &repo, &data));
    let estimate = &json["estimate"];
    let to_embed = estimate["chunks_to_embed"]
        .as_u64()
        .expect("chunks_to_embed");
    let tokens = estimate["tokens_to_embed"]
        .as_u64()
        .expect("tokens_to_embed");
    assert!(to_embed > 0 && tokens > to_embed, "{estimate}");
    assert_eq!(estimate["sources"][0]["documents"]["unchanged"], 0);
    assert_eq!(estimate["time"]["basis"], "default");

    // The budgeted run, with --json to read its summary.
    let mut budgeted = commands[2].clone();
    budgeted.push("--json".into());
    let summary = &common::json(&run(&budgeted, &repo, &data))["runs"][0];
    let embedded =
        summary["chunks_written"].as_u64().unwrap() - summary["vectors_reused"].as_u64().unwrap();
    assert_eq!(embedded, to_embed, "{summary}");
    assert_eq!(
        summary["tokens_embedded"].as_u64(),
        Some(tokens),
        "{summary}"
    );

    // A change, then a budget it exceeds: refused, nothing indexed.
    let file = repo.join("lib.rs");
    let mut source = std::fs::read_to_string(&file).unwrap();
    source.push_str("\n/// Added after the first run.\npub fn added_later() -> u32 {\n    7\n}\n");
    std::fs::write(&file, source).unwrap();
    let after = common::json(&run(&commands[1], &repo, &data));
    let needed = after["estimate"]["tokens_to_embed"].as_u64().unwrap();
    assert!(needed > 0 && needed < tokens, "{after}");
    assert_eq!(after["estimate"]["time"]["basis"], "measured", "{after}");
    let refused = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "index",
            ".",
            "--max-embed-tokens",
            &(needed - 1).to_string(),
        ])
        .current_dir(&repo)
        .env("WEFT_DATA_DIR", &data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT_CONFIG")
        .output()
        .expect("weft runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "not refused: {stderr}");
    assert!(
        stderr.contains(&format!("would embed about {needed} tokens"))
            && stderr.contains("embedding.max_embed_tokens")
            && stderr.matches("over the budget").count() == 1,
        "{stderr}"
    );
    // A budget of nothing is no budget: refused, naming the flag.
    let zero = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["index", ".", "--max-embed-tokens", "0"])
        .current_dir(&repo)
        .env("WEFT_DATA_DIR", &data)
        .output()
        .expect("weft runs");
    let stderr = String::from_utf8_lossy(&zero.stderr);
    assert_eq!(zero.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-embed-tokens"), "{stderr}");
    let again = common::json(&run(&commands[1], &repo, &data));
    assert_eq!(again["estimate"]["tokens_to_embed"].as_u64(), Some(needed));
}

/// README's `--derive` examples, as written, in a copy of weft's config
/// crate sources and README: the set is derived and kept with a hard copy
/// that hides what it asks, runs beside the baseline, runs again from the
/// file, and compares two configurations on the same queries.
#[test]
fn the_derive_examples_run_as_written() {
    let commands = block_under(&readme(), "### On your own code: `--derive`");
    assert_eq!(
        commands.len(),
        3,
        "README's --derive examples changed: {commands:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let repo: PathBuf = tmp.path().join("cfg");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/config/src"),
        &repo,
    );
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
        repo.join("README.md"),
    )
    .unwrap();
    // The two configurations of the third example: fusion by score and by rank.
    std::fs::write(
        repo.join("a.toml"),
        "[retrieval.fusion]\nmethod = \"score\"\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("b.toml"),
        "[retrieval.fusion]\nmethod = \"rrf\"\n",
    )
    .unwrap();
    let data = tmp.path().join("data");
    // `weft eval` keeps its index beside the default data directory.
    let run = |args: &[String]| {
        let output = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .current_dir(&repo)
            .env("XDG_DATA_HOME", &data)
            .env("WEFT_MODEL_DIR", model_dir())
            .env_remove("WEFT_CONFIG")
            .env_remove("WEFT__RERANK__KIND")
            .output()
            .expect("weft runs");
        assert!(
            output.status.success(),
            "weft {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };

    let first = run(&commands[0]);
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(said.starts_with("Derived "), "{said}");
    for row in [
        "BM25 line windows",
        "weft: the default configuration",
        "cfg (code)",
        "cfg (prose)",
    ] {
        assert!(said.contains(row), "no {row:?} in:\n{said}");
    }
    let set = repo.join("weft-queries.jsonl");
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&set)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(rows.len() >= 20, "{} queries derived", rows.len());
    // The hard copy hides each query's words where it was derived from,
    // and keeps every line where it was.
    let hard = repo.join("weft-queries.hard");
    for row in &rows {
        let path = row["path"].as_str().unwrap();
        let original = std::fs::read_to_string(repo.join(path)).unwrap();
        let copy = std::fs::read_to_string(hard.join(path)).unwrap();
        assert_eq!(original.lines().count(), copy.lines().count(), "{path}");
        let query = row["query"].as_str().unwrap();
        let lead: String = query
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        let start = row["start_line"].as_u64().unwrap() as usize;
        let near: String = copy
            .lines()
            .skip(start.saturating_sub(12))
            .take(14)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            !near.contains(&lead),
            "{path}:{start}: the hard copy still says {lead:?}"
        );
    }

    let mut again = commands[1].clone();
    again.push("--json".into());
    let report = common::json(&run(&again));
    let sections = &report["configs"][0]["sections"];
    assert_eq!(sections[0]["section"], "cfg");
    assert_eq!(sections[0]["figures"]["queries"], rows.len());
    let baseline = &report["baseline"]["sections"][0]["figures"];
    let weft = &sections[0]["figures"];
    assert_eq!(baseline["queries"], rows.len());
    // What weft is for: the whole answer inside the context it packs.
    let answer = |f: &serde_json::Value| {
        assert_eq!(f["packing"][0]["budget"], 2000, "{f}");
        f["packing"][0]["answer_in_context"].as_f64().unwrap()
    };
    assert!(
        answer(weft) > answer(baseline),
        "answer in context at 2000 tokens: weft {weft} against BM25 line windows {baseline}"
    );

    let mut compared = commands[2].clone();
    compared.push("--json".into());
    let report = common::json(&run(&compared));
    let configs = report["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2);
    assert_ne!(configs[0]["data_dir"], configs[1]["data_dir"]);
    assert_eq!(configs[0]["retrieval"]["fusion"]["method"], "score");
    assert_eq!(configs[1]["retrieval"]["fusion"]["method"], "rrf");
    for c in configs {
        assert_eq!(c["sections"][0]["figures"]["queries"], rows.len());
    }
}

/// README's `--branch` examples, as written: a project, a worktree of a
/// branch indexed as its overlay, a search of the branch, the overlay
/// dropped. The tree is a copy of weft's config crate sources in git.
#[test]
fn the_branch_examples_run_as_written() {
    let commands = block_under(&readme(), "### Branches and worktrees: `--branch`");
    assert_eq!(
        commands.len(),
        4,
        "README's --branch examples changed: {commands:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let app = tmp.path().join("app");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/config/src"),
        &app,
    );
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&app, &["init", "-q", "-b", "main"]);
    git(&app, &["add", "-A"]);
    git(&app, &["commit", "-qm", "main"]);
    git(
        &app,
        &["worktree", "add", "-q", "-b", "feature", "../app-feature"],
    );
    // The branch: crawl.rs learns to retry.
    let worktree = tmp.path().join("app-feature");
    let crawl = worktree.join("crawl.rs");
    let mut text = std::fs::read_to_string(&crawl).unwrap();
    text.push_str(
        "\n/// Waits before the next attempt of a failed fetch: exponential backoff\n/// with jitter, doubling from `base_ms` up to `max_ms`.\npub fn retry_delay_ms(attempt: u32, base_ms: u64, max_ms: u64) -> u64 {\n    base_ms.saturating_mul(1 << attempt.min(16)).min(max_ms)\n}\n",
    );
    std::fs::write(&crawl, text).unwrap();
    git(&worktree, &["commit", "-qam", "retry"]);
    let data = tmp.path().join("data");

    let first = run(&commands[0], tmp.path(), &data);
    assert!(String::from_utf8_lossy(&first.stdout).starts_with("app: "));
    let overlay =
        String::from_utf8_lossy(&run(&commands[1], tmp.path(), &data).stdout).into_owned();
    assert!(
        overlay.starts_with("app@feature: 19 documents seen, 1 indexed, 18 unchanged"),
        "{overlay}"
    );
    assert!(overlay.contains("hides it at 1 paths"), "{overlay}");
    let mut search = commands[2].clone();
    search.push("--json".into());
    let found: serde_json::Value =
        serde_json::from_slice(&run(&search, tmp.path(), &data).stdout).unwrap();
    let chunks: Vec<&serde_json::Value> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["spans"].as_array().unwrap())
        .flat_map(|s| s["chunks"].as_array().unwrap())
        .collect();
    // The first document is the branch's crawl.rs, with the new function.
    let first_document = &found["results"][0];
    assert!(
        first_document["spans"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["chunks"].as_array().unwrap())
            .any(|c| c["project"] == "app@feature"
                && c["content"].as_str().unwrap().contains("retry_delay_ms")),
        "{found:#}"
    );
    assert!(
        chunks
            .iter()
            .all(|c| !(c["project"] == "app" && c["uri"] == "crawl.rs")),
        "app's crawl.rs came back through the overlay"
    );
    let dropped =
        String::from_utf8_lossy(&run(&commands[3], tmp.path(), &data).stdout).into_owned();
    assert!(dropped.contains("branch overlay dropped"), "{dropped}");
}
