//! A documentation website: crawled from a start URL, staying on its origin
//! and under the start URL's directory, seeded from `sitemap.xml` (or the
//! sitemaps robots.txt names), honouring robots.txt, within page and depth
//! limits. HTML pages go to the HTML chunker; markdown and plain text pages
//! to theirs.
//!
//! The crawl cannot be turned on the network it runs in (SECURITY.md): it
//! connects only to public addresses unless `crawl.allow_private_networks`
//! lists them, checked on the address actually connected to
//! ([`super::net`]); redirects are followed one at a time, each checked
//! again, and not at all when they leave the crawl's scope; bodies are
//! limited in size after decompression and in time; only the media types of
//! `crawl.content_types` are read. Proxy variables of the environment are
//! ignored (`crawl.proxy` names one explicitly).
//!
//! No user name or password of a URL ever becomes part of a page's URL, an
//! issue or an error, nor is it sent: a start URL holding one is refused
//! (credentials go in `crawl.site_credentials`), and userinfo in the site's
//! own links, sitemaps and redirects is dropped. The credentials of
//! `crawl.site_credentials` are sent only to requests on the start origin.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use url::Url;
use weft_config::{CrawlConfig, InvalidSetting, SiteAuth};

use super::net::{GuardedResolver, Lookup, NetError, NetworkPolicy, SystemLookup};
use crate::{Issue, redact_url};

/// At most this many sitemaps are read (one index and the sitemaps it names).
const MAX_SITEMAPS: usize = 50;

/// Why a crawl could not start.
#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(String),
    /// A `[crawl]` setting cannot work.
    #[error(transparent)]
    Setting(#[from] InvalidSetting),
    /// The start URL holds a user name or password: refused, before
    /// anything is fetched (the message says where credentials go).
    #[error("{0}")]
    Credentials(String),
    /// The start page could not be fetched.
    #[error("start page {url}: {message}")]
    Start {
        /// The start URL.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// One fetched page.
#[derive(Debug, Clone)]
pub struct CrawledPage {
    /// Its URL, without fragment (where redirects ended).
    pub url: Url,
    /// `html`, `markdown` or `text`.
    pub kind: &'static str,
    /// Its body.
    pub body: String,
}

/// Crawls from `start`; returns the pages and the URLs that failed.
pub async fn crawl(
    start: &Url,
    config: &CrawlConfig,
    progress: &ProgressBar,
) -> Result<(Vec<CrawledPage>, Vec<Issue>), CrawlError> {
    crawl_with(start, config, progress, Arc::new(SystemLookup)).await
}

/// [`crawl`] with names resolved by `lookup` (tests give fixed answers);
/// its answers are checked like the system resolver's.
pub async fn crawl_with(
    start: &Url,
    config: &CrawlConfig,
    progress: &ProgressBar,
    lookup: Arc<dyn Lookup>,
) -> Result<(Vec<CrawledPage>, Vec<Issue>), CrawlError> {
    if has_userinfo(start) {
        return Err(CrawlError::Credentials(crate::userinfo_refusal(
            &redact_url(start.as_str()),
        )));
    }
    let fetcher = Fetcher::new(config, lookup, start)?;
    let scope = Scope::of(start);
    let robots = match fetcher
        .fetch(
            &scope.origin_url("/robots.txt"),
            &|u| scope.same_origin(u),
            Accept::Meta,
        )
        .await
    {
        Ok(Some(page)) => Robots::parse(&page.body, &config.user_agent),
        _ => Robots::default(),
    };
    let mut queue: VecDeque<(Url, usize)> = VecDeque::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut push = |url: Url, depth: usize, queue: &mut VecDeque<(Url, usize)>| {
        let mut url = without_userinfo(url);
        url.set_fragment(None);
        if scope.contains(&url) && seen.insert(url.to_string()) {
            queue.push_back((url, depth));
        }
    };
    push(start.clone(), 0, &mut queue);
    let mut issues = Vec::new();
    let sitemaps = if robots.sitemaps.is_empty() {
        vec![scope.origin_url("/sitemap.xml")]
    } else {
        let mut same_origin = Vec::new();
        for s in &robots.sitemaps {
            match Url::parse(s).map(without_userinfo) {
                Ok(url) if scope.same_origin(&url) => same_origin.push(url),
                _ => issues.push(Issue {
                    uri: redact_url(s),
                    reason: "sitemap named by robots.txt is not on the crawled origin; not read"
                        .into(),
                }),
            }
        }
        same_origin
    };
    for url in sitemap_urls(&fetcher, &scope, sitemaps).await {
        push(url, 1, &mut queue);
    }
    let mut pages = Vec::new();
    let mut fetched: HashSet<String> = HashSet::new();
    let mut started = false;
    while let Some((url, depth)) = queue.pop_front() {
        if pages.len() >= config.max_pages {
            break;
        }
        if !robots.allows(url.path()) {
            issues.push(Issue {
                uri: url.to_string(),
                reason: "disallowed by robots.txt".into(),
            });
            continue;
        }
        progress.set_message(url.to_string());
        let in_scope = |u: &Url| scope.contains(u) && robots.allows(u.path());
        let result = fetcher
            .fetch(&url, &in_scope, Accept::Pages(&config.content_types))
            .await;
        let first = !started;
        started = true;
        let page = match result {
            Ok(Some(page)) => page,
            other => {
                let reason = match other {
                    Err(reason) => reason,
                    Ok(_) => "not found".to_owned(),
                };
                if first {
                    return Err(CrawlError::Start {
                        url: url.to_string(),
                        message: reason,
                    });
                }
                issues.push(Issue {
                    uri: url.to_string(),
                    reason,
                });
                continue;
            }
        };
        let mut final_url = without_userinfo(page.url);
        final_url.set_fragment(None);
        // A redirect to a page already crawled (or queued: it is then
        // crawled once, here).
        if !fetched.insert(final_url.to_string()) {
            continue;
        }
        seen.insert(final_url.to_string());
        let kind = if page.media_type.contains("html") {
            "html"
        } else if page.media_type.contains("markdown") {
            "markdown"
        } else {
            "text"
        };
        if kind == "html" && depth < config.max_depth {
            for link in links(&final_url, &page.body) {
                let mut link = without_userinfo(link);
                link.set_fragment(None);
                if scope.contains(&link) && seen.insert(link.to_string()) {
                    queue.push_back((link, depth + 1));
                }
            }
        }
        progress.inc(1);
        pages.push(CrawledPage {
            url: final_url,
            kind,
            body: page.body,
        });
    }
    Ok((pages, issues))
}

/// A fetched response body.
struct Fetched {
    /// Where redirects ended.
    url: Url,
    /// The media type, lowercase, without parameters.
    media_type: String,
    body: String,
}

/// Which media types a fetch reads.
#[derive(Clone, Copy)]
enum Accept<'a> {
    /// Pages: the configured list.
    Pages(&'a [String]),
    /// robots.txt and sitemaps: text and XML.
    Meta,
}

impl Accept<'_> {
    fn allows(&self, media_type: &str) -> bool {
        match self {
            Self::Pages(types) => types.iter().any(|t| t.eq_ignore_ascii_case(media_type)),
            Self::Meta => media_type.starts_with("text/") || media_type.ends_with("xml"),
        }
    }
}

/// The HTTP side of a crawl: a client that resolves through the network
/// policy and follows no redirect by itself, and the limits.
struct Fetcher {
    client: reqwest::Client,
    policy: Arc<NetworkPolicy>,
    lookup: Arc<dyn Lookup>,
    proxied: bool,
    max_bytes: u64,
    max_redirects: usize,
    timeout_secs: u64,
    connect_timeout_secs: u64,
    /// The credentials of `crawl.site_credentials` for the start origin,
    /// and that origin: sent to requests on it, and no others.
    auth: Option<(url::Origin, SiteAuth)>,
}

impl Fetcher {
    /// A fetcher for a crawl starting at `start`: with the credentials
    /// `crawl.site_credentials` has for its origin (read now).
    fn new(config: &CrawlConfig, lookup: Arc<dyn Lookup>, start: &Url) -> Result<Self, CrawlError> {
        let policy = Arc::new(NetworkPolicy::from_config(config)?);
        let origin = start.origin();
        let auth = config.site_auth_for(&origin)?.map(|auth| (origin, auth));
        let proxy_host = config
            .proxy
            .as_deref()
            .and_then(|p| Url::parse(p).ok())
            .and_then(|u| u.host_str().map(str::to_owned));
        let mut builder = weft_http_client::client_builder()
            .user_agent(config.user_agent.clone())
            .timeout(Duration::from_secs(config.timeout_secs))
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .gzip(true)
            .dns_resolver(Arc::new(GuardedResolver {
                policy: policy.clone(),
                lookup: lookup.clone(),
                exempt: proxy_host,
            }));
        builder = match &config.proxy {
            Some(proxy) => {
                builder.proxy(reqwest::Proxy::all(proxy).map_err(|e| InvalidSetting {
                    key: "crawl.proxy".into(),
                    message: format!("{proxy:?}: {e}"),
                })?)
            }
            None => builder.no_proxy(),
        };
        let client = builder
            .build()
            .map_err(|e| CrawlError::Client(weft_core::error_chain(&e)))?;
        Ok(Self {
            client,
            policy,
            lookup,
            proxied: config.proxy.is_some(),
            max_bytes: config.max_page_bytes,
            max_redirects: config.max_redirects,
            timeout_secs: config.timeout_secs,
            connect_timeout_secs: config.connect_timeout_secs,
            auth,
        })
    }

    /// Fetches `url`, following redirects that `in_scope` accepts:
    /// `Ok(None)` for 404/410, else the body of a 2xx response of an
    /// accepted media type within the size limit. A user name or password
    /// in a URL is dropped, never sent; the configured credentials go to
    /// the start origin only, checked on every hop.
    async fn fetch(
        &self,
        url: &Url,
        in_scope: &(dyn Fn(&Url) -> bool + Sync),
        accept: Accept<'_>,
    ) -> Result<Option<Fetched>, String> {
        let mut url = without_userinfo(url.clone());
        let mut redirects = 0;
        loop {
            self.check(&url).await?;
            let mut request = self.client.get(url.clone());
            if let Some((origin, auth)) = &self.auth
                && url.origin() == *origin
            {
                request = match auth {
                    SiteAuth::Basic { username, password } => {
                        request.basic_auth(username, Some(password.expose()))
                    }
                    SiteAuth::Bearer(token) => request.bearer_auth(token.expose()),
                };
            }
            let response = request.send().await.map_err(|e| self.describe(&e))?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("HTTP {status} without a usable Location header"))?;
                let next = url
                    .join(location)
                    .map(without_userinfo)
                    .map_err(|e| format!("HTTP {status} to {:?}: {e}", redact_url(location)))?;
                if !in_scope(&next) {
                    return Err(format!(
                        "redirects (HTTP {status}) to {next}, outside the crawl's scope; not followed"
                    ));
                }
                redirects += 1;
                if redirects > self.max_redirects {
                    return Err(format!(
                        "more than {} redirects (crawl.max_redirects)",
                        self.max_redirects
                    ));
                }
                url = next;
                continue;
            }
            if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("text/html")
                .to_ascii_lowercase();
            let media_type = content_type
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            if !accept.allows(&media_type) {
                return Err(format!(
                    "content type {media_type:?} is not crawled (crawl.content_types)"
                ));
            }
            let body = self.read_body(response).await?;
            return Ok(Some(Fetched {
                url,
                body: decode(&body, &content_type),
                media_type,
            }));
        }
    }

    /// The checks before a request: an http(s) URL, an allowed IP-literal
    /// host (those never reach the resolver), and through a proxy, which
    /// resolves names itself, an allowed name.
    async fn check(&self, url: &Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{url}: only http and https are crawled"));
        }
        self.policy.check_url(url).map_err(|e| e.to_string())?;
        if self.proxied
            && let Some(url::Host::Domain(host)) = url.host()
        {
            self.policy
                .resolve(self.lookup.as_ref(), host)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Reads the body, counting the bytes after decompression: a small
    /// compressed body that inflates past the limit is cut off there.
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, String> {
        let too_large = || {
            format!(
                "the body is over {} bytes (crawl.max_page_bytes)",
                self.max_bytes
            )
        };
        if response
            .content_length()
            .is_some_and(|n| n > self.max_bytes)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.describe(&e))? {
            if (body.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A transport error with its causes (the refused address is one).
    fn describe(&self, error: &reqwest::Error) -> String {
        if error.is_timeout() {
            return format!(
                "timed out: no complete response within {} s (crawl.timeout_secs; connecting: crawl.connect_timeout_secs = {} s)",
                self.timeout_secs, self.connect_timeout_secs
            );
        }
        // A refused address says it all; the transport's wrapping adds nothing.
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = source {
            if let Some(refused) = e.downcast_ref::<NetError>() {
                return refused.to_string();
            }
            source = e.source();
        }
        weft_core::error_chain(error)
    }
}

/// Whether `url` holds a user name or password.
pub(crate) fn has_userinfo(url: &Url) -> bool {
    !url.username().is_empty() || url.password().is_some()
}

/// `url` without its user name and password: what a crawled page's URL,
/// an issue and a request may hold.
fn without_userinfo(mut url: Url) -> Url {
    if has_userinfo(&url) {
        // Only URLs that cannot have a host refuse; crawled ones have one.
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    url
}

/// The body as text, in the charset the content type names (UTF-8 when it
/// names none), a byte-order mark winning.
fn decode(body: &[u8], content_type: &str) -> String {
    let label = content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim() == "charset").then(|| v.trim().trim_matches('"').to_owned())
    });
    let encoding = label
        .and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

/// The URLs a page links to, resolved against it.
fn links(base: &Url, html: &str) -> Vec<Url> {
    let document = scraper::Html::parse_document(html);
    let Ok(selector) = scraper::Selector::parse("a[href]") else {
        return Vec::new();
    };
    document
        .select(&selector)
        .filter_map(|a| a.value().attr("href"))
        .filter_map(|href| base.join(href).ok())
        .filter(|u| u.scheme() == "http" || u.scheme() == "https")
        .map(without_userinfo)
        .collect()
}

/// The page URLs of the sitemaps (following one level of sitemap index),
/// sitemaps on the crawl's origin only, at most [`MAX_SITEMAPS`].
async fn sitemap_urls(fetcher: &Fetcher, scope: &Scope, sitemaps: Vec<Url>) -> Vec<Url> {
    let mut out = Vec::new();
    let mut pending: VecDeque<(Url, bool)> = sitemaps.into_iter().map(|u| (u, true)).collect();
    let mut read = 0;
    while let Some((sitemap, may_nest)) = pending.pop_front() {
        if read >= MAX_SITEMAPS {
            break;
        }
        read += 1;
        let Ok(Some(page)) = fetcher
            .fetch(&sitemap, &|u| scope.same_origin(u), Accept::Meta)
            .await
        else {
            continue;
        };
        let is_index = page.body.contains("<sitemapindex");
        for loc in xml_locs(&page.body) {
            let Ok(url) = Url::parse(&loc).map(without_userinfo) else {
                continue;
            };
            if is_index {
                if may_nest && scope.same_origin(&url) {
                    pending.push_back((url, false));
                }
            } else {
                out.push(url);
            }
        }
    }
    out
}

/// The text of every `<loc>` element.
fn xml_locs(xml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<loc>") {
        rest = &rest[start + 5..];
        let Some(end) = rest.find("</loc>") else {
            break;
        };
        let loc = rest[..end].trim().replace("&amp;", "&");
        out.push(loc);
        rest = &rest[end..];
    }
    out
}

/// The part of the web a crawl stays in: the start URL's origin and directory.
struct Scope {
    origin: Url,
    path_prefix: String,
}

impl Scope {
    fn of(start: &Url) -> Self {
        let path = start.path();
        let dir = match path.rfind('/') {
            Some(i) => &path[..=i],
            None => "/",
        };
        Self {
            origin: start.clone(),
            path_prefix: dir.to_owned(),
        }
    }

    fn origin_url(&self, path: &str) -> Url {
        let mut url = self.origin.clone();
        url.set_path(path);
        url.set_query(None);
        url.set_fragment(None);
        url
    }

    fn contains(&self, url: &Url) -> bool {
        self.same_origin(url) && url.path().starts_with(&self.path_prefix)
    }

    fn same_origin(&self, url: &Url) -> bool {
        url.origin() == self.origin.origin()
    }
}

/// The robots.txt rules that apply to us.
#[derive(Debug, Default)]
struct Robots {
    /// (allow, path prefix) rules of the group that applies.
    rules: Vec<(bool, String)>,
    sitemaps: Vec<String>,
}

impl Robots {
    /// Parses robots.txt, keeping the group for `agent` if there is one,
    /// else the `*` group.
    fn parse(text: &str, agent: &str) -> Self {
        let agent = agent.to_ascii_lowercase();
        let mut sitemaps = Vec::new();
        let mut specific: Option<Vec<(bool, String)>> = None;
        let mut star: Option<Vec<(bool, String)>> = None;
        let mut group_agents: Vec<String> = Vec::new();
        let mut group_rules: Vec<(bool, String)> = Vec::new();
        let mut in_rules = false;
        let mut finish = |agents: &[String], rules: &[(bool, String)]| {
            for a in agents {
                if a == "*" {
                    star.get_or_insert_with(Vec::new)
                        .extend(rules.iter().cloned());
                } else if agent.contains(a.as_str()) {
                    specific
                        .get_or_insert_with(Vec::new)
                        .extend(rules.iter().cloned());
                }
            }
        };
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if in_rules {
                        finish(&group_agents, &group_rules);
                        group_agents.clear();
                        group_rules.clear();
                        in_rules = false;
                    }
                    group_agents.push(value.to_ascii_lowercase());
                }
                "allow" | "disallow" => {
                    in_rules = true;
                    if !value.is_empty() {
                        group_rules.push((key == "allow", value.to_owned()));
                    }
                }
                "sitemap" => sitemaps.push(value.to_owned()),
                _ => {}
            }
        }
        finish(&group_agents, &group_rules);
        Self {
            rules: specific.or(star).unwrap_or_default(),
            sitemaps,
        }
    }

    /// The longest matching rule decides; allow wins ties; no rule allows.
    fn allows(&self, path: &str) -> bool {
        self.rules
            .iter()
            .filter(|(_, prefix)| path.starts_with(prefix.trim_end_matches('*')))
            .max_by_key(|(allow, prefix)| (prefix.len(), *allow))
            .is_none_or(|(allow, _)| *allow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A loopback server answering `/<n>` with a redirect to `targets[n]`,
    /// counting its connections.
    fn redirector(bind: &str, targets: Vec<String>) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind(bind).unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                }
                let n: usize = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|p| p.trim_start_matches('/').parse().ok())
                    .unwrap_or(0);
                let location = targets.get(n).cloned().unwrap_or_default();
                let _ = write!(
                    stream,
                    "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        (port, hits)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_redirect_hop_is_checked_against_the_network_policy() {
        // Scope aside (here: anything goes), each hop's address is checked.
        let (target_port, target_hits) = redirector("127.0.0.1:0", Vec::new());
        let (port, _) = redirector(
            "127.0.0.2:0",
            vec![
                format!("http://127.0.0.1:{target_port}/"),
                "http://169.254.169.254/latest/meta-data/".into(),
                format!("http://[::1]:{target_port}/"),
                format!("http://localhost:{target_port}/"),
                "http://[::ffff:10.0.0.1]/".into(),
            ],
        );
        let config = CrawlConfig {
            allow_private_networks: vec!["127.0.0.2/32".into()],
            ..Default::default()
        };
        let start = Url::parse("http://127.0.0.2/").unwrap();
        let fetcher = Fetcher::new(&config, Arc::new(SystemLookup), &start).unwrap();
        for (n, expected) in [
            (0, "127.0.0.1 is a loopback address"),
            (1, "169.254.169.254 is a link-local address"),
            (2, "::1 is a loopback address"),
            (3, "localhost resolves to"),
            (4, "::ffff:10.0.0.1 is an IPv4-mapped form of 10.0.0.1"),
        ] {
            let url = Url::parse(&format!("http://127.0.0.2:{port}/{n}")).unwrap();
            let err = fetcher
                .fetch(&url, &|_| true, Accept::Meta)
                .await
                .err()
                .unwrap_or_else(|| panic!("redirect {n} was followed"));
            assert!(err.contains(expected), "{n}: {err}");
        }
        assert_eq!(target_hits.load(Ordering::SeqCst), 0);
    }

    /// What a [`recorder`] saw: each request's Host and Authorization.
    type Seen = Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

    /// A loopback server answering `/<n>` with a redirect to
    /// `targets(port)[n]` (200 past the end; `port` is its own), recording
    /// each request's Host and Authorization headers.
    fn recorder(targets: impl Fn(u16) -> Vec<String>) -> (u16, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let targets = targets(port);
        let seen: Seen = Arc::default();
        let s = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let (mut host, mut auth) = (String::new(), None);
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':') {
                        match name.trim().to_ascii_lowercase().as_str() {
                            "host" => host = value.trim().to_owned(),
                            "authorization" => auth = Some(value.trim().to_owned()),
                            _ => {}
                        }
                    }
                }
                let n: usize = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|p| p.trim_start_matches('/').parse().ok())
                    .unwrap_or(usize::MAX);
                s.lock().unwrap().push((host, auth));
                let _ = match targets.get(n) {
                    Some(location) => write!(
                        stream,
                        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    ),
                    None => write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                    ),
                };
            }
        });
        (port, seen)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn site_credentials_go_to_the_start_origin_only_on_every_hop() {
        let (other, other_seen) = recorder(|_| Vec::new());
        let (port, seen) = recorder(|port| {
            vec![
                format!("http://127.0.0.1:{other}/9"),           // another port
                "/9".into(),                                     // the same origin
                format!("http://localhost:{port}/9"),            // another host name
                format!("http://mallory:pw@127.0.0.1:{port}/9"), // userinfo: dropped
            ]
        });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "S3CRET\n").unwrap();
        let config = CrawlConfig {
            allow_private_networks: vec!["127.0.0.0/8".into(), "::1/128".into()],
            site_credentials: vec![weft_config::SiteCredential {
                origin: format!("http://127.0.0.1:{port}"),
                username: Some("alice".into()),
                password_env: None,
                password_file: Some(file),
                token_env: None,
                token_file: None,
            }],
            ..Default::default()
        };
        let start = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let fetcher = Fetcher::new(&config, Arc::new(SystemLookup), &start).unwrap();
        assert!(!format!("{:?}", fetcher.auth).contains("S3CRET"));
        for n in 0..4 {
            let url = Url::parse(&format!("http://127.0.0.1:{port}/{n}")).unwrap();
            let fetched = fetcher.fetch(&url, &|_| true, Accept::Meta).await;
            assert!(fetched.is_ok(), "{n}: {:?}", fetched.err());
        }
        let basic = Some("Basic YWxpY2U6UzNDUkVU".to_owned()); // alice:S3CRET
        let here = format!("127.0.0.1:{port}");
        let seen = seen.lock().unwrap().clone();
        // 0 and its hop; 1 and its hop; 2 and its hop (as localhost); 3 and
        // its hop (the userinfo dropped: the configured credentials, not
        // mallory's).
        assert_eq!(seen.len(), 7, "{seen:?}");
        for (host, auth) in &seen {
            if *host == here {
                assert_eq!(*auth, basic, "{seen:?}");
            } else {
                assert_eq!(*auth, None, "sent to {host}: {seen:?}");
            }
        }
        assert!(
            seen.iter().any(|(h, _)| *h == format!("localhost:{port}")),
            "{seen:?}"
        );
        assert_eq!(
            other_seen.lock().unwrap().clone(),
            [(format!("127.0.0.1:{other}"), None)]
        );
    }

    #[test]
    fn bodies_are_decoded_by_their_charset() {
        assert_eq!(decode(b"caf\xe9", "text/html; charset=ISO-8859-1"), "café");
        assert_eq!(decode("café".as_bytes(), "text/html"), "café");
        assert_eq!(
            decode(b"\xef\xbb\xbfbom", "text/plain; charset=latin1"),
            "bom"
        );
    }

    #[test]
    fn robots_groups_and_longest_match() {
        let robots = Robots::parse(
            "User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nAllow: /private/ok\nSitemap: https://x/s.xml\n",
            "weft",
        );
        assert!(robots.allows("/docs/a"));
        assert!(!robots.allows("/private/secret"));
        assert!(robots.allows("/private/ok.html"));
        assert_eq!(robots.sitemaps, ["https://x/s.xml"]);
        let ours = Robots::parse(
            "User-agent: weft\nDisallow: /drafts\n\nUser-agent: *\nDisallow: /\n",
            "weft",
        );
        assert!(ours.allows("/docs") && !ours.allows("/drafts/x"));
    }

    #[test]
    fn sitemap_locs_and_scope() {
        let locs = xml_locs(
            "<urlset><url><loc> https://a/docs/x?a=1&amp;b=2 </loc></url><url><loc>https://a/y</loc></url></urlset>",
        );
        assert_eq!(locs, ["https://a/docs/x?a=1&b=2", "https://a/y"]);
        let scope = Scope::of(&Url::parse("https://a/docs/index.html").unwrap());
        assert!(scope.contains(&Url::parse("https://a/docs/x").unwrap()));
        assert!(!scope.contains(&Url::parse("https://a/blog/x").unwrap()));
        assert!(!scope.contains(&Url::parse("https://b/docs/x").unwrap()));
    }
}
