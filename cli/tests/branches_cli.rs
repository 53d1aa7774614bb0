//! Branches and worktrees as overlays, end to end with the real binary,
//! the real model and real git: `weft index REPO --branch B` stores only
//! what differs from the default branch, `--project P@B` reads the branch's
//! files and the base's unchanged ones and never the base's version of a
//! file the branch changed or deleted, it ranks as a full index of the
//! branch does, and a deleted branch (or `--drop`) takes its overlay away.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{json, model_dir};
use serde_json::Value;

const MODULES: usize = 20;

fn module(i: usize, retry: &str) -> String {
    let topics = [
        ("retry", retry.to_owned()),
        (
            "cache",
            "evicts the least recently used entry when full".to_owned(),
        ),
        (
            "parse",
            format!("reads configuration file number {i} into settings"),
        ),
    ];
    let mut text = format!("\"\"\"Module {i} of the fixture.\"\"\"\n\n");
    for (name, what) in topics {
        text.push_str(&format!(
            "def {name}_{i}(value, limit=10):\n    \"\"\"The {name} step of module {i}: {what}.\"\"\"\n    total = 0\n    for step in range(limit):\n        total += step * value\n        if total > 1000:\n            break\n    return total + {i}\n\n\n"
        ));
    }
    text
}

fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository: `main` with MODULES modules; `feature` changes modules 3
/// and 7, deletes module 5 and adds `breaker.py`.
fn repository(root: &Path) -> std::path::PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..MODULES {
        let file = repo.join(format!("module_{i:02}.py"));
        std::fs::write(file, module(i, "waits between attempts with a fixed delay")).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "main"]);
    git(&repo, &["checkout", "-qb", "feature"]);
    for i in [3, 7] {
        std::fs::write(
            repo.join(format!("module_{i:02}.py")),
            module(i, "opens a circuit breaker after five consecutive failures"),
        )
        .unwrap();
    }
    git(&repo, &["rm", "-q", "module_05.py"]);
    std::fs::write(
        repo.join("breaker.py"),
        "class Breaker:\n    \"\"\"Trips after repeated timeouts and half-opens after a cool-down.\"\"\"\n\n    def __init__(self, threshold=5):\n        self.threshold = threshold\n        self.failures = 0\n\n    def record(self, ok):\n        self.failures = 0 if ok else self.failures + 1\n        return self.failures >= self.threshold\n",
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "feature"]);
    git(&repo, &["checkout", "-q", "main"]);
    repo
}

fn weft(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env_remove("WEFT__RERANK__KIND");
    command
}

fn run(data: &Path, args: &[&str]) -> Output {
    weft(data).args(args).output().unwrap()
}

fn failure(o: &Output) -> String {
    assert!(!o.status.success(), "expected a failure");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// (project, uri, start line) of every matched chunk, best first.
fn hits(data: &Path, query: &str, project: Option<&str>, mode: &str) -> Vec<(String, String, u64)> {
    let mut args = vec!["search", query, "--json", "--mode", mode, "--no-expand"];
    if let Some(p) = project {
        args.extend(["--project", p]);
    }
    let out = json(&run(data, &args));
    out["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["spans"].as_array().unwrap().iter())
        .flat_map(|s| s["chunks"].as_array().unwrap().iter())
        .filter(|c| c["matched"] == Value::Bool(true))
        .map(|c| {
            (
                c["project"].as_str().unwrap().to_owned(),
                c["uri"].as_str().unwrap().to_owned(),
                c["start_line"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn projects(data: &Path) -> Vec<String> {
    json(&run(data, &["status", "--json"]))["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_branch_is_an_overlay_that_reads_as_the_branch_and_goes_with_it() {
    let root = tempfile::tempdir().unwrap();
    let repo = repository(root.path());
    let url = format!("file://{}", repo.display());
    let data = root.path().join("data");

    // Nothing to overlay yet, and names that cannot be branches.
    let refused = failure(&run(
        &data,
        &["index", &url, "--project", "demo", "--branch", "feature"],
    ));
    assert!(
        refused.contains("not indexed") && refused.contains("default branch first"),
        "{refused}"
    );
    let refused = failure(&run(&data, &["index", &url, "--branch=--upload-pack=x"]));
    assert!(refused.contains("--branch"), "{refused}");
    for (args, expected) in [
        (
            vec!["index", &url, &url, "--branch", "feature"],
            "--branch names one branch",
        ),
        (
            vec!["index", &url, "--project", "demo@x", "--branch", "feature"],
            "already names branch",
        ),
        (
            vec!["index", "--drop", "demo@feature", "--dry-run"],
            "a dry run drops nothing",
        ),
    ] {
        let refused = failure(&run(&data, &args));
        assert!(refused.contains(expected), "{args:?}: {refused}");
    }

    let main = json(&run(&data, &["index", &url, "--project", "demo", "--json"]));
    assert_eq!(main["runs"][0]["documents_indexed"], MODULES);
    let refused = failure(&run(&data, &["index", "--drop", "demo"]));
    assert!(refused.contains("only a branch overlay"), "{refused}");

    let index_feature = || {
        json(&run(
            &data,
            &[
                "index",
                &url,
                "--project",
                "demo",
                "--branch",
                "feature",
                "--json",
            ],
        ))
    };
    // The overlay: the two changed modules and the new file, nothing else;
    // the unchanged functions of the changed modules keep their vectors.
    let overlay = index_feature();
    let run0 = &overlay["runs"][0];
    assert_eq!(run0["project"], "demo@feature", "{run0:#}");
    assert_eq!(run0["documents_indexed"], 3, "{run0:#}");
    assert_eq!(run0["overlay"]["base"], "demo");
    assert_eq!(run0["overlay"]["branch"], "feature");
    assert_eq!(
        run0["overlay"]["hidden"], 4,
        "two changed, one added, one deleted"
    );
    assert!(run0["vectors_reused"].as_u64().unwrap() >= 4, "{run0:#}");
    assert_eq!(projects(&data), ["demo", "demo@feature"]);

    // Again, unchanged: nothing read into it, no model.
    let again = index_feature();
    assert_eq!(again["runs"][0]["documents_indexed"], 0, "{again:#}");
    assert_eq!(again["runs"][0]["model_loaded"], false);

    let hidden = ["module_03.py", "module_05.py", "module_07.py"];
    let queries = [
        "opens a circuit breaker after consecutive failures",
        "The retry step of module 3: waits between attempts with a fixed delay",
        "reads configuration file number 5 into settings",
        "evicts the least recently used entry",
        "trips after repeated timeouts",
    ];
    for mode in ["vector", "text", "hybrid"] {
        for q in queries {
            let found = hits(&data, q, Some("demo@feature"), mode);
            assert!(!found.is_empty(), "{mode} {q}");
            for (project, uri, _) in &found {
                assert!(
                    !(project == "demo" && hidden.contains(&uri.as_str())),
                    "{mode} {q:?}: the base's {uri} came back through the overlay: {found:?}"
                );
                assert!(project == "demo" || project == "demo@feature", "{found:?}");
            }
        }
    }
    let breaker = hits(&data, queries[0], Some("demo@feature"), "hybrid");
    assert_eq!(breaker[0].0, "demo@feature", "{breaker:?}");
    assert!(
        breaker
            .iter()
            .any(|(p, uri, _)| p == "demo@feature" && uri == "module_03.py"),
        "{breaker:?}"
    );
    let unchanged = hits(
        &data,
        "reads configuration file number 12 into settings",
        Some("demo@feature"),
        "text",
    );
    assert_eq!(
        (unchanged[0].0.as_str(), unchanged[0].1.as_str()),
        ("demo", "module_12.py")
    );
    // The base is intact, and a search of every project reads no branch.
    let base = hits(&data, queries[2], Some("demo"), "text");
    assert_eq!(base[0].1, "module_05.py", "{base:?}");
    assert!(
        hits(&data, queries[0], None, "hybrid")
            .iter()
            .all(|(p, _, _)| p == "demo"),
        "a search of every project read the branch"
    );

    // The same ranking as a full index of the branch (vector search: the
    // overlay asks for as many more hits as it hides).
    let checkout = root.path().join("feature");
    let cloned = Command::new("git")
        .args(["clone", "-q", "-b", "feature", &url])
        .arg(&checkout)
        .output()
        .unwrap();
    assert!(cloned.status.success());
    std::fs::remove_dir_all(checkout.join(".git")).unwrap();
    let full = root.path().join("full");
    json(&run(
        &full,
        &[
            "index",
            checkout.to_str().unwrap(),
            "--project",
            "whole",
            "--json",
        ],
    ));
    for q in queries {
        let lines = |h: Vec<(String, String, u64)>| -> Vec<(String, u64)> {
            h.into_iter().map(|(_, uri, line)| (uri, line)).collect()
        };
        assert_eq!(
            lines(hits(&data, q, Some("demo@feature"), "vector")),
            lines(hits(&full, q, Some("whole"), "vector")),
            "{q}"
        );
    }

    // A directory with another branch checked out is not the branch.
    let refused = failure(&run(
        &data,
        &[
            "index",
            repo.to_str().unwrap(),
            "--project",
            "demo",
            "--branch",
            "feature",
        ],
    ));
    assert!(refused.contains("checked out"), "{refused}");

    // A worktree, with a change not committed: read whole, compared with
    // the base by content.
    let worktree = root.path().join("wt");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "wt",
            worktree.to_str().unwrap(),
            "feature",
        ],
    );
    std::fs::write(
        worktree.join("module_12.py"),
        module(
            12,
            "hands the request to a bulkhead with its own thread pool",
        ),
    )
    .unwrap();
    let wt = json(&run(
        &data,
        &[
            "index",
            worktree.to_str().unwrap(),
            "--project",
            "demo",
            "--branch",
            "wt",
            "--json",
        ],
    ));
    assert_eq!(wt["runs"][0]["documents_indexed"], 4, "{wt:#}");
    assert_eq!(wt["runs"][0]["overlay"]["hidden"], 5, "{wt:#}");
    let bulkhead = hits(
        &data,
        "bulkhead with its own thread pool",
        Some("demo@wt"),
        "text",
    );
    assert_eq!(
        (bulkhead[0].0.as_str(), bulkhead[0].1.as_str()),
        ("demo@wt", "module_12.py")
    );

    // The branch deleted on the remote: the next run drops its overlay.
    git(&repo, &["branch", "-D", "feature"]);
    let gone = index_feature();
    assert_eq!(gone["runs"][0]["overlay"]["dropped"], true, "{gone:#}");
    assert_eq!(projects(&data), ["demo", "demo@wt"]);
    let refused = failure(&run(
        &data,
        &["search", "breaker", "--project", "demo@feature"],
    ));
    assert!(refused.contains("not indexed"), "{refused}");
    // The worktree removed: dropped by name.
    let dropped = json(&run(&data, &["index", "--drop", "demo@wt", "--json"]));
    assert_eq!(dropped["runs"][0]["overlay"]["dropped"], true);
    assert_eq!(projects(&data), ["demo"]);
    let base = hits(&data, queries[2], Some("demo"), "text");
    assert_eq!(base[0].1, "module_05.py", "the base survives its branches");
}
