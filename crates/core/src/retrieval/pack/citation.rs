//! Citations: `uri#L<start>-L<end>`, written into every packed span and
//! read back from `get_context`'s argument.

/// `uri#L<start>-L<end>`.
pub fn citation(uri: &str, start_line: u32, end_line: u32) -> String {
    format!("{uri}#L{start_line}-L{end_line}")
}

/// A parsed citation: `uri`, `uri#L12` or `uri#L12-L30` (also `#L12-30`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    /// The document's path or URL.
    pub uri: String,
    /// The cited lines, when given.
    pub lines: Option<(u32, u32)>,
}

impl std::str::FromStr for Citation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let Some((uri, fragment)) = s.rsplit_once("#L") else {
            if s.is_empty() {
                return Err("the citation is empty".into());
            }
            return Ok(Citation {
                uri: s.to_owned(),
                lines: None,
            });
        };
        let bad = || format!("{s:?} is not a citation of the form uri#L<start>-L<end>");
        let (start, end) = match fragment.split_once('-') {
            Some((a, b)) => (a, b.strip_prefix('L').unwrap_or(b)),
            None => (fragment, fragment),
        };
        let start: u32 = start.parse().map_err(|_| bad())?;
        let end: u32 = end.parse().map_err(|_| bad())?;
        if uri.is_empty() || start == 0 || end < start {
            return Err(bad());
        }
        Ok(Citation {
            uri: uri.to_owned(),
            lines: Some((start, end)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_parse() {
        let c: Citation = "src/A.java#L12-L30".parse().unwrap();
        assert_eq!(c.uri, "src/A.java");
        assert_eq!(c.lines, Some((12, 30)));
        let c: Citation = "https://x.org/a#b#L3".parse().unwrap();
        assert_eq!(
            (c.uri.as_str(), c.lines),
            ("https://x.org/a#b", Some((3, 3)))
        );
        let c: Citation = "docs/a.md".parse().unwrap();
        assert_eq!(c.lines, None);
        assert!("a.md#L9-L3".parse::<Citation>().is_err());
        assert!("a.md#Lx".parse::<Citation>().is_err());
        assert_eq!(citation("a", 1, 2), "a#L1-L2");
    }
}
