//! Private repositories over https, as the distributed crawler reaches
//! them: Git's own `git http-backend` (CGI) behind a small TLS server on a
//! free loopback port that wants HTTP Basic (`alice` and a password) or a
//! Bearer token, and the crawler's git given `crawl.git_credentials`.
//!
//! The configured password (from a file) or token opens the repository;
//! without credentials, or with a wrong password, the clone is refused and
//! no error shows the secret.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use base64::Engine as _;
use weft_config::{CrawlConfig, SiteCredential};
use weft_sources::{GitPolicy, GitRepo};

mod common;
use common::bare_repository;

const BACKEND: &str = "/usr/lib/git-core/git-http-backend";
const PASSWORD: &str = "s3cret-pass-word";
const TOKEN: &str = "tok-0123456789abcdef";

/// A CA and a certificate for `localhost` it signed: (CA PEM, cert DER, key DER).
fn certificates() -> (String, Vec<u8>, Vec<u8>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "weft test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.der().to_vec(), key.serialize_der())
}

/// Whether the request's `Authorization` is one the server accepts.
fn authorized(header: Option<&String>) -> bool {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("alice:{PASSWORD}"));
    header.is_some_and(|h| *h == format!("Basic {basic}") || *h == format!("Bearer {TOKEN}"))
}

fn handle(
    tcp: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    root: &Path,
) -> std::io::Result<()> {
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut reader = BufReader::new(&mut tls);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = std::collections::HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if let Some(n) = headers
        .get("content-length")
        .and_then(|n| n.parse::<usize>().ok())
    {
        body.resize(n, 0);
        reader.read_exact(&mut body)?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    drop(reader);
    if !authorized(headers.get("authorization")) {
        tls.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        tls.conn.send_close_notify();
        return tls.flush();
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new(BACKEND);
    cgi.env_clear()
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", "alice")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    for (header, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("git-protocol", "GIT_PROTOCOL"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
    ] {
        if let Some(v) = headers.get(header) {
            cgi.env(var, v);
        }
    }
    let mut child = cgi.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&body)?;
    }
    let out = child.wait_with_output()?;
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, 2))
        });
    let Some((at, gap)) = split else {
        return Err(std::io::Error::other("no CGI headers"));
    };
    let head = String::from_utf8_lossy(&out.stdout[..at]).into_owned();
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for h in head.lines() {
        match h.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_owned(),
            Some(_) => {
                response.push_str(h.trim_end());
                response.push_str("\r\n");
            }
            None => {}
        }
    }
    let payload = &out.stdout[at + gap..];
    tls.write_all(
        format!(
            "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
            payload.len()
        )
        .as_bytes(),
    )?;
    tls.write_all(payload)?;
    tls.conn.send_close_notify();
    tls.flush()
}

/// The server, on a free loopback port: its port.
fn serve(root: PathBuf, cert: Vec<u8>, key: Vec<u8>) -> u16 {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![rustls::pki_types::CertificateDer::from(cert)],
        rustls::pki_types::PrivateKeyDer::try_from(key).unwrap(),
    )
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, root) = (config.clone(), root.clone());
            std::thread::spawn(move || {
                let _ = handle(tcp, config, &root);
            });
        }
    });
    port
}

fn config(credentials: Vec<SiteCredential>) -> CrawlConfig {
    let config = CrawlConfig {
        git_protocols: vec!["https".into()],
        allow_private_networks: vec!["127.0.0.1/32".into()],
        git_credentials: credentials,
        ..CrawlConfig::default()
    };
    config.validate().unwrap();
    config
}

fn entry(port: u16, file: &Path, token: bool) -> SiteCredential {
    SiteCredential {
        origin: format!("https://localhost:{port}"),
        username: (!token).then(|| "alice".to_owned()),
        password_env: None,
        password_file: (!token).then(|| file.to_owned()),
        token_env: None,
        token_file: token.then(|| file.to_owned()),
    }
}

#[test]
fn a_private_repository_is_cloned_over_https_with_the_configured_credentials_only() {
    if !Path::new(BACKEND).exists() {
        eprintln!("skipped: no {BACKEND} (Debian's git has it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Filters allowed: the crawler's partial clone fetches the blobs it
    // checks out in a second request, which needs the credentials too.
    let bare = bare_repository(
        dir.path(),
        "src/private.rs",
        "pub fn private() -> u8 { 7 }\n",
    );
    let root = bare.parent().unwrap().to_owned();
    let (ca, cert, key) = certificates();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    // git (libcurl) trusts the test CA: the one test of this binary sets it
    // before starting any git.
    // SAFETY: no other thread of this test binary reads the environment.
    unsafe { std::env::set_var("GIT_SSL_CAINFO", &ca_file) };
    let port = serve(root, cert, key);
    let url = format!("https://localhost:{port}/private.git");
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let wrong_file = dir.path().join("wrong");
    std::fs::write(&wrong_file, "wrong-pass-word").unwrap();

    // Basic, the password from its file: cloned.
    let policy =
        GitPolicy::from_crawl_config(&config(vec![entry(port, &password_file, false)])).unwrap();
    let checkout = dir.path().join("basic");
    GitRepo::with_policy(&url, &checkout, policy)
        .sync()
        .unwrap_or_else(|e| panic!("clone with the configured password: {e}"));
    assert!(checkout.join("src/private.rs").exists());
    let filter = Command::new("git")
        .arg("-C")
        .arg(&checkout)
        .args(["config", "remote.origin.partialclonefilter"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&filter.stdout).trim(), "blob:none");

    // A Bearer token from its file: cloned.
    let policy =
        GitPolicy::from_crawl_config(&config(vec![entry(port, &token_file, true)])).unwrap();
    let checkout = dir.path().join("bearer");
    GitRepo::with_policy(&url, &checkout, policy)
        .sync()
        .unwrap_or_else(|e| panic!("clone with the configured token: {e}"));
    assert!(checkout.join("src/private.rs").exists());

    // No credentials: refused (git never prompts).
    let policy = GitPolicy::from_crawl_config(&config(Vec::new())).unwrap();
    let error = GitRepo::with_policy(&url, &dir.path().join("none"), policy)
        .sync()
        .expect_err("no credentials");
    assert!(!error.to_string().contains(PASSWORD), "{error}");

    // A wrong password: refused, and not shown.
    let policy =
        GitPolicy::from_crawl_config(&config(vec![entry(port, &wrong_file, false)])).unwrap();
    let error = GitRepo::with_policy(&url, &dir.path().join("wrong"), policy)
        .sync()
        .expect_err("a wrong password");
    let message = error.to_string();
    assert!(!message.contains("wrong-pass-word"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");

    // Credentials of another origin are not sent here.
    let other = SiteCredential {
        origin: format!("https://localhost:{}", port.wrapping_add(1)),
        ..entry(port, &password_file, false)
    };
    let policy = GitPolicy::from_crawl_config(&config(vec![other])).unwrap();
    GitRepo::with_policy(&url, &dir.path().join("other"), policy)
        .sync()
        .expect_err("another origin's credentials are not used");
}
