//! The document store against a brute-force model: random puts (plain and
//! `only_if_unique`, with and without a time to live), deletes, batches of them, checks,
//! sweeps, snapshots of the indexes and reopenings (from a snapshot, caught up, or
//! rebuilt), crashes (the files copied as they are mid-run, and opened: the write-ahead
//! log replayed), on texts built to be near-duplicates of each other. The model
//! keeps every live document's signature and decides each query over all of them with
//! `Rule::decide`, among those whose band keys agree with the query's in some band (the
//! candidates batch deduplication would compare).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup::decide::Signature;
use neardup::jaccard::{Threshold, BANDS};
use neardup_store::{
    Checked, Clock, DocConfig, DocumentStore, Hit, Opened, Outcome, Preparer, StoreError,
    StoredDoc, Write,
};
use proptest::prelude::*;

struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const WORDS: [&str; 24] = [
    "river", "stone", "mill", "farmer", "quiet", "hill", "sun", "slowly", "behind", "old",
    "watches", "bank", "fox", "lazy", "dog", "brown", "quick", "near", "while", "sets", "field",
    "barn", "rain", "wind",
];

/// A text of 60 words from one of three bases, with `edits` words replaced: texts of one
/// base and few edits are near-duplicates, of different bases never.
fn text(base: usize, edits: &[(usize, usize)]) -> String {
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

/// A write of a batch: the id, and the put's base text, edits and only if unique (`None`
/// for a delete).
type BatchWrite = (u8, Option<(usize, Vec<(usize, usize)>, bool)>);

#[derive(Clone, Debug)]
enum Op {
    Put {
        id: u8,
        base: usize,
        edits: Vec<(usize, usize)>,
        ttl: Option<u64>,
        unique: bool,
    },
    Delete(u8),
    /// A batch in one transaction: through the write-ahead log, or (`true`) in one
    /// durable commit of its own, as `neardup load` writes (`apply_bulk`).
    Batch(Vec<BatchWrite>, bool),
    Check(usize, Vec<(usize, usize)>),
    Advance(u64),
    Sweep,
    Snapshot,
    Reopen,
    /// The process killed now: the store's files as they are, opened.
    Crash,
    /// Every write so far made durable in the database itself.
    Checkpoint,
}

fn edits() -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((0usize..60, 0usize..24), 0..8)
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0u8..12;
    prop_oneof![
        5 => (id.clone(), 0usize..3, edits(), prop::option::of(1u64..20), any::<bool>())
            .prop_map(|(id, base, edits, ttl, unique)| Op::Put { id, base, edits, ttl, unique }),
        2 => id.clone().prop_map(Op::Delete),
        // Few ids, so that a batch often deletes or replaces one of its own puts before a
        // near-duplicate of it comes.
        2 => prop::collection::vec(
            (0u8..5, prop::option::weighted(0.8, (0usize..3, edits(), any::<bool>()))),
            1..8,
        )
        .prop_flat_map(|b| (Just(b), prop::bool::weighted(0.3)))
        .prop_map(|(b, bulk)| Op::Batch(b, bulk)),
        4 => (0usize..3, edits()).prop_map(|(b, e)| Op::Check(b, e)),
        1 => (1u64..15).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Reopen),
        2 => Just(Op::Crash),
        1 => Just(Op::Checkpoint),
    ]
}

/// Live documents by id: signature and expiry (0 for none).
type Model = BTreeMap<String, (Signature, u64)>;

/// What the store should answer for `query`: the live documents (but `except`) that are
/// candidates and near-duplicates, most similar first.
fn model_hits(
    model: &Model,
    config: DocConfig,
    query: &Signature,
    now: u64,
    except: Option<&str>,
) -> Vec<Hit> {
    let rule = config.rule();
    let keys = query.index_keys();
    let mut by_number: Vec<(u64, Signature)> = Vec::new();
    let mut names = Vec::new();
    for (id, (sig, expires)) in model {
        if Some(id.as_str()) == except || (*expires != 0 && *expires <= now) {
            continue;
        }
        let k = sig.index_keys();
        if (0..BANDS).any(|j| keys[j] != 0 && keys[j] == k[j]) {
            by_number.push((names.len() as u64, *sig));
            names.push(id.clone());
        }
    }
    rule.matches(query, by_number)
        .into_iter()
        .map(|(i, m)| Hit {
            id: names[i as usize].clone(),
            similarity: m.similarity,
            distance: m.distance,
        })
        .collect()
}

/// Hits compared as sets of (id, similarity): among equally similar documents the store
/// orders by its internal numbers, the model by id.
/// Whether a model document expiring at `expires` (0: never) is live at `now`.
fn live(expires: u64, now: u64) -> bool {
    expires == 0 || expires > now
}

fn same(a: &[Hit], b: &[Hit]) -> bool {
    let key = |h: &[Hit]| {
        let mut v: Vec<(String, u32)> = h
            .iter()
            .map(|x| (x.id.clone(), x.similarity.to_bits()))
            .collect();
        v.sort();
        v
    };
    key(a) == key(b) && a.windows(2).all(|w| w[0].similarity >= w[1].similarity)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn matches_the_model(
        threshold in 0.5f64..0.95,
        ops in prop::collection::vec(op(), 1..40),
        log_all in any::<bool>(),
    ) {
        let mut dir = tempfile::tempdir().unwrap();
        let config = DocConfig { threshold: Threshold::new(threshold).unwrap(), paragraphs: false };
        let clock = Arc::new(TestClock(AtomicU64::new(1000)));
        // Batches wait in the log until an explicit checkpoint, a snapshot or a drop; or
        // are checkpointed before each next batch.
        let every = if log_all { Duration::from_secs(3600) } else { Duration::ZERO };
        let mut store = DocumentStore::create(dir.path(), config)
            .unwrap()
            .with_clock(clock.clone())
            .with_checkpoint_every(every);
        let open = |dir: &tempfile::TempDir| {
            DocumentStore::open(dir.path(), Some(config))
                .unwrap()
                .with_clock(clock.clone())
                .with_checkpoint_every(every)
        };
        let prep = Preparer::new(config);
        let mut model: Model = BTreeMap::new();
        let mut snapshotted = false;
        // Batches applied since the last checkpoint (explicit, or a snapshot's or a close's).
        let mut logged = 0usize;
        for op in ops {
            let now = clock.now();
            match op {
                Op::Put { id, base, edits, ttl, unique } => {
                    let id = format!("d{id}");
                    let doc = prep.prepare(&text(base, &edits), false);
                    let want = model_hits(&model, config, &doc.signature, now, Some(&id));
                    logged += 1;
                    let out = store.apply(vec![Write::Put {
                        id: id.clone(),
                        doc: Box::new(doc.clone()),
                        ttl: ttl.map(Duration::from_secs),
                        only_if_unique: unique,
                    }]).unwrap();
                    let Outcome::Put { inserted, replaced, matches, more_matches, partial } = &out[0] else { panic!("{out:?}") };
                    prop_assert!(same(matches, &want), "{matches:?} != {want:?}");
                    prop_assert_eq!(*more_matches, 0, "fewer than MAX_MATCHES: all listed");
                    prop_assert!(!*partial, "a few dozen documents crowd no key");
                    prop_assert_eq!(*inserted, !unique || want.is_empty());
                    if *inserted {
                        let was = model.insert(id, (doc.signature, ttl.map_or(0, |t| now + t)));
                        // An expired document, not swept yet, is gone for a read: not replaced.
                        prop_assert_eq!(*replaced, was.is_some_and(|(_, e)| live(e, now)));
                    }
                }
                Op::Delete(id) => {
                    let id = format!("d{id}");
                    logged += 1;
                    let out = store.apply(vec![Write::Delete { id: id.clone() }]).unwrap();
                    let removed = model.remove(&id).is_some_and(|(_, e)| live(e, now));
                    prop_assert_eq!(&out[0], &Outcome::Delete { removed });
                }
                Op::Batch(batch, bulk) => {
                    // One transaction: each write decided against the store and the writes
                    // before it.
                    let mut writes = Vec::new();
                    let mut wants = Vec::new();
                    for (id, put) in batch {
                        let id = format!("d{id}");
                        let Some((base, edits, unique)) = put else {
                            let removed = model.remove(&id).is_some_and(|(_, e)| live(e, now));
                            wants.push(Outcome::Delete { removed });
                            writes.push(Write::Delete { id });
                            continue;
                        };
                        let doc = prep.prepare(&text(base, &edits), false);
                        let matches = model_hits(&model, config, &doc.signature, now, Some(&id));
                        let inserted = !unique || matches.is_empty();
                        let replaced = inserted
                            && model.insert(id.clone(), (doc.signature, 0)).is_some_and(|(_, e)| live(e, now));
                        wants.push(Outcome::Put { inserted, replaced, matches, more_matches: 0, partial: false });
                        writes.push(Write::Put { id, doc: Box::new(doc), ttl: None, only_if_unique: unique });
                    }
                    let out = if bulk {
                        // The log is checkpointed first, and this batch is not logged.
                        logged = 0;
                        store.apply_bulk(writes).unwrap()
                    } else {
                        logged += 1;
                        store.apply(writes).unwrap()
                    };
                    prop_assert_eq!(out.len(), wants.len());
                    for (got, want) in out.iter().zip(&wants) {
                        match (got, want) {
                            (
                                Outcome::Put { inserted, replaced, matches, more_matches, partial },
                                Outcome::Put { inserted: i, replaced: r, matches: m, more_matches: n, partial: p },
                            ) => {
                                prop_assert!(same(matches, m), "{matches:?} != {m:?}");
                                prop_assert_eq!((inserted, replaced, more_matches, partial), (i, r, n, p));
                            }
                            _ => prop_assert_eq!(got, want),
                        }
                    }
                }
                Op::Check(base, edits) => {
                    let t = text(base, &edits);
                    let doc = prep.prepare(&t, false);
                    let want = model_hits(&model, config, &doc.signature, now, None);
                    let got = store.check(&doc).unwrap();
                    prop_assert!(same(&got.hits, &want), "{got:?} != {want:?}");
                    prop_assert!(!got.partial, "a few dozen documents crowd no key");
                    prop_assert_eq!(&store.reader().check(&doc).unwrap(), &got);
                    // The fingerprint computed only for texts with candidates: the same hits.
                    prop_assert_eq!(store.reader().check_text(&prep, &t).unwrap(), got);
                }
                Op::Advance(s) => {
                    clock.0.fetch_add(s, Ordering::SeqCst);
                }
                Op::Sweep => {
                    let expired: Vec<String> = model
                        .iter()
                        .filter(|(_, (_, e))| *e != 0 && *e <= now)
                        .map(|(id, _)| id.clone())
                        .collect();
                    logged += usize::from(!expired.is_empty());
                    prop_assert_eq!(store.sweep().unwrap(), expired.len());
                    for id in expired {
                        model.remove(&id);
                    }
                }
                Op::Snapshot => {
                    store.save_snapshot().unwrap();
                    snapshotted = true;
                    logged = 0;
                }
                Op::Reopen => {
                    drop(store);
                    store = open(&dir);
                    // Read back and caught up with what came after it, once there is one.
                    let from_snapshot = matches!(store.opened(), Opened::Snapshot { .. });
                    prop_assert_eq!(from_snapshot, snapshotted, "{:?}", store.opened());
                    prop_assert_eq!(store.replayed(), 0);
                    logged = 0;
                }
                Op::Crash => {
                    let copy = tempfile::tempdir().unwrap();
                    for entry in std::fs::read_dir(dir.path()).unwrap() {
                        let entry = entry.unwrap();
                        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
                    }
                    // What the log held: every batch since the last checkpoint, or (with a
                    // checkpoint before each) the last one; as `index check` reads it, and
                    // as the open replays it.
                    let in_log = if log_all { logged } else { logged.min(1) };
                    let checked = neardup_store::check(copy.path()).unwrap();
                    prop_assert!(checked.problems.is_empty(), "{:?}", checked.problems);
                    prop_assert_eq!(checked.logged.0, in_log as u64);
                    drop(store);
                    dir = copy;
                    store = open(&dir);
                    let from_snapshot = matches!(store.opened(), Opened::Snapshot { .. });
                    prop_assert_eq!(from_snapshot, snapshotted, "{:?}", store.opened());
                    prop_assert_eq!(store.replayed(), in_log);
                    logged = 0;
                    // Every acknowledged write, here and answering: checked below and by
                    // the operations after.
                    let all: Vec<_> = model.keys().cloned().collect();
                    for id in all {
                        prop_assert!(store.get(&id).unwrap().is_some() || model[&id].1 != 0, "{id} lost");
                    }
                }
                Op::Checkpoint => {
                    store.checkpoint().unwrap();
                    logged = 0;
                }
            }
            prop_assert_eq!(store.len(), model.len());
            for (id, (sig, expires)) in model.iter().take(3) {
                let got = store.get(id).unwrap();
                if *expires != 0 && *expires <= clock.now() {
                    prop_assert!(got.is_none());
                } else {
                    prop_assert_eq!(got.map(|d| d.signature), Some(*sig));
                }
            }
        }
    }
}

/// Within one batch, a put finds every earlier put of the batch that is its near-duplicate
/// (several under the same band keys), and none deleted or replaced since.
#[test]
fn a_batch_finds_its_own_puts_under_shared_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = DocumentStore::create(dir.path(), at_08(false)).unwrap();
    let prep = store.preparer();
    let put = |id: &str, t: &str, unique: bool| Write::Put {
        id: id.into(),
        doc: Box::new(prep.prepare(t, false)),
        ttl: None,
        only_if_unique: unique,
    };
    let (t, t_edited, other) = (text(0, &[]), text(0, &[(59, 3)]), text(1, &[]));
    let ids = |o: &Outcome| match o {
        Outcome::Put { matches, .. } => {
            let mut v: Vec<String> = matches.iter().map(|h| h.id.clone()).collect();
            v.sort();
            v
        }
        other => panic!("{other:?}"),
    };
    let out = store
        .apply(vec![
            put("a", &t, false),
            put("b", &t, false),
            put("c", &t_edited, false),
            put("d", &t, true),
            Write::Delete { id: "a".into() },
            // "b" now holds another text.
            put("b", &other, false),
            put("e", &t, true),
        ])
        .unwrap();
    assert_eq!(ids(&out[1]), ["a"]);
    assert_eq!(ids(&out[2]), ["a", "b"]);
    assert_eq!(ids(&out[3]), ["a", "b", "c"]);
    assert!(matches!(
        out[3],
        Outcome::Put {
            inserted: false,
            ..
        }
    ));
    assert_eq!(out[4], Outcome::Delete { removed: true });
    assert!(matches!(out[5], Outcome::Put { replaced: true, .. }));
    assert_eq!(ids(&out[6]), ["c"]);
    assert!(matches!(
        out[6],
        Outcome::Put {
            inserted: false,
            ..
        }
    ));
}

/// A check reads the first documents under a crowded band key only (a template stored
/// many times), and says so: with 64 copies of a text stored its check lists them all and
/// is whole; with 1,000 it lists some and is partial, before and after the store is opened
/// again (its index then one part); another text's check is whole.
#[test]
fn a_check_under_a_crowded_key_says_it_is_partial() {
    let dir = tempfile::tempdir().unwrap();
    let config = at_08(false);
    let mut store = DocumentStore::create(dir.path(), config).unwrap();
    let prep = store.preparer();
    let t = text(0, &[]);
    let put = |i: usize| Write::Put {
        id: format!("c{i}"),
        doc: Box::new(prep.prepare(&t, false)),
        ttl: None,
        only_if_unique: false,
    };
    let q = prep.prepare(&t, false);
    store.apply((0..64).map(put).collect()).unwrap();
    let whole = store.check(&q).unwrap();
    assert_eq!((whole.hits.len(), whole.partial), (64, false));
    store.apply((64..1000).map(put).collect()).unwrap();
    let crowded = store.check(&q).unwrap();
    assert!(crowded.partial);
    assert!(
        (64..1000).contains(&crowded.hits.len()),
        "{}",
        crowded.hits.len()
    );
    assert_eq!(store.reader().check_text(&prep, &t).unwrap(), crowded);
    let other = prep.prepare(&text(1, &[]), false);
    assert_eq!(store.check(&other).unwrap(), Checked::default());
    // A put finds its near-duplicates as a check does, and says so too.
    let partial = |o: &Outcome| match o {
        Outcome::Put { partial, .. } => *partial,
        other => panic!("{other:?}"),
    };
    let out = store
        .apply(vec![
            put(1000),
            Write::Put {
                id: "other".into(),
                doc: Box::new(other.clone()),
                ttl: None,
                only_if_unique: true,
            },
        ])
        .unwrap();
    assert_eq!(
        (partial(&out[0]), partial(&out[1])),
        (true, false),
        "{out:?}"
    );
    drop(store);
    let store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    let crowded = store.check(&q).unwrap();
    assert_eq!((crowded.hits.len(), crowded.partial), (64, true));
    // The other text, stored since: whole.
    let found = store.check(&other).unwrap();
    assert_eq!((found.hits.len(), found.partial), (1, false));
}

/// A batch's puts find its earlier puts under a band key as the index finds stored
/// documents, the first 64 distinct texts under it, and say when there were more: in a
/// batch of 1,000 and of 3,000 (whose candidates are looked up ahead on another thread)
/// texts of one base, each different (each shares a band's key with the base's about
/// two times in five), the first 65 puts are whole and the last is partial.
#[test]
fn a_batch_says_when_its_own_puts_crowd_a_key() {
    for n in [1000, 3000] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = DocumentStore::create(dir.path(), at_08(false)).unwrap();
        let prep = store.preparer();
        let writes: Vec<Write> = (0..n)
            .map(|i| Write::Put {
                id: format!("e{i}"),
                doc: Box::new(
                    prep.prepare(&text(2, &[(i % 60, i / 60), ((i + 7) % 60, i / 13)]), false),
                ),
                ttl: None,
                only_if_unique: false,
            })
            .collect();
        let out = store.apply(writes).unwrap();
        let partial: Vec<bool> = out
            .iter()
            .map(|o| matches!(o, Outcome::Put { partial: true, .. }))
            .collect();
        assert!(!partial[..65].contains(&true), "n {n}: {partial:?}");
        assert!(partial[n - 1], "n {n}");
    }
}

/// A store's settings at threshold 0.8.
fn at_08(paragraphs: bool) -> DocConfig {
    DocConfig {
        threshold: Threshold::new(0.8).unwrap(),
        paragraphs,
    }
}

#[test]
fn paragraphs_report_what_they_share() {
    let dir = tempfile::tempdir().unwrap();
    let config = at_08(true);
    let mut store = DocumentStore::create(dir.path(), config).unwrap();
    let prep = store.preparer();
    let (a, b, c) = (text(0, &[]), text(1, &[]), text(2, &[]));
    let stored = format!("{a}\n\n{b}");
    let put = |id: &str, t: &str| Write::Put {
        id: id.into(),
        doc: Box::new(prep.prepare(t, false)),
        ttl: None,
        only_if_unique: false,
    };
    store.apply(vec![put("ab", &stored), put("c", &c)]).unwrap();
    // A query sharing its paragraphs with "ab" and "c", each edited near its end (J 0.9).
    let query = format!("{}\n\n{}", text(1, &[(58, 4)]), text(2, &[(58, 2)]));
    let doc = prep.prepare(&query, true);
    assert_eq!(doc.paragraphs.len(), 2);
    let hits = store.check_paragraphs(&doc).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    for h in &hits {
        assert_eq!(h.spans.len(), 1, "{h:?}");
        let s = &h.spans[0];
        let (q, st) = (
            &query[s.query.start as usize..s.query.end as usize],
            s.query.clone(),
        );
        let stored_text = if h.id == "ab" { &stored } else { &c };
        let other = &stored_text[s.stored.start as usize..s.stored.end as usize];
        assert!(s.similarity >= 0.8 && s.similarity < 1.0, "{s:?}");
        assert_eq!(q.split(' ').count(), 60, "{st:?}");
        assert_eq!(other.split(' ').count(), 60);
        // Each query paragraph is half the query.
        assert!((h.coverage - 0.5).abs() < 0.01, "{h:?}");
    }
    // Reopened, the paragraph index is rebuilt and a removal takes its paragraphs away.
    drop(store);
    let mut store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    assert_eq!(store.check_paragraphs(&doc).unwrap().len(), 2);
    store
        .apply(vec![Write::Delete { id: "ab".into() }])
        .unwrap();
    let hits = store.check_paragraphs(&doc).unwrap();
    assert_eq!(
        hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
        ["c"]
    );
}

/// Every check a store answers, documents and paragraphs, for the queries `texts`.
fn answers(store: &DocumentStore, prep: &Preparer, texts: &[String]) -> Vec<String> {
    texts
        .iter()
        .map(|t| {
            let doc = prep.prepare(t, true);
            format!(
                "{:?} {:?}",
                store.check(&doc).unwrap(),
                store.check_paragraphs(&doc).unwrap()
            )
        })
        .collect()
}

/// A store opened from a snapshot taken before deletes, replacements and new documents
/// (of documents and paragraphs) answers as the same store with its indexes rebuilt from
/// the documents; and a snapshot that is damaged, or of another store, is not used.
#[test]
fn a_snapshot_caught_up_answers_as_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let config = DocConfig {
        threshold: Threshold::new(0.7).unwrap(),
        paragraphs: true,
    };
    let mut store = DocumentStore::create(dir.path(), config).unwrap();
    let prep = store.preparer();
    let put = |id: String, t: &str| Write::Put {
        id,
        doc: Box::new(prep.prepare(t, false)),
        ttl: None,
        only_if_unique: false,
    };
    let doc_text = |i: usize| {
        format!(
            "{}\n\n{}",
            text(i % 3, &[(i % 60, i % 24), ((i * 7) % 60, 3)]),
            text((i + 1) % 3, &[(i % 50, 5)])
        )
    };
    store
        .apply(
            (0..120)
                .map(|i| put(format!("d{i}"), &doc_text(i)))
                .collect(),
        )
        .unwrap();
    store.save_snapshot().unwrap();
    // After the snapshot: deletes, replacements (new text under an old id), new ids.
    let mut later: Vec<Write> = (0..120)
        .step_by(7)
        .map(|i| Write::Delete {
            id: format!("d{i}"),
        })
        .collect();
    later.extend(
        (1..120)
            .step_by(11)
            .map(|i| put(format!("d{i}"), &doc_text(i + 500))),
    );
    later.extend((120..150).map(|i| put(format!("d{i}"), &doc_text(i))));
    store.apply(later).unwrap();
    store
        .apply(vec![Write::Delete { id: "d3".into() }])
        .unwrap();
    let queries: Vec<String> = (0..160).step_by(3).map(doc_text).collect();
    let live = answers(&store, &prep, &queries);
    let len = store.len();
    // What each id names, the removed and the replaced ones too.
    let gets = |store: &DocumentStore| -> Vec<Option<StoredDoc>> {
        (0..160)
            .map(|i| store.get(&format!("d{i}")).unwrap())
            .collect()
    };
    let named = gets(&store);
    drop(store);

    let store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    // Removed: 18 deleted, 10 replaced (d56 was deleted first in that batch), d3; added:
    // the 11 replacing and the 30 new.
    let caught_up = 18 + 10 + 1 + 11 + 30;
    assert_eq!(
        store.opened(),
        &Opened::Snapshot { caught_up },
        "read back, with every removal and addition since"
    );
    assert_eq!(store.len(), len);
    assert_eq!(answers(&store, &prep, &queries), live);
    assert_eq!(gets(&store), named);
    // Ids deleted or replaced since the snapshot take new documents and deletes (each
    // id's number as the map holds it), then get what they had back.
    let mut store = store;
    let outcomes = store
        .apply(vec![
            put("d7".into(), &doc_text(907)),
            put("d12".into(), &doc_text(912)),
            Write::Delete { id: "d23".into() },
        ])
        .unwrap();
    let replaced = outcomes
        .iter()
        .map(|o| match o {
            Outcome::Put { replaced, .. } => *replaced,
            Outcome::Delete { removed } => *removed,
        })
        .collect::<Vec<_>>();
    assert_eq!(replaced, [false, true, true]);
    assert_eq!(store.len(), len);
    store
        .apply(vec![
            Write::Delete { id: "d7".into() },
            put("d12".into(), &doc_text(12 + 500)),
            put("d23".into(), &doc_text(23 + 500)),
        ])
        .unwrap();
    assert_eq!(gets(&store), named);
    assert_eq!(store.len(), len);
    drop(store);

    // The oracle: indexes rebuilt from the documents (the snapshot moved away).
    let snapshot = dir.path().join("bands.snapshot");
    let kept = dir.path().join("kept.snapshot");
    std::fs::rename(&snapshot, &kept).unwrap();
    let store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    assert!(matches!(store.opened(), Opened::Rebuilt { .. }));
    assert_eq!(answers(&store, &prep, &queries), live);
    assert_eq!(gets(&store), named);
    drop(store);

    // Damaged: not used, and said why.
    let mut bytes = std::fs::read(&kept).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&snapshot, &bytes).unwrap();
    let store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    let Opened::Rebuilt { why } = store.opened() else {
        panic!("{:?}", store.opened())
    };
    assert!(why.contains("cannot be read"), "{why}");
    assert_eq!(answers(&store, &prep, &queries), live);
    drop(store);

    // Another store's snapshot, even of the same settings and size: not used.
    let other = tempfile::tempdir().unwrap();
    let mut store = DocumentStore::create(other.path(), config).unwrap();
    store
        .apply(
            (0..120)
                .map(|i| put(format!("d{i}"), &doc_text(i)))
                .collect(),
        )
        .unwrap();
    store.save_snapshot().unwrap();
    drop(store);
    std::fs::copy(other.path().join("bands.snapshot"), &snapshot).unwrap();
    let store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    assert!(
        matches!(store.opened(), Opened::Rebuilt { .. }),
        "{:?}",
        store.opened()
    );
    assert_eq!(answers(&store, &prep, &queries), live);
}

#[test]
fn stores_of_the_other_kind_and_other_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = DocConfig::default();
    drop(DocumentStore::create(dir.path(), config).unwrap());
    let other = DocConfig {
        threshold: Threshold::new(0.7).unwrap(),
        paragraphs: false,
    };
    let e = DocumentStore::open(dir.path(), Some(other)).unwrap_err();
    assert!(matches!(e, StoreError::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("threshold 0.8"), "{e}");
    let e = neardup_store::FingerprintStore::open(dir.path(), None).unwrap_err();
    assert!(e.to_string().contains("a document store"), "{e}");
    assert!(matches!(
        DocumentStore::create(dir.path(), config),
        Err(StoreError::Exists(_))
    ));
    let fp = tempfile::tempdir().unwrap();
    drop(
        neardup_store::FingerprintStore::create(
            fp.path(),
            neardup_store::StoreConfig {
                blocks: neardup::tables::Blocks::Auto,
                distance: 3,
                fingerprint_version: 2,
            },
            10,
        )
        .unwrap(),
    );
    let e = DocumentStore::open(fp.path(), None).unwrap_err();
    assert!(e.to_string().contains("not a document store"), "{e}");
    // Held by this store: a second one is refused, naming the holder.
    let held = DocumentStore::open(dir.path(), None).unwrap();
    let e = DocumentStore::open(dir.path(), None).unwrap_err();
    assert!(matches!(e, StoreError::InUse { .. }), "{e}");
    drop(held);
}

#[test]
fn a_store_of_the_old_words_is_refused_by_name() {
    // Sketch format 1 took `\w+` runs as words in every script: its sketches cannot be
    // compared with today's, so the store is refused, saying why and what to do.
    let dir = tempfile::tempdir().unwrap();
    let mut store = DocumentStore::create(dir.path(), at_08(false)).unwrap();
    let p = store.preparer();
    store
        .apply(vec![Write::Put {
            id: "a".into(),
            doc: Box::new(p.prepare("一二三四五六七八九十", false)),
            ttl: None,
            only_if_unique: false,
        }])
        .unwrap();
    drop(store);
    let file = dir.path().join(neardup_store::FILE);
    {
        let db = redb::Database::open(&file).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn
                .open_table(redb::TableDefinition::<&str, u64>::new("meta"))
                .unwrap();
            assert_eq!(
                meta.insert("sketch_version", 1).unwrap().map(|v| v.value()),
                Some(u64::from(neardup::jaccard::SKETCH_VERSION))
            );
        }
        txn.commit().unwrap();
    }
    let err = DocumentStore::open(dir.path(), None).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    let msg = err.to_string();
    for part in [
        "sketch_version 1",
        "makes 2",
        "scripts written without spaces",
        "put the documents again",
    ] {
        assert!(msg.contains(part), "{msg}");
    }
}

/// The memory budget counts a rebuild of the index as the store runs it: beside the old
/// main part (as much again), or in place (a fifth more, `neardup load`). A budget that
/// fits `n` documents rebuilt in place takes their bulk write in place and refuses one
/// more, whole; the same budget refuses the `n` when rebuilds run beside the old part,
/// storing nothing.
#[test]
fn the_memory_budget_counts_the_rebuild_the_store_runs() {
    let n = 600;
    let cache = 1 << 20;
    let budget = neardup_store::memory_needed(n, cache, true);
    assert!(neardup_store::memory_needed(n, cache, false) > budget);
    for in_place in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let options = neardup_store::OpenOptions {
            cache_bytes: Some(cache),
            memory_budget: Some(budget),
            rebuild_in_place: in_place,
        };
        let mut store = DocumentStore::create_with(dir.path(), at_08(false), options).unwrap();
        let prep = store.preparer();
        let put = |i: usize| Write::Put {
            id: format!("d{i}"),
            doc: Box::new(prep.prepare(&format!("{} {i}", text(i % 3, &[(i, i)])), false)),
            ttl: None,
            only_if_unique: false,
        };
        let all = store.apply_bulk((0..n).map(put).collect());
        if in_place {
            assert_eq!(all.unwrap().len(), n);
            assert_eq!(store.memory_needed(), budget);
            let more = store.apply_bulk(vec![put(n)]);
            assert!(matches!(more, Err(StoreError::Memory { .. })), "{more:?}");
            assert_eq!(store.len(), n);
        } else {
            let refused = all.map(|o| o.len());
            assert!(
                matches!(refused, Err(StoreError::Memory { .. })),
                "{refused:?}"
            );
            assert_eq!(store.len(), 0);
        }
        // Opened again with the budget: what was stored fits it.
        drop(store);
        assert!(DocumentStore::open_with(dir.path(), None, options).is_ok());
    }
}

/// A load's last step ([`DocumentStore::compact_index`]): an index (of documents or of
/// paragraphs, two a document here) whose levels hold half of what starts a rebuild (the
/// middle level's least cap, 8,192) has them taken into its main part, and the store
/// answers as before, then and reopened from the snapshot saved after; levels holding
/// less, or nothing, are left.
#[test]
fn compacting_the_index_keeps_its_answers() {
    let dir = tempfile::tempdir().unwrap();
    let config = DocConfig {
        threshold: Threshold::new(0.7).unwrap(),
        paragraphs: true,
    };
    let options = neardup_store::OpenOptions {
        rebuild_in_place: true,
        ..Default::default()
    };
    let mut store = DocumentStore::create_with(dir.path(), config, options).unwrap();
    let prep = store.preparer();
    let doc_text = |i: usize| {
        format!(
            "{} {i}\n\n{}",
            text(i % 5, &[(i % 60, i % 24)]),
            text((i + 2) % 5, &[(i % 50, 5)])
        )
    };
    let put = |i: usize| Write::Put {
        id: format!("d{i}"),
        doc: Box::new(prep.prepare(&doc_text(i), false)),
        ttl: None,
        only_if_unique: false,
    };
    let queries: Vec<String> = (0..4200).step_by(211).map(doc_text).collect();
    let mut before = Vec::new();
    // Documents and paragraphs in the levels at each step, and whether it compacts.
    for (upto, compacts) in [(1500, false), (2500, true), (4200, true)] {
        let from = store.len();
        store.apply_bulk((from..upto).map(put).collect()).unwrap();
        before = answers(&store, &prep, &queries);
        assert_eq!(store.compact_index(), compacts, "at {upto}");
        assert!(!store.compact_index(), "nothing left to take in at {upto}");
        assert_eq!(answers(&store, &prep, &queries), before);
    }
    store
        .apply(
            (0..4200)
                .step_by(13)
                .map(|i| Write::Delete {
                    id: format!("d{i}"),
                })
                .collect(),
        )
        .unwrap();
    let removed = answers(&store, &prep, &queries);
    assert_ne!(removed, before);
    store.save_snapshot().unwrap();
    drop(store);
    let store = DocumentStore::open(dir.path(), Some(config)).unwrap();
    assert_eq!(store.opened(), &Opened::Snapshot { caught_up: 0 });
    assert_eq!(answers(&store, &prep, &queries), removed);
}

/// A document reads back as it was put, whether from the writer's open transaction, from
/// its committed row and band keys, or after a reopen: a text with words and one without
/// (whose index keys are made from its text hash, and are no band keys of its own).
#[test]
fn a_document_reads_back_as_put_from_every_place_it_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = DocumentStore::create(dir.path(), DocConfig::default()).unwrap();
    let prep = store.preparer();
    let texts = [
        "the quick brown fox jumps over the lazy dog while the farmer watches the sky",
        "!!! ??? ...",
    ];
    let puts = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Write::Put {
            id: format!("t{i}"),
            doc: Box::new(prep.prepare(t, false)),
            ttl: None,
            only_if_unique: false,
        })
        .collect();
    store.apply(puts).unwrap();
    let want: Vec<_> = texts
        .iter()
        .map(|t| prep.prepare(t, false).signature)
        .collect();
    let read = |store: &DocumentStore| -> Vec<_> {
        (0..texts.len())
            .map(|i| store.get(&format!("t{i}")).unwrap().unwrap().signature)
            .collect()
    };
    assert_eq!(read(&store), want, "from the open transaction");
    store.checkpoint().unwrap();
    assert_eq!(read(&store), want, "from the committed rows");
    drop(store);
    let store = DocumentStore::open(dir.path(), None).unwrap();
    assert_eq!(read(&store), want, "after a reopen");
}
