//! The invariants that the chunks of one document must satisfy.
//!
//! Every chunker is tested against [`check`]: on real code, on fixtures and on
//! random and hostile input.

use crate::chunk::{Chunk, content_hash};

/// A broken invariant, with the index of the chunk that breaks it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chunk {index}: {problem}")]
pub struct Violation {
    /// The chunk at fault (or the count of chunks, for the text after the last).
    pub index: usize,
    /// What is wrong.
    pub problem: String,
}

/// Checks that `chunks` are a faithful, ordered tiling of `text`:
///
/// - `chunk_index` runs 0..n-1 and `total_chunks` is n; one document id;
/// - `content` is exactly `text[start_byte..end_byte]`, non-empty, and
///   `content_hash` is its hash;
/// - byte ranges never go backwards; a chunk overlaps the previous one only
///   by its recorded `overlap_bytes`, otherwise what lies between two chunks
///   (and before the first and after the last) is whitespace: every non-blank
///   line of the text lies in some chunk;
/// - `start_line`/`end_line` are the 1-based lines of the first and last byte.
pub fn check(text: &str, chunks: &[Chunk]) -> Result<(), Violation> {
    let fail = |index: usize, problem: String| Err(Violation { index, problem });
    let mut covered_to = 0usize;
    let mut prev: Option<&Chunk> = None;
    let mut line = 1u32;
    let mut line_pos = 0usize;
    for (i, c) in chunks.iter().enumerate() {
        if c.chunk_index as usize != i {
            return fail(i, format!("chunk_index is {}", c.chunk_index));
        }
        if c.total_chunks as usize != chunks.len() {
            return fail(
                i,
                format!("total_chunks is {}, not {}", c.total_chunks, chunks.len()),
            );
        }
        if c.document_id != chunks[0].document_id {
            return fail(i, "document_id differs from chunk 0".into());
        }
        let (start, end) = (c.start_byte as usize, c.end_byte as usize);
        if start >= end || end > text.len() {
            return fail(
                i,
                format!(
                    "byte range {start}..{end} is empty or past the text ({})",
                    text.len()
                ),
            );
        }
        let Some(slice) = text.get(start..end) else {
            return fail(i, format!("byte range {start}..{end} splits a character"));
        };
        if c.content != slice {
            return fail(i, format!("content is not the text slice {start}..{end}"));
        }
        if c.content_hash != content_hash(&c.content) {
            return fail(i, "content_hash is not the hash of content".into());
        }
        let overlap = c.overlap_bytes as usize;
        if let Some(p) = prev
            && (start < p.start_byte as usize || end <= p.end_byte as usize)
        {
            return fail(
                i,
                format!(
                    "byte range {start}..{end} goes backwards from {}..{}",
                    p.start_byte, p.end_byte
                ),
            );
        }
        if overlap > 0 {
            if prev.is_none() || start + overlap != covered_to {
                return fail(
                    i,
                    format!(
                        "overlap_bytes {overlap} does not reach back exactly to the previous end {covered_to}"
                    ),
                );
            }
        } else {
            if start < covered_to {
                return fail(
                    i,
                    format!(
                        "starts at {start} inside the previous chunk (ends {covered_to}) without recorded overlap"
                    ),
                );
            }
            if let Some(gap) = text[covered_to..start].find(|ch: char| !ch.is_whitespace()) {
                return fail(
                    i,
                    format!(
                        "non-whitespace text at byte {} lies in no chunk",
                        covered_to + gap
                    ),
                );
            }
        }
        // Lines: count forward from the last known position (linear overall).
        if start < line_pos {
            line_pos = 0;
            line = 1;
        }
        line += count_newlines(&text.as_bytes()[line_pos..start]);
        line_pos = start;
        if c.start_line != line {
            return fail(
                i,
                format!("start_line is {}, the text says {line}", c.start_line),
            );
        }
        let end_line = line + count_newlines(&text.as_bytes()[start..end - 1]);
        if c.end_line != end_line {
            return fail(
                i,
                format!("end_line is {}, the text says {end_line}", c.end_line),
            );
        }
        covered_to = end;
        prev = Some(c);
    }
    if let Some(rest) = text[covered_to..].find(|ch: char| !ch.is_whitespace()) {
        return fail(
            chunks.len(),
            format!(
                "non-whitespace text at byte {} after the last chunk",
                covered_to + rest
            ),
        );
    }
    Ok(())
}

fn count_newlines(bytes: &[u8]) -> u32 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentType, DocumentId, EMBEDDING_FORMAT};

    fn make(text: &str, ranges: &[(usize, usize, usize)]) -> Vec<Chunk> {
        let doc = DocumentId::new("p", "t.txt");
        ranges
            .iter()
            .enumerate()
            .map(|(i, &(s, e, overlap))| {
                let content = text[s..e].to_string();
                Chunk {
                    document_id: doc.clone(),
                    chunk_index: i as u32,
                    total_chunks: ranges.len() as u32,
                    project: "p".into(),
                    uri: "t.txt".into(),
                    title: "t".into(),
                    section: String::new(),
                    content_type: ContentType::Prose,
                    language: "text".into(),
                    node_type: "paragraphs".into(),
                    node_name: None,
                    start_line: 1 + text[..s].matches('\n').count() as u32,
                    end_line: 1 + text[..e - 1].matches('\n').count() as u32,
                    start_byte: s as u64,
                    end_byte: e as u64,
                    content_hash: content_hash(&content),
                    content,
                    is_index_doc: false,
                    embedding_format: EMBEDDING_FORMAT.into(),
                    overlap_bytes: overlap as u32,
                    outline: None,
                }
            })
            .collect()
    }

    const TEXT: &str = "alpha\n\nbeta gamma\ndelta\n";

    #[test]
    fn a_whitespace_separated_tiling_passes() {
        assert_eq!(
            check(
                TEXT,
                &make(TEXT, &[(0, 5), (7, 23)].map(|(s, e)| (s, e, 0)))
            ),
            Ok(())
        );
    }

    #[test]
    fn recorded_overlap_passes_and_unrecorded_fails() {
        assert_eq!(check(TEXT, &make(TEXT, &[(0, 12, 0), (7, 23, 5)])), Ok(()));
        assert!(check(TEXT, &make(TEXT, &[(0, 12, 0), (7, 23, 0)])).is_err());
    }

    #[test]
    fn a_lost_word_fails() {
        let err = check(TEXT, &make(TEXT, &[(0, 5, 0), (12, 23, 0)])).unwrap_err();
        assert!(err.problem.contains("lies in no chunk"), "{err}");
        let err = check(TEXT, &make(TEXT, &[(0, 5, 0)])).unwrap_err();
        assert!(err.problem.contains("after the last chunk"), "{err}");
    }

    #[test]
    fn wrong_lines_and_content_fail() {
        let mut chunks = make(TEXT, &[(0, 5, 0), (7, 23, 0)]);
        chunks[1].start_line = 2;
        assert!(
            check(TEXT, &chunks)
                .unwrap_err()
                .problem
                .contains("start_line")
        );
        let mut chunks = make(TEXT, &[(0, 5, 0), (7, 23, 0)]);
        chunks[0].content.push('!');
        assert!(check(TEXT, &chunks).is_err());
    }
}
