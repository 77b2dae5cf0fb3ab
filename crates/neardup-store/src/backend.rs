//! What the service needs of a store, so that it can run over the embedded
//! [`DocumentStore`](crate::DocumentStore) or a store on other machines alike: a writer
//! that applies batches of writes durably, and readers that answer checks without waiting
//! for it.

use crate::decide::{Checked, Outcome, ParagraphHit, StoredDoc, Write};
use crate::error::Result;
use crate::prepare::{DocConfig, Prepared, Preparer};
use crate::snapshot::SnapshotJob;

/// The writer side of a document store.
pub trait Backend: Send + 'static {
    /// Its readers.
    type Reader: BackendReader;

    /// A query handle for other threads.
    fn reader(&self) -> Self::Reader;

    /// Applies `writes` in order, durably before it returns (see [`DocumentStore::apply`]).
    ///
    /// [`DocumentStore::apply`]: crate::DocumentStore::apply
    fn apply(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>>;

    /// Deletes every expired document; how many.
    fn sweep(&mut self) -> Result<usize>;

    /// Documents stored.
    fn len(&self) -> usize;

    /// Whether no document is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The store's settings.
    fn config(&self) -> DocConfig;

    /// A preparer for this store's documents.
    fn preparer(&self) -> Preparer {
        Preparer::new(self.config())
    }

    /// A snapshot of what the store keeps in memory, to write on another thread so that
    /// the next start is quick ([`DocumentStore::begin_snapshot`]); `None` for a store that
    /// keeps nothing to rebuild.
    ///
    /// [`DocumentStore::begin_snapshot`]: crate::DocumentStore::begin_snapshot
    fn begin_snapshot(&mut self) -> Result<Option<SnapshotJob>> {
        Ok(None)
    }

    /// `job` is written ([`DocumentStore::snapshot_written`]).
    ///
    /// [`DocumentStore::snapshot_written`]: crate::DocumentStore::snapshot_written
    fn snapshot_written(&mut self, job: &SnapshotJob) -> Result<()> {
        let _ = job;
        Ok(())
    }

    /// Lists at most `n` matches in a put's outcome, counting the rest
    /// ([`MAX_MATCHES`](crate::MAX_MATCHES) by default).
    fn limit_matches(&mut self, n: usize) {
        let _ = n;
    }

    /// Why the store takes no more writes, if it does not: its disk or database failed in
    /// a way only opening it again recovers from ([`DocumentStore::failure`]).
    ///
    /// [`DocumentStore::failure`]: crate::DocumentStore::failure
    fn failure(&self) -> Option<String> {
        None
    }

    /// The memory the store needs now, as its budget counts it, and that budget
    /// ([`DocumentStore::memory_needed`]); `(0, None)` for a store that keeps its
    /// documents elsewhere.
    ///
    /// [`DocumentStore::memory_needed`]: crate::DocumentStore::memory_needed
    fn memory(&self) -> (u64, Option<u64>) {
        (0, None)
    }

    /// Whether the store changed since its last snapshot ([`DocumentStore::snapshot_due`]).
    ///
    /// [`DocumentStore::snapshot_due`]: crate::DocumentStore::snapshot_due
    fn snapshot_due(&self) -> bool {
        false
    }
}

/// The reader side of a document store: cheap to clone, never waiting for the writer.
pub trait BackendReader: Clone + Send + Sync + 'static {
    /// The stored near-duplicates of `doc`, most similar first.
    fn check(&self, doc: &Prepared) -> Result<Checked>;

    /// As [`BackendReader::check`] of `text` prepared by `preparer`; stores may skip work
    /// for texts without candidates.
    fn check_text(&self, preparer: &Preparer, text: &str) -> Result<Checked> {
        self.check(&preparer.prepare(text, false))
    }

    /// As [`BackendReader::check_text`], for callers on an async runtime: a store on other
    /// machines waits for them without holding a thread (so that concurrent checks share
    /// its round trips); the others answer at once.
    fn check_text_async<'a>(
        &'a self,
        preparer: &'a Preparer,
        text: &'a str,
    ) -> impl std::future::Future<Output = Result<Checked>> + Send + 'a {
        std::future::ready(self.check_text(preparer, text))
    }

    /// The stored documents sharing near-duplicate paragraphs with `doc`.
    fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>>;

    /// The live document stored under `id`.
    fn get(&self, id: &str) -> Result<Option<StoredDoc>>;

    /// Documents stored, as of now.
    fn len(&self) -> usize;

    /// Whether no document is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The store's settings.
    fn config(&self) -> DocConfig;
}
