//! The Redis Cluster backend against the embedded store as its oracle: the same random
//! batches of puts (plain and `only_if_unique`, with and without a time to live) and
//! deletes, checks, gets, sweeps and clock steps go to a `DocumentStore` and a `RedisStore`,
//! and every answer must be equal. Then the invariants one by one: a half-written insert
//! is never seen, a removed or expired document never matches, no document is reported
//! twice, band keys and ids are kept as exact bytes.
//!
//! These tests need a Redis Cluster: `scripts/redis-cluster.sh start`, then
//! `NEARDUP_REDIS=$(scripts/redis-cluster.sh seeds) cargo test -p neardup-store --features
//! redis --test redis`. Without `NEARDUP_REDIS` they say so and pass, unless
//! `NEARDUP_REQUIRE_REDIS=1` (CI sets both).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup::decide::Signature;
use neardup::jaccard::{Threshold, BANDS};
use neardup_store::{
    Clock, DocConfig, DocumentStore, Interrupt, Outcome, Preparer, RedisOptions, RedisStore, Write,
};
use proptest::prelude::*;

struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The cluster's seed nodes, or `None` (with a note) when no cluster is configured.
fn cluster(test: &str) -> Option<String> {
    match std::env::var("NEARDUP_REDIS") {
        Ok(seeds) if !seeds.trim().is_empty() => Some(seeds),
        _ => {
            // In CI a cluster is started for these tests: there, none is a failure.
            assert!(
                std::env::var("NEARDUP_REQUIRE_REDIS").as_deref() != Ok("1"),
                "{test}: NEARDUP_REQUIRE_REDIS=1 but NEARDUP_REDIS is not set"
            );
            eprintln!(
                "skipped {test}: NEARDUP_REDIS is not set (start a cluster with \
                 scripts/redis-cluster.sh start and set NEARDUP_REDIS to its seeds)"
            );
            None
        }
    }
}

/// A namespace no other test uses.
fn namespace(test: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "test-{}-{test}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn options(test: &str) -> RedisOptions {
    RedisOptions {
        namespace: namespace(test),
        ..RedisOptions::default()
    }
}

const WORDS: [&str; 24] = [
    "river", "stone", "mill", "farmer", "quiet", "hill", "sun", "slowly", "behind", "old",
    "watches", "bank", "fox", "lazy", "dog", "brown", "quick", "near", "while", "sets", "field",
    "barn", "rain", "wind",
];

/// A text of 60 words from one of three bases, with `edits` words replaced (the same
/// texts as the embedded store's model test).
fn text(base: usize, edits: &[(usize, usize)]) -> String {
    if base == 3 {
        // Without words: matches only its own copies.
        return "!!! ??? ...".into();
    }
    let mut words: Vec<String> = (0..60)
        .map(|i| {
            format!(
                "{}{}",
                WORDS[(i * 7 + base * 5) % WORDS.len()],
                (i * 31 + base * 17) % 97
            )
        })
        .collect();
    for &(at, w) in edits {
        words[at % 60] = WORDS[w % WORDS.len()].to_string();
    }
    words.join(" ")
}

/// A document: one text, or in a paragraph store two paragraphs.
fn document(paragraphs: bool, a: &Doc, b: &Doc) -> String {
    if paragraphs {
        format!("{}\n\n{}", text(a.0, &a.1), text(b.0, &b.1))
    } else {
        text(a.0, &a.1)
    }
}

type Doc = (usize, Vec<(usize, usize)>);

#[derive(Clone, Debug)]
enum W {
    Put {
        id: u8,
        a: Doc,
        b: Doc,
        ttl: Option<u64>,
        unique: bool,
    },
    Delete(u8),
}

#[derive(Clone, Debug)]
enum Op {
    Batch(Vec<W>),
    Check(Doc, Doc),
    Get(u8),
    Advance(u64),
    Sweep,
}

fn doc() -> impl Strategy<Value = Doc> {
    (
        0usize..4,
        prop::collection::vec((0usize..60, 0usize..24), 0..8),
    )
}

fn write() -> impl Strategy<Value = W> {
    let id = 0u8..10;
    prop_oneof![
        4 => (id.clone(), doc(), doc(), prop::option::of(1u64..20), any::<bool>())
            .prop_map(|(id, a, b, ttl, unique)| W::Put { id, a, b, ttl, unique }),
        1 => id.prop_map(W::Delete),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => prop::collection::vec(write(), 1..6).prop_map(Op::Batch),
        4 => (doc(), doc()).prop_map(|(a, b)| Op::Check(a, b)),
        2 => (0u8..10).prop_map(Op::Get),
        1 => (1u64..15).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
    ]
}

/// Runs `ops` on both stores; every answer must be equal.
fn same_answers(
    seeds: &str,
    config: DocConfig,
    ops: Vec<Op>,
) -> std::result::Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
    let mut local = DocumentStore::create(dir.path(), config)
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .with_clock(clock.clone());
    let mut remote = RedisStore::create(seeds, options("model"), config, 1000)
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .with_clock(clock.clone());
    let reader = remote.reader();
    let prep = Preparer::new(config);
    let p = config.paragraphs;
    let outcome = (|| {
        for op in ops {
            match op {
                Op::Batch(ws) => {
                    let writes: Vec<Write> = ws
                        .into_iter()
                        .map(|w| match w {
                            W::Put {
                                id,
                                a,
                                b,
                                ttl,
                                unique,
                            } => Write::Put {
                                id: format!("doc/{id}"),
                                doc: Box::new(prep.prepare(&document(p, &a, &b), false)),
                                ttl: ttl.map(Duration::from_secs),
                                only_if_unique: unique,
                            },
                            W::Delete(id) => Write::Delete {
                                id: format!("doc/{id}"),
                            },
                        })
                        .collect();
                    let want = local.apply(writes.clone()).unwrap();
                    let got = remote.apply(writes).unwrap();
                    prop_assert_eq!(got, want);
                }
                Op::Check(a, b) => {
                    let t = document(p, &a, &b);
                    let doc = prep.prepare(&t, p);
                    let want = local.check(&doc).unwrap();
                    let got = reader.check(&doc).unwrap();
                    let ids: HashSet<&str> = got.hits.iter().map(|h| h.id.as_str()).collect();
                    prop_assert_eq!(ids.len(), got.hits.len(), "a document reported twice");
                    prop_assert_eq!(&got, &want);
                    prop_assert_eq!(reader.check_text(&prep, &t).unwrap(), want);
                    if p {
                        let want = local.check_paragraphs(&doc).unwrap();
                        prop_assert_eq!(reader.check_paragraphs(&doc).unwrap(), want);
                    }
                }
                Op::Get(id) => {
                    let id = format!("doc/{id}");
                    prop_assert_eq!(reader.get(&id).unwrap(), local.get(&id).unwrap());
                }
                Op::Advance(s) => {
                    clock.0.fetch_add(s, Ordering::SeqCst);
                }
                Op::Sweep => {
                    prop_assert_eq!(remote.sweep().unwrap(), local.sweep().unwrap());
                }
            }
            prop_assert_eq!(remote.len(), local.len());
            prop_assert_eq!(reader.len(), local.len());
        }
        Ok(())
    })();
    remote
        .destroy()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    outcome
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn answers_equal_the_embedded_store(
        threshold in 0.5f64..0.95,
        ops in prop::collection::vec(op(), 1..30),
    ) {
        let Some(seeds) = cluster("answers_equal_the_embedded_store") else { return Ok(()) };
        let config = DocConfig { threshold: Threshold::new(threshold).unwrap(), paragraphs: false };
        same_answers(&seeds, config, ops)?;
    }

    #[test]
    fn paragraph_answers_equal_the_embedded_store(
        threshold in 0.5f64..0.95,
        ops in prop::collection::vec(op(), 1..20),
    ) {
        let Some(seeds) = cluster("paragraph_answers_equal_the_embedded_store") else { return Ok(()) };
        let config = DocConfig { threshold: Threshold::new(threshold).unwrap(), paragraphs: true };
        same_answers(&seeds, config, ops)?;
    }
}

fn put(prep: &Preparer, id: &str, text: &str, ttl: Option<u64>) -> Write {
    Write::Put {
        id: id.into(),
        doc: Box::new(prep.prepare(text, false)),
        ttl: ttl.map(Duration::from_secs),
        only_if_unique: false,
    }
}

fn ids(checked: &neardup_store::Checked) -> Vec<&str> {
    checked.hits.iter().map(|h| h.id.as_str()).collect()
}

#[test]
fn a_half_written_insert_is_never_seen() {
    let Some(seeds) = cluster("a_half_written_insert_is_never_seen") else {
        return;
    };
    let config = DocConfig::default();
    let mut store = RedisStore::create(&seeds, options("phantom"), config, 1000).unwrap();
    let reader = store.reader();
    let prep = Preparer::new(store.config());
    let (a, b) = (text(0, &[]), text(1, &[]));

    // The writer dies after the bucket entries, before the record: nothing is seen.
    store
        .apply_interrupted(vec![put(&prep, "x", &a, None)], Interrupt::BeforeCommit)
        .unwrap();
    assert!(reader
        .check(&prep.prepare(&a, false))
        .unwrap()
        .hits
        .is_empty());
    assert!(reader.check_text(&prep, &a).unwrap().hits.is_empty());
    assert_eq!(reader.get("x").unwrap(), None);
    assert_eq!(reader.len(), 0);

    // Written whole afterwards (under a new internal id), it is found once, beside the
    // dead attempt's entries.
    store.apply(vec![put(&prep, "x", &a, None)]).unwrap();
    assert_eq!(ids(&reader.check_text(&prep, &a).unwrap()), ["x"]);

    // A replacement that dies after its record, before the old entries are removed: the
    // id holds the new text only; the old text's entries lead nowhere.
    store
        .apply_interrupted(vec![put(&prep, "x", &b, None)], Interrupt::BeforeCleanup)
        .unwrap();
    assert!(reader.check_text(&prep, &a).unwrap().hits.is_empty());
    assert_eq!(ids(&reader.check_text(&prep, &b).unwrap()), ["x"]);
    let got = reader.get("x").unwrap().unwrap();
    assert_eq!(got.signature, prep.prepare(&b, false).signature);

    // A deletion that dies before its cleanup: gone for checks and gets alike.
    store
        .apply_interrupted(
            vec![Write::Delete { id: "x".into() }],
            Interrupt::BeforeCleanup,
        )
        .unwrap();
    assert!(reader.check_text(&prep, &b).unwrap().hits.is_empty());
    assert_eq!(reader.get("x").unwrap(), None);
    store.destroy().unwrap();
}

#[test]
fn removed_and_expired_documents_never_match() {
    let Some(seeds) = cluster("removed_and_expired_documents_never_match") else {
        return;
    };
    let config = DocConfig::default();
    let clock = Arc::new(TestClock(AtomicU64::new(5_000)));
    let mut store = RedisStore::create(&seeds, options("gone"), config, 1000)
        .unwrap()
        .with_clock(clock.clone());
    let reader = store.reader();
    let prep = Preparer::new(store.config());
    let (a, b, c) = (text(0, &[]), text(1, &[]), text(2, &[]));
    store
        .apply(vec![
            put(&prep, "keep", &a, None),
            put(&prep, "short", &b, Some(10)),
            put(&prep, "gone", &c, None),
        ])
        .unwrap();
    assert_eq!(reader.len(), 3);
    store
        .apply(vec![Write::Delete { id: "gone".into() }])
        .unwrap();
    assert!(reader.check_text(&prep, &c).unwrap().hits.is_empty());
    assert_eq!(ids(&reader.check_text(&prep, &b).unwrap()), ["short"]);

    // Expired: no longer matched nor got at once, counted until swept.
    clock.0.fetch_add(10, Ordering::SeqCst);
    assert!(reader.check_text(&prep, &b).unwrap().hits.is_empty());
    assert_eq!(reader.get("short").unwrap(), None);
    assert_eq!(reader.len(), 2);
    assert_eq!(store.sweep().unwrap(), 1);
    assert_eq!(store.sweep().unwrap(), 0);
    assert_eq!(reader.len(), 1);
    assert_eq!(ids(&reader.check_text(&prep, &a).unwrap()), ["keep"]);

    // A document put again without a ttl after its expiring version stays.
    store.apply(vec![put(&prep, "k2", &b, Some(5))]).unwrap();
    store.apply(vec![put(&prep, "k2", &b, None)]).unwrap();
    clock.0.fetch_add(100, Ordering::SeqCst);
    assert_eq!(store.sweep().unwrap(), 0);
    assert_eq!(ids(&reader.check_text(&prep, &b).unwrap()), ["k2"]);
    store.destroy().unwrap();
}

/// As in the store in memory: a crowded bucket gives its first members only, and the
/// check says it is partial; 64 copies of a text are all found, and the check is whole.
#[test]
fn a_check_under_a_crowded_key_says_it_is_partial() {
    let Some(seeds) = cluster("a_check_under_a_crowded_key_says_it_is_partial") else {
        return;
    };
    let config = DocConfig::default();
    let mut store = RedisStore::create(&seeds, options("crowd"), config, 1000).unwrap();
    let reader = store.reader();
    let prep = Preparer::new(store.config());
    let t = text(0, &[]);
    let copies = |from: usize, to: usize| -> Vec<Write> {
        (from..to)
            .map(|i| put(&prep, &format!("c{i}"), &t, None))
            .collect()
    };
    store.apply(copies(0, 64)).unwrap();
    let whole = reader.check_text(&prep, &t).unwrap();
    assert_eq!((whole.hits.len(), whole.partial), (64, false));
    store.apply(copies(64, 200)).unwrap();
    let crowded = reader.check_text(&prep, &t).unwrap();
    assert!(crowded.partial);
    assert!(
        (64..200).contains(&crowded.hits.len()),
        "{}",
        crowded.hits.len()
    );
    assert_eq!(reader.check(&prep.prepare(&t, false)).unwrap(), crowded);
    let other = reader.check_text(&prep, &text(1, &[])).unwrap();
    assert_eq!(other, neardup_store::Checked::default());
    // A put finds its near-duplicates as a check does, and says so too.
    let out = store
        .apply(vec![
            put(&prep, "c200", &t, None),
            put(&prep, "other", &text(1, &[]), None),
        ])
        .unwrap();
    let partial: Vec<bool> = out
        .iter()
        .map(|o| matches!(o, Outcome::Put { partial: true, .. }))
        .collect();
    assert_eq!(partial, [true, false], "{out:?}");
    store.destroy().unwrap();
}

#[test]
fn band_keys_and_ids_are_exact_bytes() {
    let Some(seeds) = cluster("band_keys_and_ids_are_exact_bytes") else {
        return;
    };
    let mut store =
        RedisStore::create(&seeds, options("exact"), DocConfig::default(), 1000).unwrap();
    let reader = store.reader();
    let prep = Preparer::new(store.config());
    // Keys in the top of the range, and keys one bit apart from them (no band agrees).
    let mut high = Signature {
        text_hash: u64::MAX,
        ..Signature::default()
    };
    for (i, k) in high.bands.iter_mut().enumerate() {
        *k = u32::MAX - i as u32;
    }
    let mut near = high;
    near.text_hash = u64::MAX - 1;
    for k in near.bands.iter_mut() {
        *k ^= 1;
    }
    // Ids with bytes that mean something to Redis keys and hash tags.
    let weird = "{x}:d:{0000}:\u{e9}\u{1F600} /";
    store
        .apply(vec![Write::Put {
            id: weird.into(),
            doc: Box::new(prep.from_signature(high)),
            ttl: None,
            only_if_unique: false,
        }])
        .unwrap();
    assert_eq!(
        ids(&reader.check(&prep.from_signature(high)).unwrap()),
        [weird]
    );
    assert!(reader
        .check(&prep.from_signature(near))
        .unwrap()
        .hits
        .is_empty());
    assert_eq!(reader.get(weird).unwrap().map(|d| d.signature), Some(high));
    assert_eq!(near.bands.len(), BANDS);
    store.destroy().unwrap();
}

#[test]
fn settings_are_kept_and_checked() {
    let Some(seeds) = cluster("settings_are_kept_and_checked") else {
        return;
    };
    let config = DocConfig {
        threshold: Threshold::new(0.7).unwrap(),
        paragraphs: true,
    };
    let opts = options("settings");
    let store = RedisStore::create(&seeds, opts.clone(), config, 1000).unwrap();
    let err = RedisStore::create(&seeds, opts.clone(), config, 1000).unwrap_err();
    assert!(err.to_string().contains("already holds a corpus"), "{err}");
    let again = RedisStore::connect(&seeds, opts.clone(), Some(config)).unwrap();
    assert_eq!(again.config(), config);
    assert_eq!(again.bucket_bits(), store.bucket_bits());
    let err = RedisStore::connect(&seeds, opts.clone(), Some(DocConfig::default())).unwrap_err();
    assert!(err.to_string().contains("made with threshold 0.7"), "{err}");
    let err = RedisStore::connect(&seeds, options("none"), None).unwrap_err();
    assert!(
        err.to_string().contains("no corpus under namespace"),
        "{err}"
    );
    let bad = RedisOptions {
        namespace: "a{b}".into(),
        ..RedisOptions::default()
    };
    let err = RedisStore::connect(&seeds, bad, None).unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");
    drop(again);
    store.destroy().unwrap();
}
