//! The one error type of the core crate.

/// What can go wrong in the core: every variant is a caller's choice that cannot work,
/// never an I/O failure (the core does no I/O).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A table layout needs at least one block.
    #[error("blocks must be at least 1")]
    ZeroBlocks,
    /// Each block must hold at least one of the 64 bits.
    #[error("blocks must be at most 64, got {0}")]
    TooManyBlocks(usize),
    /// Two fingerprints within `distance` bits agree on `blocks - distance` blocks only when
    /// that is at least one.
    #[error("blocks ({blocks}) must be greater than distance ({distance})")]
    BlocksNotAboveDistance {
        /// Requested blocks.
        blocks: usize,
        /// Requested distance.
        distance: u32,
    },
    /// C(blocks, distance) tables would not fit in any reasonable memory or time.
    #[error(
        "{blocks} blocks at distance {distance} need {tables} tables, more than the limit of {limit}"
    )]
    TooManyTables {
        /// Requested blocks.
        blocks: usize,
        /// Requested distance.
        distance: u32,
        /// C(blocks, distance).
        tables: u128,
        /// [`crate::tables::MAX_TABLES`].
        limit: usize,
    },
    /// A memory budget that cannot hold the fingerprints and the least of a table.
    #[error(
        "a memory budget of {} MB cannot hold the fingerprints and a pass of a table: at least {} MB",
        budget / 1_000_000,
        needed.div_ceil(1_000_000)
    )]
    MemoryBudget {
        /// The budget, in bytes.
        budget: u64,
        /// The least that would do, in bytes.
        needed: u64,
    },
    /// Shingles need a window of at least one token.
    #[error("Window size must be positive")]
    InvalidWindow,
    /// Shingles of more tokens than [`crate::fingerprint::MAX_WINDOW`].
    #[error("window must be at most {max} tokens, got {window}")]
    WindowTooLarge {
        /// Requested window.
        window: usize,
        /// The limit.
        max: usize,
    },
    /// Character n-grams need at least one character.
    #[error("character n-grams need n of at least 1")]
    InvalidNgram,
    /// A tokenizer name that is not one of `words`, `ascii`, `char:N`, `jieba`.
    #[error("tokenizer must be words, ascii, jieba or char:N with N > 0, got '{0}'")]
    UnknownTokenizer(String),
    /// A weight that cannot vote: negative, infinite or not a number.
    #[error("weight of '{token}' must be a finite number of at least 0, got {weight}")]
    InvalidWeight {
        /// The token (or parameter) it belongs to.
        token: String,
        /// The weight given.
        weight: f32,
    },
    /// Bytes that are not a serialised idf table.
    #[error("invalid idf table: {0}")]
    InvalidIdf(String),
    /// Batch matching numbers fingerprints with 32 bits.
    #[error("at most {max} fingerprints per batch, got {got}")]
    TooManyFingerprints {
        /// Fingerprints given.
        got: usize,
        /// The limit, `u32::MAX`.
        max: usize,
    },
    /// The fingerprint-distance rule's lanes gave more candidate pairs than it may hold.
    #[error(
        "the fingerprint-distance rule found more than {limit} candidate pairs among {documents} \
         documents (many near-copies of one text?); the Jaccard rule (no --distance) pairs \
         such families with their first documents only"
    )]
    TooManyCandidates {
        /// The pairs it may hold.
        limit: usize,
        /// Documents given.
        documents: usize,
    },
    /// A keep rule that is not one of `first`, `longest`, `shortest`.
    #[error("keep must be first, longest or shortest, got '{0}'")]
    UnknownKeep(String),
    /// A Jaccard threshold outside (0, 1].
    #[error("threshold must be a Jaccard similarity above 0 and at most 1, got {0}")]
    InvalidThreshold(f64),
    /// Rows per band of a sketch's band keys outside 1 to 25.
    #[error("rows per band must be 1 to 25, got {0}")]
    InvalidRows(usize),
    /// Per-document inputs of different lengths.
    #[error("{fingerprints} fingerprints but {hashes} text hashes")]
    LengthMismatch {
        /// Fingerprints given.
        fingerprints: usize,
        /// Text hashes given.
        hashes: usize,
    },
    /// Nodes given as documents and starts that do not cut the documents into non-empty
    /// runs.
    #[error("node starts must rise from 0 to the {documents} documents")]
    InvalidNodes {
        /// Documents given.
        documents: usize,
    },
    /// An edge of the near-duplicate graph names a node that is not there.
    #[error("an edge names node {node}, but there are {nodes} nodes")]
    UnknownNode {
        /// The node named.
        node: u32,
        /// Nodes given.
        nodes: usize,
    },
    /// Connected components are not formed with documents kept outside the run.
    #[error(
        "closure cannot be combined with documents kept outside the run (a store's): \
         a document is removed only for one that is its near-duplicate there"
    )]
    ClosureWithOutside,
}

/// `Result` with the core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
