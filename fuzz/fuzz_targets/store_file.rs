//! Opening a damaged store file: a whole store (made once per process: documents with
//! and without expiries, some replaced, some removed) is cut short or overwritten as the
//! input says, then opened and used, or checked and exported. Every outcome is a value or
//! a `StoreError`; none panics, hangs or takes unbounded memory. The store is a
//! fingerprint store (`neardup index`) or a document store (`DocumentStore`, `neardup serve`'s)
//! as the first byte says; of a document store, the edits go to its database file or to
//! its keys file (`neardup.keys`), as the first byte says too.
//!
//! The input is a list of edits: a byte `op`, three bytes of offset, and for writes their
//! bytes. `op & 3`: 0 cuts the file at the offset, 1 writes `op >> 2` bytes, 2 flips
//! the byte's bits given by the next byte, 3 writes a little-endian u32. The offset is
//! within the first page (the header) when `op & 4`, else anywhere in the file.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use neardup::jaccard::Threshold;
use neardup::tables::Blocks;
use neardup_fuzz::scratch;
use neardup_store::{DocConfig, DocumentStore, FingerprintStore, StoreConfig, Write, FILE};

const CONFIG: StoreConfig = StoreConfig {
    blocks: Blocks::Fixed(4),
    distance: 3,
    fingerprint_version: 1,
};

fn fp(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The whole store's file, made once.
fn whole() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = scratch().join("whole");
        let mut store = FingerprintStore::create(&dir, CONFIG, 1000).expect("creates");
        let docs: Vec<(String, u64, Option<Duration>)> = (0..300)
            .map(|i| {
                let ttl = (i % 3 == 0).then(|| Duration::from_secs(i % 2 * 3600));
                (format!("doc-{i}"), fp(i), ttl)
            })
            .collect();
        let refs: Vec<(&str, u64, Option<Duration>)> = docs
            .iter()
            .map(|(id, f, t)| (id.as_str(), *f, *t))
            .collect();
        store.insert_bulk(&refs, |_| {}).expect("inserts");
        for i in (0..300).step_by(7) {
            store
                .insert(&format!("doc-{i}"), fp(i + 1000), None)
                .expect("replaces");
        }
        for i in (0..300).step_by(11) {
            store.remove(&format!("doc-{i}")).expect("removes");
        }
        drop(store);
        std::fs::read(dir.join(FILE)).expect("reads the store back")
    })
}

/// A text of two paragraphs, shared by no other `i`.
fn text(i: u64) -> String {
    let word = |j: u64| format!("w{}", (i * 7919 + j * 104_729) % 1_000_003);
    let first: Vec<String> = (0..30).map(word).collect();
    let second: Vec<String> = (30..60).map(word).collect();
    format!("{}\n\n{}", first.join(" "), second.join(" "))
}

fn doc_config() -> DocConfig {
    DocConfig {
        threshold: Threshold::default(),
        paragraphs: true,
    }
}

/// A whole document store's files (its database and its keys file), made once: as the
/// fingerprint store's, documents with and without expiries, some replaced, some removed.
fn whole_documents() -> &'static (Vec<u8>, Vec<u8>) {
    static BYTES: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = scratch().join("whole-documents");
        let mut store = DocumentStore::create(&dir, doc_config()).expect("creates");
        let prep = store.preparer();
        let put = |i: u64, ttl: Option<Duration>| Write::Put {
            id: format!("doc-{}", i % 1000),
            doc: Box::new(prep.prepare(&text(i), false)),
            ttl,
            only_if_unique: false,
        };
        let writes = (0..300)
            .map(|i| put(i, (i % 3 == 0).then(|| Duration::from_secs(i % 2 * 3600))))
            .collect();
        store.apply(writes).expect("puts");
        store
            .apply((0..300).step_by(7).map(|i| put(i + 1000, None)).collect())
            .expect("replaces");
        let removes = (0..300)
            .step_by(11)
            .map(|i| Write::Delete {
                id: format!("doc-{i}"),
            })
            .collect();
        store.apply(removes).expect("removes");
        drop(store);
        (
            std::fs::read(dir.join(FILE)).expect("reads the store back"),
            std::fs::read(dir.join(KEYS)).expect("reads the keys back"),
        )
    })
}

/// A document store's keys file.
const KEYS: &str = "neardup.keys";

/// The whole file with the input's edits.
fn damaged(whole: &[u8], data: &[u8]) -> Vec<u8> {
    let mut file = whole.to_vec();
    let mut rest = data;
    while let [op, a, b, c, tail @ ..] = rest {
        rest = tail;
        let raw = u32::from_le_bytes([*a, *b, *c, 0]) as usize;
        let len = file.len().max(1);
        let at = if op & 4 != 0 { raw % 4096 } else { raw } % len;
        match op & 3 {
            0 => file.truncate(at),
            1 => {
                let n = usize::from(op >> 3).min(rest.len());
                let (bytes, tail) = rest.split_at(n);
                rest = tail;
                for (i, &byte) in bytes.iter().enumerate() {
                    if let Some(b) = file.get_mut(at + i) {
                        *b = byte;
                    }
                }
            }
            2 => {
                let Some((&mask, tail)) = rest.split_first() else {
                    break;
                };
                rest = tail;
                if let Some(b) = file.get_mut(at) {
                    *b ^= mask.max(1);
                }
            }
            _ => {
                let n = 4.min(rest.len());
                let (bytes, tail) = rest.split_at(n);
                rest = tail;
                for (i, &byte) in bytes.iter().enumerate() {
                    if let Some(b) = file.get_mut(at + i) {
                        *b = byte;
                    }
                }
            }
        }
    }
    file
}

fn place(bytes: &[u8]) -> PathBuf {
    let dir = scratch().join("store");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("makes the directory");
    std::fs::write(dir.join(FILE), bytes).expect("writes the file");
    dir
}

fn use_store(dir: &Path) {
    let Ok(mut store) = FingerprintStore::open(dir, None) else {
        return;
    };
    let _ = store.records();
    for i in [0, 1, 7, 299] {
        let _ = store.find_all(fp(i));
    }
    let _ = store.insert("new", fp(5000), Some(Duration::from_secs(60)));
    let _ = store.insert("doc-1", fp(5001), None);
    let _ = store.remove("doc-2");
    let _ = store.sweep();
    drop(store);
    if let Ok(store) = FingerprintStore::open(dir, None) {
        let _ = store.records();
    }
}

fn use_documents(dir: &Path) {
    let Ok(mut store) = DocumentStore::open(dir, None) else {
        return;
    };
    let prep = store.preparer();
    for i in [0, 1, 7, 299, 1007] {
        let _ = store.get(&format!("doc-{}", i % 1000));
        let doc = prep.prepare(&text(i), true);
        let _ = store.check(&doc);
        let _ = store.check_paragraphs(&doc);
    }
    let _ = store.apply(vec![
        Write::Put {
            id: "new".into(),
            doc: Box::new(prep.prepare(&text(5000), false)),
            ttl: Some(Duration::from_secs(60)),
            only_if_unique: true,
        },
        Write::Put {
            id: "doc-1".into(),
            doc: Box::new(prep.prepare(&text(5001), false)),
            ttl: None,
            only_if_unique: false,
        },
        Write::Delete { id: "doc-2".into() },
    ]);
    let _ = store.sweep();
    drop(store);
    if let Ok(store) = DocumentStore::open(dir, None) {
        let _ = store.get("doc-1");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&what, edits)) = data.split_first() else {
        return;
    };
    let documents = what & 2 != 0;
    let dir = if documents {
        let (file, keys) = whole_documents();
        // Bit 2: the edits go to the keys file, the database whole.
        let (file, keys) = if what & 4 != 0 {
            (file.clone(), damaged(keys, edits))
        } else {
            (damaged(file, edits), keys.clone())
        };
        let dir = place(&file);
        std::fs::write(dir.join(KEYS), keys).expect("writes the keys");
        dir
    } else {
        place(&damaged(whole(), edits))
    };
    if what & 1 == 0 {
        if documents {
            use_documents(&dir);
        } else {
            use_store(&dir);
        }
    } else {
        let _ = neardup_store::check(&dir);
        let _ = neardup_store::export(&dir, |_| Ok::<(), ()>(()));
        if neardup_store::repair(&dir).is_ok() {
            if documents {
                let store = DocumentStore::open(&dir, None).expect("a repaired store opens");
                store.get("doc-1").expect("a repaired store reads");
            } else {
                let store = FingerprintStore::open(&dir, None).expect("a repaired store opens");
                store.records().expect("a repaired store reads");
            }
        }
    }
});
