//! Batch matching against a brute-force oracle, over every kind of layout and input that
//! stresses it, and against the seomoz reference outputs.

mod common;

use std::collections::BTreeSet;

use common::*;
use neardup::batch::{
    self, Cluster, Dedup, Distinct, Indexed, IndexedPair, Keep, Matcher, Member, Options, Pair,
    Rule, Source, WideMatcher,
};
use neardup::fingerprint::{Wide, LANES};
use neardup::jaccard::{BandKeys, Banding, Sketch, Threshold, BANDS};
use neardup::tables::{num_tables, Layout};
use proptest::prelude::*;

/// Every pair of distinct values within `k` bits, `(a, b)` with `a < b`.
fn oracle_pairs(fps: &[u64], k: u32) -> BTreeSet<(u64, u64)> {
    let set: BTreeSet<u64> = fps.iter().copied().collect();
    let v: Vec<u64> = set.into_iter().collect();
    let mut out = BTreeSet::new();
    for i in 0..v.len() {
        for j in i + 1..v.len() {
            if (v[i] ^ v[j]).count_ones() <= k {
                out.insert((v[i], v[j]));
            }
        }
    }
    out
}

/// Connected components of `nodes` under `edges`, two or more members, each sorted,
/// ordered by first member.
fn oracle_components<T: Ord + Copy>(nodes: &[T], edges: &[(T, T)]) -> Vec<Vec<T>> {
    let mut comps: Vec<BTreeSet<T>> = nodes.iter().map(|&n| BTreeSet::from([n])).collect();
    for &(a, b) in edges {
        let ia = comps.iter().position(|c| c.contains(&a)).unwrap();
        let ib = comps.iter().position(|c| c.contains(&b)).unwrap();
        if ia != ib {
            let moved = comps.swap_remove(ia.max(ib));
            comps[ia.min(ib)].extend(moved);
        }
    }
    let mut out: Vec<Vec<T>> = comps
        .into_iter()
        .filter(|c| c.len() >= 2)
        .map(|c| c.into_iter().collect())
        .collect();
    out.sort();
    out
}

fn run_find_all(fps: &[u64], layout: &Layout) -> Vec<(u64, u64)> {
    find_all_with(fps, &Matcher::new(layout.clone()))
}

fn find_all_with(fps: &[u64], matcher: &Matcher) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    matcher
        .find_all(&Distinct::from_slice(fps).unwrap(), |a, b| {
            out.push((a, b));
            Ok::<(), ()>(())
        })
        .unwrap();
    out
}

fn run_indexed(fps: &[u64], matcher: &Matcher) -> Vec<IndexedPair> {
    let mut out = Vec::new();
    matcher
        .find_all_indexed(&Indexed::new(fps).unwrap(), |p| {
            out.push(p);
            Ok::<(), ()>(())
        })
        .unwrap();
    out
}

/// Checks every batch entry point on `fps` against the oracles.
fn check(fps: &[u64], layout: &Layout) -> Result<(), TestCaseError> {
    check_matcher(fps, &Matcher::new(layout.clone()))
}

/// Checks every entry point of `matcher` on `fps` against the oracles.
fn check_matcher(fps: &[u64], matcher: &Matcher) -> Result<(), TestCaseError> {
    let layout = matcher.layout();
    let k = layout.distance();
    let at = format!("blocks {layout} distance {k}");

    // Value pairs: each once, a < b, exactly the oracle's.
    let got = find_all_with(fps, matcher);
    let expected = oracle_pairs(fps, k);
    prop_assert!(got.iter().all(|(a, b)| a < b), "{}: order", at);
    let got_set: BTreeSet<(u64, u64)> = got.iter().copied().collect();
    prop_assert_eq!(got.len(), got_set.len(), "{}: a pair came out twice", at);
    prop_assert_eq!(&got_set, &expected, "{}", at);

    // Value clusters.
    let distinct: Vec<u64> = fps
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let edges: Vec<(u64, u64)> = expected.iter().copied().collect();
    let clusters = matcher.clusters(&Distinct::from_slice(fps).unwrap());
    prop_assert_eq!(
        clusters,
        oracle_components(&distinct, &edges),
        "{}: clusters",
        at
    );

    // Position pairs: exact duplicates included at distance 0.
    let mut expected_idx = BTreeSet::new();
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i] ^ fps[j]).count_ones();
            if d <= k {
                expected_idx.insert(IndexedPair {
                    a: i,
                    b: j,
                    distance: d,
                });
            }
        }
    }
    let got = run_indexed(fps, matcher);
    let got_set: BTreeSet<IndexedPair> = got.iter().copied().collect();
    prop_assert_eq!(
        got.len(),
        got_set.len(),
        "{}: an indexed pair came out twice",
        at
    );
    prop_assert_eq!(&got_set, &expected_idx, "{}: indexed", at);

    // Position clusters.
    let positions: Vec<usize> = (0..fps.len()).collect();
    let edges: Vec<(usize, usize)> = expected_idx.iter().map(|p| (p.a, p.b)).collect();
    let clusters = matcher.clusters_indexed(&Indexed::new(fps).unwrap());
    prop_assert_eq!(
        clusters,
        oracle_components(&positions, &edges),
        "{}: indexed clusters",
        at
    );
    Ok(())
}

/// A valid layout: any distance, any block count up to 64 whose table count stays small
/// enough for a test.
fn layout() -> impl Strategy<Value = Layout> {
    (0u32..64, 1usize..=64)
        .prop_filter("blocks > distance", |&(k, m)| m > k as usize)
        .prop_filter("few enough tables", |&(k, m)| num_tables(m, k) <= 3000)
        .prop_map(|(k, m)| Layout::new(m, k).unwrap())
}

/// Fingerprints built to collide: a few bases, each with variants a few bits away (dense
/// clusters), exact copies, random values, and the all-zero / all-one fingerprints.
fn fingerprints() -> impl Strategy<Value = Vec<u64>> {
    let bases = prop::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()], 1..5);
    let variants = prop::collection::vec(
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(0u32..64, 0..6),
        ),
        0..60,
    );
    let random = prop::collection::vec(any::<u64>(), 0..10);
    (bases, variants, random).prop_map(|(bases, variants, random)| {
        let mut out: Vec<u64> = bases.clone();
        for (base, flips) in variants {
            let mut v = *base.get(&bases);
            for bit in flips {
                v ^= 1 << bit;
            }
            out.push(v);
        }
        out.extend(random);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn matches_oracle(layout in layout(), fps in fingerprints()) {
        check(&fps, &layout)?;
    }

    #[test]
    fn mostly_exact_duplicates(layout in layout(),
                               distinct in prop::collection::vec(any::<u64>(), 1..4),
                               copies in prop::collection::vec(any::<prop::sample::Index>(), 0..200)) {
        let fps: Vec<u64> = copies.iter().map(|i| *i.get(&distinct)).chain(distinct.clone()).collect();
        check(&fps, &layout)?;
    }
}

proptest! {
    // Any valid layout at all, up to MAX_TABLES tables: few cases, small inputs.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matches_oracle_on_any_valid_layout(
        (k, m) in (0u32..64, 1usize..=64)
            .prop_filter("valid", |&(k, m)| Layout::new(m, k).is_ok()),
        fps in fingerprints().prop_map(|mut v| { v.truncate(24); v }),
    ) {
        check(&fps, &Layout::new(m, k).unwrap())?;
    }
}

/// A valid two-level layout at a distance up to 8, with few enough tables for a test.
fn two_level() -> impl Strategy<Value = Layout> {
    (0u32..=8, 1usize..=12, 1usize..=12)
        .prop_filter("valid", |&(k, m1, m2)| Layout::two_level(m1, m2, k).is_ok())
        .prop_filter("few enough tables", |&(k, m1, m2)| {
            num_tables(m1, k) * num_tables(m2, k) <= 3000
        })
        .prop_map(|(k, m1, m2)| Layout::two_level(m1, m2, k).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Manku's nested blocks find exactly the pairs within the distance, each once.
    #[test]
    fn two_level_layouts_match_oracle(layout in two_level(), fps in fingerprints()) {
        check(&fps, &layout)?;
    }

    /// A table scanned a range of buckets at a time (the memory budget's passes) gives
    /// the oracle's pairs, in the very order of one pass over all of them.
    #[test]
    fn passes_give_the_pairs_of_one_pass_in_its_order(
        layout in prop_oneof![layout(), two_level()],
        fps in fingerprints(),
        room in 1usize..40,
    ) {
        let limited = Matcher::new(layout.clone()).with_pass_keys(room);
        check_matcher(&fps, &limited)?;
        prop_assert_eq!(
            find_all_with(&fps, &limited),
            run_find_all(&fps, &layout),
            "blocks {} room {}", layout, room
        );
    }
}

#[test]
fn every_valid_layout_on_a_dense_set() {
    // A dense cluster around 0 and around all-ones, with copies: every pair kind occurs.
    let mut fps = vec![0u64, u64::MAX, 0, u64::MAX];
    for bit in (0..64).step_by(7) {
        fps.push(1 << bit);
        fps.push(!(1u64 << bit));
        fps.push((1 << bit) | (1 << ((bit + 31) % 64)));
        fps.push(0xF << (bit % 60));
    }
    let mut layouts = 0;
    for k in 0..64u32 {
        for m in k as usize + 1..=64 {
            let tables = num_tables(m, k);
            if tables > 2000 {
                continue;
            }
            check(&fps, &Layout::new(m, k).unwrap()).unwrap();
            layouts += 1;
        }
    }
    assert!(layouts >= 370, "{layouts}");
}

#[test]
fn largest_layouts() {
    let fps: Vec<u64> = (0..40u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (i % 8))
        .chain([0, 1, 3, 7, 15])
        .collect();
    for (m, k) in [(64, 3), (64, 61), (64, 63), (64, 0), (30, 4)] {
        check(&fps, &Layout::new(m, k).unwrap()).unwrap();
    }
}

#[test]
fn matches_reference_outputs() {
    let cases = vectors("find_all_small.json");
    for case in array(&cases) {
        let blocks = case["blocks"].as_u64().unwrap() as usize;
        let distance = case["distance"].as_u64().unwrap() as u32;
        let at = format!("{} blocks {blocks} distance {distance}", case["name"]);
        let fps: Vec<u64> = array(&case["hashes"]).iter().map(dec).collect();
        let expected: Vec<(u64, u64)> = array(&case["pairs"])
            .iter()
            .map(|p| (dec(&p[0]), dec(&p[1])))
            .collect();
        let mut got = batch::find_all(&fps, blocks, distance).unwrap();
        got.sort_unstable();
        assert_eq!(got, expected, "{at}");
        let expected: Vec<Vec<u64>> = array(&case["clusters"])
            .iter()
            .map(|c| array(c).iter().map(dec).collect())
            .collect();
        let mut got = batch::clusters(&fps, blocks, distance).unwrap();
        got.sort();
        assert_eq!(got, expected, "{at}");
    }
}

#[test]
fn large_random_set_with_planted_pairs() {
    // Enough fingerprints for many buckets, several tasks and LSD passes.
    let mut x = 0x1234_5678_u64;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut fps: Vec<u64> = (0..300_000).map(|_| next()).collect();
    let mut planted = BTreeSet::new();
    for i in 0..2000 {
        let a = fps[i];
        let b = a ^ (1 << (next() % 64)) ^ (1 << (next() % 64)) ^ (1 << (next() % 64));
        fps.push(b);
        if a != b {
            planted.insert((a.min(b), a.max(b)));
        }
    }
    let mut layouts: Vec<Layout> = [4, 5, 6, 7]
        .into_iter()
        .map(|m| Layout::new(m, 3).unwrap())
        .collect();
    layouts.push(Layout::two_level(4, 4, 3).unwrap());
    layouts.push(Layout::two_level(5, 4, 3).unwrap());
    let one = run_find_all(&fps, &layouts[0]);
    for layout in &layouts {
        let all = run_find_all(&fps, layout);
        let got: BTreeSet<(u64, u64)> = all.iter().copied().collect();
        assert_eq!(got.len(), all.len(), "blocks {layout}: a pair twice");
        assert!(planted.is_subset(&got), "blocks {layout}");
        for &(a, b) in &got {
            assert!((a ^ b).count_ones() <= 3);
        }
        assert_eq!(got, one.iter().copied().collect(), "blocks {layout}");
        // In passes of a tenth of the set: the same pairs in the same order.
        let passes = find_all_with(&fps, &Matcher::new(layout.clone()).with_pass_keys(30_000));
        assert_eq!(passes, all, "blocks {layout} in passes");
    }
}

/// Wide fingerprints built to collide: bases with variants a few bits away in each lane,
/// so that pairs fall on both sides of the lane distance and of the 256-bit distance.
fn wide_fingerprints() -> impl Strategy<Value = Vec<Wide>> {
    let bases = prop::collection::vec(any::<[u64; LANES]>(), 1..4);
    let variants = prop::collection::vec(
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(prop::collection::vec(0u32..64, 0..9), LANES),
        ),
        0..50,
    );
    (bases, variants).prop_map(|(bases, variants)| {
        let mut out = bases.clone();
        for (base, flips) in variants {
            let mut w = *base.get(&bases);
            for (lane, bits) in flips.iter().enumerate() {
                for &bit in bits {
                    w[lane] ^= 1 << bit;
                }
            }
            out.push(w);
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Each pair that is within the lane distance in some lane and within the distance on
    /// all 256 bits, once, with its distance.
    #[test]
    fn wide_matches_oracle(
        fps in wide_fingerprints(),
        (k, m) in (0u32..8, 1usize..12).prop_filter("blocks > distance", |&(k, m)| m > k as usize),
        distance in 0u32..80,
    ) {
        let matcher = WideMatcher::new(Layout::new(m, k).unwrap(), distance);
        let mut got = Vec::new();
        matcher
            .find_all(&fps, |p| {
                got.push(p);
                Ok::<(), neardup::Error>(())
            })
            .unwrap();
        let n = got.len();
        got.sort();
        got.dedup();
        prop_assert_eq!(got.len(), n, "a pair came out twice");
        let mut want = Vec::new();
        for a in 0..fps.len() {
            for b in a + 1..fps.len() {
                let lanes: Vec<u32> = (0..LANES).map(|l| (fps[a][l] ^ fps[b][l]).count_ones()).collect();
                let total: u32 = lanes.iter().sum();
                if lanes.iter().any(|&d| d <= k) && total <= distance {
                    want.push(IndexedPair { a, b, distance: total });
                }
            }
        }
        prop_assert_eq!(got, want);
    }
}

/// One document as the dedup oracle sees it.
#[derive(Clone, Copy, Debug)]
struct TestDoc {
    wide: Wide,
    text: u64,
    sketch: Sketch,
    /// Band keys of the sketch's set at two rows per band.
    bands: BandKeys,
    len: u32,
}

/// Where the oracle's candidates come from: lanes within `k` bits, or band keys.
#[derive(Clone, Copy, Debug)]
enum Src {
    Lanes(u32),
    Bands,
}

fn sources() -> impl Strategy<Value = Src> {
    prop_oneof![(0u32..5).prop_map(Src::Lanes), Just(Src::Bands)]
}

/// The rows per band of the test documents' keys: few, so that similar sets agree often.
fn test_banding() -> Banding {
    Banding::new(2).unwrap()
}

/// `batch::dedup` over the test documents, with candidates from `src`.
fn run_dedup(docs: &[TestDoc], src: Src, options: &Options) -> Dedup {
    let wides: Vec<Wide> = docs.iter().map(|d| d.wide).collect();
    let texts: Vec<u64> = docs.iter().map(|d| d.text).collect();
    let sketches: Vec<Sketch> = docs.iter().map(|d| d.sketch).collect();
    let bands: Vec<BandKeys> = docs.iter().map(|d| d.bands).collect();
    let lens: Vec<u32> = docs.iter().map(|d| d.len).collect();
    let matcher;
    let source = match src {
        Src::Lanes(k) => {
            matcher = WideMatcher::new(Layout::new(k as usize + 1, k).unwrap(), 0);
            Source::Lanes(&matcher)
        }
        Src::Bands => Source::Bands(&bands),
    };
    batch::dedup(&wides, &texts, &lens, &sketches, source, options).unwrap()
}

/// Documents built to sit on both sides of every decision: fingerprints from
/// [`wide_fingerprints`], sketches of sets drawn from a few bases with a varying share of
/// elements replaced (similarities spread across thresholds), copies of texts (same
/// fingerprint and sketch), different texts with the same fingerprint, and wordless texts.
fn test_docs() -> impl Strategy<Value = Vec<TestDoc>> {
    let sketches = prop::collection::vec((0u64..3, 0usize..40), 1..60);
    let extra = prop::collection::vec((0u8..3, 0u64..4), 0..30);
    let lens = prop::collection::vec(1u32..4, 100);
    (wide_fingerprints(), sketches, extra, lens).prop_map(|(fps, sketches, extra, lens)| {
        let set = |base: u64, replaced: usize| {
            let mut s = base.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let mut v: Vec<u64> = (0..100).map(|_| next()).collect();
            let mut r = replaced as u64 * 7919 + base;
            for x in v.iter_mut().take(replaced) {
                r = r
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *x = r;
            }
            Sketch::with_bands(v, test_banding())
        };
        let mut docs: Vec<TestDoc> = fps
            .iter()
            .enumerate()
            .map(|(i, &wide)| {
                let (base, replaced) = sketches[i % sketches.len()];
                let (sketch, bands) = set(base, replaced);
                TestDoc {
                    wide,
                    text: 100 + i as u64,
                    sketch,
                    bands,
                    len: lens[i % lens.len()],
                }
            })
            .collect();
        for (i, &(kind, text)) in extra.iter().enumerate() {
            let len = lens[(i + 50) % lens.len()];
            match kind {
                0 if !docs.is_empty() => {
                    // A copy of a text.
                    let d = docs[i % docs.len()];
                    docs.push(TestDoc { len: d.len, ..d });
                }
                1 if !docs.is_empty() => {
                    // Another text with the same fingerprint.
                    let d = docs[i % docs.len()];
                    let (base, replaced) = sketches[(i + 1) % sketches.len()];
                    let (sketch, bands) = set(base, replaced);
                    docs.push(TestDoc {
                        text: 1000 + i as u64,
                        sketch,
                        bands,
                        len,
                        ..d
                    });
                }
                _ => docs.push(TestDoc {
                    wide: [0; LANES],
                    text,
                    sketch: Sketch::EMPTY,
                    bands: [0; BANDS],
                    len,
                }),
            }
        }
        docs
    })
}

/// The decision of `batch::dedup`, written the slow and obvious way: over documents, not
/// nodes; every pair checked.
fn oracle_dedup(docs: &[TestDoc], src: Src, options: &Options) -> Dedup {
    let n = docs.len();
    let same = |a: usize, b: usize| docs[a].text == docs[b].text && docs[a].wide == docs[b].wide;
    let wordless = |a: usize| match src {
        Src::Lanes(_) => docs[a].wide == [0; LANES],
        Src::Bands => docs[a].bands == [0; BANDS],
    };
    let sim = |a: usize, b: usize| {
        if same(a, b) {
            1.0
        } else {
            docs[a].sketch.similarity(&docs[b].sketch) as f32
        }
    };
    let dist = |a: usize, b: usize| batch::wide_distance(&docs[a].wide, &docs[b].wide);
    let candidate = |a: usize, b: usize| {
        !same(a, b)
            && !wordless(a)
            && !wordless(b)
            && match src {
                Src::Lanes(k) => {
                    (0..LANES).any(|l| (docs[a].wide[l] ^ docs[b].wide[l]).count_ones() <= k)
                }
                Src::Bands => (0..BANDS).any(|j| docs[a].bands[j] == docs[b].bands[j]),
            }
    };
    let near = |a: usize, b: usize| {
        same(a, b)
            || (candidate(a, b)
                && match options.rule {
                    Rule::Jaccard(t) => t.accepts(f64::from(sim(a, b))),
                    Rule::Distance(d) => dist(a, b) <= d,
                })
    };
    let rank = |d: usize| -> (i64, usize) {
        let len = i64::from(docs[d].len);
        match options.keep {
            Keep::First => (0, d),
            Keep::Longest => (-len, d),
            Keep::Shortest => (len, d),
        }
    };
    let member = |doc: usize, rep: usize| Member {
        doc: doc as u32,
        similarity: sim(doc, rep),
        distance: dist(doc, rep),
    };
    let mut clusters = Vec::new();
    if options.closure {
        let nodes: Vec<usize> = (0..n).collect();
        let mut edges = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                if near(a, b) {
                    edges.push((a, b));
                }
            }
        }
        for comp in oracle_components(&nodes, &edges) {
            let rep = *comp.iter().min_by_key(|&&d| rank(d)).unwrap();
            clusters.push(Cluster {
                representative: rep as u32,
                members: comp.iter().map(|&d| member(d, rep)).collect(),
            });
        }
    } else {
        let mut by_rank: Vec<usize> = (0..n).collect();
        by_rank.sort_by_key(|&d| rank(d));
        let mut kept = vec![false; n];
        let mut removed = vec![false; n];
        for &d in &by_rank {
            if removed[d] {
                continue;
            }
            kept[d] = true;
            for e in 0..n {
                if e != d && !kept[e] && !removed[e] && near(d, e) {
                    removed[e] = true;
                }
            }
        }
        let mut members: Vec<Vec<Member>> = vec![Vec::new(); n];
        for d in 0..n {
            if kept[d] {
                members[d].push(member(d, d));
            }
        }
        for d in (0..n).filter(|&d| removed[d]) {
            let rep = (0..n)
                .filter(|&r| kept[r] && near(d, r))
                .min_by(|&x, &y| sim(d, y).total_cmp(&sim(d, x)).then(rank(x).cmp(&rank(y))))
                .unwrap();
            members[rep].push(member(d, rep));
        }
        for (rep, mut m) in members.into_iter().enumerate() {
            if m.len() >= 2 {
                m.sort_by_key(|m| m.doc);
                clusters.push(Cluster {
                    representative: rep as u32,
                    members: m,
                });
            }
        }
    }
    clusters.sort_by_key(|c| c.representative);
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if near(a, b) {
                pairs.push(Pair {
                    a: a as u32,
                    b: b as u32,
                    similarity: sim(a, b),
                    distance: dist(a, b),
                });
            }
        }
    }
    // Counts over distinct texts.
    let firsts: Vec<usize> = (0..n).filter(|&d| (0..d).all(|e| !same(d, e))).collect();
    let mut candidates = 0;
    let mut verified = 0;
    for (i, &a) in firsts.iter().enumerate() {
        for &b in &firsts[i + 1..] {
            if candidate(a, b) {
                candidates += 1;
                verified += u64::from(near(a, b));
            }
        }
    }
    Dedup {
        outside: Vec::new(),
        clusters,
        pairs: if options.pairs { pairs } else { Vec::new() },
        exact_duplicates: (n - firsts.len()) as u64,
        wordless: (0..n).filter(|&d| wordless(d)).count() as u64,
        candidates,
        verified,
    }
}

fn options() -> impl Strategy<Value = Options> {
    let rule = prop_oneof![
        (0.05f64..1.0).prop_map(|t| Rule::Jaccard(Threshold::new(t).unwrap())),
        (0u32..60).prop_map(Rule::Distance),
    ];
    let keep = prop_oneof![Just(Keep::First), Just(Keep::Longest), Just(Keep::Shortest)];
    (rule, keep, any::<bool>(), any::<bool>()).prop_map(|(rule, keep, closure, pairs)| Options {
        rule,
        keep,
        closure,
        pairs,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Candidates, verification and assignment against the slow oracle, with either
    /// source of candidates and every rule, keep, closure and pairs setting.
    #[test]
    fn dedup_matches_oracle(docs in test_docs(), src in sources(), options in options()) {
        let got = run_dedup(&docs, src, &options);
        prop_assert_eq!(&got, &oracle_dedup(&docs, src, &options));
    }

    /// Without chaining, a removed document is a near-duplicate of the document kept for
    /// it, and no two kept documents are near-duplicates of each other.
    #[test]
    fn no_chaining(docs in test_docs(), src in sources(), t in 0.3f64..0.95) {
        let threshold = Threshold::new(t).unwrap();
        let options = Options { rule: Rule::Jaccard(threshold), pairs: true, ..Options::default() };
        let got = run_dedup(&docs, src, &options);
        let near: BTreeSet<(u32, u32)> = got.pairs.iter().map(|p| (p.a, p.b)).collect();
        let mut removed = BTreeSet::new();
        for c in &got.clusters {
            for m in &c.members {
                if m.doc != c.representative {
                    let key = (m.doc.min(c.representative), m.doc.max(c.representative));
                    prop_assert!(near.contains(&key), "{} removed for {}, not a pair", m.doc, c.representative);
                    prop_assert!(threshold.accepts(f64::from(m.similarity)));
                    removed.insert(m.doc);
                }
            }
        }
        for p in &got.pairs {
            prop_assert!(removed.contains(&p.a) || removed.contains(&p.b), "kept pair {p:?}");
        }
    }
}

#[test]
fn dedup_rejects_mismatched_lengths() {
    let matcher = WideMatcher::new(Layout::new(4, 3).unwrap(), 40);
    assert_eq!(
        batch::candidates(&[[1; LANES]], &[], Source::Lanes(&matcher), None).map(|c| c.len()),
        Err(neardup::Error::LengthMismatch {
            fingerprints: 1,
            hashes: 0
        })
    );
    assert_eq!(
        batch::candidates(&[[1; LANES]], &[7], Source::Bands(&[]), None).map(|c| c.len()),
        Err(neardup::Error::LengthMismatch {
            fingerprints: 1,
            hashes: 0
        })
    );
}
