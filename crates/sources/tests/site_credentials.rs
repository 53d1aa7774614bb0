//! Issue 33, hole 1: a user name or password in a site URL never becomes
//! part of a document's uri, an error or an issue. A site URL holding one
//! is refused before anything is fetched (the command line, the crawler's
//! manifest and MCP classify sources with `SourceSpec::parse`; the crawl
//! refuses it too); userinfo that a site's own links, sitemaps and
//! redirects carry is dropped and never sent. Real HTTP servers on
//! loopback ports (`crawl.allow_private_networks` lets the crawler reach
//! them).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use indicatif::ProgressBar;
use url::Url;
use weft_config::CrawlConfig;
use weft_sources::{SourceSpec, crawl};

/// The secrets the tests put in URLs: none may come out.
const SECRETS: &[&str] = &[
    "S3CRET",
    "TOKEN",
    "SITEMAPPW",
    "OTHERPW",
    "MAPPW",
    "LINKPW",
    "PRIVPW",
    "REDIRPW",
    "ERRPW",
];

/// A request as a handler sees it.
struct Request {
    target: String,
    headers: Vec<(String, String)>,
}

impl Request {
    /// The value of header `name` (lowercase).
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A response: status line, headers, body.
struct Reply {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: "200 OK",
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    fn status(status: &'static str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"no".to_vec(),
        }
    }

    fn redirect(location: &str) -> Self {
        Self {
            status: "302 Found",
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }

    fn not_found() -> Self {
        Self::status("404 Not Found")
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A real HTTP/1.1 server on a loopback port, one thread per connection,
/// recording the requests it saw.
struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let (h, s) = (hits.clone(), seen.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let (handler, seen) = (handler.clone(), s.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    let _ = reader.read_line(&mut line);
                    let mut headers = Vec::new();
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':') {
                            headers
                                .push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
                        }
                    }
                    let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let request = Request { target, headers };
                    let reply = handler(&request);
                    seen.lock().unwrap().push(request);
                    let mut head = format!("HTTP/1.1 {}\r\n", reply.status);
                    for (name, value) in &reply.headers {
                        head.push_str(&format!("{name}: {value}\r\n"));
                    }
                    head.push_str(&format!(
                        "Content-Length: {}\r\nConnection: close\r\n\r\n",
                        reply.body.len()
                    ));
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(&reply.body);
                });
            }
        });
        Self { addr, hits, seen }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The requests seen so far, as (target, Authorization header).
    fn requests(&self) -> Vec<(String, Option<String>)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.target.clone(),
                    r.header("authorization").map(str::to_owned),
                )
            })
            .collect()
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A small HTML page.
fn html(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><title>{title}</title></head><body><main>{body}</main></body></html>"
    )
}

fn loopback() -> CrawlConfig {
    CrawlConfig {
        allow_private_networks: vec!["127.0.0.0/8".into()],
        ..Default::default()
    }
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows {secret}: {text}");
    }
}

/// A docs site: `/docs/` links to `/docs/guide.html`.
fn docs_site() -> Server {
    Server::start(|r| match r.target.as_str() {
        "/docs/" => Reply::ok(
            "text/html",
            html("Docs", "<h1>Docs</h1><a href=\"guide.html\">guide</a>"),
        ),
        "/docs/guide.html" => Reply::ok("text/html", html("Guide", "<p>Read me.</p>")),
        _ => Reply::not_found(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_url_with_a_password_is_refused_and_never_shown() {
    let site = docs_site();
    let failing = Server::start(|_| Reply::status("500 Internal Server Error"));
    for server in [&site, &failing] {
        for start in [
            format!("http://alice:S3CRET@{}/docs/", server.addr),
            format!("http://S3CRET@{}/docs/", server.addr),
        ] {
            // Classified for the command line, the manifest and MCP: refused,
            // saying where credentials go, without the secret.
            let err = SourceSpec::parse(&start).expect_err("a site URL with credentials");
            eprintln!("{start}\n  parse: {err}");
            assert_no_secret("the refusal", &err);
            assert!(
                err.contains("crawl.site_credentials") && err.contains(".git"),
                "{err}"
            );
            // Crawled as given (a caller that builds the URL itself): refused
            // before connecting.
            let url = Url::parse(&start).unwrap();
            let outcome = crawl(&url, &loopback(), &ProgressBar::hidden()).await;
            let shown = match &outcome {
                Ok((pages, issues)) => format!(
                    "crawled {:?}, issues {issues:?}",
                    pages.iter().map(|p| p.url.as_str()).collect::<Vec<_>>()
                ),
                Err(e) => format!("{e} / {e:?}"),
            };
            eprintln!("  crawl: {shown}");
            assert_no_secret("the crawl", &shown);
            assert!(outcome.is_err(), "{shown}");
            assert!(shown.contains("crawl.site_credentials"), "{shown}");
        }
    }
    assert_eq!(site.hits() + failing.hits(), 0, "nothing was fetched");

    // A git URL without .git is no repository to weft: refused as a site
    // with credentials, naming the form that is one.
    let err = SourceSpec::parse("https://oauth2:TOKEN@gitlab.example/group/repo")
        .expect_err("a git URL without .git, with a token");
    eprintln!("git URL without .git: {err}");
    assert_no_secret("the refusal", &err);
    assert!(err.contains(".git"), "{err}");
    let git = SourceSpec::parse("https://oauth2:TOKEN@gitlab.example/group/repo.git").unwrap();
    assert!(matches!(git, SourceSpec::Git(_)));
    assert_no_secret("the git source", &git.display());
    // Arguments that are no valid URL, or no URL at all, are not echoed
    // with their secret either.
    for arg in [
        "http://alice:S3CRET@host:99999/docs/",
        "HTTPS://alice:S3CRET@host/docs/",
        "git+https://alice:S3CRET@host/repo",
    ] {
        let err = SourceSpec::parse(arg).expect_err(arg);
        eprintln!("{arg}: {err}");
        assert_no_secret("the refusal", &err);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn userinfo_in_links_sitemaps_and_redirects_never_reaches_a_uri() {
    let site = Server::start(|r| {
        let host = r.header("host").unwrap_or_default().to_owned();
        match r.target.as_str() {
            "/robots.txt" => Reply::ok(
                "text/plain",
                format!(
                    "User-agent: *\nDisallow: /docs/private\n\
                     Sitemap: http://bob:SITEMAPPW@{host}/sitemap.xml\n\
                     Sitemap: http://carol:OTHERPW@127.0.0.2:9/s.xml\n"
                ),
            ),
            "/sitemap.xml" => Reply::ok(
                "application/xml",
                format!(
                    "<urlset><url><loc>http://dave:MAPPW@{host}/docs/mapped.html</loc></url></urlset>"
                ),
            ),
            "/docs/" => Reply::ok(
                "text/html",
                html(
                    "Docs",
                    &format!(
                        "<a href=\"http://mallory:LINKPW@{host}/docs/other.html\">o</a> \
                         <a href=\"http://eve:PRIVPW@{host}/docs/private.html\">p</a> \
                         <a href=\"moved\">m</a> \
                         <a href=\"http://gina:ERRPW@{host}/docs/broken.html\">b</a>"
                    ),
                ),
            ),
            "/docs/moved" => Reply::redirect(&format!("http://frank:REDIRPW@{host}/docs/new.html")),
            "/docs/broken.html" => Reply::status("500 Internal Server Error"),
            "/docs/other.html" | "/docs/mapped.html" | "/docs/new.html" => {
                Reply::ok("text/html", html("Page", "<p>A page.</p>"))
            }
            _ => Reply::not_found(),
        }
    });
    let start = Url::parse(&format!("{}/docs/", site.base())).unwrap();
    let (pages, issues) = crawl(&start, &loopback(), &ProgressBar::hidden())
        .await
        .unwrap();
    let mut uris: Vec<String> = pages.iter().map(|p| p.url.to_string()).collect();
    uris.sort();
    eprintln!("pages: {uris:#?}\nissues: {issues:#?}");
    for uri in &uris {
        assert_no_secret("a page's uri", uri);
        assert!(!uri.contains('@'), "{uri}");
    }
    for issue in &issues {
        assert_no_secret("an issue", &format!("{} {}", issue.uri, issue.reason));
    }
    let base = site.base();
    let expected: Vec<String> = [
        "/docs/",
        "/docs/mapped.html",
        "/docs/new.html",
        "/docs/other.html",
    ]
    .iter()
    .map(|p| format!("{base}{p}"))
    .collect();
    assert_eq!(uris, expected, "{issues:?}");
    for (uri, says) in [
        (format!("{base}/docs/private.html"), "robots.txt"),
        (format!("{base}/docs/broken.html"), "HTTP 500"),
    ] {
        assert!(
            issues
                .iter()
                .any(|i| i.uri == uri && i.reason.contains(says)),
            "{uri}: {issues:?}"
        );
    }
    // No userinfo was turned into an Authorization header either.
    for (target, authorization) in site.requests() {
        assert!(
            authorization.is_none(),
            "{target} was sent {authorization:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn site_credentials_reach_the_start_origin_and_nothing_else() {
    const BASIC: &str = "Basic YWxpY2U6UzNDUkVU"; // alice:S3CRET
    let elsewhere = Server::start(|_| Reply::ok("text/html", html("Elsewhere", "reached")));
    let other = elsewhere.base();
    let site = Server::start(move |r| {
        if r.header("authorization") != Some(BASIC) {
            return Reply::status("401 Unauthorized");
        }
        match r.target.as_str() {
            "/docs/" => Reply::ok(
                "text/html",
                html(
                    "Docs",
                    &format!(
                        "<a href=\"guide.html\">g</a> <a href=\"{other}/docs/x.html\">x</a> \
                         <a href=\"away\">away</a>"
                    ),
                ),
            ),
            "/docs/away" => Reply::redirect(&format!("{other}/docs/y.html")),
            "/docs/guide.html" => Reply::ok("text/html", html("Guide", "<p>Read me.</p>")),
            _ => Reply::not_found(),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "S3CRET\n").unwrap();
    let config = CrawlConfig {
        site_credentials: vec![weft_config::SiteCredential {
            origin: site.base(),
            username: Some("alice".into()),
            password_env: None,
            password_file: Some(file.clone()),
            token_env: None,
            token_file: None,
        }],
        ..loopback()
    };
    assert_no_secret("the configuration", &format!("{config:?}"));
    let start = Url::parse(&format!("{}/docs/", site.base())).unwrap();
    let (pages, issues) = crawl(&start, &config, &ProgressBar::hidden())
        .await
        .unwrap();
    let paths: Vec<&str> = pages.iter().map(|p| p.url.path()).collect();
    eprintln!("pages {paths:?}\nissues {issues:#?}");
    assert_eq!(paths, ["/docs/", "/docs/guide.html"], "{issues:?}");
    assert!(
        issues.iter().any(
            |i| i.uri.ends_with("/docs/away") && i.reason.contains("outside the crawl's scope")
        ),
        "{issues:?}"
    );
    for issue in &issues {
        assert_no_secret("an issue", &format!("{} {}", issue.uri, issue.reason));
    }
    assert!(
        site.requests()
            .iter()
            .all(|(_, a)| a.as_deref() == Some(BASIC))
    );
    assert_eq!(elsewhere.hits(), 0, "another origin was fetched");

    // Without them, the start page's error says so and shows no secret.
    let err = crawl(&start, &loopback(), &ProgressBar::hidden())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("401"), "{err}");
    // A credential whose file is gone: the crawl does not start, naming
    // the field and the file.
    std::fs::remove_file(&file).unwrap();
    let err = crawl(&start, &config, &ProgressBar::hidden())
        .await
        .unwrap_err()
        .to_string();
    eprintln!("{err}");
    assert!(
        err.contains("crawl.site_credentials[0].password_file") && err.contains("password"),
        "{err}"
    );
}
