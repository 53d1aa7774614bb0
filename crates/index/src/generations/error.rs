//! Why a generation was not begun, switched, aborted or collected.

use weft_core::ErrorKind;
use weft_core::generations::{GenerationError, GenerationState};
use weft_core::ports::{PortError, RegistryError};

/// Why a generation is not complete (the check before a switch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incomplete {
    /// Its rebuild is still publishing, or recorded no document count:
    /// nothing says what it should hold.
    #[error(
        "its rebuild has not finished publishing (no document count recorded): nothing says it is complete"
    )]
    Publishing,
    /// Messages for it are still queued.
    #[error("{documents} documents and {batches} chunk batches queued")]
    Queued {
        /// Documents queued.
        documents: u64,
        /// Chunk batches queued.
        batches: u64,
    },
    /// Its catalog records fewer documents than its rebuild published.
    #[error("{written} of {expected} documents written")]
    Documents {
        /// Documents its catalog records.
        written: u64,
        /// Documents its rebuild published.
        expected: u64,
    },
    /// No writer has recorded the model of its vectors yet.
    #[error("no embedder has written it yet")]
    NoModel,
    /// The catalog and the indexes hold different chunks.
    #[error(
        "the catalog records {catalog_chunks} chunks of {documents} documents, the vector index holds {vector_chunks}, the text index {text_chunks}"
    )]
    Disagree {
        /// Documents its catalog records.
        documents: u64,
        /// Chunks its catalog records.
        catalog_chunks: u64,
        /// Chunks in its vector index.
        vector_chunks: u64,
        /// Chunks in its text index.
        text_chunks: u64,
    },
    /// Messages for it were dead-lettered: waiting does not complete it.
    #[error("{count} of its messages were dead-lettered ({place}: the Weft-Error header says why)")]
    DeadLettered {
        /// Messages dead-lettered.
        count: u64,
        /// Where they are.
        place: String,
    },
}

impl Incomplete {
    /// Whether waiting may complete it (work under way), rather than
    /// something an operator must fix.
    pub fn waits(&self) -> bool {
        !matches!(self, Self::DeadLettered { .. })
    }
}

/// Why a generation was not begun, switched, aborted or collected.
#[derive(Debug, thiserror::Error)]
pub enum GenerationsError {
    /// The record refused the change.
    #[error(transparent)]
    Refused(#[from] GenerationError),
    /// The generation is not complete: not switched.
    #[error("generation {number} is not complete: {why}")]
    Incomplete {
        /// The generation.
        number: u32,
        /// What is missing.
        why: Incomplete,
    },
    /// The record could not be read or written.
    #[error(transparent)]
    Registry(PortError),
    /// A generation's stores could not be counted, prepared or removed.
    #[error("generation {number}'s stores: {source}")]
    Stores {
        /// The generation.
        number: u32,
        /// What failed.
        #[source]
        source: PortError,
    },
    /// The generation just begun is not in the record written (a
    /// concurrent writer changed it).
    #[error("the index generation just begun is not recorded")]
    NotRecorded,
}

impl GenerationsError {
    /// The kind of failure (the one [`ErrorKind`] every port carries): no
    /// such generation `NotFound`; a change the record refuses (a rebuild
    /// already building, the wrong state, another model) or a generation
    /// not complete `FailedPrecondition`; a record or stores that failed,
    /// their port's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Refused(GenerationError::Unknown(_)) => ErrorKind::NotFound,
            Self::Refused(GenerationError::Contended(_)) | Self::NotRecorded => {
                ErrorKind::Unavailable
            }
            Self::Refused(_) | Self::Incomplete { .. } => ErrorKind::FailedPrecondition,
            Self::Registry(e) | Self::Stores { source: e, .. } => e.kind(),
        }
    }

    /// Whether waiting may make the same call succeed: the generation is
    /// still being written, or the record or its stores were unreachable.
    pub fn waits(&self) -> bool {
        match self {
            Self::Incomplete { why, .. } => why.waits(),
            other => matches!(
                other.kind(),
                ErrorKind::Unavailable | ErrorKind::ResourceExhausted
            ),
        }
    }

    pub(super) fn not_building(number: u32, state: GenerationState) -> Self {
        Self::Refused(GenerationError::WrongState {
            number,
            state,
            expected: GenerationState::Building,
        })
    }

    pub(super) fn stores(number: u32) -> impl FnOnce(PortError) -> Self {
        move |source| Self::Stores { number, source }
    }
}

impl From<RegistryError> for GenerationsError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Transition(t) => Self::Refused(t),
            RegistryError::Port(p) => Self::Registry(p),
        }
    }
}
