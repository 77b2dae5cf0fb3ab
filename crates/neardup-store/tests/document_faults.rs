//! Damaged, cut and busy document stores (`DocumentStore`, the service's), held to the promises
//! the fingerprint store's tests (faults.rs) hold it to: every case is an error naming the
//! file, never a panic; `check` finds the damage and `repair` keeps every document that
//! can be read.

use std::path::Path;
use std::time::Duration;

use neardup::jaccard::Threshold;
use neardup_store::{DocConfig, DocumentStore, StoreError, StoredDoc, Write, FILE, LOG_FILE};

fn config() -> DocConfig {
    DocConfig {
        threshold: Threshold::default(),
        paragraphs: true,
    }
}

/// Two paragraphs of 40 words each, shared by no other `i`.
fn text(i: usize) -> String {
    let word = |j: usize| format!("w{}", (i * 7919 + j * 104_729) % 1_000_003);
    let first: Vec<String> = (0..40).map(word).collect();
    let second: Vec<String> = (40..80).map(word).collect();
    format!("{}\n\n{}", first.join(" "), second.join(" "))
}

/// A store of `n` documents (every third expiring, far ahead), closed; each id with what
/// `get` gave for it.
fn filled(dir: &Path, n: usize) -> Vec<(String, StoredDoc)> {
    let mut store = DocumentStore::create(dir, config()).unwrap();
    let prep = store.preparer();
    let ids: Vec<String> = (0..n).map(|i| format!("doc-{i}")).collect();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let writes = chunk
            .iter()
            .map(|&i| Write::Put {
                id: ids[i].clone(),
                doc: Box::new(prep.prepare(&text(i), false)),
                ttl: (i % 3 == 0).then(|| Duration::from_secs(1_000_000)),
                only_if_unique: false,
            })
            .collect();
        store.apply(writes).unwrap();
        // A commit a batch, as a store written now and then has.
        store.checkpoint().unwrap();
    }
    ids.into_iter()
        .map(|id| {
            let doc = store.get(&id).unwrap().unwrap();
            (id, doc)
        })
        .collect()
}

/// The store in `dir` opens and gives back each of `docs` but `but` as it was, and check
/// then finds nothing wrong with it.
fn holds(dir: &Path, docs: &[(String, StoredDoc)], but: &str) {
    let store = DocumentStore::open(dir, Some(config())).unwrap();
    for (id, doc) in docs.iter().filter(|(id, _)| id != but) {
        assert_eq!(store.get(id).unwrap().as_ref(), Some(doc), "{id}");
    }
    drop(store);
    assert!(neardup_store::check(dir).unwrap().problems.is_empty());
}

/// Every call of a store on a damaged file: a value, or an error naming the file.
fn use_store(dir: &Path) {
    let named = |e: StoreError| {
        let msg = e.to_string();
        assert!(msg.contains(FILE), "{msg}");
    };
    let mut store = match DocumentStore::open(dir, None) {
        Ok(store) => store,
        Err(e) => return named(e),
    };
    let prep = store.preparer();
    for i in [0, 1, 7, 299] {
        let doc = prep.prepare(&text(i), true);
        let _ = store.get(&format!("doc-{i}")).map_err(named);
        let _ = store.check(&doc).map_err(named);
        let _ = store.check_paragraphs(&doc).map_err(named);
    }
    let writes = vec![
        Write::Put {
            id: "new".into(),
            doc: Box::new(prep.prepare(&text(5000), false)),
            ttl: Some(Duration::from_secs(60)),
            only_if_unique: true,
        },
        Write::Delete { id: "doc-2".into() },
    ];
    let _ = store.apply(writes).map_err(named);
    let _ = store.sweep().map_err(named);
}

#[test]
fn a_document_store_cut_short_is_a_damaged_error_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), 300);
    let path = dir.path().join(FILE);
    let whole = std::fs::read(&path).unwrap();
    let mut lengths: Vec<usize> = (4096..whole.len()).step_by(4096 * 5).collect();
    lengths.extend([0, 1, 9, 100, 320, 4095, whole.len() - 4096, whole.len() - 1]);
    for len in lengths {
        std::fs::write(&path, &whole[..len]).unwrap();
        let err = DocumentStore::open(dir.path(), None).unwrap_err();
        let msg = err.to_string();
        match len {
            0 => assert!(matches!(err, StoreError::Unfinished(_)), "{len}: {msg}"),
            _ => {
                assert!(matches!(err, StoreError::Damaged { .. }), "{len}: {msg}");
                assert!(msg.contains(FILE) && msg.contains("cut short"), "{msg}");
            }
        }
    }
}

#[test]
fn a_document_store_cut_short_is_checked_and_repaired_with_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let docs = filled(dir.path(), 300);
    let path = dir.path().join(FILE);
    let whole = std::fs::read(&path).unwrap();
    // redb's file ends in free space: the last page holds nothing of the store.
    let cut = &whole[..whole.len() - 4096];
    std::fs::write(&path, cut).unwrap();

    let check = neardup_store::check(dir.path()).unwrap();
    assert!(check.problems[0].contains("cut short"), "{check:?}");
    assert!(check.complete, "{check:?}");
    assert_eq!(check.documents, 300);
    assert_eq!(std::fs::read(&path).unwrap(), cut, "check wrote the store");
    // Its documents are signatures: export says so, and writes nothing.
    let err = neardup_store::export(dir.path(), |_| Ok::<(), ()>(())).unwrap_err();
    assert!(err.to_string().contains("a document store"), "{err}");

    // Writes acknowledged after the last checkpoint, in the write-ahead log: the repaired
    // file's commits start over, so the log is kept aside, said so, and not replayed.
    let log = dir.path().join(LOG_FILE);
    // One whole record, in the log's first format (its CRC-32 is that of "abc").
    let logged = b"ndwal01\n\x03\0\0\0\xc2\x41\x24\x35abc".to_vec();
    std::fs::write(&log, &logged).unwrap();

    let repair = neardup_store::repair(dir.path()).unwrap();
    assert!(repair.complete && repair.documents == 300, "{repair:?}");
    assert_eq!(std::fs::read(repair.kept.as_ref().unwrap()).unwrap(), cut);
    let note = repair.problems.last().unwrap();
    assert!(note.contains("write-ahead log"), "{repair:?}");
    let aside = note
        .split("kept as ")
        .nth(1)
        .unwrap()
        .split(", not")
        .next()
        .unwrap();
    assert_eq!(std::fs::read(aside).unwrap(), logged);
    assert!(!log.exists());
    let store = DocumentStore::open(dir.path(), Some(config())).unwrap();
    assert_eq!(store.replayed(), 0);
    assert_eq!(store.len(), 300);
    for (id, doc) in &docs {
        assert_eq!(store.get(id).unwrap().as_ref(), Some(doc), "{id}");
    }
    // The indexes are whole again: a document finds itself, and its paragraphs.
    let query = store.preparer().prepare(&text(7), true);
    let hits = store.check(&query).unwrap().hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, "doc-7");
    let paras = store.check_paragraphs(&query).unwrap();
    assert_eq!(paras.len(), 1);
    assert_eq!(paras[0].id, "doc-7");
    drop(store);
    assert!(neardup_store::check(dir.path())
        .unwrap()
        .problems
        .is_empty());
    // A log that is not one is a problem `check` names, not a count.
    std::fs::write(&log, b"not a log, not at all").unwrap();
    let check = neardup_store::check(dir.path()).unwrap();
    assert_eq!(check.logged, (0, 0));
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("write-ahead log") && p.contains("ndwal02")),
        "{check:?}"
    );
}

#[test]
fn damage_inside_a_document_store_is_an_error_or_found_by_check() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), 300);
    let path = dir.path().join(FILE);
    let whole = std::fs::read(&path).unwrap();
    // 64 bytes flipped in used pages past the header, a page at a time: each open and call
    // is a value or an error naming the file; check notices some of them; a repair, where
    // one is made, opens.
    let mut found = 0;
    let pages = whole.len() / 4096;
    for page in (1..pages).step_by(pages / 30 + 1) {
        let mut bytes = whole.clone();
        let at = page * 4096 + 100;
        if bytes[at..at + 64].iter().all(|&b| b == 0) {
            continue;
        }
        for b in &mut bytes[at..at + 64] {
            *b ^= 0x5a;
        }
        std::fs::write(&path, &bytes).unwrap();
        use_store(dir.path());
        std::fs::write(&path, &bytes).unwrap();
        let check = neardup_store::check(dir.path()).unwrap();
        if !check.problems.is_empty() {
            found += 1;
            if neardup_store::repair(dir.path()).is_ok() {
                DocumentStore::open(dir.path(), None).unwrap();
            }
        }
    }
    assert!(found > 0, "no damaged page was noticed");
}

/// Makes the store in `dir` (closed) one of the format before the id map and the keys
/// file: format 100, each row with its whole signature (`docs`' band keys too), an id
/// table naming each document by its number, no keys file.
fn to_old_format(dir: &Path, docs: &[(String, StoredDoc)]) {
    use redb::ReadableTable;
    let whole: std::collections::HashMap<&str, [u8; neardup::decide::Signature::BYTES]> = docs
        .iter()
        .map(|(id, d)| (id.as_str(), d.signature.to_bytes()))
        .collect();
    let db = redb::Database::open(dir.join(FILE)).unwrap();
    let txn = db.begin_write().unwrap();
    let meta_def: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
    let ids_def: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("ids");
    let docs_def: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("documents");
    let crcs_def: redb::TableDefinition<(u64, u8), (u32, u32)> =
        redb::TableDefinition::new("key_crcs");
    {
        txn.open_table(meta_def)
            .unwrap()
            .insert("format", 100)
            .unwrap();
        let mut table = txn.open_table(docs_def).unwrap();
        let mut ids = txn.open_table(ids_def).unwrap();
        // A pack's rows: varint number past the key, varint expiry, varint id length,
        // the signature (here without its band keys), the id.
        let varint = |b: &[u8], at: &mut usize| {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let byte = b[*at];
                *at += 1;
                v |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte < 0x80 {
                    return v;
                }
            }
        };
        let put = |v: u64, out: &mut Vec<u8>| {
            let mut v = v;
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        };
        let packs: Vec<(u64, Vec<u8>)> = table
            .iter()
            .unwrap()
            .map(|e| {
                let (k, v) = e.unwrap();
                (k.value(), v.value().to_vec())
            })
            .collect();
        for (key, bytes) in packs {
            let mut at = 0;
            let mut out = Vec::new();
            while at < bytes.len() {
                let delta = varint(&bytes, &mut at);
                let expires = varint(&bytes, &mut at);
                let len = varint(&bytes, &mut at) as usize;
                at += neardup::decide::Signature::STORED_BYTES;
                let id = std::str::from_utf8(&bytes[at..at + len])
                    .unwrap()
                    .to_string();
                at += len;
                // A removed document's row is gone; every other is among `docs`.
                ids.insert(id.as_str(), key + delta).unwrap();
                put(delta, &mut out);
                put(expires, &mut out);
                put(len as u64, &mut out);
                out.extend_from_slice(&whole[id.as_str()]);
                out.extend_from_slice(id.as_bytes());
            }
            table.insert(key, &out[..]).unwrap();
        }
    }
    txn.delete_table(crcs_def).unwrap();
    txn.commit().unwrap();
    drop(db);
    std::fs::remove_file(dir.join("neardup.keys")).unwrap();
    // Its snapshot is of this format: an old store's would not be read either.
    let _ = std::fs::remove_file(dir.join("bands.snapshot"));
}

/// A store made before the id map and the keys file (its ids in a table, its band keys in
/// its rows) opens with every document found by its id and by its text, its id table
/// dropped and its keys moved out; check finds nothing wrong before or after.
#[test]
fn a_store_with_an_id_table_opens_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let docs = filled(dir.path(), 250);
    to_old_format(dir.path(), &docs);
    assert!(neardup_store::check(dir.path())
        .unwrap()
        .problems
        .is_empty());
    let store = DocumentStore::open(dir.path(), Some(config())).unwrap();
    for (id, doc) in &docs {
        assert_eq!(store.get(id).unwrap().as_ref(), Some(doc), "{id}");
    }
    // The index, built from the moved keys, finds each document by its text.
    for i in (0..250).step_by(17) {
        let hits = store
            .check(&store.preparer().prepare(&text(i), false))
            .unwrap()
            .hits;
        assert_eq!(hits.first().map(|h| h.id.clone()), Some(format!("doc-{i}")));
    }
    drop(store);
    let db = redb::Database::open(dir.path().join(FILE)).unwrap();
    let txn = db.begin_read().unwrap();
    let tables: Vec<String> = txn
        .list_tables()
        .unwrap()
        .map(|t| redb::TableHandle::name(&t).to_string())
        .collect();
    assert!(!tables.contains(&"ids".to_string()), "{tables:?}");
    let meta_def: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
    let format = txn
        .open_table(meta_def)
        .unwrap()
        .get("format")
        .unwrap()
        .unwrap()
        .value();
    assert_eq!(format, neardup_store::DOC_FORMAT);
    drop(txn);
    drop(db);
    assert!(neardup_store::check(dir.path())
        .unwrap()
        .problems
        .is_empty());
}

#[test]
fn inconsistent_document_tables_are_found_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let docs = filled(dir.path(), 20);
    let path = dir.path().join(FILE);
    {
        // An expiry lost, as a bug or a hand edit could lose it.
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let expiry: redb::TableDefinition<(u64, u64), ()> = redb::TableDefinition::new("expiry");
        {
            let mut table = txn.open_table(expiry).unwrap();
            table.retain(|(_, internal), _| internal != 3).unwrap();
        }
        txn.commit().unwrap();
    }
    let check = neardup_store::check(dir.path()).unwrap();
    assert_eq!(
        check.problems,
        vec!["document 3's expiry is not indexed".to_string()]
    );
    let repair = neardup_store::repair(dir.path()).unwrap();
    assert!(repair.complete && repair.documents == 20, "{repair:?}");
    holds(dir.path(), &docs, "");
}

/// In a store of the format with an id table, a document its id table lost is found by
/// check and kept by repair.
#[test]
fn an_old_stores_lost_id_is_found_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let docs = filled(dir.path(), 20);
    to_old_format(dir.path(), &docs);
    let path = dir.path().join(FILE);
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let ids: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("ids");
        txn.open_table(ids).unwrap().remove("doc-3").unwrap();
        txn.commit().unwrap();
    }
    let check = neardup_store::check(dir.path()).unwrap();
    assert_eq!(
        check.problems,
        vec!["document \"doc-3\" (3) is missing from the id table".to_string()]
    );
    let repair = neardup_store::repair(dir.path()).unwrap();
    assert!(repair.complete && repair.documents == 20, "{repair:?}");
    let store = DocumentStore::open(dir.path(), Some(config())).unwrap();
    for (id, doc) in &docs {
        assert_eq!(store.get(id).unwrap().as_ref(), Some(doc), "{id}");
    }
}

#[test]
fn a_document_store_in_use_says_by_whom() {
    let dir = tempfile::tempdir().unwrap();
    let store = DocumentStore::create(dir.path(), config()).unwrap();
    let err = DocumentStore::open(dir.path(), None).unwrap_err();
    assert!(matches!(err, StoreError::InUse { .. }), "{err}");
    assert!(err.to_string().contains("in use by this process"), "{err}");
    let err = neardup_store::check(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::InUse { .. }), "{err}");
    drop(store);
    assert!(DocumentStore::open(dir.path(), None).is_ok());
}

/// A keys file with a flipped byte, cut short, of another store or missing: the open is
/// refused naming it; check names the damage; a repair makes a store that opens with every
/// document (the damaged one kept beside it); and a repair stopped between its renames is
/// finished by the next open.
#[test]
fn damaged_band_keys_are_refused_found_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let docs = filled(dir.path(), 300);
    let keys = dir.path().join("neardup.keys");
    let whole = std::fs::read(&keys).unwrap();
    let refused = |why: &str| {
        let err = DocumentStore::open(dir.path(), None).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Damaged { .. }), "{msg}");
        assert!(msg.contains("neardup.keys") && msg.contains(why), "{msg}");
    };
    // Band 5 of document 123: 4 KiB of header, 65,536 keys a band of a chunk.
    let mut bytes = whole.clone();
    bytes[4096 + 5 * 65_536 * 4 + 123 * 4] ^= 0x40;
    std::fs::write(&keys, &bytes).unwrap();
    refused("checksum");
    let check = neardup_store::check(dir.path()).unwrap();
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("band 5") && p.contains("checksum")),
        "{check:?}"
    );
    let mut other = whole.clone();
    other[8] ^= 1;
    std::fs::write(&keys, &other).unwrap();
    refused("another store");
    std::fs::remove_file(&keys).unwrap();
    refused("missing");

    // Repaired from the damaged file: every document kept.
    std::fs::write(&keys, &bytes).unwrap();
    let repair = neardup_store::repair(dir.path()).unwrap();
    assert!(repair.complete && repair.documents == 300, "{repair:?}");
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("neardup.keys.damaged-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let repaired = std::fs::read(&keys).unwrap();
    holds(dir.path(), &docs, "doc-123");

    // A repair stopped after the database's rename, before the keys file's: the repaired
    // keys wait under their instance's name, the damaged ones in place.
    let instance = u64::from_le_bytes(repaired[8..16].try_into().unwrap());
    let pending = dir.path().join(format!("neardup.keys.{instance:016x}"));
    std::fs::write(&pending, &repaired).unwrap();
    std::fs::write(&keys, &bytes).unwrap();
    assert!(neardup_store::check(dir.path())
        .unwrap()
        .problems
        .is_empty());
    holds(dir.path(), &docs, "doc-123");
    assert!(!pending.exists());
}
