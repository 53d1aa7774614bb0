//! The site crawler cannot be turned on the network it runs in (SECURITY.md):
//! real HTTP servers on loopback ports, crawled with the default policy
//! (public addresses only) and with `crawl.allow_private_networks`;
//! redirects to internal addresses, names that resolve to them (a lookup
//! override), an answer that changes after the check (DNS rebinding), a
//! gzip bomb, oversize, slow and silent responses, refused media types,
//! and an explicit proxy. Every refused address is shown never to have
//! been connected to (the servers count their connections).
//!
//! `cargo test -p weft-index --test crawl_security -- --nocapture`
//! prints every address form tried and its outcome.

mod common;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::http::{Reply, Server, html};
use indicatif::ProgressBar;
use url::Url;
use weft_config::CrawlConfig;
use weft_index::Issue;
use weft_sources::net::{Lookup, LookupFuture};
use weft_sources::{CrawlError, CrawledPage, crawl, crawl_with};

/// Fixed answers for test names; any other name does not resolve.
struct Names(HashMap<&'static str, Vec<IpAddr>>);

impl Names {
    fn new(entries: &[(&'static str, &str)]) -> Arc<Self> {
        let mut map: HashMap<&'static str, Vec<IpAddr>> = HashMap::new();
        for (name, ip) in entries {
            map.entry(name).or_default().push(ip.parse().unwrap());
        }
        Arc::new(Self(map))
    }
}

impl Lookup for Names {
    fn lookup(&self, host: &str) -> LookupFuture {
        let answer = self.0.get(host).cloned().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{host}: no such test name"),
            )
        });
        Box::pin(async move { answer })
    }
}

fn allowing(networks: &[&str]) -> CrawlConfig {
    CrawlConfig {
        allow_private_networks: networks.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

async fn run(
    url: &str,
    config: &CrawlConfig,
    lookup: Option<Arc<dyn Lookup>>,
) -> Result<(Vec<CrawledPage>, Vec<Issue>), CrawlError> {
    let url = Url::parse(url).unwrap();
    let progress = ProgressBar::hidden();
    match lookup {
        Some(lookup) => crawl_with(&url, config, &progress, lookup).await,
        None => crawl(&url, config, &progress).await,
    }
}

/// A docs site: `/docs/` links to `/docs/guide.html`.
fn docs_site(bind: &str) -> Server {
    Server::start(bind, |r| match r.target.as_str() {
        "/docs/" => Reply::ok(
            "text/html",
            html("Docs", "<h1>Docs</h1><a href=\"guide.html\">guide</a>"),
        ),
        "/docs/guide.html" => {
            Reply::ok("text/html", html("Guide", "<h1>Guide</h1><p>Read me.</p>"))
        }
        _ => Reply::not_found(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_site_needs_allow_private_networks() {
    let site = docs_site("127.0.0.1:0");
    let start = format!("{}/docs/", site.base());
    let err = run(&start, &CrawlConfig::default(), None)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("127.0.0.1 is a loopback address")
            && text.contains("crawl.allow_private_networks"),
        "{text}"
    );
    assert_eq!(site.hits(), 0, "nothing connected to the refused address");

    let (pages, issues) = run(&start, &allowing(&["127.0.0.0/8"]), None)
        .await
        .unwrap();
    let urls: Vec<&str> = pages.iter().map(|p| p.url.path()).collect();
    assert_eq!(urls, ["/docs/", "/docs/guide.html"], "{issues:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_of_an_internal_address_is_refused_before_connecting() {
    // Servers on the loopback addresses, counting connections.
    let v4 = docs_site("127.0.0.1:0");
    let port = v4.addr.port();
    let v6 = std::net::TcpListener::bind(("::1", port))
        .ok()
        .map(|l| Server::on(l, |_| Reply::ok("text/html", html("v6", "reached"))));
    let any = std::net::TcpListener::bind(("0.0.0.0", 0)).unwrap();
    let any_port = any.local_addr().unwrap().port();
    let any = Server::on(any, |_| Reply::ok("text/html", html("any", "reached")));
    let forms = [
        format!("http://127.0.0.1:{port}/docs/"),
        format!("http://2130706433:{port}/docs/"),
        format!("http://0x7f.1:{port}/docs/"),
        format!("http://0x7f000001:{port}/docs/"),
        format!("http://0177.0.0.1:{port}/docs/"),
        format!("http://127.1:{port}/docs/"),
        format!("http://127.0.0.1.:{port}/docs/"),
        format!("http://[::ffff:127.0.0.1]:{port}/docs/"),
        format!("http://[::ffff:7f00:1]:{port}/docs/"),
        format!("http://[::127.0.0.1]:{port}/docs/"),
        format!("http://[64:ff9b::7f00:1]:{port}/docs/"),
        format!("http://[2002:7f00:1::1]:{port}/docs/"),
        format!("http://[::1]:{port}/docs/"),
        format!("http://0:{any_port}/docs/"),
        format!("http://0.0.0.0:{any_port}/docs/"),
        format!("http://[::]:{any_port}/docs/"),
        format!("http://localhost:{port}/docs/"),
        format!("http://localhost.:{port}/docs/"),
        "http://169.254.169.254/latest/meta-data/".into(),
        "http://[::ffff:169.254.169.254]/latest/meta-data/".into(),
        "http://[::ffff:a9fe:a9fe]/latest/meta-data/".into(),
        "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/".into(),
        "http://0xa9fea9fe/latest/meta-data/".into(),
        "http://2852039166/latest/meta-data/".into(),
        "http://[fd00:ec2::254]/latest/meta-data/".into(),
        "http://[fe80::1]/".into(),
        "http://100.100.100.200/latest/meta-data/".into(),
        "http://10.0.0.1/".into(),
        "http://172.16.0.1/".into(),
        "http://192.168.1.1/".into(),
        "http://[fc00::1]/".into(),
        "http://224.0.0.1/".into(),
        "http://255.255.255.255/".into(),
        "http://240.0.0.1/".into(),
        "http://192.0.2.1/".into(),
        "http://198.18.0.1/".into(),
        "http://[2001:db8::1]/".into(),
        "http://[ff02::1]/".into(),
        "http://[2001::1]/".into(),
    ];
    let mut report = String::new();
    for form in &forms {
        let outcome = match run(form, &CrawlConfig::default(), None).await {
            Ok((pages, _)) => panic!("{form} was crawled: {} pages", pages.len()),
            Err(e) => e.to_string(),
        };
        // `localhost.` resolves on some machines only; where it does not,
        // nothing is connected to either.
        let unresolved = form.contains("localhost.") && outcome.contains("cannot resolve");
        assert!(
            outcome.contains("crawl.allow_private_networks") || unresolved,
            "{form}: {outcome}"
        );
        report.push_str(&format!("  {form:<52} refused: {outcome}\n"));
    }
    assert_eq!(v4.hits(), 0, "nothing reached 127.0.0.1");
    assert_eq!(
        v6.as_ref().map_or(0, Server::hits),
        0,
        "nothing reached ::1"
    );
    assert_eq!(any.hits(), 0, "nothing reached 0.0.0.0");
    let mut out = std::io::stderr().lock();
    let _ = writeln!(out, "SSRF address forms tried ({}):\n{report}", forms.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_resolve_to_internal_addresses_are_refused() {
    let site = docs_site("127.0.0.1:0");
    let port = site.addr.port();
    let names: Arc<dyn Lookup> = Names::new(&[
        ("intranet.test", "127.0.0.1"),
        ("metadata.google.internal", "169.254.169.254"),
        ("rebind.test", "10.0.0.7"),
        ("v6-mapped.test", "::ffff:127.0.0.1"),
    ]);
    for (url, expected) in [
        (
            format!("http://intranet.test:{port}/docs/"),
            "intranet.test resolves to 127.0.0.1, which",
        ),
        (
            "http://metadata.google.internal/computeMetadata/v1/".to_owned(),
            "resolves to 169.254.169.254",
        ),
        ("http://rebind.test/".to_owned(), "resolves to 10.0.0.7"),
        (
            format!("http://v6-mapped.test:{port}/docs/"),
            "resolves to ::ffff:127.0.0.1",
        ),
    ] {
        let err = run(&url, &CrawlConfig::default(), Some(names.clone()))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{url}: {err}");
        assert!(err.contains("crawl.allow_private_networks"), "{err}");
        eprintln!("  {url:<52} refused: {err}");
    }
    assert_eq!(site.hits(), 0);
    // Allowed, the overridden name is what is connected to.
    let (pages, _) = run(
        &format!("http://intranet.test:{port}/docs/"),
        &allowing(&["127.0.0.1/32"]),
        Some(names.clone()),
    )
    .await
    .unwrap();
    assert_eq!(pages.len(), 2);
    assert_eq!(pages[0].url.host_str(), Some("intranet.test"));
}

/// Answers 127.0.0.2 (allowed) until `flipped`, then 127.0.0.1 (not).
struct Rebinding(Arc<AtomicBool>);

impl Lookup for Rebinding {
    fn lookup(&self, _: &str) -> LookupFuture {
        let ip: IpAddr = if self.0.load(Ordering::SeqCst) {
            "127.0.0.1".parse().unwrap()
        } else {
            "127.0.0.2".parse().unwrap()
        };
        Box::pin(async move { Ok(vec![ip]) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_changes_after_the_check_is_checked_again() {
    // The same port on two loopback addresses: the allowed one serves the
    // docs and then flips the name to the other one, as a rebinding DNS
    // server would between a check and a connection.
    let flipped = Arc::new(AtomicBool::new(false));
    let allowed = std::net::TcpListener::bind("127.0.0.2:0").expect("127.0.0.2 is loopback");
    let port = allowed.local_addr().unwrap().port();
    let Ok(target) = std::net::TcpListener::bind(("127.0.0.1", port)) else {
        eprintln!("port {port} is taken on 127.0.0.1; skipping");
        return;
    };
    let flip = flipped.clone();
    let docs = Server::on(allowed, move |r| match r.target.as_str() {
        "/docs/" => {
            flip.store(true, Ordering::SeqCst);
            Reply::ok(
                "text/html",
                html("Docs", "<a href=\"a.html\">a</a> <a href=\"b.html\">b</a>"),
            )
        }
        _ => Reply::not_found(),
    });
    let internal = Server::on(target, |_| {
        Reply::ok("text/html", html("secret", "internal"))
    });
    let (pages, issues) = run(
        &format!("http://docs.test:{port}/docs/"),
        &allowing(&["127.0.0.2/32"]),
        Some(Arc::new(Rebinding(flipped))),
    )
    .await
    .unwrap();
    assert_eq!(pages.len(), 1, "{issues:?}");
    assert!(docs.hits() >= 1);
    assert_eq!(
        internal.hits(),
        0,
        "the rebound address was never connected to"
    );
    let refused: Vec<&Issue> = issues
        .iter()
        .filter(|i| i.reason.contains("resolves to 127.0.0.1"))
        .collect();
    assert_eq!(refused.len(), 2, "{issues:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_that_leave_the_scope_are_not_followed() {
    let elsewhere = docs_site("127.0.0.1:0");
    let other = elsewhere.addr.port();
    let v6 = std::net::TcpListener::bind("[::1]:0")
        .ok()
        .map(|l| Server::on(l, |_| Reply::ok("text/html", "reached")));
    let v6_port = v6.as_ref().map_or(1, |s| s.addr.port());
    let site = Server::start("127.0.0.1:0", move |r| match r.target.as_str() {
        "/docs/" => Reply::ok(
            "text/html",
            html(
                "Docs",
                "<a href=\"meta\">m</a> <a href=\"loop\">l</a> <a href=\"six\">6</a> \
                 <a href=\"moved\">moved</a> <a href=\"up\">up</a>",
            ),
        ),
        "/docs/meta" => Reply::redirect("http://169.254.169.254/latest/meta-data/iam/"),
        "/docs/loop" => Reply::redirect(&format!("http://127.0.0.1:{other}/docs/")),
        "/docs/six" => Reply::redirect(&format!("http://[::1]:{v6_port}/")),
        "/docs/moved" => Reply::redirect("/docs/new.html"),
        "/docs/up" => Reply::redirect("/private/"),
        "/docs/new.html" => Reply::ok("text/html", html("New", "<p>moved here</p>")),
        _ => Reply::not_found(),
    });
    let (pages, issues) = run(
        &format!("{}/docs/", site.base()),
        &allowing(&["127.0.0.0/8", "::1/128"]),
        None,
    )
    .await
    .unwrap();
    let paths: Vec<&str> = pages.iter().map(|p| p.url.path()).collect();
    assert_eq!(paths, ["/docs/", "/docs/new.html"], "{issues:?}");
    for (page, target) in [
        ("/docs/meta", "169.254.169.254"),
        ("/docs/loop", &format!("127.0.0.1:{other}")),
        ("/docs/six", "[::1]"),
        ("/docs/up", "/private/"),
    ] {
        let issue = issues
            .iter()
            .find(|i| i.uri.ends_with(page))
            .unwrap_or_else(|| panic!("{page}: {issues:?}"));
        assert!(
            issue.reason.contains("outside the crawl's scope") && issue.reason.contains(target),
            "{issue:?}"
        );
        eprintln!("  redirect {page} -> {target}: {}", issue.reason);
    }
    assert_eq!(elsewhere.hits(), 0);
    assert_eq!(v6.as_ref().map_or(0, Server::hits), 0);
}

/// `bytes` gzipped.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_is_cut_at_the_decompressed_limit() {
    // 256 MiB of spaces inside an HTML page, about 250 KiB gzipped: under
    // the 1 MiB limit compressed, far over it inflated.
    let mut page = b"<!doctype html><html><body><main><p>".to_vec();
    page.resize(256 * 1024 * 1024, b' ');
    let bomb = gzip(&page);
    drop(page);
    let compressed = bomb.len();
    let small = gzip(html("Small", "<h1>Small</h1><p>a gzipped page</p>").as_bytes());
    let site = Server::start("127.0.0.1:0", move |r| {
        let gzipped = |body: &Vec<u8>| Reply::Full {
            status: "200 OK",
            headers: vec![
                ("Content-Type".into(), "text/html".into()),
                ("Content-Encoding".into(), "gzip".into()),
            ],
            body: body.clone(),
        };
        match r.target.as_str() {
            "/docs/" => gzipped(&small),
            "/docs/bomb.html" => gzipped(&bomb),
            _ => Reply::not_found(),
        }
    });
    let config = CrawlConfig {
        max_page_bytes: 1024 * 1024,
        ..allowing(&["127.0.0.0/8"])
    };
    // An ordinary gzipped page is read (and asked for gzipped).
    let (pages, _) = run(&format!("{}/docs/", site.base()), &config, None)
        .await
        .unwrap();
    assert!(pages[0].body.contains("a gzipped page"));
    assert!(site.requests().iter().any(|r| {
        r.header("accept-encoding")
            .is_some_and(|v| v.contains("gzip"))
    }));
    let started = Instant::now();
    let err = run(&format!("{}/docs/bomb.html", site.base()), &config, None)
        .await
        .unwrap_err()
        .to_string();
    let elapsed = started.elapsed();
    assert!(err.contains("crawl.max_page_bytes"), "{err}");
    eprintln!(
        "gzip bomb: {compressed} bytes compressed, 268435456 inflated, refused after {} ms: {err}",
        elapsed.as_millis()
    );
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_slow_and_silent_responses_are_cut() {
    let big = vec![b'a'; 2 * 1024 * 1024];
    let site = Server::start("127.0.0.1:0", move |r| match r.target.as_str() {
        "/docs/" => Reply::ok(
            "text/html",
            html(
                "Docs",
                "<a href=\"big.html\">big</a> <a href=\"stream.html\">stream</a> \
                 <a href=\"slow.html\">slow</a> <a href=\"silent.html\">silent</a> \
                 <a href=\"report.pdf\">pdf</a> <a href=\"ok.txt\">ok</a>",
            ),
        ),
        // Announced as too large: refused before the body is read.
        "/docs/big.html" => Reply::ok("text/html", big.clone()),
        // Too large, with no length announced: cut while reading.
        "/docs/stream.html" => Reply::Drip {
            content_type: "text/html",
            every: Duration::ZERO,
        },
        "/docs/slow.html" => Reply::Drip {
            content_type: "text/html",
            every: Duration::from_millis(100),
        },
        "/docs/silent.html" => Reply::Silence,
        "/docs/report.pdf" => Reply::ok("application/pdf", b"%PDF-1.4".to_vec()),
        "/docs/ok.txt" => Reply::ok("text/plain; charset=utf-8", "plain text page"),
        _ => Reply::not_found(),
    });
    let config = CrawlConfig {
        max_page_bytes: 1024 * 1024,
        timeout_secs: 2,
        ..allowing(&["127.0.0.0/8"])
    };
    let started = Instant::now();
    let (pages, issues) = run(&format!("{}/docs/", site.base()), &config, None)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let paths: Vec<&str> = pages.iter().map(|p| p.url.path()).collect();
    assert_eq!(paths, ["/docs/", "/docs/ok.txt"], "{issues:?}");
    let reason = |page: &str| {
        issues
            .iter()
            .find(|i| i.uri.ends_with(page))
            .map(|i| i.reason.clone())
            .unwrap_or_else(|| panic!("{page}: {issues:?}"))
    };
    for (page, expected) in [
        ("big.html", "crawl.max_page_bytes"),
        ("stream.html", "crawl.max_page_bytes"),
        ("slow.html", "timed out"),
        ("silent.html", "timed out"),
        ("report.pdf", "crawl.content_types"),
    ] {
        let r = reason(page);
        assert!(r.contains(expected), "{page}: {r}");
        eprintln!("  {page}: {r}");
    }
    // Two timeouts of 2 s, the rest at once.
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_proxy_names_are_still_checked() {
    // A forward proxy (it answers absolute-form requests itself).
    let proxy = Server::start("127.0.0.1:0", |r| {
        if r.target.starts_with("http://docs.example.org/docs/") {
            Reply::ok("text/html", html("Docs", "<h1>Through the proxy</h1>"))
        } else {
            Reply::not_found()
        }
    });
    let names: Arc<dyn Lookup> = Names::new(&[
        ("docs.example.org", "93.184.215.14"),
        ("internal.example.org", "10.1.2.3"),
    ]);
    let config = CrawlConfig {
        proxy: Some(proxy.base()),
        ..Default::default()
    };
    let (pages, _) = run(
        "http://docs.example.org/docs/",
        &config,
        Some(names.clone()),
    )
    .await
    .unwrap();
    assert!(pages[0].body.contains("Through the proxy"));
    let before = proxy.hits();
    for url in [
        "http://internal.example.org/",
        "http://169.254.169.254/latest/meta-data/",
    ] {
        let err = run(url, &config, Some(names.clone()))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("crawl.allow_private_networks"), "{url}: {err}");
    }
    assert_eq!(proxy.hits(), before, "refused before the proxy was asked");
}
