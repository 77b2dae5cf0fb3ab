//! What can go wrong with a store, and `?` on redb's errors ([`db!`]).

use std::path::{Path, PathBuf};

use crate::dir::FILE;

/// What can go wrong with a data directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed (I/O, or a damaged file).
    #[error("{}: {source}", path.display())]
    Db {
        /// The database file.
        path: PathBuf,
        /// What redb said (boxed: it is large, and errors are rare).
        source: Box<redb::Error>,
    },
    /// The directory holds no store.
    #[error("{}: not a neardup data directory (no {FILE})", .0.display())]
    NotAStore(PathBuf),
    /// `create` on a directory that already holds a store.
    #[error("{}: already a neardup data directory", .0.display())]
    Exists(PathBuf),
    /// The file is a database, but not one of ours, or of another format.
    #[error("{}: {detail}", path.display())]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Opened with settings other than those it was made with.
    #[error("{}: made with {stored}, opened with {requested}", path.display())]
    Mismatch {
        /// The database file.
        path: PathBuf,
        /// The settings on disk.
        stored: String,
        /// The settings asked for.
        requested: String,
    },
    /// The file is damaged: cut short, its header overwritten, or its pages unreadable.
    /// `neardup index check|repair|export` ([`check`](crate::check),
    /// [`repair`](crate::repair()), [`export`](crate::export)) tell and save what can be
    /// saved.
    #[error("{}: the store file is damaged: {detail}", path.display())]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Another `Store` holds the directory: another process (named when it said who it
    /// is), or this one.
    #[error("{}: in use by {}", path.display(), holder(*pid))]
    InUse {
        /// The data directory.
        path: PathBuf,
        /// The process holding it, if known.
        pid: Option<u32>,
    },
    /// A `create` was interrupted before it finished (by a version that made stores in
    /// place): the file holds nothing. `create` replaces it.
    #[error(
        "{}: a neardup store whose creation was interrupted: it holds nothing; create it again",
        .0.display()
    )]
    Unfinished(PathBuf),
    /// Settings that cannot make a store.
    #[error("{0}")]
    Setting(String),
    /// A store on other machines (the Redis Cluster backend) failed: unreachable, a
    /// command refused, no corpus where one was expected, or data this neardup cannot read.
    #[error("{target}: {detail}")]
    Remote {
        /// The store: its seed nodes and namespace.
        target: String,
        /// What went wrong.
        detail: String,
    },
    /// A layout the core refuses.
    #[error(transparent)]
    Core(#[from] neardup::Error),
    /// A batch of writes failed after its record reached the write-ahead log: it may be
    /// durable, and then the next open applies it. Its outcome is unknown; the store
    /// takes no more writes (it [`failed`](crate::DocumentStore::failure)).
    #[error(
        "{}: {detail}: the writes' outcome is unknown (their log record may be durable, and \
         the next start applies them if it is)",
        path.display()
    )]
    Unsure {
        /// The database file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// The store failed earlier (its database or log met an I/O error it cannot go on
    /// from) and takes no more calls until it is opened again, which recovers every
    /// acknowledged write from the write-ahead log.
    #[error("{}: the store failed earlier ({detail}); open it again", path.display())]
    Failed {
        /// The database file.
        path: PathBuf,
        /// The first failure.
        detail: String,
    },
    /// The store would need more memory than it may use (its `memory_budget`): at open,
    /// for the index of what it holds; at a write, for the index with the write's new
    /// documents. Nothing was changed.
    #[error("{}: {detail}", path.display())]
    Memory {
        /// The data directory.
        path: PathBuf,
        /// What it would need, and what it may use.
        detail: String,
    },
    /// The directory cannot be made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl StoreError {
    /// Whether the call certainly changed nothing: false for [`StoreError::Unsure`].
    pub fn stored_nothing(&self) -> bool {
        !matches!(self, StoreError::Unsure { .. })
    }
}

fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) if p == std::process::id() => {
            "this process: another Store of it has the directory open (close that one first)".into()
        }
        Some(p) => format!("another process (pid {p})"),
        None => "another process".into(),
    }
}

/// `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A redb error on the file at `path`, in the store's words.
pub(crate) fn db_err(path: &Path) -> impl Fn(redb::Error) -> StoreError + '_ {
    move |source| StoreError::Db {
        path: path.to_path_buf(),
        source: Box::new(source),
    }
}

/// `?` on any redb error, naming the file.
macro_rules! db {
    ($path:expr, $e:expr) => {
        $e.map_err(|e| $crate::error::db_err($path)(e.into()))
    };
}
pub(crate) use db;
