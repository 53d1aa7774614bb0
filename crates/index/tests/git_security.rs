//! Git sources cannot be turned against the machine that indexes them
//! (SECURITY.md): the distributed crawler's policy refuses local
//! repositories, remote helpers and internal addresses; credentials in a
//! URL reach the server (a real HTTP git server on loopback that demands
//! them) but no log, error, summary, catalog entry or `.git/config`; a
//! repository's symlinks and crafted paths cannot reach outside its
//! checkout.

mod common;

use std::path::Path;
use std::process::Command;

use common::http::{Reply, Server};
use weft_config::CrawlConfig;
use weft_index::IndexOptions;
use weft_sources::{GitError, GitPolicy, GitRepo, SourceSpec, checkout_name};

const TOKEN: &str = "tok-7f3a9c1e55d2";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with a README and a guide, committed.
fn repository(dir: &Path) {
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(dir.join("README.md"), "# Widget\n\nA widget.\n").unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(
        dir.join("docs/guide.md"),
        "# Guide\n\nInstall the widget with apt.\n",
    )
    .unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "--quiet", "-m", "first"]);
}

fn crawler_policy(protocols: &[&str], allow: &[&str]) -> GitPolicy {
    GitPolicy::from_crawl_config(&CrawlConfig {
        git_protocols: protocols.iter().map(|p| p.to_string()).collect(),
        allow_private_networks: allow.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn the_crawler_refuses_local_repositories_helpers_and_internal_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    repository(&repo);
    let marker = dir.path().join("pwned");
    let checkout = dir.path().join("checkout");
    let server = Server::start("127.0.0.1:0", |_| Reply::not_found());
    let port = server.addr.port();
    let default = GitPolicy::from_crawl_config(&CrawlConfig::default()).unwrap();
    let with_http = crawler_policy(&["https", "ssh", "http"], &[]);
    let cases: Vec<(String, &GitPolicy, &str)> = vec![
        (
            format!("file://{}", repo.display()),
            &default,
            "a local repository",
        ),
        (repo.display().to_string(), &default, "a local repository"),
        (
            format!("ext::sh -c touch% {}", marker.display()),
            &default,
            "remote helpers",
        ),
        (
            format!("ext::sh -c touch% {}", marker.display()),
            &with_http,
            "remote helpers",
        ),
        ("fd::3".into(), &default, "remote helpers"),
        (
            format!("-u touch {}", marker.display()),
            &default,
            "cannot start with '-'",
        ),
        ("git://example.org/x.git".into(), &default, "git transport"),
        (
            format!("http://127.0.0.1:{port}/x.git"),
            &default,
            "the http transport",
        ),
        (
            format!("http://127.0.0.1:{port}/x.git"),
            &with_http,
            "127.0.0.1 is a loopback address",
        ),
        (
            format!("http://localhost:{port}/x.git"),
            &with_http,
            "localhost resolves to",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/x.git"),
            &with_http,
            "IPv4-mapped",
        ),
        (
            "https://169.254.169.254/x.git".into(),
            &default,
            "169.254.169.254 is a link-local address",
        ),
        (
            "ssh://git@10.0.0.1/x.git".into(),
            &default,
            "10.0.0.1 is a private address",
        ),
        (
            "git@192.168.1.1:x.git".into(),
            &default,
            "192.168.1.1 is a private",
        ),
    ];
    for (url, policy, expected) in &cases {
        let err = GitRepo::with_policy(url, &checkout, (*policy).clone())
            .sync()
            .unwrap_err();
        assert!(matches!(err, GitError::Refused { .. }), "{url}: {err}");
        assert!(err.to_string().contains(expected), "{url}: {err}");
        eprintln!("  {url}: refused: {err}");
    }
    assert!(!marker.exists(), "a remote helper ran");
    assert!(!checkout.exists(), "nothing was cloned");
    assert_eq!(server.hits(), 0, "nothing connected to loopback");

    // `weft index` on the user's machine clones a local repository, and
    // still never runs a remote helper.
    let local = GitRepo::new(&format!("file://{}", repo.display()), &checkout);
    local.sync().unwrap();
    assert!(checkout.join("docs/guide.md").exists());
    let err = GitRepo::new(
        &format!("ext::sh -c touch% {}", marker.display()),
        &dir.path().join("c2"),
    )
    .sync()
    .unwrap_err();
    assert!(err.to_string().contains("remote helpers"), "{err}");
    assert!(!marker.exists());
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Serves the bare repository `bare` over git's dumb HTTP protocol at
/// `/repo.git/`, to clients that send `weft:TOKEN` by basic auth.
fn serve_repository(bare: &Path) -> Server {
    let bare = bare.to_owned();
    let expected = format!("Basic {}", base64(format!("weft:{TOKEN}").as_bytes()));
    Server::start("127.0.0.1:0", move |r| {
        if r.header("authorization") != Some(expected.as_str()) {
            return Reply::Full {
                status: "401 Unauthorized",
                headers: vec![("WWW-Authenticate".into(), "Basic realm=\"git\"".into())],
                body: Vec::new(),
            };
        }
        let path = r.target.split('?').next().unwrap_or_default();
        let Some(relative) = path.strip_prefix("/repo.git/") else {
            return Reply::not_found();
        };
        if relative.split('/').any(|p| p == "..") {
            return Reply::not_found();
        }
        match std::fs::read(bare.join(relative)) {
            Ok(body) => Reply::ok("application/octet-stream", body),
            Err(_) => Reply::not_found(),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_a_url_reach_the_server_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    repository(&work);
    let bare = dir.path().join("bare.git");
    git(
        dir.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(&bare, &["update-server-info"]);
    let server = serve_repository(&bare);
    let url = format!("http://weft:{TOKEN}@{}/repo.git", server.addr);

    // The crawler's policy, loopback allowed: the clone works, so the
    // credentials reached git; they are nowhere on disk or in messages.
    let checkout = dir.path().join("checkout");
    let policy = crawler_policy(&["https", "http"], &["127.0.0.1/32"]);
    let repo = GitRepo::with_policy(&url, &checkout, policy.clone());
    let head = repo.sync().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(head.len(), 40);
    assert!(checkout.join("docs/guide.md").exists());
    let config = std::fs::read_to_string(checkout.join(".git/config")).unwrap();
    assert!(!config.contains(TOKEN), "{config}");
    assert!(config.contains(&format!("url = http://{}/repo.git", server.addr)));
    assert!(!format!("{repo:?}").contains(TOKEN));
    assert!(!repo.display_url().contains(TOKEN));
    // A second sync fetches with the same credentials.
    assert_eq!(repo.sync().unwrap(), head);
    assert!(
        server.requests().iter().all(|r| !r.target.contains(TOKEN)),
        "the token is never in a request line"
    );

    // Failures do not show it either: a wrong path, a wrong token.
    for bad in [
        format!("http://weft:{TOKEN}@{}/missing.git", server.addr),
        format!("http://weft:{TOKEN}x@{}/repo.git", server.addr),
        format!("http://{TOKEN}@{}/repo.git", server.addr),
    ] {
        let err = GitRepo::with_policy(&bad, &dir.path().join("bad"), policy.clone())
            .sync()
            .unwrap_err()
            .to_string();
        assert!(!err.contains(TOKEN), "{err}");
        assert!(err.contains(&server.addr.to_string()), "{err}");
        eprintln!("  failed clone, redacted: {err}");
    }

    // Through `weft index` (the local policy): the summary, the errors and
    // the catalog's recorded source hold no token.
    let data = tempfile::tempdir().unwrap();
    let indexer = common::indexer(data.path(), common::model());
    let spec = SourceSpec::parse(&url).unwrap();
    assert!(!spec.display().contains(TOKEN));
    let options = IndexOptions {
        project: Some("widget".into()),
        ..Default::default()
    };
    let summary = indexer.index(&spec, &options).await.unwrap();
    assert_eq!(summary.documents_indexed, 2, "{summary:#?}");
    let again = indexer.index(&spec, &options).await.unwrap();
    assert_eq!(again.documents_seen, 0, "diffed, not walked: {again:#?}");
    drop(indexer);
    let shown = format!("{summary:?}{again:?}");
    assert!(!shown.contains(TOKEN), "{shown}");
    let state = {
        let stores = common::stores(data.path());
        stores.catalog.project("widget").await.unwrap().unwrap()
    };
    assert!(!state.source.contains(TOKEN), "{}", state.source);
    assert_eq!(state.source, format!("http://***@{}/repo.git", server.addr));
    let missing =
        SourceSpec::parse(&format!("http://weft:{TOKEN}@{}/gone.git", server.addr)).unwrap();
    let indexer = common::indexer(data.path(), common::model());
    let err = indexer
        .index(&missing, &options)
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains(TOKEN), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_cannot_reach_outside_its_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "the crawler's private key\n").unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    repository(&repo);
    std::os::unix::fs::symlink(&secret, repo.join("docs/leak.md")).unwrap();
    std::os::unix::fs::symlink("/etc", repo.join("etc")).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "--quiet", "-m", "links"]);
    let url = format!("file://{}", repo.display());

    // Cloned: the links are plain files holding their targets.
    let data = tempfile::tempdir().unwrap();
    let indexer = common::indexer(data.path(), common::model());
    let options = IndexOptions {
        project: Some("links".into()),
        ..Default::default()
    };
    let spec = SourceSpec::Git(url.clone());
    indexer.index(&spec, &options).await.unwrap();
    let checkout = data.path().join("sources").join(checkout_name("links"));
    for link in ["docs/leak.md", "etc"] {
        let meta = std::fs::symlink_metadata(checkout.join(link)).unwrap();
        assert!(meta.is_file(), "{link} is a plain file");
    }
    drop(indexer);
    let stores = common::stores(data.path());
    let texts = stores.text.clone();
    let hits = texts
        .search(
            "private key",
            &weft_core::retrieval::SearchFilter::default(),
            10,
        )
        .await
        .unwrap();
    assert!(
        hits.iter()
            .all(|h| !h.chunk.content.contains("private key")),
        "the secret was indexed: {hits:?}"
    );

    // A checkout made before (with symlinks) loses them on the next sync.
    let old = dir.path().join("old-checkout");
    git(
        dir.path(),
        &["clone", "--quiet", url.as_str(), old.to_str().unwrap()],
    );
    assert!(
        std::fs::symlink_metadata(old.join("docs/leak.md"))
            .unwrap()
            .is_symlink()
    );
    GitRepo::new(&url, &old).sync().unwrap();
    let leak = std::fs::symlink_metadata(old.join("docs/leak.md")).unwrap();
    assert!(leak.is_file());
    assert_eq!(
        std::fs::read_to_string(old.join("docs/leak.md")).unwrap(),
        secret.display().to_string()
    );
}

#[test]
fn crafted_paths_that_leave_the_checkout_are_refused() {
    // A tree with a `..` entry, written with `hash-object --literally`
    // (git itself refuses to make one): what a hostile server could send.
    let dir = tempfile::tempdir().unwrap();
    repository(dir.path());
    let old = git(dir.path(), &["rev-parse", "HEAD"]).trim().to_owned();
    let blob = git(dir.path(), &["rev-parse", "HEAD:README.md"])
        .trim()
        .to_owned();
    let mut tree = b"100644 ..\0".to_vec();
    tree.extend((0..20).map(|i| u8::from_str_radix(&blob[2 * i..2 * i + 2], 16).unwrap()));
    let tree_file = dir.path().join("tree.bin");
    std::fs::write(&tree_file, &tree).unwrap();
    let tree_id = git(
        dir.path(),
        &[
            "hash-object",
            "-t",
            "tree",
            "--literally",
            "-w",
            tree_file.to_str().unwrap(),
        ],
    )
    .trim()
    .to_owned();
    let new = git(
        dir.path(),
        &["commit-tree", &tree_id, "-p", &old, "-m", "evil"],
    )
    .trim()
    .to_owned();
    let repo = GitRepo::new("file:///unused", dir.path());
    let err = repo.changes(&old, &new).unwrap_err();
    assert!(matches!(err, GitError::UnsafePath { .. }), "{err}");
    assert!(err.to_string().contains("\"..\""), "{err}");
}

#[test]
fn checkout_names_never_leave_the_sources_directory() {
    for project in [
        "",
        ".",
        "..",
        "...",
        "../x",
        "a/../../b",
        "/etc",
        "a\0b",
        "x\n",
    ] {
        let name = checkout_name(project);
        assert!(
            !name.is_empty()
                && !name.chars().all(|c| c == '.')
                && !name.contains(['/', '\\', '\0']),
            "{project:?} -> {name:?}"
        );
        assert_eq!(Path::new(&name).components().count(), 1, "{name}");
    }
    // Names that needed no change keep it; others never collide.
    assert_eq!(checkout_name("guava"), "guava");
    assert_eq!(checkout_name("a.b-c_d"), "a.b-c_d");
    assert_ne!(checkout_name("a b"), checkout_name("a_b"));
    assert_ne!(checkout_name("a/b"), checkout_name("a b"));
}
