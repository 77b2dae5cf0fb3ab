//! What a data directory holds: the names of its files, and the `format` setting that
//! tells the two kinds of store apart. Every module that touches the directory takes the
//! names from here, so that `remove_leftovers`, `repair` and the stores agree on them.

/// The database file inside a data directory.
pub const FILE: &str = "neardup.redb";

/// The write-ahead log of a document store inside its data directory.
pub const LOG_FILE: &str = "neardup.wal";

/// The snapshot of a document store's band indexes in its data directory.
pub(crate) const SNAPSHOT: &str = "bands.snapshot";

/// The file beside the database that names the process holding it.
pub(crate) const PID_FILE: &str = "neardup.pid";

/// Version of the fingerprint store's on-disk layout. Format 1 (without the expiry
/// table) is upgraded on open.
pub const FORMAT: u64 = 2;

/// The `format` setting of a document store. Far from [`FORMAT`], so that either kind of
/// store, opened as the other, says what it is instead of "another version". Format 101
/// keeps its ids in memory, not in a table (`ids.rs`); 102 keeps the band keys in a file
/// of their own, not in the rows (`keys.rs`). Older stores are upgraded on open.
pub const DOC_FORMAT: u64 = 102;

/// The `format` of a document store with an id table (external id → internal id), which
/// opening drops.
pub(crate) const OLD_DOC_FORMAT: u64 = 100;

/// The `format` of a document store whose rows hold their band keys, which opening moves
/// to the keys file.
pub(crate) const KEYED_DOC_FORMAT: u64 = 101;

/// The band keys of a document store's documents inside its data directory.
pub(crate) const KEYS_FILE: &str = "neardup.keys";

/// Whether `format` is a document store's, of this version or one opening upgrades.
pub(crate) fn is_doc_format(format: u64) -> bool {
    (OLD_DOC_FORMAT..=DOC_FORMAT).contains(&format)
}
