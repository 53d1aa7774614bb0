//! `crawl.site_credentials`: what the site crawler sends to a documentation
//! site that wants a login. The secret is read from an environment variable
//! or a file when a crawl starts, never written in `weft.toml` and never in
//! the site's URL (whose user name and password would otherwise become part
//! of every crawled page's uri, SECURITY.md). It is sent only to requests
//! whose origin (scheme, host and port) is the entry's `origin`, and only
//! when the crawl starts there.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::bad;

/// One entry of `crawl.site_credentials`: the credentials of one origin.
/// Exactly one of `password_env`, `password_file` (HTTP Basic, with
/// `username`), `token_env`, `token_file` (`Authorization: Bearer`, without
/// `username`) names where the secret is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteCredential {
    /// The origin the credentials are sent to: scheme, host and port only
    /// (`https://docs.example.com`, `http://wiki.internal:8080`). A request
    /// to any other origin — a redirect, a link, a sitemap — gets none.
    pub origin: String,
    /// The user name of HTTP Basic (with `password_env` or `password_file`).
    #[serde(default)]
    pub username: Option<String>,
    /// The environment variable holding the HTTP Basic password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// The file holding the HTTP Basic password (a trailing line break is
    /// not part of it).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// The environment variable holding a token sent as
    /// `Authorization: Bearer`.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The file holding a token sent as `Authorization: Bearer` (a trailing
    /// line break is not part of it).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
}

/// A secret read from the environment or a file. Its `Debug` shows no
/// value, and it has no `Display`: what holds one can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, to put in a request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// What the crawler sends to a site's origin, read from a
/// [`SiteCredential`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteAuth {
    /// `Authorization: Basic`.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
    /// `Authorization: Bearer`.
    Bearer(Secret),
}

/// Where an entry's secret is.
enum SecretSource<'a> {
    Env(&'static str, &'a str),
    File(&'static str, &'a std::path::Path),
}

impl SiteCredential {
    /// The origin of [`SiteCredential::origin`], as requests are compared
    /// with it; `Err` says what is wrong with the setting (without echoing a
    /// value that holds a user name or password).
    pub fn parsed_origin(&self) -> Result<url::Origin, String> {
        let shown = if self.origin.contains('@') {
            "the value".to_owned()
        } else {
            format!("{:?}", self.origin)
        };
        let url = url::Url::parse(&self.origin)
            .map_err(|e| format!("{shown} is not a URL like https://docs.example.com: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{shown} is not an http:// or https:// origin"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "holds a user name or password: the user name goes in username, the secret in password_env or password_file"
                    .into(),
            );
        }
        if url.host_str().is_none_or(str::is_empty)
            || url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(format!(
                "{shown} is not an origin: give the scheme, host and port only, like https://docs.example.com"
            ));
        }
        Ok(url.origin())
    }

    /// Checks the entry, `key` being its place (`crawl.site_credentials[0]`):
    /// an origin, one place for the secret, a user name exactly with a
    /// password, names that can be an environment variable or a file.
    pub fn validate(&self, key: &str) -> Result<(), InvalidSetting> {
        self.parsed_origin()
            .or_else(|message| bad(format!("{key}.origin"), message))?;
        let source = self.secret_source(key)?;
        let is_password = match source {
            SecretSource::Env(field, name) => {
                if name.is_empty() || name.contains(['=', '\0']) {
                    return bad(
                        format!("{key}.{field}"),
                        format!("{name:?} is not the name of an environment variable"),
                    );
                }
                field == "password_env"
            }
            SecretSource::File(field, path) => {
                if path.as_os_str().is_empty() {
                    return bad(format!("{key}.{field}"), "names no file");
                }
                field == "password_file"
            }
        };
        match (&self.username, is_password) {
            (None, true) => bad(
                format!("{key}.username"),
                "is needed with password_env or password_file (HTTP Basic)",
            ),
            (Some(user), true)
                if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) =>
            {
                bad(
                    format!("{key}.username"),
                    "must be a user name without ':' or control characters (HTTP Basic)",
                )
            }
            (Some(_), false) => bad(
                format!("{key}.username"),
                "goes with password_env or password_file; a token (token_env, token_file) is sent as Authorization: Bearer, without a user name",
            ),
            _ => Ok(()),
        }
    }

    /// Reads the secret (from the environment or its file), `key` being the
    /// entry's place for errors, which name the variable or file, never the
    /// value.
    pub fn read(&self, key: &str) -> Result<SiteAuth, InvalidSetting> {
        self.read_with(key, &|name| std::env::var_os(name))
    }

    /// [`SiteCredential::read`] with the environment given.
    fn read_with(
        &self,
        key: &str,
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<SiteAuth, InvalidSetting> {
        self.validate(key)?;
        let (field, value) = match self.secret_source(key)? {
            SecretSource::Env(field, name) => {
                let value = env(name)
                    .ok_or_else(|| InvalidSetting {
                        key: format!("{key}.{field}"),
                        message: format!("the environment variable {name} is not set"),
                    })?
                    .into_string()
                    .map_err(|_| InvalidSetting {
                        key: format!("{key}.{field}"),
                        message: format!("the environment variable {name} is not UTF-8"),
                    })?;
                (field, value)
            }
            SecretSource::File(field, path) => {
                let value = std::fs::read_to_string(path).map_err(|e| InvalidSetting {
                    key: format!("{key}.{field}"),
                    message: format!("{} cannot be read: {e}", path.display()),
                })?;
                let value = value
                    .strip_suffix('\n')
                    .map(|v| v.strip_suffix('\r').unwrap_or(v))
                    .unwrap_or(&value)
                    .to_owned();
                (field, value)
            }
        };
        if value.is_empty() {
            return bad(format!("{key}.{field}"), "the secret it names is empty");
        }
        if value.chars().any(char::is_control) {
            return bad(
                format!("{key}.{field}"),
                "the secret it names holds a control character (it cannot be sent in a header)",
            );
        }
        let secret = Secret::new(value);
        Ok(match &self.username {
            Some(username) => SiteAuth::Basic {
                username: username.clone(),
                password: secret,
            },
            None => SiteAuth::Bearer(secret),
        })
    }

    /// The one place the secret is, or why there is not exactly one.
    fn secret_source(&self, key: &str) -> Result<SecretSource<'_>, InvalidSetting> {
        let mut sources = Vec::new();
        if let Some(name) = &self.password_env {
            sources.push(SecretSource::Env("password_env", name));
        }
        if let Some(path) = &self.password_file {
            sources.push(SecretSource::File("password_file", path));
        }
        if let Some(name) = &self.token_env {
            sources.push(SecretSource::Env("token_env", name));
        }
        if let Some(path) = &self.token_file {
            sources.push(SecretSource::File("token_file", path));
        }
        if sources.len() != 1 {
            return bad(
                key,
                "set exactly one of password_env, password_file (with username), token_env, token_file",
            );
        }
        Ok(sources.remove(0))
    }
}

/// Checks every entry of `crawl.site_credentials`, and that no origin is
/// listed twice.
pub(crate) fn validate_all(
    setting: &str,
    entries: &[SiteCredential],
) -> Result<(), InvalidSetting> {
    let mut origins: Vec<url::Origin> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("{setting}[{i}]");
        entry.validate(&key)?;
        let origin = entry
            .parsed_origin()
            .or_else(|message| bad(format!("{key}.origin"), message))?;
        if origins.contains(&origin) {
            return bad(
                format!("{key}.origin"),
                format!("{} is listed twice", origin.ascii_serialization()),
            );
        }
        origins.push(origin);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_refused, load_toml};

    fn entry(toml: &str) -> String {
        format!("[[crawl.site_credentials]]\n{toml}\n")
    }

    #[test]
    fn bad_entries_are_named_by_field() {
        assert_refused(&[
            (
                &entry("origin = \"https://docs.example\"\nusername = \"a\""),
                "crawl.site_credentials[0]: set exactly one of",
            ),
            (
                &entry("origin = \"https://docs.example\"\npassword_env = \"P\""),
                "crawl.site_credentials[0].username",
            ),
            (
                &entry("origin = \"https://docs.example\"\nusername = \"a\"\ntoken_env = \"T\""),
                "crawl.site_credentials[0].username",
            ),
            (
                &entry(
                    "origin = \"https://docs.example\"\nusername = \"a\"\npassword_env = \"P\"\npassword_file = \"/p\"",
                ),
                "set exactly one of",
            ),
            (
                &entry("origin = \"https://docs.example/docs/\"\ntoken_env = \"T\""),
                "crawl.site_credentials[0].origin",
            ),
            (
                &entry("origin = \"ftp://docs.example\"\ntoken_env = \"T\""),
                "crawl.site_credentials[0].origin",
            ),
            (
                &entry("origin = \"https://docs.example\"\ntoken_env = \"A=B\""),
                "crawl.site_credentials[0].token_env",
            ),
            (
                &format!(
                    "{}{}",
                    entry("origin = \"https://docs.example\"\ntoken_env = \"T\""),
                    entry("origin = \"https://docs.example:443\"\ntoken_env = \"U\"")
                ),
                "crawl.site_credentials[1].origin: https://docs.example is listed twice",
            ),
        ]);
        // A password in the origin is refused, and not echoed.
        let err = load_toml(&entry(
            "origin = \"https://alice:S3CRET@docs.example\"\nusername = \"alice\"\npassword_env = \"P\"",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("crawl.site_credentials[0].origin") && !err.contains("S3CRET"),
            "{err}"
        );
    }

    #[test]
    fn secrets_come_from_the_environment_or_a_file_and_are_never_shown() {
        let config = load_toml(&format!(
            "{}{}",
            entry("origin = \"https://docs.example\"\nusername = \"alice\"\npassword_env = \"DOCS_PASSWORD\""),
            entry("origin = \"http://wiki.internal:8080\"\ntoken_file = \"/no/such/token\""),
        ))
        .unwrap();
        let [basic, bearer] = &config.crawl.site_credentials[..] else {
            panic!("{:?}", config.crawl.site_credentials);
        };
        let env = |name: &str| (name == "DOCS_PASSWORD").then(|| "S3CRET".into());
        let auth = basic.read_with("k", &env).unwrap();
        assert_eq!(
            auth,
            SiteAuth::Basic {
                username: "alice".into(),
                password: Secret::new("S3CRET")
            }
        );
        assert!(!format!("{auth:?}").contains("S3CRET"), "{auth:?}");
        let err = basic.read_with("k", &|_| None).unwrap_err().to_string();
        assert!(
            err.contains("k.password_env") && err.contains("DOCS_PASSWORD is not set"),
            "{err}"
        );
        let err = bearer.read_with("k", &env).unwrap_err().to_string();
        assert!(
            err.contains("k.token_file") && err.contains("/no/such/token"),
            "{err}"
        );

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "T0KEN\n").unwrap();
        let from_file = SiteCredential {
            token_file: Some(file.clone()),
            ..bearer.clone()
        };
        assert_eq!(
            from_file.read("k").unwrap(),
            SiteAuth::Bearer(Secret::new("T0KEN"))
        );
        std::fs::write(&file, "two\nlines\n").unwrap();
        let err = from_file.read("k").unwrap_err().to_string();
        assert!(
            err.contains("control character") && !err.contains("two"),
            "{err}"
        );
        assert_eq!(
            basic.parsed_origin().unwrap(),
            url::Url::parse("https://docs.example:443/x")
                .unwrap()
                .origin()
        );
    }
}
