//! The crawler as an organisation-wide job, through the `weft-crawler`
//! binary against a real nats-server: a job killed halfway and started
//! again does not crawl the sources it finished; a job that ran to its
//! end, failed sources and all, is not continued but run again.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_nats::testing::NatsServer;

fn crawler(server: &NatsServer, manifest: &Path, checkouts: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft-crawler"));
    command
        .arg("--manifest")
        .arg(manifest)
        .args(["--json", "--concurrency", "1", "--nats-url"])
        .arg(server.url())
        .arg("--checkout-dir")
        .arg(checkouts)
        .env("WEFT__CRAWL__ALLOW_PRIVATE_NETWORKS", "127.0.0.0/8")
        .env("WEFT__CRAWL__TIMEOUT_SECS", "600")
        .env("WEFT_LOG", "info");
    command
}

/// A site on `listener` that answers every request with one small page.
fn serve_site(listener: TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body =
                "<html><body><main><h1>Site</h1><p>The site's only page.</p></main></body></html>";
            let path = String::from_utf8_lossy(&buf);
            let (status, body) = if path.starts_with("GET / ") || path.starts_with("GET /index") {
                ("200 OK", body)
            } else {
                ("404 Not Found", "")
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

#[test]
fn a_job_killed_halfway_continues_where_it_stopped() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let checkouts = tempfile::tempdir().unwrap();
    for name in ["alpha", "gamma"] {
        let source = dir.path().join(name);
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(
            source.join("guide.md"),
            format!("# {name}\n\nThe {name} guide.\n"),
        )
        .unwrap();
    }
    // The second source is a site that accepts connections and never
    // answers: the job hangs there, after finishing the first.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let manifest = dir.path().join("org.toml");
    std::fs::write(
        &manifest,
        format!(
            "[[sources]]\nsource = \"alpha\"\n\n[[sources]]\nsource = \"http://{addr}/\"\nproject = \"site\"\n\n[[sources]]\nsource = \"gamma\"\n"
        ),
    )
    .unwrap();
    let mut first = crawler(&server, &manifest, checkouts.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = first.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the first source ends");
        if line.contains("[1/3] alpha") {
            break;
        }
    }
    // The crawler now waits on the silent site: kill it (a Job's pod lost).
    std::thread::sleep(Duration::from_millis(500));
    first.kill().unwrap();
    first.wait().unwrap();
    drop(listener);

    // Started again, with the site answering now.
    let listener = TcpListener::bind(addr).unwrap();
    serve_site(listener);
    let out = crawler(&server, &manifest, checkouts.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["resumed"], true, "{json:#}");
    let done: Vec<&str> = json["already_done"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert_eq!(done.len(), 1, "{json:#}");
    assert!(done[0].ends_with("alpha"), "{json:#}");
    let crawled: Vec<&str> = json["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["project"].as_str())
        .collect();
    assert_eq!(crawled.len(), 2, "{json:#}");
    assert!(
        crawled.contains(&"site") && crawled.contains(&"gamma"),
        "{json:#}"
    );

    // That run ran to its end: the next one starts afresh (every source
    // listed again; nothing changed, so nothing is published).
    let out = crawler(&server, &manifest, checkouts.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["resumed"], false, "{json:#}");
    assert_eq!(json["sources"].as_array().unwrap().len(), 3, "{json:#}");
    assert!(
        json["already_done"].as_array().unwrap().is_empty(),
        "{json:#}"
    );
}

#[test]
fn every_source_failing_fails_the_job() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let checkouts = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("org.toml");
    std::fs::write(
        &manifest,
        "[[sources]]\nsource = \"https://127.0.0.1:9/nowhere.git\"\nproject = \"a\"\n",
    )
    .unwrap();
    let out = crawler(&server, &manifest, checkouts.path())
        .env_remove("WEFT__CRAWL__ALLOW_PRIVATE_NETWORKS")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["failed"].as_array().unwrap().len(), 1, "{json:#}");
}

/// `--dry-run` over a manifest: per source the documents and chunks a crawl
/// would send and the tokens the embedders would embed; nothing is
/// published, so the crawl that follows publishes what the dry run counted.
#[test]
fn a_dry_run_of_a_manifest_publishes_nothing_and_counts_what_a_crawl_publishes() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let checkouts = tempfile::tempdir().unwrap();
    for (name, files) in [("alpha", 3), ("beta", 2)] {
        let source = dir.path().join(name);
        std::fs::create_dir_all(&source).unwrap();
        for i in 0..files {
            std::fs::write(
                source.join(format!("page{i}.md")),
                format!("# {name} page {i}\n\n## Setup\n\nHow to set up {name} part {i}.\n"),
            )
            .unwrap();
        }
        std::fs::write(source.join("blob.bin"), [0u8, 1, 2, 0, 255]).unwrap();
    }
    let manifest = dir.path().join("org.toml");
    std::fs::write(
        &manifest,
        "[[sources]]\nsource = \"alpha\"\n\n[[sources]]\nsource = \"beta\"\n",
    )
    .unwrap();

    let out = crawler(&server, &manifest, checkouts.path())
        .arg("--dry-run")
        .env("WEFT__EMBEDDING__PRICE_PER_MILLION_TOKENS", "0.02")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let estimate: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sources = estimate["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2, "{estimate:#}");
    for (source, new) in sources.iter().zip([3, 2]) {
        assert_eq!(source["documents"]["new"], new, "{source:#}");
        assert_eq!(source["documents"]["skipped"], 1, "{source:#}");
        assert!(
            source["chunks_to_embed"].as_u64().unwrap() >= new,
            "{source:#}"
        );
    }
    let tokens = estimate["tokens_to_embed"].as_u64().unwrap();
    assert!(tokens > 0, "{estimate:#}");
    let cost = estimate["cost"].as_f64().unwrap();
    assert!((cost - 0.02 * tokens as f64 / 1e6).abs() < 1e-12);
    assert_eq!(estimate["looked_up_stored"], false);
    assert!(
        estimate["notes"]
            .to_string()
            .contains("embedding.dimension"),
        "{estimate:#}"
    );

    // The text for people: README's command, exactly as written, in the
    // manifest's directory (the server and data directory from the
    // environment).
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("weft-crawler ") && l.contains("--dry-run"))
        .expect("README shows weft-crawler --dry-run");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        words,
        ["weft-crawler", "--manifest", "org.toml", "--dry-run"]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_weft-crawler"))
        .args(&words[1..])
        .current_dir(dir.path())
        .env("WEFT__NATS__URL", server.url())
        .env("WEFT_DATA_DIR", checkouts.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.starts_with("dry run:"),
        "{said}"
    );
    assert!(said.contains("alpha (") && said.contains("3 new"), "{said}");

    // Nothing was published: the crawl publishes every document.
    let out = crawler(&server, &manifest, checkouts.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["resumed"], false, "{summary:#}");
    let published: Vec<u64> = summary["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["documents_published"].as_u64().unwrap())
        .collect();
    // The binary files are published too (the chunkers skip them, which
    // the dry run counts as skipped).
    assert_eq!(published, [3 + 1, 2 + 1], "{summary:#}");
}
