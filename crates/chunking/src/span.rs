//! Byte-range helpers shared by the chunkers, and the assembly of
//! [`Piece`]s into [`Chunk`]s.

use weft_core::{Chunk, ContentType, DocumentId, EMBEDDING_FORMAT, content_hash};

/// A chunk before assembly: a byte range of the text and what it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Piece {
    pub start: usize,
    pub end: usize,
    pub section: String,
    pub node_type: String,
    pub node_name: Option<String>,
    /// Leading bytes shared with the previous piece.
    pub overlap: usize,
    /// Extra embedded context (member outline), never content.
    pub outline: Option<String>,
}

impl Piece {
    pub fn new(
        start: usize,
        end: usize,
        section: impl Into<String>,
        node_type: impl Into<String>,
    ) -> Self {
        Piece {
            start,
            end,
            section: section.into(),
            node_type: node_type.into(),
            node_name: None,
            overlap: 0,
            outline: None,
        }
    }
}

/// Counts characters of byte ranges; for ASCII text in O(1).
#[derive(Clone, Copy)]
pub(crate) struct Measure<'a> {
    text: &'a str,
    ascii: bool,
}

impl<'a> Measure<'a> {
    pub fn new(text: &'a str) -> Self {
        Measure {
            text,
            ascii: text.is_ascii(),
        }
    }

    /// Characters in `text[start..end]`.
    pub fn chars(&self, start: usize, end: usize) -> usize {
        if end <= start {
            0
        } else if self.ascii {
            end - start
        } else {
            self.text[start..end].chars().count()
        }
    }

    /// The byte position `n` characters after `start` (or `end`, if sooner).
    pub fn advance(&self, start: usize, n: usize, end: usize) -> usize {
        if self.ascii {
            return (start + n).min(end);
        }
        match self.text[start..end].char_indices().nth(n) {
            Some((i, _)) => start + i,
            None => end,
        }
    }
}

/// `end` moved back over trailing whitespace, not below `start`.
pub(crate) fn trim_end(text: &str, start: usize, end: usize) -> usize {
    start + text[start..end].trim_end().len()
}

/// `start` moved forward over leading whitespace, not past `end`.
pub(crate) fn skip_ws(text: &str, start: usize, end: usize) -> usize {
    end - text[start..end].trim_start().len()
}

/// Whether `pos` lies strictly inside one of `ranges` (sorted by start).
fn inside(ranges: &[(usize, usize)], pos: usize) -> Option<(usize, usize)> {
    ranges.iter().copied().find(|&(s, e)| s < pos && pos < e)
}

/// Splits `text[start..end]` into ranges of at most `max_chars` characters,
/// cutting at line starts, else after whitespace, else anywhere (on a
/// character boundary). No cut falls strictly inside a `keep_whole` range;
/// such a range may make a piece larger than `max_chars`.
///
/// Ranges start and end on non-whitespace and are separated by whitespace only.
pub(crate) fn split_by_size(
    text: &str,
    measure: Measure<'_>,
    start: usize,
    end: usize,
    max_chars: usize,
    keep_whole: &[(usize, usize)],
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut cur = skip_ws(text, start, end);
    while cur < end {
        let limit = measure.advance(cur, max_chars.max(1), end);
        let cut = if limit >= end {
            end
        } else {
            size_cut(text, cur, limit, end, keep_whole)
        };
        let piece_end = trim_end(text, cur, cut);
        if piece_end > cur {
            out.push((cur, piece_end));
        }
        cur = skip_ws(text, cut.max(cur + 1).min(end), end);
        // cut is always > cur; the max() only guards against a logic error.
    }
    out
}

/// Where to cut a piece starting at `cur` whose size limit is reached at `limit`.
fn size_cut(
    text: &str,
    cur: usize,
    limit: usize,
    end: usize,
    keep_whole: &[(usize, usize)],
) -> usize {
    // The last line start in (cur, limit] that is not inside a kept range.
    let mut search_end = limit;
    while let Some(nl) = text[cur..search_end].rfind('\n') {
        let line_start = cur + nl + 1;
        if line_start <= cur {
            break;
        }
        match inside(keep_whole, line_start) {
            None => return line_start,
            Some((s, _)) => {
                if s <= cur {
                    break;
                }
                search_end = s.min(search_end);
            }
        }
    }
    // The limit falls in a kept range that began at or before cur: cut at the
    // first line start after the range.
    if let Some((_, e)) = inside(keep_whole, limit).or_else(|| inside(keep_whole, cur + 1)) {
        let after = e.min(end);
        return match text[after..end].find('\n') {
            Some(nl) => after + nl + 1,
            None => end,
        };
    }
    // One long line: cut after the last whitespace, else at the limit.
    let window = &text[cur..limit];
    match window.rfind(char::is_whitespace) {
        Some(ws) if ws > 0 => {
            let ch_len = window[ws..].chars().next().map_or(1, char::len_utf8);
            cur + ws + ch_len
        }
        _ => limit.max(cur + text[cur..].chars().next().map_or(1, char::len_utf8)),
    }
}

/// What the assembly needs to know about the document.
pub(crate) struct DocumentMeta<'a> {
    pub document_id: &'a DocumentId,
    pub project: &'a str,
    pub uri: &'a str,
    pub title: &'a str,
    pub content_type: ContentType,
    pub language: &'a str,
    pub is_index_doc: bool,
}

/// Turns ordered pieces of `text` into chunks: indices, lines, content, hashes.
pub(crate) fn assemble(meta: &DocumentMeta<'_>, text: &str, pieces: Vec<Piece>) -> Vec<Chunk> {
    let total = pieces.len() as u32;
    let mut line = 1u32;
    let mut line_pos = 0usize;
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            // Pieces never go backwards, so lines are counted forward once.
            let bytes = text.as_bytes();
            line += newlines(&bytes[line_pos..p.start]);
            line_pos = p.start;
            let end_line = line + newlines(&bytes[p.start..p.end.saturating_sub(1).max(p.start)]);
            let content = text[p.start..p.end].to_owned();
            Chunk {
                document_id: meta.document_id.clone(),
                chunk_index: i as u32,
                total_chunks: total,
                project: meta.project.to_owned(),
                uri: meta.uri.to_owned(),
                title: meta.title.to_owned(),
                section: p.section,
                content_type: meta.content_type,
                language: meta.language.to_owned(),
                node_type: p.node_type,
                node_name: p.node_name,
                start_line: line,
                end_line,
                start_byte: p.start as u64,
                end_byte: p.end as u64,
                content_hash: content_hash(&content),
                content,
                is_index_doc: meta.is_index_doc,
                embedding_format: EMBEDDING_FORMAT.to_owned(),
                overlap_bytes: p.overlap as u32,
                outline: p.outline,
            }
        })
        .collect()
}

fn newlines(bytes: &[u8]) -> u32 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u32
}

/// Adds " (Part i/n)" to the sections of a run of pieces split from one unit.
pub(crate) fn number_parts(pieces: &mut [Piece]) {
    let n = pieces.len();
    if n < 2 {
        return;
    }
    for (i, p) in pieces.iter_mut().enumerate() {
        let label = format!("(Part {}/{})", i + 1, n);
        p.section = if p.section.is_empty() {
            label
        } else {
            format!("{} {label}", p.section)
        };
    }
}

/// One section of a document (markdown, reST, AsciiDoc) labelled `label`:
/// whole if it fits in `max_chars`, else parts cut at `blocks` (block
/// starts, sorted) and then by size, never inside a `keep` range, numbered
/// "(Part i/n)".
#[allow(clippy::too_many_arguments)]
pub(crate) fn split_section(
    text: &str,
    measure: Measure<'_>,
    range: (usize, usize),
    blocks: &[usize],
    keep: &[(usize, usize)],
    max_chars: usize,
    label: &str,
    out: &mut Vec<Piece>,
) {
    if measure.chars(range.0, range.1) <= max_chars {
        out.push(Piece::new(range.0, range.1, label, "section"));
        return;
    }
    let cuts = greedy_cuts(
        measure,
        range,
        blocks.iter().copied(),
        max_chars,
        max_chars / 8,
    );
    let mut parts = Vec::new();
    for (i, &cut) in cuts.iter().enumerate() {
        let next = cuts.get(i + 1).copied().unwrap_or(range.1);
        let end = trim_end(text, cut, next);
        for (s, e) in split_by_size(text, measure, cut, end, max_chars, keep) {
            parts.push(Piece::new(s, e, label, "section"));
        }
    }
    number_parts(&mut parts);
    out.extend(parts);
}

/// Chooses where to cut `range` among `candidates` (sorted positions inside
/// it, each the start of a block that must not be split): every part takes
/// whole blocks while it stays within `max_chars`; a part whose first block is
/// larger stays larger (the caller splits it further if it may). A tail under
/// `min_chars` joins the part before it when they fit together.
///
/// Returns the part starts, beginning with `range.0`.
pub(crate) fn greedy_cuts(
    measure: Measure<'_>,
    range: (usize, usize),
    candidates: impl IntoIterator<Item = usize>,
    max_chars: usize,
    min_chars: usize,
) -> Vec<usize> {
    let mut cuts = vec![range.0];
    let mut part_start = range.0;
    let mut last_fit: Option<usize> = None;
    for pos in candidates
        .into_iter()
        .filter(|&p| p > range.0 && p < range.1)
    {
        if pos <= part_start {
            continue;
        }
        if measure.chars(part_start, pos) <= max_chars {
            last_fit = Some(pos);
            continue;
        }
        let cut = last_fit.unwrap_or(pos);
        cuts.push(cut);
        part_start = cut;
        last_fit = (pos > part_start && measure.chars(part_start, pos) <= max_chars).then_some(pos);
    }
    if measure.chars(part_start, range.1) > max_chars
        && let Some(cut) = last_fit
    {
        cuts.push(cut);
    }
    if let [.., prev, tail] = cuts[..]
        && measure.chars(tail, range.1) < min_chars
        && measure.chars(prev, range.1) <= max_chars
    {
        cuts.pop();
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split<'a>(text: &'a str, max: usize, keep: &[(usize, usize)]) -> Vec<&'a str> {
        split_by_size(text, Measure::new(text), 0, text.len(), max, keep)
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    #[test]
    fn splits_at_line_starts() {
        assert_eq!(split("aaa\nbbb\nccc\n", 8, &[]), vec!["aaa\nbbb", "ccc"]);
    }

    #[test]
    fn long_lines_split_after_whitespace_then_anywhere() {
        assert_eq!(split("one two three", 8, &[]), vec!["one two", "three"]);
        assert_eq!(split("one two three", 6, &[]), vec!["one", "two", "three"]);
        assert_eq!(split("abcdefghij", 4, &[]), vec!["abcd", "efgh", "ij"]);
        assert_eq!(split("ééééé", 2, &[]), vec!["éé", "éé", "é"]);
    }

    #[test]
    fn kept_ranges_are_never_cut() {
        let text = "p\n```\nx\ny\nz\n```\nq\n";
        let fence = (2, 16);
        let parts = split(text, 4, &[fence]);
        assert!(
            parts.iter().any(|p| p.contains("```\nx\ny\nz\n```")),
            "{parts:?}"
        );
    }
}
