//! What the distributed crawler refuses (SECURITY.md), through the
//! `weft-crawler` binary against a real nats-server: local repositories
//! (`file://`) and loopback or metadata addresses for git unless
//! configured, manifest paths that leave the manifest's directory; and
//! credentials in a git URL never appear in its output, logs or errors.

use std::path::Path;
use std::process::Command;

use weft_nats::testing::NatsServer;

const TOKEN: &str = "SECRET-TOKEN-4b1d2e9f";

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// Runs the crawler on `manifest`; returns (success, its JSON summary,
/// stdout and stderr).
fn crawl(
    server: &NatsServer,
    manifest: &Path,
    env: &[(&str, &str)],
) -> (bool, serde_json::Value, String) {
    let checkouts = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weft-crawler"))
        .arg("--manifest")
        .arg(manifest)
        .arg("--json")
        .arg("--nats-url")
        .arg(server.url())
        .arg("--checkout-dir")
        .arg(checkouts.path())
        .env("WEFT_LOG", "debug")
        .envs(env.iter().copied())
        .output()
        .expect("weft-crawler runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let text = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), json, text)
}

#[test]
fn local_repositories_and_internal_addresses_are_refused_and_tokens_never_shown() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(repo.join("README.md"), "# Repo\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "--quiet", "-m", "first"]);
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("guide.md"), "# Guide\n\nRead me.\n").unwrap();
    let manifest = dir.path().join("org.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[sources]]\nsource = \"file://{}\"\nproject = \"local\"\n\n\
             [[sources]]\nsource = \"https://weft:{TOKEN}@127.0.0.1:9/org/x.git\"\nproject = \"loopback\"\n\n\
             [[sources]]\nsource = \"https://{TOKEN}@169.254.169.254/x.git\"\nproject = \"metadata\"\n\n\
             [[sources]]\nsource = \"git://example.org/x.git\"\nproject = \"plain-git\"\n\n\
             [[sources]]\nsource = \"docs\"\nproject = \"docs\"\n",
            repo.display()
        ),
    )
    .unwrap();
    let (ok, json, text) = crawl(&server, &manifest, &[]);
    // One bad source does not fail the job: it exits 0 and lists them.
    assert!(ok, "the job did its work:\n{text}");
    let failed = json["failed"].as_array().unwrap();
    let error_of = |project: &str| {
        failed
            .iter()
            .find(|f| f["project"] == project)
            .map(|f| f["error"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("{project} did not fail: {json:#}"))
    };
    for (project, expected) in [
        ("local", "local repository"),
        ("local", "crawl.git_protocols"),
        ("loopback", "127.0.0.1 is a loopback address"),
        ("metadata", "169.254.169.254 is a link-local address"),
        ("plain-git", "the git transport is not allowed"),
    ] {
        let error = error_of(project);
        assert!(error.contains(expected), "{project}: {error}");
        eprintln!("  {project}: {error}");
    }
    // The directory source went through.
    assert_eq!(json["sources"][0]["project"], "docs", "{json:#}");
    assert_eq!(json["sources"][0]["documents_published"], 1);
    // The token is nowhere: not in the summary, the errors or the logs.
    assert!(!text.contains(TOKEN), "the token leaked:\n{text}");
    assert!(text.contains("https://***@127.0.0.1:9/org/x.git"), "{text}");

    // Allowed by configuration, the local repository is crawled.
    let (ok, json, _) = crawl(
        &server,
        &manifest,
        &[("WEFT__CRAWL__GIT_PROTOCOLS", "https,file")],
    );
    assert!(ok, "the other sources still fail, listed");
    assert_eq!(json["failed"].as_array().unwrap().len(), 3, "{json:#}");
    assert_eq!(
        json["resumed"], false,
        "the first run ran to its end: {json:#}"
    );
    assert!(
        json["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["project"] == "local" && s["documents_published"] == 1),
        "{json:#}"
    );
}

#[test]
fn manifest_paths_stay_under_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("org.toml");
    for (source, expected) in [
        ("../outside", "leaves the manifest's directory"),
        ("docs/../../etc", "leaves the manifest's directory"),
        ("docs\\u0000x", "control characters"),
    ] {
        std::fs::write(
            &manifest,
            format!("[[sources]]\nsource = \"{source}\"\nproject = \"p\"\n"),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_weft-crawler"))
            .arg("--manifest")
            .arg(&manifest)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("sources[0].source") && text.contains(expected),
            "{source}: {text}"
        );
    }
}
