//! The Jaccard sketch of a set of shingle hashes (one-permutation minima, the empty bins
//! filled by borrowing), for sets of the sizes paragraphs and documents give. The signing
//! of whole texts, words and shingles included, is `examples/sketch_speed.rs` on a corpus.
//!
//! `cargo bench -p neardup --bench sketch`

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use neardup::jaccard::Sketch;

fn sketch(c: &mut Criterion) {
    let mut group = c.benchmark_group("sketch");
    // 20 and 40 shingles (a paragraph) fill few bins, whose borrowing is solved for; 330
    // (a 2 KB document) about half, walked; 5,000 all.
    for n in [20usize, 40, 330, 1000, 5000] {
        let sets: Vec<Vec<u64>> = (0..64).map(|s| common::splitmix(n, s)).collect();
        group.throughput(Throughput::Elements(sets.len() as u64));
        group.bench_with_input(BenchmarkId::new("from_hashes", n), &sets, |b, sets| {
            b.iter(|| {
                for set in sets {
                    black_box(Sketch::from_hashes(set.iter().copied()));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sketch);
criterion_main!(benches);
