//! Checks of the pipeline's messages (`weft/v1/pipeline.proto`) as a stage
//! receives them: the one place where the chunker and the embedder decide
//! whether a `Document` or a `ChunkBatch` holds together. A message that
//! does not is dead-lettered with the [`ConversionError`] as its reason;
//! nothing of it is written.
//!
//! What is checked: identities (project and uri as [`weft_core::project_problem`]
//! and [`weft_core::uri_problem`] allow, the document id computed from them, the
//! content hash of what is carried), a batch's parts, that chunks belong to
//! their batch (document, project, uri, total) and are each whole
//! ([`Chunk::try_from`]: index below total, byte range spanning the
//! content), and that consecutive chunks go forward (indices, bytes, lines)
//! and overlap only by their recorded `overlap_bytes`. Sizes are bounded by
//! the NATS server's payload limit, and every text field here by a length.

use weft_core::{Chunk, DocumentId, content_hash, project_problem};

use crate::{ConversionError, v1};

/// The longest short field (media type, revision, chunker fingerprint,
/// language, node type, embedded-text format), in bytes.
pub const MAX_LABEL_BYTES: usize = 1024;
/// The longest reason a batch gives for a skipped document, in bytes.
pub const MAX_REASON_BYTES: usize = 16 * 1024;

fn label_problem(value: &str) -> Option<String> {
    if value.len() > MAX_LABEL_BYTES {
        return Some(format!(
            "is {} bytes long, over the limit of {MAX_LABEL_BYTES}",
            value.len()
        ));
    }
    weft_core::control_character(value)
}

fn is_sha256_hex(value: &str) -> bool {
    value.len() == 64
        && value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks project, uri and document id, which every message carries; returns the id.
fn identity(
    message: &'static str,
    project: &str,
    uri: &str,
    document_id: &str,
) -> Result<DocumentId, ConversionError> {
    let err = |field, problem: String| ConversionError {
        message,
        field,
        problem,
    };
    if let Some(problem) = project_problem(project) {
        return Err(err("project", problem));
    }
    if let Some(problem) = weft_core::uri_problem(uri) {
        return Err(err("uri", problem));
    }
    let expected = DocumentId::new(project, uri);
    if expected.as_str() != document_id {
        return Err(err(
            "document_id",
            format!(
                "{document_id:?} is not the id of project {project:?}, uri {uri:?} ({expected})"
            ),
        ));
    }
    Ok(expected)
}

/// Checks a document message; returns its id. A document with content
/// carries the content's sha256 (so a message whose content was cut or
/// altered is refused); a deletion (no content) carries no hash.
pub fn check_document(document: &v1::Document) -> Result<DocumentId, ConversionError> {
    let err = |field, problem: String| ConversionError {
        message: "weft.v1.Document",
        field,
        problem,
    };
    let id = identity(
        "weft.v1.Document",
        &document.project,
        &document.uri,
        &document.document_id,
    )?;
    match &document.content {
        Some(content) => {
            let actual = content_hash(content);
            if document.content_hash != actual {
                return Err(err(
                    "content_hash",
                    format!(
                        "{:?} is not the sha256 of the {} bytes of content ({actual})",
                        document.content_hash,
                        content.len()
                    ),
                ));
            }
        }
        None if !document.content_hash.is_empty() => {
            return Err(err(
                "content_hash",
                format!(
                    "{:?} is set, but the message has no content: a deletion carries no hash (was the message cut short?)",
                    document.content_hash
                ),
            ));
        }
        None => {}
    }
    for (field, value) in [
        ("media_type", &document.media_type),
        ("revision", &document.revision),
    ] {
        if let Some(problem) = label_problem(value) {
            return Err(err(field, problem));
        }
    }
    Ok(id)
}

/// Checks a chunk batch and converts its chunks; returns the document's id
/// and the chunks in the batch's order.
pub fn check_chunk_batch(
    batch: &v1::ChunkBatch,
) -> Result<(DocumentId, Vec<Chunk>), ConversionError> {
    let err = |field, problem: String| ConversionError {
        message: "weft.v1.ChunkBatch",
        field,
        problem,
    };
    let id = identity(
        "weft.v1.ChunkBatch",
        &batch.project,
        &batch.uri,
        &batch.document_id,
    )?;
    if batch.parts == 0 || batch.part == 0 || batch.part > batch.parts {
        return Err(err(
            "part",
            format!(
                "part {} of {} is not one of 1..={}",
                batch.part, batch.parts, batch.parts
            ),
        ));
    }
    if !batch.deleted && !is_sha256_hex(&batch.content_hash) {
        return Err(err(
            "content_hash",
            format!(
                "{:?} is not a sha256 (64 lowercase hex characters)",
                batch.content_hash
            ),
        ));
    }
    if let Some(problem) = label_problem(&batch.chunker) {
        return Err(err("chunker", problem));
    }
    if batch.skipped_reason.len() > MAX_REASON_BYTES {
        return Err(err(
            "skipped_reason",
            format!(
                "is {} bytes long, over the limit of {MAX_REASON_BYTES}",
                batch.skipped_reason.len()
            ),
        ));
    }
    if (batch.deleted || !batch.skipped_reason.is_empty()) && !batch.chunks.is_empty() {
        let what = if batch.deleted {
            "a deleted document"
        } else {
            "a skipped document"
        };
        return Err(err(
            "chunks",
            format!("{what} has no chunks, but {} came", batch.chunks.len()),
        ));
    }
    if batch.chunks.len() as u64 > u64::from(batch.total_chunks) {
        return Err(err(
            "chunks",
            format!(
                "{} chunks of a document of total_chunks {}",
                batch.chunks.len(),
                batch.total_chunks
            ),
        ));
    }
    let mut chunks: Vec<Chunk> = Vec::with_capacity(batch.chunks.len());
    for wire in &batch.chunks {
        let chunk = Chunk::try_from(wire.clone())?;
        let index = chunk.chunk_index;
        let bad = |field, problem: String| ConversionError {
            message: "weft.v1.Chunk",
            field,
            problem: format!("chunk {index}: {problem}"),
        };
        if chunk.document_id != id {
            return Err(bad(
                "document_id",
                format!("{} is not this batch's document {id}", chunk.document_id),
            ));
        }
        if chunk.total_chunks != batch.total_chunks {
            return Err(bad(
                "total_chunks",
                format!(
                    "{} is not this batch's total_chunks {}",
                    chunk.total_chunks, batch.total_chunks
                ),
            ));
        }
        if chunk.project != batch.project || chunk.uri != batch.uri {
            return Err(bad(
                "uri",
                format!(
                    "project {:?}, uri {:?} is not this batch's project {:?}, uri {:?}",
                    chunk.project, chunk.uri, batch.project, batch.uri
                ),
            ));
        }
        if chunk.content.is_empty() {
            return Err(bad("content", "is empty".into()));
        }
        if chunk.content_hash != content_hash(&chunk.content) {
            return Err(bad(
                "content_hash",
                format!("{:?} is not the sha256 of content", chunk.content_hash),
            ));
        }
        if chunk.overlap_bytes as usize >= chunk.content.len() {
            return Err(bad(
                "overlap_bytes",
                format!(
                    "{} is not below the {} bytes of content",
                    chunk.overlap_bytes,
                    chunk.content.len()
                ),
            ));
        }
        if chunk.start_line == 0 || chunk.end_line < chunk.start_line {
            return Err(bad(
                "start_line",
                format!(
                    "lines {}..={} are not 1-based and in order",
                    chunk.start_line, chunk.end_line
                ),
            ));
        }
        for (field, value) in [
            ("language", &chunk.language),
            ("node_type", &chunk.node_type),
            ("embedding_format", &chunk.embedding_format),
        ] {
            if let Some(problem) = label_problem(value) {
                return Err(bad(field, problem));
            }
        }
        if let Some(prev) = chunks.last() {
            if index <= prev.chunk_index {
                return Err(bad(
                    "chunk_index",
                    format!("comes after chunk {} in the batch", prev.chunk_index),
                ));
            }
            if index == prev.chunk_index + 1 {
                // Neighbours: the byte ranges go forward and overlap only
                // by what the later one records.
                let reaches_back = chunk.start_byte + u64::from(chunk.overlap_bytes);
                let forward = chunk.start_byte >= prev.start_byte
                    && chunk.end_byte > prev.end_byte
                    && chunk.start_line >= prev.start_line;
                let overlap_ok = if chunk.overlap_bytes > 0 {
                    reaches_back == prev.end_byte
                } else {
                    chunk.start_byte >= prev.end_byte
                };
                if !forward || !overlap_ok {
                    return Err(bad(
                        "start_byte",
                        format!(
                            "bytes {}..{} (overlap {}) do not follow chunk {}'s {}..{}",
                            chunk.start_byte,
                            chunk.end_byte,
                            chunk.overlap_bytes,
                            prev.chunk_index,
                            prev.start_byte,
                            prev.end_byte
                        ),
                    ));
                }
            }
        }
        chunks.push(chunk);
    }
    Ok((id, chunks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::EMBEDDING_FORMAT;

    const PROJECT: &str = "demo";
    const URI: &str = "docs/guide.md";
    const TEXT: &str = "# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n";

    fn chunk(index: u32, total: u32, start: usize, end: usize, overlap: u32) -> v1::Chunk {
        let content = TEXT[start..end].to_owned();
        let line = |at: usize| TEXT[..at].matches('\n').count() as u32 + 1;
        v1::Chunk {
            document_id: DocumentId::new(PROJECT, URI).as_str().to_owned(),
            chunk_index: index,
            total_chunks: total,
            project: PROJECT.into(),
            uri: URI.into(),
            title: "Guide".into(),
            section: "Guide".into(),
            content_type: v1::ContentType::Prose as i32,
            language: "markdown".into(),
            node_type: "section".into(),
            start_line: line(start),
            end_line: line(end - 1),
            start_byte: start as u64,
            end_byte: end as u64,
            content_hash: content_hash(&content),
            content,
            embedding_format: EMBEDDING_FORMAT.into(),
            overlap_bytes: overlap,
            ..Default::default()
        }
    }

    fn batch() -> v1::ChunkBatch {
        v1::ChunkBatch {
            project: PROJECT.into(),
            document_id: DocumentId::new(PROJECT, URI).as_str().to_owned(),
            uri: URI.into(),
            total_chunks: 2,
            chunks: vec![chunk(0, 2, 0, 21, 0), chunk(1, 2, 22, TEXT.len(), 0)],
            part: 1,
            parts: 1,
            content_hash: content_hash(TEXT),
            version: 7,
            chunker: "weft-chunking 1 abc".into(),
            ..Default::default()
        }
    }

    fn document() -> v1::Document {
        v1::Document {
            project: PROJECT.into(),
            uri: URI.into(),
            document_id: DocumentId::new(PROJECT, URI).as_str().to_owned(),
            content: Some(TEXT.as_bytes().to_vec()),
            content_hash: content_hash(TEXT),
            ..Default::default()
        }
    }

    #[test]
    fn good_messages_pass() {
        assert_eq!(
            check_document(&document()).unwrap(),
            DocumentId::new(PROJECT, URI)
        );
        let deleted = v1::Document {
            content: None,
            content_hash: String::new(),
            ..document()
        };
        check_document(&deleted).unwrap();
        let (id, chunks) = check_chunk_batch(&batch()).unwrap();
        assert_eq!(id, DocumentId::new(PROJECT, URI));
        assert_eq!(chunks.len(), 2);
        // A recorded overlap that reaches back exactly to the previous end.
        let overlapping = v1::ChunkBatch {
            chunks: vec![chunk(0, 2, 0, 21, 0), chunk(1, 2, 9, TEXT.len(), 12)],
            ..batch()
        };
        check_chunk_batch(&overlapping).unwrap();
        // The second part of a document: later chunks only.
        let part = v1::ChunkBatch {
            chunks: vec![chunk(1, 2, 22, TEXT.len(), 0)],
            part: 2,
            parts: 2,
            ..batch()
        };
        check_chunk_batch(&part).unwrap();
        let deleted = v1::ChunkBatch {
            chunks: Vec::new(),
            total_chunks: 0,
            deleted: true,
            content_hash: String::new(),
            ..batch()
        };
        check_chunk_batch(&deleted).unwrap();
    }

    #[test]
    fn hostile_documents_are_refused_naming_the_field() {
        let cases: Vec<(v1::Document, &str, &str)> = vec![
            (
                v1::Document {
                    uri: "../../etc/passwd".into(),
                    document_id: DocumentId::new(PROJECT, "../../etc/passwd").as_str().into(),
                    ..document()
                },
                "uri",
                "\"..\"",
            ),
            (
                v1::Document {
                    uri: "/etc/passwd".into(),
                    document_id: DocumentId::new(PROJECT, "/etc/passwd").as_str().into(),
                    ..document()
                },
                "uri",
                "absolute",
            ),
            (
                v1::Document {
                    uri: "a\0b.md".into(),
                    ..document()
                },
                "uri",
                "U+0000",
            ),
            (
                v1::Document {
                    uri: String::new(),
                    ..document()
                },
                "uri",
                "empty",
            ),
            (
                v1::Document {
                    project: String::new(),
                    ..document()
                },
                "project",
                "empty",
            ),
            (
                v1::Document {
                    project: "a\nb".into(),
                    ..document()
                },
                "project",
                "U+000A",
            ),
            (
                v1::Document {
                    project: "p".repeat(300),
                    ..document()
                },
                "project",
                "300 characters",
            ),
            (
                v1::Document {
                    document_id: "0123456789abcdef".into(),
                    ..document()
                },
                "document_id",
                "not the id",
            ),
            (
                v1::Document {
                    content: Some(TEXT.as_bytes()[..10].to_vec()),
                    ..document()
                },
                "content_hash",
                "10 bytes",
            ),
            (
                v1::Document {
                    content: None,
                    ..document()
                },
                "content_hash",
                "cut short",
            ),
            (
                v1::Document {
                    media_type: "text/html\r\nX: y".into(),
                    ..document()
                },
                "media_type",
                "U+000D",
            ),
            (
                v1::Document {
                    revision: "r".repeat(2000),
                    ..document()
                },
                "revision",
                "2000 bytes",
            ),
        ];
        for (d, field, says) in cases {
            let e = check_document(&d).expect_err(&format!("{d:?} passed"));
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(says), "{e} should say {says:?}");
        }
    }

    #[test]
    fn hostile_batches_are_refused_naming_the_field() {
        let with_chunks = |chunks: Vec<v1::Chunk>| v1::ChunkBatch { chunks, ..batch() };
        let other = DocumentId::new(PROJECT, "other.md");
        let mut foreign = chunk(1, 2, 22, TEXT.len(), 0);
        foreign.document_id = other.as_str().into();
        let mut other_uri = chunk(1, 2, 22, TEXT.len(), 0);
        other_uri.uri = "other.md".into();
        let mut bad_hash = chunk(1, 2, 22, TEXT.len(), 0);
        bad_hash.content_hash = content_hash("something else");
        let mut long_range = chunk(1, 2, 22, TEXT.len(), 0);
        long_range.end_byte += 5;
        let mut zero_line = chunk(1, 2, 22, TEXT.len(), 0);
        zero_line.start_line = 0;
        let mut lines_backwards = chunk(1, 2, 22, TEXT.len(), 0);
        lines_backwards.end_line = lines_backwards.start_line - 1;
        let mut bad_total = chunk(1, 3, 22, TEXT.len(), 0);
        bad_total.total_chunks = 3;
        let mut bad_language = chunk(1, 2, 22, TEXT.len(), 0);
        bad_language.language = "md\u{1b}[0m".into();
        let cases: Vec<(v1::ChunkBatch, &str, &str)> = vec![
            (
                v1::ChunkBatch {
                    uri: "a/../../b.md".into(),
                    document_id: DocumentId::new(PROJECT, "a/../../b.md").as_str().into(),
                    ..batch()
                },
                "uri",
                "\"..\"",
            ),
            (
                v1::ChunkBatch {
                    document_id: other.as_str().into(),
                    ..batch()
                },
                "document_id",
                "not the id",
            ),
            (v1::ChunkBatch { part: 0, ..batch() }, "part", "part 0 of 1"),
            (
                v1::ChunkBatch {
                    part: 3,
                    parts: 2,
                    ..batch()
                },
                "part",
                "part 3 of 2",
            ),
            (
                v1::ChunkBatch {
                    content_hash: "abc".into(),
                    ..batch()
                },
                "content_hash",
                "sha256",
            ),
            (
                v1::ChunkBatch {
                    deleted: true,
                    ..batch()
                },
                "chunks",
                "a deleted document",
            ),
            (
                v1::ChunkBatch {
                    skipped_reason: "binary".into(),
                    ..batch()
                },
                "chunks",
                "a skipped document",
            ),
            (
                v1::ChunkBatch {
                    total_chunks: 1,
                    chunks: vec![chunk(0, 1, 0, 21, 0), chunk(0, 1, 0, 21, 0)],
                    ..batch()
                },
                "chunks",
                "2 chunks of a document of total_chunks 1",
            ),
            (
                v1::ChunkBatch {
                    chunker: "x".repeat(5000),
                    ..batch()
                },
                "chunker",
                "5000 bytes",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), chunk(2, 2, 22, TEXT.len(), 0)]),
                "chunk_index",
                "not below total_chunks",
            ),
            (
                with_chunks(vec![chunk(1, 2, 22, TEXT.len(), 0), chunk(0, 2, 0, 21, 0)]),
                "chunk_index",
                "comes after chunk 1",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), foreign]),
                "document_id",
                "not this batch's document",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), other_uri]),
                "uri",
                "other.md",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), bad_hash]),
                "content_hash",
                "chunk 1",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), long_range]),
                "end_byte",
                "does not span",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), zero_line]),
                "start_line",
                "1-based",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), lines_backwards]),
                "start_line",
                "in order",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), bad_total]),
                "total_chunks",
                "not this batch's total_chunks 2",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 0), bad_language]),
                "language",
                "U+001B",
            ),
            (
                // Overlaps chunk 0 without recording it.
                with_chunks(vec![chunk(0, 2, 0, 21, 0), chunk(1, 2, 9, TEXT.len(), 0)]),
                "start_byte",
                "do not follow chunk 0",
            ),
            (
                // Records more overlap than there is.
                with_chunks(vec![chunk(0, 2, 0, 21, 0), chunk(1, 2, 9, TEXT.len(), 3)]),
                "start_byte",
                "overlap 3",
            ),
            (
                // Goes backwards.
                with_chunks(vec![chunk(0, 2, 22, TEXT.len(), 0), chunk(1, 2, 0, 21, 0)]),
                "start_byte",
                "do not follow",
            ),
            (
                with_chunks(vec![chunk(0, 2, 0, 21, 21)]),
                "overlap_bytes",
                "not below",
            ),
        ];
        for (b, field, says) in cases {
            let e = check_chunk_batch(&b).expect_err(&format!("{b:?} passed"));
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(says), "{e} should say {says:?}");
        }
        let mut content_type = chunk(0, 2, 0, 21, 0);
        content_type.content_type = 42;
        let e = check_chunk_batch(&with_chunks(vec![content_type])).unwrap_err();
        assert_eq!(e.field, "content_type");
    }
}
