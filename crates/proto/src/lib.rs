//! # weft-proto
//!
//! The wire contract of weft's pipeline (`proto/weft/v1`), generated with
//! prost, and conversions between its messages and the domain types of
//! `weft-core`. Protobuf types stay at the edges: services convert here and
//! work with `weft_core` types everywhere else.
//!
//! ```
//! use weft_proto::v1;
//! # let chunk = weft_proto::tests_support::sample_chunk();
//! let wire: v1::Chunk = chunk.clone().into();
//! let back = weft_core::Chunk::try_from(wire).unwrap();
//! assert_eq!(back, chunk);
//! ```

#![warn(missing_docs)]

use weft_core::{Chunk, ContentType, DocumentId};

pub mod pipeline;
pub mod query;

/// Generated messages and gRPC client/server of package `weft.v1`.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/weft.v1.rs"));
}

/// The encoded `FileDescriptorSet` of `proto/weft/v1`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/weft_descriptor.bin"));

/// A message that does not convert to a domain type, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}.{field}: {problem}")]
pub struct ConversionError {
    /// The message type, e.g. `weft.v1.Chunk`.
    pub message: &'static str,
    /// The field at fault.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl From<ContentType> for v1::ContentType {
    fn from(value: ContentType) -> Self {
        match value {
            ContentType::Prose => v1::ContentType::Prose,
            ContentType::Code => v1::ContentType::Code,
            ContentType::ApiReference => v1::ContentType::ApiReference,
        }
    }
}

impl From<Chunk> for v1::Chunk {
    fn from(c: Chunk) -> Self {
        v1::Chunk {
            document_id: c.document_id.as_str().to_owned(),
            chunk_index: c.chunk_index,
            total_chunks: c.total_chunks,
            project: c.project,
            uri: c.uri,
            title: c.title,
            section: c.section,
            content_type: v1::ContentType::from(c.content_type) as i32,
            language: c.language,
            node_type: c.node_type,
            node_name: c.node_name,
            start_line: c.start_line,
            end_line: c.end_line,
            start_byte: c.start_byte,
            end_byte: c.end_byte,
            content: c.content,
            content_hash: c.content_hash,
            is_index_doc: c.is_index_doc,
            embedding_format: c.embedding_format,
            overlap_bytes: c.overlap_bytes,
            outline: c.outline,
        }
    }
}

impl TryFrom<v1::Chunk> for Chunk {
    type Error = ConversionError;

    fn try_from(c: v1::Chunk) -> Result<Self, Self::Error> {
        let err = |field, problem: String| ConversionError {
            message: "weft.v1.Chunk",
            field,
            problem,
        };
        let document_id = DocumentId::parse(&c.document_id).ok_or_else(|| {
            err(
                "document_id",
                format!("{:?} is not 16 lowercase hex characters", c.document_id),
            )
        })?;
        let content_type =
            query::content_type(c.content_type, "content_type").map_err(|e| ConversionError {
                message: "weft.v1.Chunk",
                ..e
            })?;
        if c.chunk_index >= c.total_chunks {
            return Err(err(
                "chunk_index",
                format!(
                    "{} is not below total_chunks {}",
                    c.chunk_index, c.total_chunks
                ),
            ));
        }
        if c.end_byte < c.start_byte || c.end_byte - c.start_byte != c.content.len() as u64 {
            return Err(err(
                "end_byte",
                format!(
                    "{}..{} does not span the {} bytes of content",
                    c.start_byte,
                    c.end_byte,
                    c.content.len()
                ),
            ));
        }
        Ok(Chunk {
            document_id,
            chunk_index: c.chunk_index,
            total_chunks: c.total_chunks,
            project: c.project,
            uri: c.uri,
            title: c.title,
            section: c.section,
            content_type,
            language: c.language,
            node_type: c.node_type,
            node_name: c.node_name,
            start_line: c.start_line,
            end_line: c.end_line,
            start_byte: c.start_byte,
            end_byte: c.end_byte,
            content: c.content,
            content_hash: c.content_hash,
            is_index_doc: c.is_index_doc,
            embedding_format: c.embedding_format,
            overlap_bytes: c.overlap_bytes,
            outline: c.outline,
        })
    }
}

#[doc(hidden)]
pub mod tests_support {
    //! A sample chunk for doc examples and tests.
    use weft_core::{Chunk, ContentType, DocumentId, EMBEDDING_FORMAT, content_hash};

    /// A valid chunk.
    pub fn sample_chunk() -> Chunk {
        let content = "fn main() {}".to_owned();
        Chunk {
            document_id: DocumentId::new("p", "src/main.rs"),
            chunk_index: 1,
            total_chunks: 3,
            project: "p".into(),
            uri: "src/main.rs".into(),
            title: "main.rs".into(),
            section: "main".into(),
            content_type: ContentType::Code,
            language: "rust".into(),
            node_type: "function_item".into(),
            node_name: Some("main".into()),
            start_line: 4,
            end_line: 4,
            start_byte: 40,
            end_byte: 40 + content.len() as u64,
            content_hash: content_hash(&content),
            content,
            is_index_doc: false,
            embedding_format: EMBEDDING_FORMAT.into(),
            overlap_bytes: 0,
            outline: Some("Members of main: a".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::tests_support::sample_chunk;

    #[test]
    fn a_chunk_survives_the_wire() {
        let chunk = sample_chunk();
        let bytes = v1::Chunk::from(chunk.clone()).encode_to_vec();
        let decoded = v1::Chunk::decode(bytes.as_slice()).unwrap();
        assert_eq!(Chunk::try_from(decoded).unwrap(), chunk);
    }

    #[test]
    fn a_batch_carries_its_chunks_in_order() {
        let chunks: Vec<v1::Chunk> = (0..3)
            .map(|i| {
                let mut c = sample_chunk();
                c.chunk_index = i;
                c.into()
            })
            .collect();
        let batch = v1::ChunkBatch {
            project: "p".into(),
            total_chunks: 3,
            chunks,
            part: 1,
            parts: 1,
            ..Default::default()
        };
        let decoded = v1::ChunkBatch::decode(batch.encode_to_vec().as_slice()).unwrap();
        let indices: Vec<u32> = decoded.chunks.iter().map(|c| c.chunk_index).collect();
        assert_eq!(indices, vec![0, 1, 2]);
    }

    #[test]
    fn a_deleted_document_has_no_content() {
        let deleted = v1::Document {
            project: "p".into(),
            uri: "a.md".into(),
            ..Default::default()
        };
        let decoded = v1::Document::decode(deleted.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded.content, None);
        let empty = v1::Document {
            content: Some(Vec::new()),
            ..deleted
        };
        assert_eq!(
            v1::Document::decode(empty.encode_to_vec().as_slice())
                .unwrap()
                .content,
            Some(Vec::new())
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let mut wire = v1::Chunk::from(sample_chunk());
        wire.document_id = "nope".into();
        assert_eq!(Chunk::try_from(wire).unwrap_err().field, "document_id");

        let mut wire = v1::Chunk::from(sample_chunk());
        wire.content_type = 0;
        let err = Chunk::try_from(wire).unwrap_err();
        assert_eq!(
            err.to_string(),
            "weft.v1.Chunk.content_type: 0 is not prose, code or api_reference"
        );

        let mut wire = v1::Chunk::from(sample_chunk());
        wire.chunk_index = 3;
        assert_eq!(Chunk::try_from(wire).unwrap_err().field, "chunk_index");

        let mut wire = v1::Chunk::from(sample_chunk());
        wire.end_byte += 1;
        assert_eq!(Chunk::try_from(wire).unwrap_err().field, "end_byte");
    }
}
