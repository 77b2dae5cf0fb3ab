//! Durable near-duplicate corpora, for the two models neardup decides by.
//!
//! - **Documents** (Jaccard model): [`DocumentStore`] keeps each document's signature in
//!   an embedded redb database in one data directory, its band keys in memory, and
//!   decides near-duplicates as `neardup dedup` does, at the threshold it was made with;
//!   `RedisStore` (feature `redis`) keeps the same corpus in a Redis Cluster. Both
//!   implement [`Backend`], which `neardup serve` runs over, and both carry out one
//!   decision: a batch of [`Write`]s is decided once, against what is stored and the
//!   batch's earlier writes, into a plan the backend only performs (`decide.rs`).
//! - **Fingerprints** (64-bit model): [`FingerprintStore`] keeps 64-bit simhash
//!   fingerprints in redb and the tables in memory ([`neardup::corpus::Corpus`]), matched
//!   within a Hamming distance (`neardup index`).
//!
//! Every acknowledged write is durable before it returns. A document may carry a time to
//! live: once expired it stops matching at once, and a sweep deletes it. Readers
//! ([`DocumentStore::reader`], [`FingerprintStore::reader`]) never wait for the writer.
//! A damaged data directory is an error that names the damage, and [`check`],
//! [`repair`](repair()) and [`export`] save what can be saved.
//!
//! ```
//! use neardup_store::{DocConfig, DocumentStore, Outcome, Write};
//!
//! let dir = tempfile::tempdir()?;
//! let mut store = DocumentStore::create(dir.path(), DocConfig::default())?;
//! let preparer = store.preparer();
//! let text = "the quick brown fox jumps over the lazy dog while the farmer watches";
//! let put = |id: &str, only_if_unique| Write::Put {
//!     id: id.into(),
//!     doc: Box::new(preparer.prepare(text, false)),
//!     ttl: None,
//!     only_if_unique,
//! };
//! let outcomes = store.apply(vec![put("a", false), put("b", true)])?;
//! // "b" is a copy of "a", put earlier in the same batch: refused.
//! let Outcome::Put { inserted, matches, .. } = &outcomes[1] else { unreachable!() };
//! assert!(!inserted && matches[0].id == "a");
//! assert_eq!(store.check(&preparer.prepare(text, false))?.hits[0].id, "a");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backend;
mod batch;
mod clock;
mod decide;
mod dir;
mod documents;
mod error;
mod file;
mod fingerprints;
mod ids;
mod keys;
mod log;
mod packed;
mod prepare;
#[cfg(feature = "redis")]
mod redis;
mod repair;
mod rows;
mod snapshot;

pub use backend::{Backend, BackendReader};
pub use clock::{Clock, SystemClock};
pub use decide::{Checked, Hit, Outcome, ParagraphHit, SpanMatch, StoredDoc, Write, MAX_MATCHES};
pub use dir::{DOC_FORMAT, FILE, FORMAT, LOG_FILE};
pub use documents::{
    memory_needed, DocumentReader, DocumentStore, OpenOptions, Opened, CHECKPOINT_EVERY,
};
pub use error::{Result, StoreError};
pub use fingerprints::{FingerprintReader, FingerprintStore, Record, StoreConfig};
pub use prepare::{DocConfig, Prepared, Preparer, MAX_PARAGRAPHS};
#[cfg(feature = "redis")]
pub use redis::{Interrupt, RedisOptions, RedisReader, RedisStore};
pub use repair::{check, export, repair, Check, Export, Repair};
pub use snapshot::SnapshotJob;

// The names of the first releases, before the two models were named apart.
/// Old name of [`DocumentStore`].
#[deprecated(since = "0.1.0", note = "renamed DocumentStore")]
pub type DocStore = DocumentStore;
/// Old name of [`DocumentReader`].
#[deprecated(since = "0.1.0", note = "renamed DocumentReader")]
pub type DocStoreReader = DocumentReader;
/// Old name of [`FingerprintStore`].
#[deprecated(since = "0.1.0", note = "renamed FingerprintStore")]
pub type Store = FingerprintStore;
/// Old name of [`FingerprintReader`].
#[deprecated(since = "0.1.0", note = "renamed FingerprintReader")]
pub type StoreReader = FingerprintReader;
