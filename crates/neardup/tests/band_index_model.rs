//! The online band index against a brute-force model: random inserts (replacements
//! included), bulk inserts, removals and queries, on keys drawn from a small alphabet so
//! that documents agree in many bands; and long runs that go through rebuilds of the main
//! part, in the background and not. Snapshots written and read back at any point go on
//! as the index they were taken of.

use std::collections::BTreeMap;

use neardup::batch::RUN_LEADERS;
use neardup::corpus::BandIndex;
use neardup::jaccard::{BandKeys, BANDS};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, BandKeys),
    InsertBulk(Vec<(u64, BandKeys)>),
    Remove(u64),
    RemoveBulk(Vec<u64>),
    Query(BandKeys),
    /// Write a snapshot and go on with the index read back from it.
    Reload,
}

/// `ix` written to bytes and read back.
fn reloaded(ix: &BandIndex) -> BandIndex {
    let mut bytes = Vec::new();
    ix.snapshot().write_to(&mut bytes).unwrap();
    BandIndex::read_from(&mut &bytes[..]).unwrap()
}

fn keys() -> impl Strategy<Value = BandKeys> {
    prop::collection::vec(0u32..4, BANDS).prop_map(|v| {
        let mut k = [0; BANDS];
        k.copy_from_slice(&v);
        k
    })
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0u64..40;
    prop_oneof![
        4 => (id.clone(), keys()).prop_map(|(i, k)| Op::Insert(i, k)),
        1 => prop::collection::vec((id.clone(), keys()), 0..30).prop_map(Op::InsertBulk),
        2 => id.clone().prop_map(Op::Remove),
        1 => prop::collection::vec(id, 0..10).prop_map(Op::RemoveBulk),
        4 => keys().prop_map(Op::Query),
        1 => Just(Op::Reload),
    ]
}

/// The stored ids whose keys agree with `q` in some band with a nonzero key.
fn model_candidates(model: &BTreeMap<u64, BandKeys>, q: &BandKeys) -> Vec<u64> {
    model
        .iter()
        .filter(|(_, k)| (0..BANDS).any(|j| q[j] != 0 && k[j] == q[j]))
        .map(|(&id, _)| id)
        .collect()
}

fn check(ix: &BandIndex, model: &BTreeMap<u64, BandKeys>, q: &BandKeys) {
    let want = model_candidates(model, q);
    assert_eq!(ix.candidates(q), want);
    assert_eq!(ix.reader().candidates(q), want);
    // At most 40 documents: no key is crowded.
    assert!(!ix.lookup(q).crowded);
    assert_eq!(ix.len(), model.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matches_the_model(
        first in prop::collection::btree_map(0u64..40, keys(), 0..40),
        ops in prop::collection::vec(op(), 1..120),
        caps in prop::option::of((1usize..6, 1usize..40)),
        background in any::<bool>(),
        in_place in any::<bool>(),
    ) {
        // Small level caps (in some runs) take these few documents through folds of the
        // top level and rebuilds of the main part, waited for, in the background, or in
        // place (the old main part let go as the new is built).
        let setup = |ix: BandIndex| {
            let ix = ix.background_rebuilds(background).rebuilds_in_place(in_place);
            match caps {
                Some((top, mid)) => ix.with_level_caps(top, mid),
                None => ix,
            }
        };
        // Some runs start from documents built in one pass, as a store's open does.
        let mut model: BTreeMap<u64, BandKeys> = first;
        let mut ix = setup(if model.len().is_multiple_of(2) {
            BandIndex::from_docs(model.iter().map(|(&id, &k)| (id, k)).collect()).unwrap()
        } else {
            model.clear();
            BandIndex::new()
        });
        for op in ops {
            match op {
                Op::Insert(id, k) => {
                    prop_assert_eq!(ix.insert(id, &k).unwrap(), model.insert(id, k).is_some());
                }
                Op::InsertBulk(docs) => {
                    ix.insert_bulk(&docs).unwrap();
                    model.extend(docs);
                }
                Op::Remove(id) => prop_assert_eq!(ix.remove(id), model.remove(&id).is_some()),
                Op::RemoveBulk(ids) => {
                    let want = ids.iter().filter(|id| model.remove(id).is_some()).count();
                    prop_assert_eq!(ix.remove_bulk(&ids), want);
                }
                Op::Query(q) => check(&ix, &model, &q),
                Op::Reload => ix = setup(reloaded(&ix)),
            }
            prop_assert_eq!(ix.len(), model.len());
        }
        for (&id, _) in model.iter().take(5) {
            prop_assert!(ix.contains(id));
        }
    }
}

/// Crowded keys: of the documents agreeing with `q` in a band, at least
/// [`RUN_LEADERS`] (all, when there are no more) are candidates, and nothing else is.
fn check_crowded(ix: &BandIndex, model: &BTreeMap<u64, BandKeys>, q: &BandKeys) {
    let got = ix.candidates(q);
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "candidates repeated or unsorted"
    );
    let all = model_candidates(model, q);
    assert!(
        got.iter().all(|id| all.binary_search(id).is_ok()),
        "a candidate agrees in no band"
    );
    for band in (0..BANDS).filter(|&j| q[j] != 0) {
        let under: Vec<u64> = model
            .iter()
            .filter(|(_, k)| k[band] == q[band])
            .map(|(&id, _)| id)
            .collect();
        let taken = under
            .iter()
            .filter(|id| got.binary_search(id).is_ok())
            .count();
        assert!(
            taken >= under.len().min(RUN_LEADERS),
            "band {band}: {taken} of the {} documents under the key",
            under.len()
        );
    }
    assert_eq!(ix.reader().candidates(q), got);
    // A lookup says when it may have left documents out: only under a key that at least
    // RUN_LEADERS documents share, and never when it gave them all.
    let found = ix.lookup(q);
    assert_eq!(found.ids, got);
    assert_eq!(ix.reader().lookup(q), found);
    if found.crowded {
        assert!(
            (0..BANDS).any(|band| q[band] != 0
                && model.values().filter(|k| k[band] == q[band]).count() >= RUN_LEADERS),
            "crowded, but no key of the query has {RUN_LEADERS} documents"
        );
    } else {
        assert_eq!(got, all, "documents left out, but not crowded");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Hundreds of documents on two keys a band, through levels, rebuilds and removals:
    /// every key crowded, read as [`check_crowded`] says.
    #[test]
    fn crowded_keys_give_their_leaders(
        docs in prop::collection::vec(
            prop::collection::vec(1u32..3, BANDS).prop_map(|v| {
                let mut k = [0; BANDS];
                k.copy_from_slice(&v);
                // One key every document shares.
                k[0] = 1;
                k
            }),
            100..600,
        ),
        removals in prop::collection::vec(0u64..600, 0..200),
        caps in (1usize..50, 1usize..300),
    ) {
        let mut ix = BandIndex::new().background_rebuilds(false).with_level_caps(caps.0, caps.1);
        let mut model = BTreeMap::new();
        for (id, k) in docs.iter().enumerate() {
            ix.insert(id as u64, k).unwrap();
            model.insert(id as u64, *k);
        }
        for q in docs.iter().take(10) {
            check_crowded(&ix, &model, q);
        }
        // The key all share, alone: the main part and the five levels give their first
        // each, not all.
        let mut shared = [0; BANDS];
        shared[0] = 1;
        prop_assert!(ix.candidates(&shared).len() <= 6 * RUN_LEADERS);
        check_crowded(&ix, &model, &shared);
        // Removed documents do not count among a key's first: the next ones do.
        for id in removals {
            prop_assert_eq!(ix.remove(id), model.remove(&id).is_some());
        }
        for q in docs.iter().take(10) {
            check_crowded(&ix, &model, q);
        }
    }
}

/// A splitmix64 stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Keys over a larger alphabet: most bands of two documents differ. Each of the
    /// alphabet's values but 0 is spread over the 32 bits, as band keys (hashes) are: a
    /// main part's directory is on their top bits, and keys below 50,000 put every entry
    /// in its first bucket, which the long run below then scanned whole for each query
    /// (90 s of CI).
    fn keys(&mut self, alphabet: u64) -> BandKeys {
        let mut k = [0; BANDS];
        for x in &mut k {
            let v = self.next() % alphabet;
            *x = if v == 0 {
                0
            } else {
                // Odd multipliers are bijections of the u64s; the top half spreads.
                (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32 | 1
            };
        }
        k
    }
}

/// Tens of thousands of writes: folds, rebuilds (waited for, or in the background while
/// writes go on) and the renumbering after them, checked against the model throughout.
#[test]
fn long_runs_through_rebuilds() {
    for (background, in_place) in [(false, false), (true, false), (false, true)] {
        let mut rng = Rng(u64::from(background) + 2 * u64::from(in_place) + 7);
        let setup = |ix: BandIndex| {
            ix.background_rebuilds(background)
                .rebuilds_in_place(in_place)
        };
        let mut ix = setup(BandIndex::new());
        let mut model: BTreeMap<u64, BandKeys> = BTreeMap::new();
        for round in 0..60u64 {
            let bulk: Vec<(u64, BandKeys)> = (0..1500)
                .map(|_| (rng.next() % 60_000, rng.keys(50_000)))
                .collect();
            ix.insert_bulk(&bulk).unwrap();
            model.extend(bulk);
            for _ in 0..300 {
                let id = rng.next() % 60_000;
                match rng.next() % 3 {
                    0 => assert_eq!(ix.remove(id), model.remove(&id).is_some()),
                    _ => {
                        let k = rng.keys(50_000);
                        assert_eq!(ix.insert(id, &k).unwrap(), model.insert(id, k).is_some());
                    }
                }
            }
            // Now and then, go on from a snapshot: taken while a rebuild may be running
            // in the background (it runs again after the read).
            if round % 7 == 3 {
                ix = setup(reloaded(&ix));
            }
            let removed: Vec<u64> = (0..100).map(|_| rng.next() % 60_000).collect();
            let want = removed
                .iter()
                .filter(|id| model.remove(id).is_some())
                .count();
            assert_eq!(ix.remove_bulk(&removed), want);
            // Queries: stored documents' own keys, and keys that share a band with one.
            for (i, (_, k)) in model
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 997 == round as usize % 997)
            {
                check(&ix, &model, k);
                let mut q = rng.keys(1 << 30);
                q[i % BANDS] = k[i % BANDS];
                check(&ix, &model, &q);
            }
        }
        ix.finish_rebuild();
        for (_, k) in model.iter().step_by(613) {
            check(&ix, &model, k);
        }
        assert_eq!(ix.len(), model.len());
        assert!(ix.heap_bytes() > 0);
    }
}

/// A damaged snapshot is an error, whatever byte is hit or wherever it is cut.
#[test]
fn damaged_snapshots_are_refused() {
    let mut rng = Rng(3);
    let mut ix = BandIndex::from_docs((0..300).map(|i| (i, rng.keys(100))).collect()).unwrap();
    for i in 300..340 {
        ix.insert(i, &rng.keys(100)).unwrap();
    }
    ix.remove(5);
    let mut bytes = Vec::new();
    ix.snapshot().write_to(&mut bytes).unwrap();
    let step = bytes.len() / 97 + 1;
    for at in (0..bytes.len()).step_by(step) {
        let mut bad = bytes.clone();
        bad[at] ^= 0x04;
        assert!(BandIndex::read_from(&mut &bad[..]).is_err(), "flip at {at}");
        assert!(
            BandIndex::read_from(&mut &bytes[..at]).is_err(),
            "cut at {at}"
        );
    }
    let back = BandIndex::read_from(&mut &bytes[..]).unwrap();
    assert_eq!(back.len(), 339);
    assert!(!back.contains(5) && back.contains(339));
}
