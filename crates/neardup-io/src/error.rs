//! What can go wrong reading an input, each kind with the words its message has always had
//! (tests and users match on them: `file:line: why`).

use std::io;

/// An input that cannot be read, or a line or row of it that is not what it should be.
///
/// [`Error::is_input`] tells the input's fault (a missing file, a bad line) from a failure
/// while reading (a read that fails half way): a command line exits differently for each.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input that does not open.
    #[error("cannot open input '{path}': {error}")]
    Open {
        /// The path as given.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// An input whose kind cannot be told (it may not exist).
    #[error("cannot read input '{path}': {error}")]
    Unreadable {
        /// The path as given.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A directory where a file of fingerprints was expected.
    #[error("cannot read input '{path}': it is a directory")]
    IsDirectory {
        /// The path as given.
        path: String,
    },
    /// A directory of inputs that cannot be walked.
    #[error("cannot read directory '{path}': {error}")]
    Walk {
        /// The directory as given.
        path: String,
        /// Why.
        error: walkdir::Error,
    },
    /// The copy of standard input made for a second pass does not open.
    #[error("cannot reopen the copy of standard input: {0}")]
    StdinCopy(io::Error),
    /// A `.zst` input without a zstd frame header.
    #[error("cannot read '{path}' as zstd: {error}")]
    Zstd {
        /// The path.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A read that failed part way.
    #[error("cannot read {name}: {error}")]
    Read {
        /// The path, or `<stdin>`.
        name: String,
        /// Why.
        error: io::Error,
    },
    /// A whole file that cannot be read (little-endian fingerprints).
    #[error("cannot read '{path}': {error}")]
    ReadFile {
        /// The path.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A JSON line that is no document.
    #[error("{name}:{line}: {why}")]
    Record {
        /// The input's path, or `<stdin>`.
        name: String,
        /// Its number, from 1.
        line: u64,
        /// What is wrong with it.
        why: String,
    },
    /// A line of a fingerprint list that is not a decimal u64.
    #[error("{name}:{line}: not a decimal u64: {shown:?} ({why})")]
    Decimal {
        /// The input's path, or `<stdin>`.
        name: String,
        /// Its number, from 1.
        line: u64,
        /// Its first 60 characters, white space trimmed.
        shown: String,
        /// What is wrong with it.
        why: LineError,
    },
    /// A file of little-endian u64 whose length is not a multiple of 8.
    #[error("'{path}': {len} bytes is not a whole number of little-endian u64")]
    NotU64 {
        /// The path.
        path: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A Parquet file that the parquet crate or its guard refuses.
    #[error("{name}: not readable as Parquet: {why}")]
    Parquet {
        /// The path.
        name: String,
        /// Why.
        why: String,
    },
    /// Parquet asked of standard input, which has no copy to seek in.
    #[error("Parquet input must be a file, not standard input")]
    ParquetStdin,
    /// Parquet asked of an input read as a stream.
    #[error("{name}: Parquet input must be a file")]
    ParquetStream {
        /// The path.
        name: String,
    },
    /// A Parquet file without the text column.
    #[error("{name}: no column \"{column}\" (columns: {columns})")]
    NoColumn {
        /// The path.
        name: String,
        /// The column asked for.
        column: String,
        /// The columns the file has, comma separated.
        columns: String,
    },
    /// A Parquet row whose text is not a string.
    #[error("{name}:{row}: column \"{column}\" is {what}")]
    Column {
        /// The path.
        name: String,
        /// The row, from 1.
        row: u64,
        /// The text column.
        column: String,
        /// What the value is instead (`null`, `not a string but …`).
        what: String,
    },
    /// Parquet input to a build without the `parquet` feature.
    #[error("{name}: this neardup was built without Parquet support (cargo feature \"parquet\")")]
    NoParquet {
        /// The path.
        name: String,
    },
    /// A weights table file ([`crate::weights`]) that cannot be read.
    #[error("cannot read {what} '{path}': {error}")]
    Table {
        /// Which table: `idf table`, `weights`.
        what: &'static str,
        /// The path.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// An idf table the core refuses.
    #[error("'{path}': {error}")]
    Idf {
        /// The path.
        path: String,
        /// Why.
        error: neardup::Error,
    },
    /// A weights file that is not a JSON object of numbers.
    #[error("'{path}': expected a JSON object of token weights: {error}")]
    Weights {
        /// The path.
        path: String,
        /// Why.
        error: serde_json::Error,
    },
    /// The caller's work on the documents stopped, so reading stopped too.
    #[error("the work on the documents stopped")]
    Stopped,
    /// The thread that read the documents panicked.
    #[error("the reading thread failed")]
    ReaderFailed,
}

impl Error {
    /// Whether the input is at fault (missing, unreadable from the start, malformed), not
    /// a read that failed while under way.
    pub fn is_input(&self) -> bool {
        !matches!(
            self,
            Error::StdinCopy(_) | Error::Read { .. } | Error::Stopped | Error::ReaderFailed
        )
    }
}

/// Why a line is not a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// `+` or `-` in front.
    Sign,
    /// A byte that is not a decimal digit.
    NotDigit(u8),
    /// More than 2^64 − 1.
    TooLarge,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Sign => f.write_str("a sign is not allowed"),
            LineError::NotDigit(b) if b.is_ascii_graphic() => {
                write!(f, "unexpected character '{}'", *b as char)
            }
            LineError::NotDigit(b) => write!(f, "unexpected byte 0x{b:02x}"),
            LineError::TooLarge => f.write_str("above 18446744073709551615"),
        }
    }
}
