//! What can go wrong making a page, writing a corpus or reading a truth file, each with the
//! words its message has always had on the command line.

use std::io;

/// A page that cannot be made, an output that cannot be written, or a truth file that
/// cannot be read. [`Error::is_input`] tells the caller's fault (a path that cannot be
/// created, a bad line) from a failure on the way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A page's template failed (a bug: the data and templates are this crate's).
    #[error("{error}")]
    Render {
        /// Why.
        error: minijinja::Error,
    },
    /// An output file that cannot be created.
    #[error("cannot create '{path}': {error}")]
    Create {
        /// The path as given.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A directory of shards that cannot be made.
    #[error("cannot make the directory '{path}': {error}")]
    Directory {
        /// The path as given.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// An output file that stopped accepting writes.
    #[error("cannot write '{path}': {error}")]
    Write {
        /// The path as given.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// Standard output stopped accepting writes.
    #[error("cannot write to standard output: {error}")]
    Stdout {
        /// Why.
        error: io::Error,
    },
    /// A truth file that does not open.
    #[error("cannot read the truth file '{path}': {error}")]
    TruthOpen {
        /// The path as given.
        path: String,
        /// Why.
        error: io::Error,
    },
    /// A truth file whose reading failed on the way.
    #[error("{path}:{line}: {error}")]
    TruthRead {
        /// The path as given.
        path: String,
        /// The line, from 1.
        line: usize,
        /// Why.
        error: io::Error,
    },
    /// A line of a truth file that is not a pair of the corpus.
    #[error("{path}:{line}: {why}")]
    TruthLine {
        /// The path as given.
        path: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl Error {
    /// Whether the caller's input is at fault (a path that cannot be created or read, a bad
    /// line) rather than a write or read that failed on the way, or a bug.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Error::Create { .. }
                | Error::Directory { .. }
                | Error::TruthOpen { .. }
                | Error::TruthLine { .. }
        )
    }
}

impl From<minijinja::Error> for Error {
    fn from(error: minijinja::Error) -> Error {
        Error::Render { error }
    }
}
