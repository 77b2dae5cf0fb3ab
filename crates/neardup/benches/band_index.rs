//! The online band index at a million documents: built in one pass (what opening a store
//! without a snapshot does), its main part rebuilt once the middle level outgrows it (what
//! every 1/32 of the stored documents inserted costs), with and without removals, and
//! queried while the middle level is nearly full.
//!
//! `cargo bench -p neardup --bench band_index`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use neardup::corpus::BandIndex;
use neardup::jaccard::{BandKeys, BANDS};

const DOCS: u64 = 1_000_000;
/// More than the middle level takes at a million documents (1/32 of them): inserting
/// these in bulk folds into a rebuild of the main part.
const MORE: u64 = DOCS / 32 + 1;

/// Documents `from..to` with random keys (band keys are hashes: uniform over 32 bits).
fn docs(from: u64, to: u64) -> Vec<(u64, BandKeys)> {
    (from..to)
        .map(|id| {
            let mut keys = [0u32; BANDS];
            for (band, k) in keys.iter_mut().enumerate() {
                let mut z = (id * BANDS as u64 + band as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                *k = (z ^ (z >> 31)) as u32;
            }
            (id, keys)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("band_index");
    g.sample_size(10);
    let stored = docs(0, DOCS);
    let more = docs(DOCS, DOCS + MORE);
    g.bench_function("from_docs/1M", |b| {
        b.iter_batched(
            || stored.clone(),
            |d| black_box(BandIndex::from_docs(d)),
            BatchSize::PerIteration,
        )
    });
    for removed in [0u64, DOCS / 100] {
        let setup = || {
            let mut ix = BandIndex::from_docs(stored.clone())
                .expect("a million documents fit")
                .background_rebuilds(false);
            let gone: Vec<u64> = (0..removed).map(|i| i * 97 % DOCS).collect();
            ix.remove_bulk(&gone);
            ix
        };
        g.bench_function(format!("rebuild/1M/{removed}_removed"), |b| {
            b.iter_batched(
                setup,
                |mut ix| {
                    ix.insert_bulk(&more).expect("fits");
                    ix
                },
                BatchSize::PerIteration,
            )
        });
    }
    // Queries while the middle level is nearly full (just under 1/32 of the main part):
    // the state a service spends most of its time in between rebuilds.
    let mut ix = BandIndex::from_docs(stored.clone())
        .expect("a million documents fit")
        .background_rebuilds(false);
    ix.insert_bulk(&more[..more.len() - 1_000]).expect("fits");
    let queries: Vec<BandKeys> = docs(2 * DOCS, 2 * DOCS + 1_000)
        .into_iter()
        .map(|(_, k)| k)
        .collect();
    g.bench_function("candidates/1M_and_30k_recent/1000_queries", |b| {
        b.iter(|| {
            queries
                .iter()
                .map(|q| ix.candidates(q).len())
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
