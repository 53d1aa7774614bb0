//! A documentation website: crawled from a start URL, staying on its origin
//! and under the start URL's directory, seeded from `sitemap.xml` (or the
//! sitemaps robots.txt names), honouring robots.txt, within page and depth
//! limits. HTML pages go to the HTML chunker; markdown and plain text pages
//! to theirs.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use indicatif::ProgressBar;
use url::Url;
use weft_config::CrawlConfig;

use crate::Issue;

/// Why a crawl could not start.
#[derive(Debug, thiserror::Error)]
pub enum CrawlError {
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(String),
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
    /// Its URL, without fragment.
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
    let client = reqwest::Client::builder()
        .user_agent(config.user_agent.clone())
        .timeout(Duration::from_secs(config.timeout_secs))
        .build()
        .map_err(|e| CrawlError::Client(e.to_string()))?;
    let scope = Scope::of(start);
    let robots = match fetch_text(&client, &scope.origin_url("/robots.txt")).await {
        Ok(Some((body, _))) => Robots::parse(&body, &config.user_agent),
        _ => Robots::default(),
    };
    let mut queue: VecDeque<(Url, usize)> = VecDeque::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut push = |url: Url, depth: usize, queue: &mut VecDeque<(Url, usize)>| {
        let mut url = url;
        url.set_fragment(None);
        if scope.contains(&url) && seen.insert(url.to_string()) {
            queue.push_back((url, depth));
        }
    };
    push(start.clone(), 0, &mut queue);
    let sitemaps = if robots.sitemaps.is_empty() {
        vec![scope.origin_url("/sitemap.xml")]
    } else {
        robots
            .sitemaps
            .iter()
            .filter_map(|s| Url::parse(s).ok())
            .collect()
    };
    for url in sitemap_urls(&client, sitemaps).await {
        push(url, 1, &mut queue);
    }
    let mut pages = Vec::new();
    let mut issues = Vec::new();
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
        let fetched = fetch_text(&client, &url).await;
        let first = !started;
        started = true;
        let (body, content_type) = match fetched {
            Ok(Some(page)) => page,
            Ok(None) => {
                if first {
                    return Err(CrawlError::Start {
                        url: url.to_string(),
                        message: "not found".into(),
                    });
                }
                issues.push(Issue {
                    uri: url.to_string(),
                    reason: "not found".into(),
                });
                continue;
            }
            Err(message) => {
                if first {
                    return Err(CrawlError::Start {
                        url: url.to_string(),
                        message,
                    });
                }
                issues.push(Issue {
                    uri: url.to_string(),
                    reason: message,
                });
                continue;
            }
        };
        let kind = if content_type.contains("html") {
            "html"
        } else if content_type.contains("markdown") {
            "markdown"
        } else if content_type.starts_with("text/") {
            "text"
        } else {
            continue;
        };
        if kind == "html" && depth < config.max_depth {
            for link in links(&url, &body) {
                push(link, depth + 1, &mut queue);
            }
        }
        progress.inc(1);
        pages.push(CrawledPage { url, kind, body });
    }
    Ok((pages, issues))
}

/// Fetches `url`: `Ok(None)` for 404/410, the body and content type for 2xx.
async fn fetch_text(
    client: &reqwest::Client,
    url: &Url,
) -> Result<Option<(String, String)>, String> {
    let response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
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
    let body = response.text().await.map_err(|e| e.to_string())?;
    Ok(Some((body, content_type)))
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
        .collect()
}

/// The page URLs of the sitemaps (following one level of sitemap index).
async fn sitemap_urls(client: &reqwest::Client, sitemaps: Vec<Url>) -> Vec<Url> {
    let mut out = Vec::new();
    let mut pending: VecDeque<(Url, bool)> = sitemaps.into_iter().map(|u| (u, true)).collect();
    while let Some((sitemap, may_nest)) = pending.pop_front() {
        let Ok(Some((body, _))) = fetch_text(client, &sitemap).await else {
            continue;
        };
        let is_index = body.contains("<sitemapindex");
        for loc in xml_locs(&body) {
            let Ok(url) = Url::parse(&loc) else { continue };
            if is_index {
                if may_nest {
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
        url.origin() == self.origin.origin() && url.path().starts_with(&self.path_prefix)
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
