//! One line for an error and its causes: how every weft binary and every
//! message that carries an error prints it.

use std::error::Error;

/// The error's message, then each cause's after `": "`, skipping a cause
/// whose message one already printed quotes (an error that says
/// "text index in D: lock busy" and also carries "lock busy" as its source
/// prints it once).
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// #[error("open {path}: {source}")]
/// struct Open { path: String, source: std::io::Error }
///
/// let e = Open { path: "a".into(), source: std::io::Error::other("denied") };
/// assert_eq!(weft_core::error_chain(&e), "open a: denied");
/// ```
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner: {0}")]
    struct Inner(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("quoting: {0}")]
    struct Quoting(#[source] Inner);

    #[test]
    fn every_cause_is_printed_once() {
        let io = || std::io::Error::other("disk");
        assert_eq!(error_chain(&Outer(Inner(io()))), "outer: inner: disk");
        // The outer message quotes its cause, which quotes its own.
        assert_eq!(error_chain(&Quoting(Inner(io()))), "quoting: inner: disk");
    }
}
