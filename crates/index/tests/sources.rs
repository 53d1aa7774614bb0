//! Git and documentation-site sources end to end: a local repository cloned
//! by `file://` URL and re-indexed from its diff, and a site served from a
//! loopback HTTP server, crawled with robots.txt and sitemap.xml.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use weft_index::IndexOptions;
use weft_sources::SourceSpec;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_repository_is_cloned_then_reindexed_from_its_diff() {
    let repo = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "--quiet", "--initial-branch=main"]);
    common::write_fixture(repo.path());
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "--quiet", "-m", "first"]);
    let url = format!("file://{}", repo.path().display());
    let spec = SourceSpec::parse(&url).unwrap();
    assert!(matches!(spec, SourceSpec::Git(_)));
    let options = IndexOptions {
        project: Some("repo".into()),
        ..Default::default()
    };
    let indexer = common::indexer(data.path(), common::model());
    let first = indexer.index(&spec, &options).await.unwrap();
    assert_eq!(first.documents_indexed, 3, "{first:#?}");
    let first_rev = first.revision.clone().expect("a revision");
    assert!(data.path().join("sources/repo/.git").exists());

    // One file changes, one is deleted: the re-index reads just the diff.
    std::fs::write(
        repo.path().join("docs/deploy.md"),
        "# Deployment guide\n\n## Monitoring\n\nScrape `/metrics` with Prometheus every fifteen seconds.\n",
    )
    .unwrap();
    git(repo.path(), &["rm", "--quiet", "web/src/lru-cache.ts"]);
    git(repo.path(), &["commit", "--quiet", "-am", "second"]);
    let second = indexer.index(&spec, &options).await.unwrap();
    assert_ne!(second.revision.as_deref(), Some(first_rev.as_str()));
    assert_eq!(
        second.documents_seen, 1,
        "only the changed file is read: {second:#?}"
    );
    assert_eq!(second.documents_indexed, 1);
    assert_eq!(second.documents_deleted, 1, "{second:#?}");
    // Nothing new: no document read at all.
    let third = indexer.index(&spec, &options).await.unwrap();
    assert_eq!(third.documents_seen, 0, "{third:#?}");
    drop(indexer);

    let stores = common::stores(data.path());
    let response = common::search(&stores, "prometheus metrics scraping", 3).await;
    assert!(response.results[0].uri.ends_with("deploy.md"));
    assert!(
        response.results[0].spans[0]
            .chunks
            .iter()
            .any(|c| c.chunk.content.contains("Prometheus"))
    );
    let state = stores.catalog.project("repo").await.unwrap().unwrap();
    assert_eq!(state.revision, second.revision);
}

/// `crawl.max_checkout_bytes`: the checkout synced least recently is
/// removed when another would take the cache past the budget, and its
/// source, crawled again, is cloned anew and still read from its diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkouts_over_the_disk_budget_are_removed_least_recent_first_and_diffed_after() {
    let repos = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut specs = Vec::new();
    for name in ["alpha", "beta"] {
        let repo = repos.path().join(name);
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "--quiet", "--initial-branch=main"]);
        common::write_fixture(&repo);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "--quiet", "-m", "first"]);
        specs.push(SourceSpec::parse(&format!("file://{}", repo.display())).unwrap());
    }
    let options = |project: &str| IndexOptions {
        project: Some(project.into()),
        ..Default::default()
    };

    // Measure one checkout, then allow a little more than one.
    let mut config = weft_config::WeftConfig::default();
    let indexer = common::indexer_with(data.path(), common::model(), config.clone());
    indexer.index(&specs[0], &options("alpha")).await.unwrap();
    let alpha_dir = data.path().join("sources/alpha");
    let one = weft_sources::disk_usage(&alpha_dir);
    drop(indexer);
    config.crawl.max_checkout_bytes = Some(one + one / 2);
    let indexer = common::indexer_with(data.path(), common::model(), config);

    // beta's checkout takes the cache past the budget: alpha, synced
    // least recently, goes once beta is read; beta stays.
    let beta = indexer.index(&specs[1], &options("beta")).await.unwrap();
    assert_eq!(beta.documents_indexed, 3, "{beta:#?}");
    assert!(!alpha_dir.exists(), "alpha's checkout was removed");
    assert!(data.path().join("sources/beta/.git").exists());
    let cache = weft_sources::CheckoutCache::new(data.path().join("sources"), None);
    assert!(
        cache.usage() <= one + one / 2,
        "{} > {}",
        cache.usage(),
        one + one / 2
    );

    // alpha changes: cloned again, it is still read from its diff (the
    // clone has the history), and now beta goes.
    let alpha_repo = repos.path().join("alpha");
    std::fs::write(
        alpha_repo.join("docs/deploy.md"),
        "# Deployment guide\n\n## Monitoring\n\nScrape `/metrics` with Prometheus.\n",
    )
    .unwrap();
    git(&alpha_repo, &["commit", "--quiet", "-am", "second"]);
    let alpha = indexer.index(&specs[0], &options("alpha")).await.unwrap();
    assert_eq!(alpha.documents_seen, 1, "read from its diff: {alpha:#?}");
    assert_eq!(alpha.documents_indexed, 1);
    assert!(alpha_dir.join(".git").exists());
    assert!(!data.path().join("sources/beta").exists());
}

fn html(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><title>{title}</title></head><body>\
         <nav><a href=\"/docs/\">Home</a></nav><main>{body}</main></body></html>"
    )
}

/// Serves a small documentation site on a loopback port until the test
/// ends and returns its base URL. robots.txt forbids /docs/private/; the
/// sitemap lists a page no link reaches; /blog is outside the start
/// directory; one link leaves the origin.
fn serve_site() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let sitemap = format!(
        "<?xml version=\"1.0\"?><urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\
         <url><loc>{base}/docs/orphan.html</loc></url><url><loc>{base}/docs/install.html</loc></url></urlset>"
    );
    let pages: Vec<(&'static str, &'static str, String)> = vec![
        (
            "/robots.txt",
            "text/plain",
            "User-agent: *\nDisallow: /docs/private/\n".into(),
        ),
        ("/sitemap.xml", "application/xml", sitemap),
        (
            "/docs/",
            "text/html; charset=utf-8",
            html(
                "Docs",
                "<h1>Widget docs</h1><p>Start with <a href=\"install.html\">installing</a> \
                or read the <a href=\"private/roadmap.html\">roadmap</a>.</p>\
                <p><a href=\"https://elsewhere.example/x\">elsewhere</a> <a href=\"/blog/post.html\">blog</a></p>",
            ),
        ),
        (
            "/docs/install.html",
            "text/html",
            html(
                "Installing",
                "<h1>Installing the widget</h1><h2>From packages</h2>\
                <p>Install the widget with the system package manager: apt install widget.</p>\
                <h2>From source</h2><p>Build the widget with cargo build --release and copy the binary into your PATH.</p>",
            ),
        ),
        (
            "/docs/private/roadmap.html",
            "text/html",
            html("Roadmap", "<p>secret plans</p>"),
        ),
        (
            "/blog/post.html",
            "text/html",
            html("Blog", "<p>outside the docs</p>"),
        ),
        (
            "/docs/orphan.html",
            "text/html",
            html(
                "Garbage collection",
                "<h1>Tuning garbage collection</h1>\
                <p>Lower the heap limit to make the collector run more often and pause less.</p>",
            ),
        ),
    ];
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(read_half) = stream.try_clone() else {
                continue;
            };
            let mut reader = BufReader::new(read_half);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                    break;
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .to_owned();
            let (status, content_type, body) = match pages.iter().find(|(p, _, _)| *p == path) {
                Some((_, ct, body)) => ("200 OK", *ct, body.clone()),
                None => ("404 Not Found", "text/plain", "not found".to_owned()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documentation_site_is_crawled_within_robots_and_sitemap() {
    let site = serve_site();
    let data = tempfile::tempdir().unwrap();
    // A site on this machine: loopback must be allowed (crawl_security.rs).
    let indexer = common::indexer_with(
        data.path(),
        common::model(),
        common::loopback_crawl_config(),
    );
    let spec = SourceSpec::parse(&format!("{site}/docs/")).unwrap();
    assert!(matches!(spec, SourceSpec::Site(_)));
    let summary = indexer
        .index(
            &spec,
            &IndexOptions {
                project: Some("widget-docs".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    drop(indexer);
    let uris: Vec<String> = indexer_records(data.path())
        .await
        .iter()
        .map(|u| u.trim_start_matches(&site).to_owned())
        .collect();
    assert!(uris.contains(&"/docs/".to_owned()), "{uris:?}");
    assert!(uris.contains(&"/docs/install.html".to_owned()), "{uris:?}");
    assert!(
        uris.contains(&"/docs/orphan.html".to_owned()),
        "sitemap page: {uris:?}"
    );
    assert!(
        !uris.iter().any(|u| u.contains("private")),
        "robots.txt: {uris:?}"
    );
    assert!(
        !uris.iter().any(|u| u.contains("blog")),
        "outside the start directory: {uris:?}"
    );
    assert!(
        summary
            .skipped
            .iter()
            .any(|s| s.uri.contains("private") && s.reason.contains("robots")),
        "{summary:#?}"
    );

    let stores = common::stores(data.path());
    let response = common::search(&stores, "how to install the widget from source", 3).await;
    assert!(
        response.results[0].uri.ends_with("/docs/install.html"),
        "{}",
        response.results[0].uri
    );
}

#[tokio::test]
async fn an_unreachable_site_is_an_error_naming_it() {
    let data = tempfile::tempdir().unwrap();
    let indexer = common::indexer_with(
        data.path(),
        common::model(),
        common::loopback_crawl_config(),
    );
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/docs/");
    let err = indexer
        .index(&SourceSpec::parse(&url).unwrap(), &IndexOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&url), "{err}");
}

async fn indexer_records(data: &Path) -> Vec<String> {
    let stores = common::stores(data);
    stores
        .catalog
        .documents(Some("widget-docs"))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect()
}
