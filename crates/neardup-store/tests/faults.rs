//! Damaged, half-made and busy stores: every case an error that names the file and what
//! is wrong, never a panic; what can be saved is saved by `check`, `repair` and `export`.

use std::path::Path;
use std::time::Duration;

use neardup::tables::Blocks;
use neardup_store::{FingerprintStore, Record, StoreConfig, StoreError, FILE};

const CONFIG: StoreConfig = StoreConfig {
    blocks: Blocks::Fixed(6),
    distance: 3,
    fingerprint_version: 2,
};

fn fp(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)
}

/// A store of `n` documents (every third with an expiry), closed, and its records.
fn filled(dir: &Path, n: u64) -> Vec<Record> {
    let mut store = FingerprintStore::create(dir, CONFIG, 0).unwrap();
    let ids: Vec<String> = (0..n).map(|i| format!("doc-{i:05}")).collect();
    let docs: Vec<(&str, u64, Option<Duration>)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let ttl = (i % 3 == 0).then(|| Duration::from_secs(1_000_000 + i as u64));
            (id.as_str(), fp(i as u64), ttl)
        })
        .collect();
    for chunk in docs.chunks(500) {
        store.insert_bulk(chunk, |_| {}).unwrap();
    }
    let records = store.records().unwrap();
    assert_eq!(records.len() as u64, n);
    records
}

#[test]
fn a_store_cut_short_is_a_damaged_error_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), 2000);
    let path = dir.path().join(FILE);
    let whole = std::fs::read(&path).unwrap();
    let mut lengths: Vec<usize> = (4096..whole.len()).step_by(4096 * 7).collect();
    lengths.extend([0, 1, 9, 100, 320, 4095, whole.len() - 4096, whole.len() - 1]);
    for len in lengths {
        std::fs::write(&path, &whole[..len]).unwrap();
        let err = FingerprintStore::open(dir.path(), None).unwrap_err();
        let msg = err.to_string();
        match len {
            // Nothing in it: an interrupted create, as far as anyone can tell.
            0 => assert!(matches!(err, StoreError::Unfinished(_)), "{len}: {msg}"),
            _ => {
                assert!(matches!(err, StoreError::Damaged { .. }), "{len}: {msg}");
                assert!(msg.contains(FILE) && msg.contains("cut short"), "{msg}");
            }
        }
        assert!(matches!(
            FingerprintStore::create(dir.path(), CONFIG, 0),
            Err(StoreError::Exists(_)) | Ok(_)
        ));
        // create never replaces a damaged store (only an empty, unfinished one).
        if len > 0 {
            assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, len);
        }
    }
}

#[test]
fn a_store_cut_short_is_exported_and_repaired_with_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let records = filled(dir.path(), 2000);
    let path = dir.path().join(FILE);
    let whole = std::fs::read(&path).unwrap();
    // redb's file ends in free space: the last page holds nothing of the store.
    std::fs::write(&path, &whole[..whole.len() - 4096]).unwrap();

    let check = neardup_store::check(dir.path()).unwrap();
    assert!(check.problems[0].contains("cut short"), "{check:?}");
    assert!(check.complete, "{check:?}");
    assert_eq!(check.documents, 2000);
    // check never writes the store.
    assert_eq!(std::fs::read(&path).unwrap(), whole[..whole.len() - 4096]);

    let mut out = Vec::new();
    let export = neardup_store::export(dir.path(), |r| {
        out.push(r);
        Ok::<(), ()>(())
    })
    .unwrap()
    .unwrap();
    assert!(export.complete);
    assert_eq!(out, records);

    let repair = neardup_store::repair(dir.path()).unwrap();
    assert!(repair.complete && repair.documents == 2000, "{repair:?}");
    let kept = repair.kept.unwrap();
    assert_eq!(std::fs::read(&kept).unwrap(), whole[..whole.len() - 4096]);
    let store = FingerprintStore::open(dir.path(), Some(CONFIG)).unwrap();
    assert_eq!(store.records().unwrap(), records);
    assert_eq!(
        store.find_first(fp(7)).unwrap(),
        Some(("doc-00007".into(), 0))
    );
    drop(store);
    assert!(neardup_store::check(dir.path())
        .unwrap()
        .problems
        .is_empty());
}

#[test]
fn damage_inside_the_file_is_found_by_check() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), 3000);
    let path = dir.path().join(FILE);
    let whole = std::fs::read(&path).unwrap();
    // Flip bytes in used pages past the header (40 of them), one page at a time: the checksums of
    // redb's pages (or the store's own checks) find every one that matters, and no flip
    // ends in a panic.
    let mut found = 0;
    let pages = whole.len() / 4096;
    for page in (1..pages).step_by(pages / 40 + 1) {
        let mut bytes = whole.clone();
        let at = page * 4096 + 100;
        if bytes[at..at + 64].iter().all(|&b| b == 0) {
            continue;
        }
        for b in &mut bytes[at..at + 64] {
            *b ^= 0x5a;
        }
        std::fs::write(&path, &bytes).unwrap();
        let check = neardup_store::check(dir.path()).unwrap();
        if !check.problems.is_empty() {
            found += 1;
        }
        // Opening either works (redb never reads the damaged page on open) or is an error.
        if let Err(e) = FingerprintStore::open(dir.path(), None) {
            assert!(e.to_string().contains(FILE), "{e}");
        }
    }
    assert!(found > 0, "no damaged page was noticed");
}

#[test]
fn inconsistent_tables_are_found_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let records = filled(dir.path(), 50);
    let path = dir.path().join(FILE);
    {
        // A name lost, as a bug or a hand edit could lose it.
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let names: redb::TableDefinition<u64, &str> = redb::TableDefinition::new("names");
        txn.open_table(names).unwrap().remove(&3).unwrap();
        txn.commit().unwrap();
    }
    let check = neardup_store::check(dir.path()).unwrap();
    assert_eq!(
        check.problems,
        vec!["document \"doc-00003\" (3) has no name".to_string()]
    );
    let repair = neardup_store::repair(dir.path()).unwrap();
    assert!(repair.complete);
    let store = FingerprintStore::open(dir.path(), Some(CONFIG)).unwrap();
    assert_eq!(store.records().unwrap(), records);
    assert_eq!(
        store.find_first(fp(3)).unwrap(),
        Some(("doc-00003".into(), 0))
    );
}

#[test]
fn settings_that_make_no_store_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("new");
    for (config, words) in [
        (
            StoreConfig {
                distance: 65,
                blocks: Blocks::Auto,
                ..CONFIG
            },
            "distance 65",
        ),
        (
            StoreConfig {
                distance: 4,
                blocks: Blocks::Fixed(4),
                ..CONFIG
            },
            "blocks (4) must be greater than distance (4)",
        ),
    ] {
        let err = FingerprintStore::create(&d, config, 0).unwrap_err();
        assert!(err.to_string().contains(words), "{err}");
        assert!(!d.exists(), "{err}: left {}", d.display());
    }
}

#[test]
fn leftovers_of_an_interrupted_create_are_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A file made aside by a process that is gone (pid 0 is never a user process), and an
    // empty database file from a create of an earlier version.
    let aside = d.join(format!("{FILE}.4194304.0.partial"));
    std::fs::write(&aside, b"half").unwrap();
    std::fs::write(d.join(FILE), b"").unwrap();
    let err = FingerprintStore::open(d, None).unwrap_err();
    assert!(matches!(err, StoreError::Unfinished(_)), "{err}");
    assert!(err.to_string().contains("create it again"), "{err}");
    let mut store = FingerprintStore::create(d, CONFIG, 0).unwrap();
    store.insert("a", 1, None).unwrap();
    drop(store);
    if Path::new("/proc/self").exists() {
        assert!(!aside.exists(), "the leftover of a dead process stays");
    }
    // A redb file that never committed a table (killed inside an earlier create) holds
    // nothing either.
    let e = tempfile::tempdir().unwrap();
    drop(redb::Database::create(e.path().join(FILE)).unwrap());
    let err = FingerprintStore::open(e.path(), None).unwrap_err();
    assert!(matches!(err, StoreError::Unfinished(_)), "{err}");
    FingerprintStore::create(e.path(), CONFIG, 0).unwrap();
}

#[test]
fn a_store_in_use_says_by_whom() {
    let dir = tempfile::tempdir().unwrap();
    let store = FingerprintStore::create(dir.path(), CONFIG, 0).unwrap();
    let err = FingerprintStore::open(dir.path(), None).unwrap_err();
    assert!(matches!(err, StoreError::InUse { .. }), "{err}");
    assert!(err.to_string().contains("in use by this process"), "{err}");
    let err = neardup_store::check(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::InUse { .. }), "{err}");
    drop(store);
    assert!(FingerprintStore::open(dir.path(), None).is_ok());
}
