//! The bit-voting kernel against the per-bit loop of the seomoz references (simhash-cpp's
//! `compute`), on a document-sized feature list and a large one.
//!
//! `cargo bench -p neardup --bench kernel`

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use neardup::fingerprint::simhash;

/// simhash-cpp's `compute`: a counter per bit, one branch per bit per hash.
fn per_bit(hashes: &[u64]) -> u64 {
    let mut counts = [0i64; 64];
    for &h in hashes {
        let mut h = h;
        for c in counts.iter_mut() {
            *c += if h & 1 == 1 { 1 } else { -1 };
            h >>= 1;
        }
    }
    let mut out = 0;
    for (i, &c) in counts.iter().enumerate() {
        if c > 0 {
            out |= 1 << i;
        }
    }
    out
}

fn hashes(n: usize) -> Vec<u64> {
    common::splitmix(n, 0x853c_49e6_748f_ea9b)
}

fn kernel(c: &mut Criterion) {
    let mut group = c.benchmark_group("simhash");
    for n in [500usize, 100_000] {
        let h = hashes(n);
        assert_eq!(simhash(&h), per_bit(&h));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("bit_sliced", n), &h, |b, h| {
            b.iter(|| simhash(black_box(h)))
        });
        group.bench_with_input(BenchmarkId::new("per_bit", n), &h, |b, h| {
            b.iter(|| per_bit(black_box(h)))
        });
    }
    group.finish();
}

criterion_group!(benches, kernel);
criterion_main!(benches);
