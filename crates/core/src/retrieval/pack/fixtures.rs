//! Documents and search responses for the tests of packing and
//! `get_context`.

use std::collections::HashMap;

use super::{ApproxTokenCounter, ContextPack, PackOptions, pack};
use crate::retrieval::{DocumentResult, ResultChunk, Span};
use crate::{Chunk, ContentType, DocumentId};

/// A document of `n` chunks of `lines` lines each, 40 chars a line.
pub(super) fn doc(uri: &str, n: u32, lines: u32) -> Vec<Chunk> {
    let id = DocumentId::new("p", uri);
    (0..n)
        .map(|i| {
            let start = i * lines + 1;
            let content = (start..start + lines)
                .map(|l| format!("{uri} line {l:>4} {}", "x".repeat(20)))
                .collect::<Vec<_>>()
                .join("\n");
            Chunk {
                document_id: id.clone(),
                chunk_index: i,
                total_chunks: n,
                project: "p".into(),
                uri: uri.into(),
                title: uri.into(),
                section: format!("S{i}"),
                content_type: ContentType::Code,
                language: "java".into(),
                node_type: "method_declaration".into(),
                node_name: Some(format!("m{i}")),
                start_line: start,
                end_line: start + lines - 1,
                start_byte: 0,
                end_byte: 0,
                content_hash: String::new(),
                content,
                is_index_doc: false,
                embedding_format: String::new(),
                overlap_bytes: 0,
                outline: None,
            }
        })
        .collect()
}

pub(super) fn result(chunks: &[Chunk], spans: &[&[(u32, f64, bool)]]) -> DocumentResult {
    DocumentResult {
        document_id: chunks[0].document_id.clone(),
        uri: chunks[0].uri.clone(),
        title: chunks[0].title.clone(),
        score: 0.0,
        spans: spans
            .iter()
            .map(|s| Span {
                start_line: chunks[s[0].0 as usize].start_line,
                end_line: chunks[s[s.len() - 1].0 as usize].end_line,
                rerank_score: None,
                chunks: s
                    .iter()
                    .map(|&(i, score, matched)| ResultChunk {
                        chunk: chunks[i as usize].clone(),
                        score,
                        matched,
                        vector: None,
                        text: None,
                        boost: 1.0,
                    })
                    .collect(),
            })
            .collect(),
    }
}

pub(super) fn pack_of(results: &[DocumentResult], max_tokens: usize) -> ContextPack {
    pack(
        results,
        &HashMap::from([("p".to_owned(), "abc123".to_owned())]),
        &PackOptions { max_tokens },
        &ApproxTokenCounter,
    )
}
