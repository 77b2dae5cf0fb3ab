//! The corpus against a brute-force model: random sequences of inserts (including
//! replacements), bulk inserts, removals and queries, on fingerprints built to collide.

use std::collections::BTreeMap;

use neardup::corpus::Corpus;
use neardup::tables::{num_tables, Blocks};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    InsertBulk(Vec<(u64, u64)>),
    Remove(u64),
    RemoveBulk(Vec<u64>),
    Query(u64),
}

/// Fingerprints near a few bases, so that queries have matches at every distance.
fn fp() -> impl Strategy<Value = u64> {
    (0usize..4, prop::collection::vec(0u32..64, 0..6)).prop_map(|(base, flips)| {
        let bases = [0u64, u64::MAX, 0x0123_4567_89ab_cdef, 0xf0f0_f0f0_0f0f_0f0f];
        flips.iter().fold(bases[base], |x, &b| x ^ (1 << b))
    })
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0u64..40;
    prop_oneof![
        4 => (id.clone(), fp()).prop_map(|(i, f)| Op::Insert(i, f)),
        1 => prop::collection::vec((id.clone(), fp()), 0..30).prop_map(Op::InsertBulk),
        2 => id.clone().prop_map(Op::Remove),
        1 => prop::collection::vec(id, 0..10).prop_map(Op::RemoveBulk),
        4 => fp().prop_map(Op::Query),
    ]
}

fn model_find_all(model: &BTreeMap<u64, u64>, q: u64, k: u32) -> Vec<(u64, u32)> {
    let mut out: Vec<(u64, u32)> = model
        .iter()
        .map(|(&id, &f)| (id, (f ^ q).count_ones()))
        .filter(|&(_, d)| d <= k)
        .collect();
    out.sort_by_key(|&(id, d)| (d, id));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matches_the_model(
        (k, m) in (0u32..6, 1usize..12)
            .prop_filter("blocks > distance", |&(k, m)| m > k as usize)
            .prop_filter("small layouts: the 4,845 tables are tested alone", |&(k, m)| num_tables(m, k) <= 256),
        auto in any::<bool>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let blocks = if auto { Blocks::Auto } else { Blocks::Fixed(m) };
        let mut corpus = Corpus::new(blocks, k, 1000).unwrap();
        let mut model: BTreeMap<u64, u64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Insert(id, f) => {
                    prop_assert_eq!(corpus.insert(id, f).unwrap(), model.insert(id, f));
                }
                Op::InsertBulk(docs) => {
                    corpus.insert_bulk(&docs).unwrap();
                    model.extend(docs);
                }
                Op::Remove(id) => prop_assert_eq!(corpus.remove(id), model.remove(&id)),
                Op::RemoveBulk(ids) => {
                    let want = ids.iter().filter(|id| model.remove(id).is_some()).count();
                    prop_assert_eq!(corpus.remove_bulk(&ids), want);
                }
                Op::Query(q) => {
                    let want = model_find_all(&model, q, k);
                    prop_assert_eq!(corpus.find_first(q), want.first().copied());
                    prop_assert_eq!(corpus.find_all(q), want);
                }
            }
            prop_assert_eq!(corpus.len(), model.len());
        }
        let documents: Vec<(u64, u64)> = model.iter().map(|(&id, &f)| (id, f)).collect();
        prop_assert_eq!(corpus.documents(), documents.clone());
        prop_assert_eq!(corpus.reader().documents(), documents);
        let queries: Vec<u64> = model.values().copied().chain([0, u64::MAX]).collect();
        let all: Vec<Vec<(u64, u32)>> = queries.iter().map(|&q| model_find_all(&model, q, k)).collect();
        prop_assert_eq!(corpus.find_all_bulk(&queries), all.clone());
        let first: Vec<Option<(u64, u32)>> = all.iter().map(|v| v.first().copied()).collect();
        prop_assert_eq!(corpus.find_first_bulk(&queries), first);
    }
}

#[test]
fn layouts_of_too_many_tables_are_refused() {
    assert!(matches!(
        Corpus::new(Blocks::Fixed(64), 3, 0),
        Err(neardup::Error::TooManyTables {
            tables: 41_664,
            limit: 10_000,
            ..
        })
    ));
}

/// simhash-py's own test builds `Corpus(20, 16)`: 4,845 tables, each with every
/// fingerprint. Built, it answers as brute force, within 16 bits.
#[test]
fn simhash_py_corpus_of_4845_tables_matches_the_model() {
    let (blocks, k) = (20, 16);
    assert_eq!(num_tables(blocks, k), 4_845);
    let mut corpus = Corpus::new(Blocks::Fixed(blocks), k, 0).unwrap();
    let mut model = BTreeMap::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut queries = Vec::new();
    for id in 0..120u64 {
        let f = next();
        // A near copy of each: about 8 bits flipped (some beyond 16), and a stranger.
        let near = f ^ (next() & next() & next());
        corpus.insert(id, f).unwrap();
        model.insert(id, f);
        queries.push(near);
        queries.push(next());
    }
    for q in queries {
        assert_eq!(
            corpus.find_all(q),
            model_find_all(&model, q, k),
            "query {q:#x}"
        );
    }
}

/// Enough inserts and removals to cross the levels' limits several times, with rebuilds
/// of the main part in the background (installed whenever they finish, and at fixed
/// points) and in the foreground.
#[test]
fn many_operations_cross_every_rebuild() {
    for background in [true, false] {
        many_operations(background);
    }
}

fn many_operations(background: bool) {
    let mut corpus = Corpus::new(Blocks::Auto, 3, 100_000)
        .unwrap()
        .background_rebuilds(background);
    let mut model = BTreeMap::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..30_000u64 {
        let id = next() % 20_000;
        if i % 3 == 2 {
            assert_eq!(corpus.remove(id), model.remove(&id));
        } else {
            // Every fourth document is a near copy of an earlier fingerprint.
            let fp = match model.values().nth((next() % 64) as usize) {
                Some(&f) if i % 4 == 0 => f ^ (1 << (next() % 64)),
                _ => next(),
            };
            assert_eq!(corpus.insert(id, fp).unwrap(), model.insert(id, fp));
        }
        if i % 2999 == 0 {
            corpus.finish_rebuild();
        }
        if i % 997 == 0 {
            for &q in model.values().take(50) {
                assert_eq!(corpus.find_all(q), model_find_all(&model, q, 3));
            }
        }
    }
    for &q in model.values() {
        assert_eq!(corpus.find_all(q), model_find_all(&model, q, 3));
    }
}

/// Readers on other threads see every write once it returns, through merges, and never a
/// torn state: each query answers from one snapshot.
#[test]
fn readers_see_every_acknowledged_write_while_the_writer_merges() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let fp = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 7).rotate_left(29);
    let mut corpus = Corpus::new(Blocks::Auto, 3, 50_000).unwrap();
    let base: Vec<(u64, u64)> = (0..20_000).map(|i| (i, fp(i))).collect();
    corpus.insert_bulk(&base).unwrap();
    let acked = AtomicU64::new(20_000);
    let stop = AtomicBool::new(false);
    let reader = corpus.reader();
    std::thread::scope(|s| {
        for r in 0..3u64 {
            let (reader, acked, stop) = (reader.clone(), &acked, &stop);
            s.spawn(move || {
                let mut x = 0x1234_5678 + r;
                let mut checks = 0u64;
                while !stop.load(Ordering::SeqCst) || checks < 1000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let n = acked.load(Ordering::SeqCst);
                    let i = x % n;
                    let found = reader.find_all(fp(i));
                    assert!(
                        found.contains(&(i, 0)),
                        "reader {r}: acknowledged {i} missing ({n} acked)"
                    );
                    let mut ids: Vec<u64> = found.iter().map(|m| m.0).collect();
                    ids.dedup();
                    assert_eq!(ids.len(), found.len(), "a document came back twice");
                    assert!(found
                        .iter()
                        .all(|&(j, d)| d <= 3 && (fp(j) ^ fp(i)).count_ones() == d));
                    checks += 1;
                }
            });
        }
        // Enough single inserts to cross the delta cap several times, and bulk ones.
        for i in 20_000..40_000u64 {
            if i % 1000 == 0 {
                let batch: Vec<(u64, u64)> = (i..i + 500).map(|j| (j, fp(j))).collect();
                corpus.insert_bulk(&batch).unwrap();
            } else if i % 1000 >= 500 {
                corpus.insert(i, fp(i)).unwrap();
            } else {
                continue;
            }
            acked.store(
                if i % 1000 == 0 { i + 500 } else { i + 1 },
                Ordering::SeqCst,
            );
        }
        stop.store(true, Ordering::SeqCst);
    });
    assert_eq!(reader.len(), 40_000);
    assert_eq!(corpus.len(), 40_000);
}

/// Past 2^15 documents the tables keep 48-bit keys and a match seen by a later table is
/// found in the first by its fingerprint: check that path against brute force, with ids
/// wider than 32 bits, fingerprints shared by several ids, removals and replacements, in
/// the planner's layout (a bucket is a run) and in one whose runs are part of a bucket.
#[test]
fn large_corpora_match_brute_force() {
    for blocks in [Blocks::Auto, Blocks::Fixed(5)] {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut corpus = Corpus::new(blocks, 3, 50_000).unwrap();
        let mut model = BTreeMap::new();
        let mut docs = Vec::new();
        for i in 0..50_000u64 {
            // Ids beyond u32 for a tenth; every fifth document near or equal to an earlier one.
            let id = if i % 10 == 0 { (1 << 40) + i } else { i };
            let fp = match docs.get((next() % (i + 1)) as usize) {
                Some(&(_, f)) if i % 5 == 0 => f ^ ((1 << (next() % 64)) * (next() % 2)),
                _ => next(),
            };
            docs.push((id, fp));
        }
        corpus.insert_bulk(&docs).unwrap();
        model.extend(docs.iter().copied());
        // Enough single writes to cross a merge, with tombstones to compact.
        for i in 0..10_000u64 {
            let (id, fp) = docs[(next() % docs.len() as u64) as usize];
            if i % 2 == 0 {
                assert_eq!(corpus.remove(id), model.remove(&id));
            } else {
                let f = fp ^ (1 << (next() % 64));
                assert_eq!(corpus.insert(id, f).unwrap(), model.insert(id, f));
            }
            assert_eq!(corpus.get(id), model.get(&id).copied());
        }
        assert_eq!(corpus.len(), model.len());
        let documents: Vec<(u64, u64)> = model.iter().map(|(&id, &f)| (id, f)).collect();
        assert_eq!(corpus.documents(), documents);
        let queries: Vec<u64> = docs
            .iter()
            .step_by(97)
            .map(|&(_, f)| f ^ (1 << (f % 64)))
            .chain((0..50).map(|_| next()))
            .collect();
        let want: Vec<Vec<(u64, u32)>> = queries
            .iter()
            .map(|&q| model_find_all(&model, q, 3))
            .collect();
        assert!(want.iter().filter(|w| w.len() > 1).count() > 10);
        assert_eq!(corpus.find_all_bulk(&queries), want, "{blocks}");
        for (&q, w) in queries.iter().zip(&want) {
            assert_eq!(corpus.find_first(q), w.first().copied());
        }
    }
}
