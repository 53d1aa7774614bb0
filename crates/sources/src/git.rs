//! A git repository given by URL: cloned into the data directory on first
//! use, fetched afterwards. A re-index reads only the files changed between
//! the last indexed commit and the new one (`git diff --name-status`).
//! Uses the `git` command, so ssh keys and credential helpers work as they
//! do for the user.
//!
//! What git may do is a [`GitPolicy`] (SECURITY.md): the transports it may
//! use (`protocol.allow`; remote helpers such as `ext::` never), and in the
//! distributed crawler ([`GitPolicy::from_crawl_config`]) the addresses it
//! may connect to, checked like the site crawler's and pinned for http(s),
//! with no redirects and no proxy from the environment. Credentials written
//! in a URL (`https://user:token@host/x.git`) are taken out of it: git gets
//! them from a credential helper scoped to that host, through its
//! environment, so they appear in no command line, `.git/config`, log,
//! error or catalog entry ([`redact_url`]). Checkouts are made with
//! `core.symlinks=false`, so a repository's symlink cannot point a reader
//! outside it, and changed paths that could escape the checkout are refused.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use weft_config::CrawlConfig;
use weft_config::InvalidSetting;
use weft_config::SiteAuth;

use super::net::NetworkPolicy;

/// Why a git operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` is not installed.
    #[error("`git` could not be run ({0}); install git to index repositories by URL")]
    NotInstalled(std::io::Error),
    /// The checkout directory could not be made.
    #[error("cannot create {path}: {source}")]
    Checkout {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("`git {args}` failed: {stderr}")]
    Failed {
        /// The arguments (with credentials taken out).
        args: String,
        /// What git printed (credentials redacted).
        stderr: String,
    },
    /// The URL is not allowed by the policy, or not a repository URL.
    #[error("{url}: {reason}")]
    Refused {
        /// The URL, credentials redacted.
        url: String,
        /// Why.
        reason: String,
    },
    /// The remote has no such branch (deleted, or never pushed).
    #[error("{url} has no branch {branch:?}")]
    NoBranch {
        /// The URL, credentials redacted.
        url: String,
        /// The branch asked for.
        branch: String,
    },
    /// The repository names a path that would leave the checkout.
    #[error("{url}: the repository has a path that would leave the checkout: {path:?}")]
    UnsafePath {
        /// The URL, credentials redacted.
        url: String,
        /// The path, as git printed it.
        path: String,
    },
}

/// What git may do for one source: the transports (`https`, `http`,
/// `ssh`, `git`, `file`) and, in the distributed crawler, the addresses.
#[derive(Clone)]
pub struct GitPolicy {
    protocols: Vec<String>,
    network: Option<Arc<NetworkPolicy>>,
    proxy: Option<String>,
    /// `crawl.git_credentials`, read: what each http(s) origin gets.
    credentials: Vec<(url::Origin, SiteAuth)>,
    /// `crawl.git_ssh_key_file` and `crawl.git_known_hosts_file`.
    ssh_key: Option<PathBuf>,
    known_hosts: Option<PathBuf>,
}

impl fmt::Debug for GitPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitPolicy")
            .field("protocols", &self.protocols)
            .field("network", &self.network)
            .field("proxy", &self.proxy.as_deref().map(redact_url))
            .field(
                "credentials",
                &self
                    .credentials
                    .iter()
                    .map(|(o, _)| o.ascii_serialization())
                    .collect::<Vec<_>>(),
            )
            .field("ssh_key", &self.ssh_key)
            .field("known_hosts", &self.known_hosts)
            .finish()
    }
}

impl GitPolicy {
    /// `weft index` on the user's own machine: https, http, ssh, git and
    /// local repositories (`file://`), any address, the user's proxies.
    pub fn local() -> Self {
        Self {
            protocols: ["https", "http", "ssh", "git", "file"]
                .map(String::from)
                .to_vec(),
            network: None,
            proxy: None,
            credentials: Vec::new(),
            ssh_key: None,
            known_hosts: None,
        }
    }

    /// The distributed crawler: the transports of `crawl.git_protocols`
    /// (default https and ssh: no local repositories), public addresses
    /// plus `crawl.allow_private_networks`, `crawl.proxy` or none; the
    /// credentials of `crawl.git_credentials` (their secrets read now) and
    /// the ssh key and known hosts of `crawl.git_ssh_key_file` /
    /// `crawl.git_known_hosts_file`.
    pub fn from_crawl_config(config: &CrawlConfig) -> Result<Self, InvalidSetting> {
        Ok(Self {
            protocols: config.git_protocols.clone(),
            network: Some(Arc::new(NetworkPolicy::from_config(config)?)),
            proxy: config.proxy.clone(),
            credentials: config.git_auth()?,
            ssh_key: config.git_ssh_key_file.clone(),
            known_hosts: config.git_known_hosts_file.clone(),
        })
    }

    /// The `ssh` command git runs: no prompt ever; with a key, that key
    /// alone; with known hosts, those alone, strictly.
    fn ssh_command(&self) -> String {
        let mut command = String::from("ssh -o BatchMode=yes");
        if let Some(key) = &self.ssh_key {
            command.push_str(" -o IdentitiesOnly=yes -i ");
            command.push_str(&shell_quote(&key.to_string_lossy()));
        }
        if let Some(known) = &self.known_hosts {
            command.push_str(" -o StrictHostKeyChecking=yes -o GlobalKnownHostsFile=/dev/null -o UserKnownHostsFile=");
            command.push_str(&shell_quote(&known.to_string_lossy()));
        }
        command
    }
}

/// `text` as one word for the shell git runs `GIT_SSH_COMMAND` with.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A local checkout of a remote repository.
#[derive(Clone)]
pub struct GitRepo {
    url: String,
    dir: PathBuf,
    policy: GitPolicy,
    branch: Option<String>,
}

impl fmt::Debug for GitRepo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitRepo")
            .field("url", &redact_url(&self.url))
            .field("dir", &self.dir)
            .field("policy", &self.policy)
            .field("branch", &self.branch)
            .finish()
    }
}

/// What changed between two commits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitChanges {
    /// Added or modified paths.
    pub changed: Vec<String>,
    /// Deleted paths.
    pub deleted: Vec<String>,
}

/// A remote as git will be given it.
struct Remote {
    /// `https`, `http`, `ssh`, `git` or `file`.
    transport: &'static str,
    /// The URL without credentials.
    url: String,
    /// Host and port to check (and pin), for network transports.
    host: Option<(String, u16)>,
    /// User name and password taken out of an http(s) URL.
    credentials: Option<(String, String)>,
    /// The credential helper's scope: `https://host:port`.
    origin: String,
}

impl GitRepo {
    /// The checkout of `url` kept in `dir`, with what `weft index` on the
    /// user's machine allows ([`GitPolicy::local`]).
    pub fn new(url: &str, dir: &Path) -> Self {
        Self::with_policy(url, dir, GitPolicy::local())
    }

    /// The checkout of `url` kept in `dir`, within `policy`.
    pub fn with_policy(url: &str, dir: &Path, policy: GitPolicy) -> Self {
        Self {
            url: url.to_owned(),
            dir: dir.to_owned(),
            policy,
            branch: None,
        }
    }

    /// The same checkout, of `branch` instead of the remote's default
    /// branch. The name must pass [`weft_core::overlays::branch_problem`]
    /// (it is checked again by [`GitRepo::sync`]).
    pub fn with_branch(mut self, branch: Option<String>) -> Self {
        self.branch = branch;
        self
    }

    /// The URL with any credentials redacted: what may be logged or stored.
    pub fn display_url(&self) -> String {
        redact_url(&self.url)
    }

    /// The working tree.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Clones or fetches, checks out the remote's default branch (or the
    /// branch [`GitRepo::with_branch`] names), and returns its commit. The
    /// URL is checked against the policy first. A branch the remote does
    /// not have is [`GitError::NoBranch`].
    pub fn sync(&self) -> Result<String, GitError> {
        let remote = self.remote()?;
        if let Some(problem) = self
            .branch
            .as_deref()
            .and_then(weft_core::overlays::branch_problem)
        {
            return Err(GitError::Refused {
                url: self.display_url(),
                reason: format!("branch {problem}"),
            });
        }
        let wanted = match &self.branch {
            Some(branch) => format!("refs/heads/{branch}"),
            None => "HEAD".to_owned(),
        };
        let no_branch = |e: GitError| match (&e, &self.branch) {
            (GitError::Failed { stderr, .. }, Some(branch))
                if stderr.contains("couldn't find remote ref")
                    || stderr.contains("not found in upstream") =>
            {
                GitError::NoBranch {
                    url: self.display_url(),
                    branch: branch.clone(),
                }
            }
            _ => e,
        };
        let pins = self.check_network(&remote)?;
        let network = |command: &mut Command| self.network_settings(command, &remote, &pins);
        if self.dir.join(".git").exists() {
            // The origin URL never holds credentials (older checkouts may).
            self.run(&["remote", "set-url", "origin", &remote.url], |_| {})?;
            self.run(&["config", "core.symlinks", "false"], |_| {})?;
            self.run(&["fetch", "--quiet", "origin", &wanted], network)
                .map_err(no_branch)?;
            // A partial clone fetches the blobs it checks out here: with the
            // same settings (credentials, pinned addresses) as the fetch.
            self.run(&["reset", "--quiet", "--hard", "FETCH_HEAD"], network)?;
            self.replace_symlinks()?;
        } else {
            if let Some(parent) = self.dir.parent() {
                std::fs::create_dir_all(parent).map_err(|source| GitError::Checkout {
                    path: parent.to_owned(),
                    source,
                })?;
            }
            let dir = self.dir.to_string_lossy().into_owned();
            let mut args = vec!["clone", "--quiet"];
            // A partial clone: commits and trees of the whole history (the
            // diff-based re-index needs them), blobs only as checked out,
            // so a checkout's disk stays near its working tree. Only where
            // git speaks protocol v2, which fetches those blobs by id later:
            // over ssh the server's sshd must pass GIT_PROTOCOL on (many do
            // not), and a v0 server that allows filters but not fetching
            // blobs by id would fail the checkout. A server without
            // filters sends everything.
            if matches!(remote.transport, "https" | "http" | "file") {
                args.push("--filter=blob:none");
            }
            if let Some(branch) = &self.branch {
                args.extend(["--branch", branch]);
            }
            args.extend(["--config", "core.symlinks=false", "--", &remote.url, &dir]);
            self.run_in(None, &args, network).map_err(no_branch)?;
        }
        self.head()
    }

    /// The checked-out commit.
    pub fn head(&self) -> Result<String, GitError> {
        Ok(self.run(&["rev-parse", "HEAD"], |_| {})?.trim().to_owned())
    }

    /// Whether `commit` exists locally (a force-push may have dropped it).
    pub fn has_commit(&self, commit: &str) -> bool {
        self.run(&["cat-file", "-e", &format!("{commit}^{{commit}}")], |_| {})
            .is_ok()
    }

    /// Paths changed and deleted from `old` to `new`. A path that could
    /// leave the checkout (absolute, `..`, NUL) is an error:
    /// such a repository is refused rather than read.
    pub fn changes(&self, old: &str, new: &str) -> Result<GitChanges, GitError> {
        let out = self.run(
            &["diff", "--name-status", "--no-renames", "-z", old, new],
            |_| {},
        )?;
        let mut changes = GitChanges::default();
        let mut fields = out.split('\0').filter(|f| !f.is_empty());
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            self.check_path(path)?;
            if status.starts_with('D') {
                changes.deleted.push(path.to_owned());
            } else {
                changes.changed.push(path.to_owned());
            }
        }
        Ok(changes)
    }

    fn check_path(&self, path: &str) -> Result<(), GitError> {
        if is_safe_relative_path(path) {
            Ok(())
        } else {
            Err(GitError::UnsafePath {
                url: self.display_url(),
                path: path.to_owned(),
            })
        }
    }

    /// Symlinks left in a checkout made before `core.symlinks=false`
    /// become plain files holding their target, as new checkouts have them.
    fn replace_symlinks(&self) -> Result<(), GitError> {
        let out = self.run(&["ls-files", "-s", "-z"], |_| {})?;
        let mut links = Vec::new();
        for entry in out.split('\0').filter(|e| e.starts_with("120000 ")) {
            let Some((_, path)) = entry.split_once('\t') else {
                continue;
            };
            self.check_path(path)?;
            let on_disk = self.dir.join(path);
            if on_disk
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                std::fs::remove_file(&on_disk).map_err(|source| GitError::Checkout {
                    path: on_disk.clone(),
                    source,
                })?;
                links.push(path.to_owned());
            }
        }
        if !links.is_empty() {
            let mut args = vec!["checkout", "--"];
            args.extend(links.iter().map(String::as_str));
            self.run(&args, |_| {})?;
        }
        Ok(())
    }

    /// The URL, classified and checked against the allowed transports.
    fn remote(&self) -> Result<Remote, GitError> {
        let refused = |reason: String| GitError::Refused {
            url: self.display_url(),
            reason,
        };
        let remote = parse_remote(&self.url).map_err(refused)?;
        if !self.policy.protocols.iter().any(|p| p == remote.transport) {
            let what = if remote.transport == "file" {
                "a local repository (file:// or a path)".to_owned()
            } else {
                format!("the {} transport", remote.transport)
            };
            return Err(refused(format!(
                "{what} is not allowed here; allowed: {} (crawl.git_protocols)",
                self.policy.protocols.join(", ")
            )));
        }
        Ok(remote)
    }

    /// Under a network policy: the host's addresses, each allowed (else an
    /// error naming it). Empty without a policy or for local repositories.
    fn check_network(&self, remote: &Remote) -> Result<Vec<IpAddr>, GitError> {
        let (Some(policy), Some((host, _))) = (&self.policy.network, &remote.host) else {
            return Ok(Vec::new());
        };
        let refused = |reason: String| GitError::Refused {
            url: self.display_url(),
            reason,
        };
        policy
            .resolve_blocking(host)
            .map_err(|e| refused(e.to_string()))
    }

    /// The settings of a command that talks to the remote: credentials
    /// through a helper scoped to its origin; under a network policy, the
    /// checked addresses pinned (http(s)), no redirects, no proxy but the
    /// configured one.
    fn network_settings(&self, command: &mut Command, remote: &Remote, pins: &[IpAddr]) {
        // Credentials of the URL, else of crawl.git_credentials for its
        // origin: in git's environment, never on its command line.
        let configured = || {
            let origin = url::Url::parse(&remote.origin).ok()?.origin();
            self.policy
                .credentials
                .iter()
                .find(|(o, _)| *o == origin)
                .map(|(_, auth)| auth)
        };
        let basic = match (&remote.credentials, configured()) {
            (Some((user, password)), _) => Some((user.as_str(), password.as_str())),
            (None, Some(SiteAuth::Basic { username, password })) => {
                Some((username.as_str(), password.expose()))
            }
            (None, Some(SiteAuth::Bearer(token))) => {
                command
                    .env("GIT_CONFIG_COUNT", "1")
                    .env(
                        "GIT_CONFIG_KEY_0",
                        format!("http.{}/.extraHeader", remote.origin),
                    )
                    .env(
                        "GIT_CONFIG_VALUE_0",
                        format!("Authorization: Bearer {}", token.expose()),
                    );
                None
            }
            (None, None) => None,
        };
        if let Some((user, password)) = basic {
            let key = format!("credential.{}.helper", remote.origin);
            command
                .arg("-c")
                .arg(format!("{key}="))
                .arg("-c")
                .arg(format!(
                    "{key}=!f() {{ test \"$1\" = get && printf 'username=%s\\npassword=%s\\n' \"$WEFT_GIT_USERNAME\" \"$WEFT_GIT_PASSWORD\"; }}; f"
                ))
                .env("WEFT_GIT_USERNAME", user)
                .env("WEFT_GIT_PASSWORD", password);
        }
        if self.policy.network.is_none() {
            return;
        }
        command
            .arg("-c")
            .arg("http.followRedirects=false")
            .arg("-c")
            .arg(format!(
                "http.proxy={}",
                self.policy.proxy.as_deref().unwrap_or("")
            ))
            .env("GIT_SSH_COMMAND", self.policy.ssh_command())
            .env_remove("GIT_ASKPASS")
            .env_remove("SSH_ASKPASS");
        for var in [
            "http_proxy",
            "https_proxy",
            "all_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
        ] {
            command.env_remove(var);
        }
        if let (Some((host, port)), true, false) = (
            &remote.host,
            matches!(remote.transport, "http" | "https"),
            pins.is_empty(),
        ) {
            let addresses: Vec<String> = pins
                .iter()
                .map(|ip| match ip {
                    IpAddr::V4(v4) => v4.to_string(),
                    IpAddr::V6(v6) => format!("[{v6}]"),
                })
                .collect();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            command.arg("-c").arg(format!(
                "http.curloptResolve={host}:{port}:{}",
                addresses.join(",")
            ));
        }
    }

    fn run(&self, args: &[&str], settings: impl FnOnce(&mut Command)) -> Result<String, GitError> {
        self.run_in(Some(&self.dir), args, settings)
    }

    fn run_in(
        &self,
        dir: Option<&Path>,
        args: &[&str],
        settings: impl FnOnce(&mut Command),
    ) -> Result<String, GitError> {
        let mut command = Command::new("git");
        if let Some(dir) = dir {
            command.arg("-C").arg(dir);
        }
        command
            .arg("-c")
            .arg("protocol.allow=never")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PROTOCOL_FROM_USER", "0")
            .env("GCM_INTERACTIVE", "never");
        for p in &self.policy.protocols {
            command.arg("-c").arg(format!("protocol.{p}.allow=always"));
        }
        settings(&mut command);
        let output = command
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(GitError::NotInstalled)?;
        if !output.status.success() {
            return Err(GitError::Failed {
                args: args.join(" "),
                stderr: self.redact(String::from_utf8_lossy(&output.stderr).trim()),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `text` with the URL's credentials, and those of
    /// `crawl.git_credentials`, replaced by `***`.
    fn redact(&self, text: &str) -> String {
        let mut text = text.replace(&self.url, &redact_url(&self.url));
        if let Ok(Remote {
            credentials: Some((user, password)),
            ..
        }) = parse_remote(&self.url)
        {
            for secret in [password, user] {
                if secret.len() >= 4 {
                    text = text.replace(&secret, "***");
                }
            }
        }
        // And the secrets of crawl.git_credentials.
        for (_, auth) in &self.policy.credentials {
            let secret = match auth {
                SiteAuth::Basic { password, .. } => password.expose(),
                SiteAuth::Bearer(token) => token.expose(),
            };
            if secret.len() >= 4 {
                text = text.replace(secret, "***");
            }
        }
        text
    }
}

/// Whether `path` (relative, `/`-separated, as git prints it) stays inside
/// the directory it is joined to: not empty, not absolute, no NUL, no
/// The branch checked out in the git work tree `dir` (a clone or a
/// worktree), if it is one and a branch is checked out (not a detached
/// head). Runs the user's own `git`, locally: nothing is fetched.
pub fn checked_out_branch(dir: &Path) -> Option<String> {
    if !dir.join(".git").exists() {
        return None;
    }
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["symbolic-ref", "--quiet", "--short", "HEAD"])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .filter(|b| !b.is_empty())
}

/// `.`/`..` or empty component (on Windows, `\\` and `:` separate too).
/// Other characters, control characters included, are legal file names
/// that cannot move a path.
pub fn is_safe_relative_path(path: &str) -> bool {
    let separators: &[char] = if cfg!(windows) {
        &['/', '\\', ':']
    } else {
        &['/']
    };
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\0')
        && path
            .split(separators)
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// `url` with its user name and password replaced by `***` (a user name
/// alone is kept for ssh and git, where it is not a secret, and replaced
/// for http(s), where it is often a token).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &authority[..at];
    let scheme = url[..scheme_end].to_ascii_lowercase();
    let keep_user = !userinfo.contains(':') && !matches!(scheme.as_str(), "http" | "https");
    if keep_user {
        return url.to_owned();
    }
    format!(
        "{}://***@{}{}",
        &url[..scheme_end],
        &authority[at + 1..],
        &rest[authority_end..]
    )
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |i: usize| {
        bytes
            .get(i)
            .and_then(|b| (*b as char).to_digit(16))
            .map(|d| d as u8)
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2))
        {
            out.push(h * 16 + l);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Classifies a remote as git would: `<helper>::<address>` (refused),
/// `scheme://…`, scp-like `[user@]host:path` (ssh), or a local path.
fn parse_remote(raw: &str) -> Result<Remote, String> {
    if raw.starts_with('-') {
        return Err("a repository URL cannot start with '-'".into());
    }
    if raw.chars().any(char::is_control) {
        return Err("the URL has control characters".into());
    }
    let scheme_end = raw.find("://");
    let before_scheme = &raw[..scheme_end.unwrap_or(raw.len())];
    if before_scheme.contains("::") {
        return Err(
            "remote helpers (<transport>::<address>, such as ext::) run commands and are never allowed"
                .into(),
        );
    }
    if scheme_end.is_some() {
        let url = url::Url::parse(raw).map_err(|e| format!("not a valid URL: {e}"))?;
        let transport = match url.scheme() {
            "https" => "https",
            "http" => "http",
            "ssh" | "git+ssh" | "ssh+git" => "ssh",
            "git" => "git",
            "file" => "file",
            other => return Err(format!("the {other}:// transport is not supported")),
        };
        if transport == "file" {
            return Ok(Remote {
                transport,
                url: raw.to_owned(),
                host: None,
                credentials: None,
                origin: String::new(),
            });
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or("the URL has no host")?
            .to_owned();
        if host.starts_with('-') {
            return Err("a host cannot start with '-'".into());
        }
        let port = url.port_or_known_default().unwrap_or(match transport {
            "ssh" => 22,
            "git" => 9418,
            _ => 443,
        });
        let mut stripped = url.clone();
        let credentials = if transport == "https" || transport == "http" {
            let user = percent_decode(url.username());
            let password = url.password().map(percent_decode).unwrap_or_default();
            let _ = stripped.set_username("");
            let _ = stripped.set_password(None);
            (!user.is_empty() || !password.is_empty()).then_some((user, password))
        } else {
            // ssh and git take no password in the URL (ssh keys do the work).
            let _ = stripped.set_password(None);
            None
        };
        let origin = format!("{}://{}:{port}", url.scheme(), host);
        return Ok(Remote {
            transport,
            url: stripped.to_string(),
            host: Some((host, port)),
            credentials,
            origin,
        });
    }
    // scp-like syntax: a colon before the first slash.
    let colon = raw.find(':');
    let slash = raw.find('/');
    if let Some(colon) = colon
        && slash.is_none_or(|s| colon < s)
    {
        let authority = &raw[..colon];
        let host = authority.rsplit('@').next().unwrap_or_default();
        if host.is_empty() || host.starts_with('-') {
            return Err("not a valid [user@]host:path address".into());
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        return Ok(Remote {
            transport: "ssh",
            url: raw.to_owned(),
            host: Some((host, 22)),
            credentials: None,
            origin: String::new(),
        });
    }
    Ok(Remote {
        transport: "file",
        url: raw.to_owned(),
        host: None,
        credentials: None,
        origin: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_are_classified_as_git_would() {
        for (url, transport) in [
            ("https://github.com/a/b.git", "https"),
            ("http://h/x.git", "http"),
            ("ssh://git@h/x.git", "ssh"),
            ("git+ssh://h/x.git", "ssh"),
            ("git@github.com:a/b.git", "ssh"),
            ("git://h/x.git", "git"),
            ("file:///srv/x.git", "file"),
            ("/srv/x.git", "file"),
            ("./x", "file"),
        ] {
            assert_eq!(parse_remote(url).unwrap().transport, transport, "{url}");
        }
        for url in [
            "ext::sh -c touch% /tmp/pwned",
            "fd::3",
            "https::example.org/x",
            "-uupload-pack=touch /tmp/x",
            "ssh://-oProxyCommand=touch%20x/x",
            "ftp://h/x.git",
            "https://h/x\n.git",
        ] {
            assert!(parse_remote(url).is_err(), "{url}");
        }
    }

    #[test]
    fn credentials_leave_the_url_for_the_helper() {
        let r = parse_remote("https://user:s3cr%2Ft@h.example:8443/o/x.git").unwrap();
        assert_eq!(r.url, "https://h.example:8443/o/x.git");
        assert_eq!(
            r.credentials,
            Some(("user".to_owned(), "s3cr/t".to_owned()))
        );
        assert_eq!(r.origin, "https://h.example:8443");
        assert_eq!(r.host, Some(("h.example".to_owned(), 8443)));
        let token_only = parse_remote("https://ghp_abc@github.com/o/x.git").unwrap();
        assert_eq!(token_only.url, "https://github.com/o/x.git");
        assert_eq!(
            token_only.credentials,
            Some(("ghp_abc".to_owned(), String::new()))
        );
    }

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("https://user:tok@h/x.git"),
            "https://***@h/x.git"
        );
        assert_eq!(redact_url("https://tok@h/x.git"), "https://***@h/x.git");
        assert_eq!(redact_url("ssh://git@h/x.git"), "ssh://git@h/x.git");
        assert_eq!(redact_url("ssh://git:pw@h/x.git"), "ssh://***@h/x.git");
        assert_eq!(redact_url("https://h/x.git?a=b@c"), "https://h/x.git?a=b@c");
        assert_eq!(redact_url("git@h:x.git"), "git@h:x.git");
    }

    #[test]
    fn paths_that_leave_the_checkout_are_unsafe() {
        for ok in [
            "a",
            "a/b.rs",
            "docs/..hidden",
            "a/b..c",
            "..a",
            "a\nb",
            "a b",
        ] {
            assert!(is_safe_relative_path(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "..",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "a\u{0}b",
        ] {
            assert!(!is_safe_relative_path(bad), "{bad:?}");
        }
    }
}
