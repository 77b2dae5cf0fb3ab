//! The store against a model (with reopens and an injectable clock), bad directories, and
//! a writer killed with SIGKILL again and again.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup::tables::Blocks;
use neardup_store::{Clock, FingerprintStore, StoreConfig, StoreError};
use proptest::prelude::*;

struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const CONFIG: StoreConfig = StoreConfig {
    blocks: Blocks::Auto,
    distance: 3,
    fingerprint_version: 2,
};

#[derive(Clone, Debug)]
enum Op {
    Insert(u8, u64, Option<u64>),
    InsertBulk(Vec<(u8, u64, Option<u64>)>),
    Remove(u8),
    RemoveBulk(Vec<u8>),
    Query(u64),
    Advance(u64),
    Sweep,
    Reopen,
}

fn fp() -> impl Strategy<Value = u64> {
    (0usize..3, prop::collection::vec(0u32..64, 0..5)).prop_map(|(b, flips)| {
        let bases = [0u64, u64::MAX, 0x0123_4567_89ab_cdef];
        flips.iter().fold(bases[b], |x, &i| x ^ (1 << i))
    })
}

fn op() -> impl Strategy<Value = Op> {
    let ttl = prop::option::of(0u64..5);
    prop_oneof![
        4 => (0u8..20, fp(), ttl.clone()).prop_map(|(i, f, t)| Op::Insert(i, f, t)),
        1 => prop::collection::vec((0u8..20, fp(), ttl), 0..8).prop_map(Op::InsertBulk),
        2 => (0u8..20).prop_map(Op::Remove),
        1 => prop::collection::vec(0u8..20, 0..5).prop_map(Op::RemoveBulk),
        4 => fp().prop_map(Op::Query),
        1 => (0u64..4).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
        1 => Just(Op::Reopen),
    ]
}

/// The model: id → (fingerprint, expiry).
type Model = BTreeMap<String, (u64, Option<u64>)>;

fn live(model: &Model, now: u64) -> impl Iterator<Item = (&String, u64)> {
    model
        .iter()
        .filter(move |(_, (_, exp))| exp.is_none_or(|at| at > now))
        .map(|(id, (f, _))| (id, *f))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn matches_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock(AtomicU64::new(1000)));
        let mut store = FingerprintStore::create(dir.path(), CONFIG, 100).unwrap().with_clock(clock.clone());
        let mut model = Model::new();
        let name = |i: u8| format!("doc-{i}");
        let expiry = |t: Option<u64>, now: u64| t.map(|s| now + s);
        for op in ops {
            let now = clock.now();
            match op {
                Op::Insert(i, f, t) => {
                    let old = store.insert(&name(i), f, t.map(Duration::from_secs)).unwrap();
                    prop_assert_eq!(old, model.insert(name(i), (f, expiry(t, now))).map(|v| v.0));
                }
                Op::InsertBulk(docs) => {
                    let names: Vec<String> = docs.iter().map(|d| name(d.0)).collect();
                    let batch: Vec<(&str, u64, Option<Duration>)> = docs
                        .iter()
                        .zip(&names)
                        .map(|(d, n)| (n.as_str(), d.1, d.2.map(Duration::from_secs)))
                        .collect();
                    let mut replaced = Vec::new();
                    store.insert_bulk(&batch, |r| replaced.push(r)).unwrap();
                    let want: Vec<Option<u64>> = docs
                        .iter()
                        .map(|&(i, f, t)| model.insert(name(i), (f, expiry(t, now))).map(|v| v.0))
                        .collect();
                    prop_assert_eq!(replaced, want);
                }
                Op::Remove(i) => {
                    prop_assert_eq!(store.remove(&name(i)).unwrap(), model.remove(&name(i)).is_some());
                }
                Op::RemoveBulk(ids) => {
                    let names: Vec<String> = ids.iter().map(|&i| name(i)).collect();
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    let want = names.iter().filter(|n| model.remove(*n).is_some()).count();
                    prop_assert_eq!(store.remove_bulk(&refs).unwrap(), want);
                }
                Op::Query(q) => {
                    let mut want: Vec<(String, u32)> = live(&model, now)
                        .map(|(id, f)| (id.clone(), (f ^ q).count_ones()))
                        .filter(|&(_, d)| d <= 3)
                        .collect();
                    want.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
                    prop_assert_eq!(store.find_first(q).unwrap(), want.first().cloned());
                    prop_assert_eq!(store.reader().find_all(q).unwrap(), want.clone());
                    prop_assert_eq!(store.find_all(q).unwrap(), want);
                }
                Op::Advance(s) => {
                    clock.0.fetch_add(s, Ordering::SeqCst);
                }
                Op::Sweep => {
                    let expired: Vec<String> = model
                        .iter()
                        .filter(|(_, (_, e))| e.is_some_and(|at| at <= now))
                        .map(|(id, _)| id.clone())
                        .collect();
                    for id in &expired {
                        model.remove(id);
                    }
                    prop_assert_eq!(store.sweep().unwrap(), expired.len());
                }
                Op::Reopen => {
                    drop(store);
                    store = FingerprintStore::open(dir.path(), Some(CONFIG)).unwrap().with_clock(clock.clone());
                }
            }
            prop_assert_eq!(store.len(), model.len());
        }
    }
}

#[test]
fn bad_directories_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = FingerprintStore::open(dir.path(), None).unwrap_err();
    assert!(matches!(err, StoreError::NotAStore(_)), "{err}");
    assert!(err.to_string().contains("not a neardup data directory"));

    // Garbage where the database should be.
    std::fs::write(
        dir.path().join(neardup_store::FILE),
        b"not a database at all",
    )
    .unwrap();
    let err = FingerprintStore::open(dir.path(), None).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains(neardup_store::FILE), "{err}");
    // ... and create does not overwrite it.
    assert!(matches!(
        FingerprintStore::create(dir.path(), CONFIG, 10),
        Err(StoreError::Exists(_))
    ));
    assert_eq!(
        std::fs::read(dir.path().join(neardup_store::FILE)).unwrap(),
        b"not a database at all"
    );

    // Another program's redb database.
    let other = tempfile::tempdir().unwrap();
    let db = redb_database(other.path());
    drop(db);
    let err = FingerprintStore::open(other.path(), None).unwrap_err();
    assert!(err.to_string().contains("no neardup settings"), "{err}");
}

fn redb_database(dir: &std::path::Path) -> redb::Database {
    let db = redb::Database::create(dir.join(neardup_store::FILE)).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let def: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("other");
        txn.open_table(def).unwrap().insert("x", &1).unwrap();
    }
    txn.commit().unwrap();
    db
}

#[test]
fn settings_are_recorded_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FingerprintStore::create(dir.path(), CONFIG, 1_000_000).unwrap();
    store.insert("a", 42, None).unwrap();
    let blocks = store.config().blocks;
    drop(store);
    for wrong in [
        StoreConfig {
            distance: 4,
            ..CONFIG
        },
        StoreConfig {
            fingerprint_version: 1,
            ..CONFIG
        },
        StoreConfig {
            blocks: Blocks::Fixed(9),
            ..CONFIG
        },
    ] {
        let err = FingerprintStore::open(dir.path(), Some(wrong)).unwrap_err();
        assert!(matches!(err, StoreError::Mismatch { .. }), "{err}");
        assert!(err.to_string().contains("made with"), "{err}");
    }
    let store = FingerprintStore::open(dir.path(), Some(StoreConfig { blocks, ..CONFIG })).unwrap();
    assert_eq!(store.find_first(43).unwrap(), Some(("a".to_string(), 1)));
}

/// The writer of the crash test: runs only when the parent test starts it.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("NEARDUP_CRASH_DIR") else {
        return;
    };
    let start: u64 = std::env::var("NEARDUP_CRASH_START")
        .unwrap()
        .parse()
        .unwrap();
    let mut store = FingerprintStore::open(&dir, None).unwrap();
    let mut out = std::io::stdout().lock();
    for i in start.. {
        store.insert(&format!("d{i}"), crash_fp(i), None).unwrap();
        writeln!(out, "i {i}").unwrap();
        out.flush().unwrap();
        if i % 5 == 4 {
            store.remove(&format!("d{}", i - 2)).unwrap();
            writeln!(out, "r {}", i - 2).unwrap();
            out.flush().unwrap();
        }
    }
}

fn crash_fp(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    drop(FingerprintStore::create(dir.path(), CONFIG, 1000).unwrap());
    let (mut inserted, mut removed) = (BTreeSet::new(), BTreeSet::new());
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..12u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let acks_wanted = 1 + seed % 200;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("NEARDUP_CRASH_DIR", dir.path())
            .env("NEARDUP_CRASH_START", (round * 1_000_000).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut acks = 0;
        let mut last = None;
        let mut record = |line: String, last: &mut Option<(String, u64)>| {
            // The harness may print "test crash_child ... " before the first one.
            let mut words = line.split_whitespace().rev();
            let (Some(n), Some(kind)) = (words.next(), words.next()) else {
                return;
            };
            let Ok(n) = n.parse::<u64>() else { return };
            match kind {
                "i" => inserted.insert(n),
                "r" => removed.insert(n),
                _ => return,
            };
            *last = Some((kind.to_string(), n));
        };
        while acks < acks_wanted {
            let Some(Ok(line)) = lines.next() else { break };
            record(line, &mut last);
            acks += 1;
        }
        // SIGKILL, mid-write or not; every line printed before it is an acknowledgement.
        child.kill().unwrap();
        child.wait().unwrap();
        for line in lines.map_while(Result::ok) {
            record(line, &mut last);
        }
        // The operation after the last acknowledged one may or may not have happened.
        let (in_flight_insert, in_flight_remove) = match &last {
            Some((k, n)) if k == "i" && n % 5 == 4 => (None, Some(n - 2)),
            Some((k, n)) if k == "i" => (Some(n + 1), None),
            Some((_, n)) => (Some(n + 3), None),
            None => (Some(round * 1_000_000), None),
        };
        let store = FingerprintStore::open(dir.path(), Some(CONFIG)).unwrap();
        for &i in &inserted {
            let found = store.find_all(crash_fp(i)).unwrap();
            let present = found
                .iter()
                .any(|(id, d)| *id == format!("d{i}") && *d == 0);
            if removed.contains(&i) {
                assert!(!present, "round {round}: d{i} was removed, and is back");
            } else if Some(i) != in_flight_remove {
                assert!(present, "round {round}: acknowledged d{i} is lost");
            }
        }
        let live = inserted.len() - removed.len();
        let extra = usize::from(in_flight_insert.is_some());
        let lost = usize::from(in_flight_remove.is_some());
        assert!(
            store.len() >= live - lost && store.len() <= live + extra,
            "round {round}: {} documents, {live} acknowledged",
            store.len()
        );
        if let Some(i) = in_flight_insert {
            // Keep the books right for the next round.
            if store
                .find_all(crash_fp(i))
                .unwrap()
                .iter()
                .any(|(id, _)| *id == format!("d{i}"))
            {
                inserted.insert(i);
            }
        }
        if let Some(i) = in_flight_remove {
            if !store
                .find_all(crash_fp(i))
                .unwrap()
                .iter()
                .any(|(id, _)| *id == format!("d{i}"))
            {
                removed.insert(i);
            }
        }
    }
    assert!(
        inserted.len() > 12,
        "the writer barely ran: {}",
        inserted.len()
    );
}

/// A store of format 1 (expiries only in the documents table) is upgraded on open, and
/// its expiries still hold.
#[test]
fn format_1_stores_are_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(AtomicU64::new(1000)));
    let mut store = FingerprintStore::create(dir.path(), CONFIG, 10)
        .unwrap()
        .with_clock(clock.clone());
    store.insert("keep", 7, None).unwrap();
    store
        .insert("short", 7, Some(Duration::from_secs(10)))
        .unwrap();
    drop(store);
    {
        let db = redb::Database::open(dir.path().join(neardup_store::FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.delete_table(redb::TableDefinition::<u64, u64>::new("expires"))
            .unwrap();
        let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
        txn.open_table(meta).unwrap().insert("format", &1).unwrap();
        txn.commit().unwrap();
    }
    let mut store = FingerprintStore::open(dir.path(), Some(CONFIG))
        .unwrap()
        .with_clock(clock.clone());
    assert_eq!(store.find_all(7).unwrap().len(), 2);
    clock.0.fetch_add(10, Ordering::SeqCst);
    assert_eq!(store.find_all(7).unwrap(), vec![("keep".to_string(), 0)]);
    assert_eq!(store.sweep().unwrap(), 1);
    drop(store);
    let db = redb::Database::open(dir.path().join(neardup_store::FILE)).unwrap();
    let txn = db.begin_read().unwrap();
    let meta: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("meta");
    let format = txn
        .open_table(meta)
        .unwrap()
        .get("format")
        .unwrap()
        .unwrap()
        .value();
    assert_eq!(format, neardup_store::FORMAT);
}

/// Readers on other threads see every acknowledged insert and no acknowledged removal,
/// each document once, while the writer commits one document at a time.
#[test]
fn readers_query_while_the_writer_commits() {
    use std::sync::atomic::AtomicBool;

    let dir = tempfile::tempdir().unwrap();
    let mut store = FingerprintStore::create(dir.path(), CONFIG, 10_000).unwrap();
    let fp = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    let name = |i: u64| format!("doc-{i}");
    // Documents 0..inserted are acknowledged; of those, even ones below removed are gone.
    let inserted = AtomicU64::new(0);
    let removed = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let reader = store.reader();
    std::thread::scope(|s| {
        for r in 0..2u64 {
            let (reader, inserted, removed, stop) = (reader.clone(), &inserted, &removed, &stop);
            s.spawn(move || {
                let mut x = 0x5151 + r;
                let mut checks = 0;
                while !stop.load(Ordering::SeqCst) || checks < 200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Read the removal mark first: it only grows, and trails the inserts.
                    let gone = removed.load(Ordering::SeqCst);
                    let n = inserted.load(Ordering::SeqCst);
                    if n == 0 {
                        continue;
                    }
                    let i = x % n;
                    let found = reader.find_all(fp(i)).unwrap();
                    let hits = found.iter().filter(|(id, _)| *id == name(i)).count();
                    if i % 2 == 0 && i < gone {
                        assert_eq!(hits, 0, "reader {r}: removed doc-{i} still found");
                    } else if i % 2 == 1 || i >= removed.load(Ordering::SeqCst) + 2 {
                        assert_eq!(hits, 1, "reader {r}: doc-{i} found {hits} times");
                    }
                    checks += 1;
                }
            });
        }
        for i in 0..600u64 {
            store.insert(&name(i), fp(i), None).unwrap();
            inserted.store(i + 1, Ordering::SeqCst);
            if i % 2 == 1 && i >= 100 {
                // Remove an even document well behind the inserts.
                let j = (i - 100) & !1;
                assert!(store.remove(&name(j)).unwrap());
                removed.store(j + 1, Ordering::SeqCst);
            }
        }
        stop.store(true, Ordering::SeqCst);
    });
    assert_eq!(reader.len(), store.len());
}
