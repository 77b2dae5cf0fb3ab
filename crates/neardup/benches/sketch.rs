//! The Jaccard sketch: the bins of a set of shingle hashes (one-permutation minima, the
//! empty bins filled by borrowing), for sets of the sizes documents give, and the whole
//! signing of a 2 KB text (words, shingles, bins, sketch and band keys).
//!
//! `cargo bench -p neardup --bench sketch`

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use neardup::jaccard::{Banding, Sketch, Threshold};

/// About `bytes` of English-like text: words of 1 to 12 letters, some capitalised, with
/// punctuation, drawn from a vocabulary of 5,000.
fn text(bytes: usize) -> String {
    let vocabulary: Vec<String> = common::splitmix(5000, 7)
        .into_iter()
        .map(|h| {
            let len = 1 + (h % 12) as usize;
            (0..len)
                .map(|i| char::from(b'a' + ((h >> (5 * i + 4)) % 26) as u8))
                .collect()
        })
        .collect();
    let mut out = String::new();
    for h in common::splitmix(bytes, 11) {
        if out.len() >= bytes {
            break;
        }
        let word = &vocabulary[(h % 5000) as usize];
        if h >> 60 == 0 {
            out.push_str(&word.to_uppercase());
        } else {
            out.push_str(word);
        }
        out.push_str(if h >> 56 & 15 == 1 { ", " } else { " " });
    }
    out
}

fn sketch(c: &mut Criterion) {
    let mut group = c.benchmark_group("sketch");
    // 40 shingles fill few bins (solved for), 330 (a 2 KB document) about half, 5,000 all.
    for n in [40usize, 330, 1000, 5000] {
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
    let banding = Banding::for_threshold(Threshold::new(0.8).expect("0.8 is a threshold"));
    let text = text(2000);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("of_text_with_bands/2KB", |b| {
        b.iter(|| black_box(Sketch::of_text_with_bands(black_box(&text), banding)))
    });
    group.finish();
}

criterion_group!(benches, sketch);
criterion_main!(benches);
