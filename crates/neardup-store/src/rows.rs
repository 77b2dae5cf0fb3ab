//! A document store's tables, the bytes of their rows, and the whole file read and
//! written row by row for [`check`](crate::check) and [`repair`](crate::repair()).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;

use neardup::decide::Signature;
use neardup::jaccard::{BandKeys, Threshold, SKETCH_VERSION};
use redb::{Database, ReadableTable, TableDefinition, TableHandle};

use crate::dir::{DOC_FORMAT, KEYED_DOC_FORMAT, KEYS_FILE, OLD_DOC_FORMAT};
use crate::error::{db, Result, StoreError};
use crate::packed;
use crate::prepare::{other_version, DocConfig, MAX_PARAGRAPHS};

/// Settings by name: "format", "threshold" (the f64's bits), "paragraphs" (0 or 1),
/// "fingerprint_version", "sketch_version", "next_id"; and for index snapshots
/// ([`crate::snapshot`]) "instance" (random, made with the store), "commit" (write
/// transactions committed) and "snapshot_commit" (the commit the removal log is pruned to).
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// External id → internal id, in stores of [`OLD_DOC_FORMAT`]; the ids are now in each
/// document's row only, and in memory (`ids.rs`).
pub(crate) const IDS: TableDefinition<&str, u64> = TableDefinition::new("ids");
/// Internal id → its paragraphs: per paragraph its start and end (u32, little-endian)
/// and its signature bytes.
pub(crate) const PARAS: TableDefinition<u64, &[u8]> = TableDefinition::new("paragraphs");
/// (expiry, internal id) of the documents that expire.
pub(crate) const EXPIRY: TableDefinition<(u64, u64), ()> = TableDefinition::new("expiry");
/// (commit, internal id) → paragraphs, of every document removed by that write
/// transaction: what an index snapshot taken before it must still remove
/// ([`crate::snapshot`]). Pruned up to a snapshot once it is durable.
pub(crate) const REMOVED: TableDefinition<(u64, u64), u64> = TableDefinition::new("removed");
/// Internal id → (external id, expiry, signature): the documents of a store made before
/// their rows were packed ([`packed::DOCS`]); [`pack_old_rows`] packs them.
pub(crate) const UNPACKED: TableDefinition<u64, (&str, u64, &[u8])> = TableDefinition::new("docs");

/// Bytes of a paragraph in a [`PARAS`] row: its start and end, then its signature.
pub(crate) const PARA_BYTES: usize = 8 + Signature::BYTES;

/// The signature in a row's `bytes`.
pub(crate) fn signature_of(path: &Path, bytes: &[u8]) -> Result<Signature> {
    let bytes: &[u8; Signature::BYTES] = bytes.try_into().map_err(|_| StoreError::Damaged {
        path: path.to_path_buf(),
        detail: format!(
            "a signature of {} bytes, not {}",
            bytes.len(),
            Signature::BYTES
        ),
    })?;
    Ok(Signature::from_bytes(bytes))
}

/// The signature in a document's row's `bytes` (its band keys apart), with `bands`.
pub(crate) fn stored_signature_of(path: &Path, bytes: &[u8], bands: BandKeys) -> Result<Signature> {
    let bytes: &[u8; Signature::STORED_BYTES] =
        bytes.try_into().map_err(|_| StoreError::Damaged {
            path: path.to_path_buf(),
            detail: format!(
                "a signature of {} bytes, not {}",
                bytes.len(),
                Signature::STORED_BYTES
            ),
        })?;
    Ok(Signature::from_stored_bytes(bytes, bands))
}

/// The paragraphs of a [`PARAS`] row.
pub(crate) fn paragraphs_of(path: &Path, bytes: &[u8]) -> Result<Vec<(Range<u32>, Signature)>> {
    // More than MAX_PARAGRAPHS would give paragraphs the index ids of the next document's.
    if !bytes.len().is_multiple_of(PARA_BYTES) || bytes.len() / PARA_BYTES > MAX_PARAGRAPHS as usize
    {
        return Err(StoreError::Damaged {
            path: path.to_path_buf(),
            detail: format!("a paragraph list of {} bytes", bytes.len()),
        });
    }
    bytes
        .chunks_exact(PARA_BYTES)
        .map(|c| {
            let start = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let end = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
            Ok((start..end, signature_of(path, &c[8..])?))
        })
        .collect()
}

/// The bytes of a [`PARAS`] row.
pub(crate) fn paragraphs_bytes(paras: &[(Range<u32>, Signature)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(paras.len() * PARA_BYTES);
    for (span, sig) in paras {
        out.extend_from_slice(&span.start.to_le_bytes());
        out.extend_from_slice(&span.end.to_le_bytes());
        out.extend_from_slice(&sig.to_bytes());
    }
    out
}

/// A random number for a new store's "instance" setting.
pub(crate) fn new_instance() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// A stored document as [`crate::check`] and [`crate::repair()`] read it: its rows, kept
/// as bytes (a repair writes them back as they were).
pub(crate) struct DocRow {
    id: String,
    expires: u64,
    signature: Vec<u8>,
    paragraphs: Option<Vec<u8>>,
}

/// What can be read of a document store's file (a copy of it, after redb's own check):
/// its settings and every document whose row reads whole.
#[derive(Default)]
pub(crate) struct DocRows {
    /// Every setting of the "meta" table, as stored.
    meta: Vec<(String, u64)>,
    /// Documents by internal id.
    docs: BTreeMap<u64, DocRow>,
    /// Whether every row of the documents table was read.
    pub(crate) complete: bool,
}

impl DocRows {
    /// Documents read.
    pub(crate) fn len(&self) -> usize {
        self.docs.len()
    }

    /// The setting `key`, as stored.
    pub(crate) fn setting(&self, key: &str) -> Option<u64> {
        self.meta.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }

    /// The settings a repaired store is made with, when they are all there and make a
    /// document store of this version; else what is wrong.
    pub(crate) fn settings(&self) -> std::result::Result<DocConfig, String> {
        for key in [
            "format",
            "threshold",
            "paragraphs",
            "fingerprint_version",
            "sketch_version",
            "next_id",
        ] {
            if self.setting(key).is_none() {
                return Err(format!("setting \"{key}\" is missing"));
            }
        }
        let versions = [
            (
                "fingerprint_version",
                u64::from(neardup::fingerprint::VERSION),
            ),
            ("sketch_version", u64::from(SKETCH_VERSION)),
        ];
        for (key, want) in versions {
            let have = self.setting(key).unwrap_or(0);
            if have != want {
                return Err(other_version(key, have, want));
            }
        }
        let bits = self.setting("threshold").unwrap_or(0);
        let threshold =
            Threshold::new(f64::from_bits(bits)).map_err(|e| format!("its threshold: {e}"))?;
        Ok(DocConfig {
            threshold,
            paragraphs: self.setting("paragraphs") != Some(0),
        })
    }
}

/// Reads a document store's tables in `txn` (of the copy at `copy`) into `rows`: the
/// documents first, as they are what a repair keeps (a row whose signature has the wrong
/// length is not kept); then the id, paragraph and expiry tables, checked against them.
/// Every inconsistency goes to `note`.
pub(crate) fn read_rows(
    copy: &Path,
    txn: &redb::ReadTransaction,
    rows: &mut DocRows,
    note: &mut dyn FnMut(String),
) -> Result<()> {
    let meta = db!(copy, txn.open_table(META))?;
    for row in db!(copy, meta.iter())? {
        let (key, value) = db!(copy, row)?;
        rows.meta.push((key.value().to_string(), value.value()));
    }
    if let Err(why) = rows.settings() {
        note(format!("its settings (table \"meta\"): {why}"));
    }
    let next_id = rows.setting("next_id");
    // A store of this format keeps its band keys apart: each row's signature is made
    // whole with its keys from the keys file, which is checked band by band first.
    let keyed = rows.setting("format") == Some(DOC_FORMAT);
    let keys = match (keyed, rows.setting("instance")) {
        (false, _) => None,
        (true, None) => {
            note("setting \"instance\" is missing: the band keys cannot be read".into());
            None
        }
        (true, Some(instance)) => {
            let dir = copy.parent().unwrap_or(Path::new("."));
            match crate::keys::KeyReader::open(dir, instance) {
                Ok(keys) => Some(keys),
                Err(e) => {
                    note(format!("its band keys cannot be read: {e}"));
                    None
                }
            }
        }
    };
    if let Some(keys) = &keys {
        let mut vouched = HashMap::new();
        match txn.open_table(crate::keys::KEY_CRCS) {
            Ok(table) => {
                for row in db!(copy, table.iter())? {
                    let (k, v) = db!(copy, row)?;
                    vouched.insert(k.value(), v.value());
                }
            }
            Err(e) => note(format!("its table of key checksums cannot be read: {e}")),
        }
        let mut read = Vec::new();
        for band in 0..neardup::jaccard::BANDS {
            let len = next_id.unwrap_or(0);
            let vouched_for = |c| vouched.get(&(c, band as u8)).copied();
            if let Err(e) = keys.band(band, len, vouched_for, &mut read) {
                note(e.to_string());
            }
        }
    }
    let width = if keyed {
        Signature::STORED_BYTES
    } else {
        Signature::BYTES
    };
    // The whole signature of a row (of `width` bytes), or why it cannot be had.
    let whole = |internal: u64, signature: &[u8]| -> std::result::Result<Vec<u8>, String> {
        if !keyed {
            return Ok(signature.to_vec());
        }
        let Some(keys) = &keys else {
            return Err("its band keys cannot be read".into());
        };
        let bands = keys.keys_of(internal).map_err(|e| e.to_string())?;
        let sig = stored_signature_of(copy, signature, bands).map_err(|e| e.to_string())?;
        Ok(sig.to_bytes().to_vec())
    };
    let mut by_id: HashMap<String, u64> = HashMap::new();
    let mut add = |internal: u64, id: &str, expires: u64, signature: &[u8]| {
        if signature.len() != Signature::BYTES {
            note(format!(
                "document \"{id}\" ({internal}) has a signature of {} bytes, not {}: not kept",
                signature.len(),
                Signature::BYTES
            ));
            return;
        }
        if let Some(n) = next_id.filter(|&n| internal >= n) {
            note(format!(
                "document \"{id}\" is numbered {internal}, past next_id {n}"
            ));
        }
        if let Some(other) = by_id.insert(id.to_string(), internal) {
            note(format!(
                "documents {other} and {internal} are both \"{id}\" (the later is kept)"
            ));
            rows.docs.remove(&other);
        }
        rows.docs.insert(
            internal,
            DocRow {
                id: id.to_string(),
                expires,
                signature: signature.to_vec(),
                paragraphs: None,
            },
        );
    };
    let mut bad = Vec::new();
    let tables: Vec<String> = db!(copy, txn.list_tables())?
        .map(|t| t.name().to_string())
        .collect();
    if tables.iter().any(|t| t == packed::DOCS.name()) {
        let docs = db!(copy, txn.open_table(packed::DOCS))?;
        for entry in db!(copy, docs.iter())? {
            let (key, bytes) = db!(copy, entry)?;
            let key = key.value();
            match packed::rows_of_width(key, bytes.value(), width) {
                Ok(found) => {
                    for r in found {
                        match whole(r.internal, r.signature) {
                            Ok(sig) => add(r.internal, r.id, r.expires, &sig),
                            Err(why) => bad.push(format!(
                                "document \"{}\" ({}): {why}: not kept",
                                r.id, r.internal
                            )),
                        }
                    }
                }
                Err(why) => bad.push(format!(
                    "the pack of documents from {key}: {why}: its documents are not kept"
                )),
            }
        }
    }
    // A store made before packing, not opened since.
    if tables.iter().any(|t| t == UNPACKED.name()) {
        let docs = db!(copy, txn.open_table(UNPACKED))?;
        for entry in db!(copy, docs.iter())? {
            let (internal, v) = db!(copy, entry)?;
            let (id, expires, signature) = v.value();
            add(internal.value(), id, expires, signature);
        }
    }
    bad.into_iter().for_each(&mut *note);
    rows.complete = true;

    // A store of the old format names its documents twice: the names must agree.
    let id_table = tables.iter().any(|t| t == IDS.name());
    let ids = match id_table {
        true => Some(db!(copy, txn.open_table(IDS))?),
        false => None,
    };
    let mut named = std::collections::HashSet::new();
    let id_rows = match &ids {
        Some(ids) => Some(db!(copy, ids.iter())?),
        None => None,
    };
    for row in id_rows.into_iter().flatten() {
        let (id, internal) = db!(copy, row)?;
        let (id, internal) = (id.value(), internal.value());
        match rows.docs.get(&internal) {
            Some(doc) if doc.id == id => {
                named.insert(internal);
            }
            Some(doc) => note(format!(
                "id \"{id}\" names document {internal}, which is \"{}\"",
                doc.id
            )),
            None => note(format!(
                "id \"{id}\" names document {internal}, which is missing"
            )),
        }
    }
    for (internal, doc) in rows.docs.iter().filter(|_| id_table) {
        if !named.contains(internal) {
            note(format!(
                "document \"{}\" ({internal}) is missing from the id table",
                doc.id
            ));
        }
    }
    let paras = db!(copy, txn.open_table(PARAS))?;
    for row in db!(copy, paras.iter())? {
        let (internal, bytes) = db!(copy, row)?;
        let (internal, bytes) = (internal.value(), bytes.value());
        if !bytes.len().is_multiple_of(PARA_BYTES)
            || bytes.len() / PARA_BYTES > MAX_PARAGRAPHS as usize
        {
            note(format!(
                "document {internal}'s paragraph list has {} bytes, not a multiple of \
                 {PARA_BYTES} up to {MAX_PARAGRAPHS} paragraphs: not kept",
                bytes.len()
            ));
            continue;
        }
        match rows.docs.get_mut(&internal) {
            Some(doc) => doc.paragraphs = Some(bytes.to_vec()),
            None => note(format!(
                "paragraphs of document {internal}, which is missing"
            )),
        }
    }
    let expiry = db!(copy, txn.open_table(EXPIRY))?;
    let mut timed = std::collections::HashSet::new();
    for row in db!(copy, expiry.iter())? {
        let (key, _) = db!(copy, row)?;
        let (at, internal) = key.value();
        match rows.docs.get(&internal) {
            Some(doc) if doc.expires == at => {
                timed.insert(internal);
            }
            other => note(format!(
                "an expiry ({at}) for document {internal}, which has {}",
                other.map_or("none".to_string(), |d| d.expires.to_string())
            )),
        }
    }
    for (internal, doc) in &rows.docs {
        if doc.expires != 0 && !timed.contains(internal) {
            note(format!("document {internal}'s expiry is not indexed"));
        }
    }
    Ok(())
}

/// A new document store file at `path` holding `rows` with their settings, the documents
/// numbered afresh in their order (a damaged number could be past next_id, or overflow
/// the paragraphs' index ids), and its keys file beside it under the name a repair leaves
/// it at ([`crate::keys::pending_path`]); the new store's instance.
pub(crate) fn rebuild(path: &Path, rows: &DocRows) -> Result<u64> {
    let db = db!(path, Database::create(path))?;
    let txn = db!(path, db.begin_write())?;
    let instance = new_instance();
    let dir = path.parent().unwrap_or(Path::new("."));
    let pending = crate::keys::pending_path(dir, instance);
    let mut keys = crate::keys::KeyFile::open_at(pending, instance, 0, |_, _| None)?;
    {
        let mut meta = db!(path, txn.open_table(META))?;
        for (key, value) in &rows.meta {
            // Documents are numbered afresh: an index snapshot of the old file is not
            // of this one.
            if !matches!(
                key.as_str(),
                "next_id" | "instance" | "commit" | "snapshot_commit"
            ) {
                db!(path, meta.insert(key.as_str(), *value))?;
            }
        }
        db!(path, meta.insert("next_id", rows.docs.len() as u64))?;
        db!(path, meta.insert("instance", instance))?;
        db!(path, meta.insert("commit", 0))?;
        db!(path, meta.insert("snapshot_commit", 0))?;
        // The new file is of this format whatever the old one's.
        db!(path, meta.insert("format", DOC_FORMAT))?;
        let mut docs = db!(path, txn.open_table(packed::DOCS))?;
        let mut paras = db!(path, txn.open_table(PARAS))?;
        let mut expiry = db!(path, txn.open_table(EXPIRY))?;
        db!(path, txn.open_table(REMOVED))?;
        let mut crcs = db!(path, txn.open_table(crate::keys::KEY_CRCS))?;
        for (internal, doc) in (0u64..).zip(rows.docs.values()) {
            let sig = signature_of(path, &doc.signature)?;
            keys.append(internal, &[sig.index_keys()])?;
            let row = packed::Row {
                internal,
                id: &doc.id,
                expires: doc.expires,
                signature: &sig.to_stored_bytes(),
            };
            packed::insert(path, &mut docs, row)?;
            if let Some(p) = &doc.paragraphs {
                db!(path, paras.insert(internal, &p[..]))?;
            }
            if doc.expires != 0 {
                db!(path, expiry.insert((doc.expires, internal), ()))?;
            }
        }
        for (at, vouched) in keys.sync()? {
            db!(path, crcs.insert(at, vouched))?;
        }
    }
    db!(path, txn.commit())?;
    Ok(instance)
}

/// Drops the id table of a store of [`OLD_DOC_FORMAT`] (each id is also in its document's
/// row), and marks it [`DOC_FORMAT`], in one write transaction; whether it did.
pub(crate) fn drop_id_table(path: &Path, db: &redb::Database) -> Result<bool> {
    let txn = db!(path, db.begin_write())?;
    let format = {
        let meta = db!(path, txn.open_table(META))?;
        let format = db!(path, meta.get("format"))?.map(|v| v.value());
        format
    };
    if format != Some(OLD_DOC_FORMAT) {
        db!(path, txn.abort())?;
        return Ok(false);
    }
    {
        let mut meta = db!(path, txn.open_table(META))?;
        db!(path, meta.insert("format", KEYED_DOC_FORMAT))?;
    }
    db!(path, txn.delete_table(IDS))?;
    db!(path, txn.commit())?;
    Ok(true)
}

/// Moves the band keys of a store of [`KEYED_DOC_FORMAT`] out of its rows into a new keys
/// file in `dir` (`keys.rs`), every row rewritten without them, and marks it
/// [`DOC_FORMAT`], in one write transaction committed after the keys file is durable; a
/// keys file left by an upgrade that did not finish is made again. Whether it did.
pub(crate) fn move_keys_out(dir: &Path, path: &Path, db: &redb::Database) -> Result<bool> {
    let txn = db!(path, db.begin_write())?;
    let (format, instance, next_id) = {
        let meta = db!(path, txn.open_table(META))?;
        let get =
            |k: &str| -> Result<Option<u64>> { Ok(db!(path, meta.get(k))?.map(|v| v.value())) };
        (
            get("format")?,
            get("instance")?,
            get("next_id")?.unwrap_or(0),
        )
    };
    if format != Some(KEYED_DOC_FORMAT) {
        db!(path, txn.abort())?;
        return Ok(false);
    }
    let instance = instance.unwrap_or_else(new_instance);
    let keys_path = dir.join(KEYS_FILE);
    match std::fs::remove_file(&keys_path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(StoreError::Io {
                path: keys_path,
                source,
            })
        }
    }
    let mut keys = crate::keys::KeyFile::open(dir, instance, 0, |_, _| None)?;
    {
        let mut table = db!(path, txn.open_table(packed::DOCS))?;
        let mut pending: Vec<BandKeys> = Vec::new();
        let mut from = 0u64;
        loop {
            let next = match db!(path, table.range(from..))?.next() {
                Some(entry) => {
                    let (k, v) = db!(path, entry)?;
                    Some((k.value(), v.value().to_vec()))
                }
                None => None,
            };
            let Some((key, bytes)) = next else { break };
            let old = packed::rows_of_width(key, &bytes, Signature::BYTES).map_err(|why| {
                StoreError::Damaged {
                    path: path.to_path_buf(),
                    detail: format!("the pack of documents from {key}: {why}"),
                }
            })?;
            let mut stored = Vec::with_capacity(old.len());
            for r in &old {
                let sig = signature_of(path, r.signature)?;
                if r.internal >= next_id {
                    return Err(StoreError::Damaged {
                        path: path.to_path_buf(),
                        detail: format!("document {}: numbered past next_id {next_id}", r.internal),
                    });
                }
                // Numbers without a stored document (removed) keep zero keys.
                let at = keys.len() + pending.len() as u64;
                if r.internal < at {
                    return Err(StoreError::Damaged {
                        path: path.to_path_buf(),
                        detail: format!("document {} is out of order", r.internal),
                    });
                }
                pending.extend((at..r.internal).map(|_| [0u32; neardup::jaccard::BANDS]));
                pending.push(sig.index_keys());
                stored.push(sig.to_stored_bytes());
            }
            let rows: Vec<packed::Row<'_>> = old
                .iter()
                .zip(&stored)
                .map(|(r, s)| packed::Row { signature: s, ..*r })
                .collect();
            db!(path, table.insert(key, &packed::pack_bytes(key, &rows)[..]))?;
            if pending.len() >= 1 << 16 {
                keys.append(keys.len(), &pending)?;
                pending.clear();
            }
            from = key + 1;
        }
        let at = keys.len() + pending.len() as u64;
        pending.extend((at..next_id).map(|_| [0u32; neardup::jaccard::BANDS]));
        keys.append(keys.len(), &pending)?;
        let mut crcs = db!(path, txn.open_table(crate::keys::KEY_CRCS))?;
        for (at, vouched) in keys.sync()? {
            db!(path, crcs.insert(at, vouched))?;
        }
        let mut meta = db!(path, txn.open_table(META))?;
        db!(path, meta.insert("instance", instance))?;
        db!(path, meta.insert("format", DOC_FORMAT))?;
    }
    db!(path, txn.commit())?;
    Ok(true)
}

/// Packs the rows of a store made before packing ([`UNPACKED`]) into [`packed::DOCS`], in one
/// write transaction, and drops the old table; whether there was one.
pub(crate) fn pack_old_rows(path: &Path, db: &redb::Database) -> Result<bool> {
    let txn = db!(path, db.begin_write())?;
    let old = db!(path, txn.list_tables())?.any(|t| t.name() == UNPACKED.name());
    // A fingerprint store has a "docs" table of its own: left to the open to refuse.
    let documents = old && {
        let meta = db!(path, txn.open_table(META))?;
        let format = db!(path, meta.get("format"))?.map(|v| v.value());
        format.is_some_and(crate::dir::is_doc_format)
    };
    if !documents {
        db!(path, txn.abort())?;
        return Ok(false);
    }
    {
        let unpacked = db!(path, txn.open_table(UNPACKED))?;
        let mut table = db!(path, txn.open_table(packed::DOCS))?;
        // All at once, in order: these rows keep their band keys (248-byte signatures)
        // until the keys move out, so the packs are written without being read back.
        let mut old: Vec<(u64, String, u64, Vec<u8>)> = Vec::new();
        for entry in db!(path, unpacked.iter())? {
            let (internal, value) = db!(path, entry)?;
            let (id, expires, signature) = value.value();
            if signature.len() != Signature::BYTES {
                return Err(StoreError::Damaged {
                    path: path.to_path_buf(),
                    detail: format!(
                        "document \"{id}\" has a signature of {} bytes, not {}",
                        signature.len(),
                        Signature::BYTES
                    ),
                });
            }
            old.push((
                internal.value(),
                id.to_string(),
                expires,
                signature.to_vec(),
            ));
        }
        let rows: Vec<packed::Row<'_>> = old
            .iter()
            .map(|(internal, id, expires, signature)| packed::Row {
                internal: *internal,
                id,
                expires: *expires,
                signature,
            })
            .collect();
        if !rows.is_empty() {
            if !db!(path, redb::ReadableTableMetadata::is_empty(&table))? {
                return Err(StoreError::Damaged {
                    path: path.to_path_buf(),
                    detail: "both packed and unpacked rows".into(),
                });
            }
            packed::insert_all(path, &mut table, &rows)?;
        }
    }
    db!(path, txn.delete_table(UNPACKED))?;
    db!(path, txn.commit())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use redb::Database;

    use super::*;

    /// A store of one row a document (as stores were made before packing, with an id
    /// table and the band keys in the rows) opens with the same documents, each found as
    /// before, its old tables gone and its keys in the keys file; check finds nothing
    /// wrong before and after.
    #[test]
    fn a_store_of_one_row_a_document_is_packed_on_open() {
        use crate::{DocConfig, DocumentStore, Write};

        let dir = tempfile::tempdir().unwrap();
        let texts: Vec<String> = (0..300)
            .map(|i| {
                format!(
                    "document {i} tells of {} and more words {i} {}",
                    i * 7,
                    i % 13
                )
            })
            .collect();
        let before = {
            let mut store = DocumentStore::create(dir.path(), DocConfig::default()).unwrap();
            let preparer = store.preparer();
            let puts = texts
                .iter()
                .enumerate()
                .map(|(i, t)| Write::Put {
                    id: format!("id{i}"),
                    doc: Box::new(preparer.prepare(t, false)),
                    ttl: (i % 3 == 0).then_some(std::time::Duration::from_secs(1_000_000)),
                    only_if_unique: false,
                })
                .collect();
            store.apply(puts).unwrap();
            store
                .apply(vec![Write::Delete { id: "id7".into() }])
                .unwrap();
            (0..300)
                .map(|i| store.get(&format!("id{i}")).unwrap())
                .collect::<Vec<_>>()
        };
        // Unpack the rows, as an older neardup wrote them: the whole signature (band keys
        // too) in one row a document, an id table, no keys file (format 100).
        let path = dir.path().join(crate::dir::FILE);
        {
            let whole: HashMap<String, Vec<u8>> = before
                .iter()
                .flatten()
                .map(|d| (d.id.clone(), d.signature.to_bytes().to_vec()))
                .collect();
            let db = Database::open(&path).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let docs = txn.open_table(packed::DOCS).unwrap();
                let mut old = txn.open_table(UNPACKED).unwrap();
                let mut ids = txn.open_table(IDS).unwrap();
                packed::each_from(&path, &docs, 0, |r| {
                    old.insert(r.internal, (r.id, r.expires, &whole[r.id][..]))
                        .unwrap();
                    ids.insert(r.id, r.internal).unwrap();
                    Ok(())
                })
                .unwrap();
                let mut meta = txn.open_table(META).unwrap();
                meta.insert("format", OLD_DOC_FORMAT).unwrap();
            }
            txn.delete_table(packed::DOCS).unwrap();
            txn.delete_table(crate::keys::KEY_CRCS).unwrap();
            txn.commit().unwrap();
        }
        std::fs::remove_file(dir.path().join(crate::dir::SNAPSHOT)).ok();
        std::fs::remove_file(dir.path().join(KEYS_FILE)).unwrap();
        assert!(crate::check(dir.path()).unwrap().problems.is_empty());
        let store = DocumentStore::open(dir.path(), None).unwrap();
        for (i, want) in before.iter().enumerate() {
            let got = store.get(&format!("id{i}")).unwrap();
            assert_eq!(got.is_some(), want.is_some(), "id{i}");
            if let (Some(got), Some(want)) = (got, want) {
                assert_eq!(
                    (&got.id, got.signature, got.expires),
                    (&want.id, want.signature, want.expires)
                );
            }
        }
        assert!(before[7].is_none() && before[8].is_some());
        let preparer = store.preparer();
        let hits = store
            .check(&preparer.prepare(&texts[8], false))
            .unwrap()
            .hits;
        assert_eq!(hits[0].id, "id8");
        drop(store);
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        assert!(!txn
            .list_tables()
            .unwrap()
            .any(|t| t.name() == UNPACKED.name() || t.name() == IDS.name()));
        drop(txn);
        drop(db);
        assert!(crate::check(dir.path()).unwrap().problems.is_empty());
    }
}
